package apiserver

import (
	"errors"
	"fmt"
	"net/http"
	"slices"

	"github.com/gin-gonic/gin"

	"github.com/ironflow/ironflow/hardware"
	"github.com/ironflow/ironflow/store"
	"github.com/ironflow/ironflow/workflows"
)

// bootDeviceKey is where the API records the last boot device it set, in
// driver_internal_info, so that GET .../boot_device can answer without a BMC
// round trip (the API never talks to a BMC).
const bootDeviceKey = "last_boot_device"

func (s *server) getBootDevice(c *gin.Context, n *store.Node) error {
	out := map[string]any{"boot_device": nil, "persistent": nil}
	if m, ok := n.DriverInternalInfo[bootDeviceKey].(map[string]any); ok {
		out["boot_device"] = m["boot_device"]
		out["persistent"] = m["persistent"]
	}
	writeJSON(c, http.StatusOK, out)
	return nil
}

func (s *server) supportedBootDevices(c *gin.Context, n *store.Node) error {
	devices := []string{}
	if ht, ok := hardware.Lookup(n.Driver); ok {
		devices = ht.BootDevices
	}
	writeJSON(c, http.StatusOK, map[string]any{"supported_boot_devices": devices})
	return nil
}

func (s *server) setBootDevice(c *gin.Context, n *store.Node) error {
	body, err := decodeObject(c)
	if err != nil {
		return err
	}
	dev, ok := body["boot_device"].(string)
	if !ok {
		return badRequest("Missing argument: \"boot_device\"")
	}
	persistent := false
	if p, ok := body["persistent"]; ok && p != nil {
		if persistent, err = boolValue(p); err != nil {
			return badRequest("Invalid value for persistent: %s", err.Error())
		}
	}
	ht, ok := hardware.Lookup(n.Driver)
	if !ok || !slices.Contains(ht.BootDevices, dev) {
		return badRequest("Invalid boot device %s specified.", dev)
	}
	err = s.eng.SetBootDevice(c.Request.Context(), workflows.BootDeviceRequest{
		NodeUUID: n.UUID, BootDevice: dev, Persistent: persistent, ConductorGroup: n.ConductorGroup,
	})
	if errors.Is(err, ErrNodeLocked) {
		return nodeLocked(n.UUID, lockHolder(n))
	}
	if err != nil {
		return fmt.Errorf("set boot device %s on node %s: %w", dev, n.UUID, err)
	}
	if err := s.store.MergeDriverInternalInfo(c.Request.Context(), n.UUID, map[string]any{
		bootDeviceKey: map[string]any{"boot_device": dev, "persistent": persistent},
	}); err != nil {
		s.log.WarnContext(c.Request.Context(), "record boot device", "node", n.UUID, "err", err)
	}
	writeEmpty(c, http.StatusNoContent, "")
	return nil
}
