package apiserver

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/ironflow/ironflow/hardware"
	"github.com/ironflow/ironflow/pyliteral"
	"github.com/ironflow/ironflow/store"
	"github.com/ironflow/ironflow/workflows"
)

// Virtual media (API 1.89, Ironic's API reference "Attach / Detach Virtual
// Media"): POST /v1/nodes/{node}/vmedia inserts an image into a virtual
// device of the node's BMC, DELETE ejects it. The BMC call runs in a short
// workflow on the node's conductor-group queue (workflows/vmedia.go) that
// holds the node's lock, as Ironic's conductor takes the node's lock; a
// node another operation holds is 409 NodeLocked.

// vmediaDevices are Ironic's virtual media device types (boot_devices.py).
var vmediaDevices = []string{"disk", "cdrom", "floppy"}

// vmediaSources are Ironic's image_download_source values.
var vmediaSources = []string{"http", "local", "swift"}

// supportsVirtualMedia: Ironic asks the node's management interface
// (hardware.SupportsVirtualMedia).
func supportsVirtualMedia(n *store.Node) bool {
	return hardware.SupportsVirtualMedia(n.Driver, hardware.Interface(n.ManagementInterface))
}

// unsupportedExtension is Ironic's UnsupportedDriverExtension (400).
func unsupportedExtension(n *store.Node, extension string) *apiError {
	return badRequest("Driver %s does not support %s (disabled or not implemented).", n.Driver, extension)
}

func oneOf(v any, allowed []string) error {
	s, ok := v.(string)
	if !ok {
		return typeErr(v, "string")
	}
	if !slices.Contains(allowed, s) {
		return fmt.Errorf("%s is not one of %s", pyliteral.Repr(s), pyliteral.List(allowed))
	}
	return nil
}

// parseAttach checks the body as Ironic's schema of the vmedia body does.
func parseAttach(body map[string]any) (workflows.VirtualMediaRequest, string, error) {
	var req workflows.VirtualMediaRequest
	var extra []string
	for k := range body {
		if k != "device_type" && k != "image_url" && k != "image_download_source" {
			extra = append(extra, k)
		}
	}
	if len(extra) > 0 {
		return req, "", schemaError("vmedia", additionalProps(extra))
	}
	for _, k := range []string{"device_type", "image_url"} {
		if _, ok := body[k]; !ok {
			return req, "", schemaError("vmedia", fmt.Errorf("%s is a required property", pyliteral.Repr(k)))
		}
	}
	if err := oneOf(body["device_type"], vmediaDevices); err != nil {
		return req, "", schemaError("vmedia", err)
	}
	url, ok := body["image_url"].(string)
	if !ok {
		return req, "", schemaError("vmedia", typeErr(body["image_url"], "string"))
	}
	source := "local"
	if v, ok := body["image_download_source"]; ok {
		if err := oneOf(v, vmediaSources); err != nil {
			return req, "", schemaError("vmedia", err)
		}
		source = v.(string)
	}
	req.Attach, req.DeviceType, req.ImageURL = true, body["device_type"].(string), url
	return req, source, nil
}

// attachVirtualMedia answers POST /v1/nodes/{node}/vmedia.
func (s *server) attachVirtualMedia(c *gin.Context, n *store.Node) error {
	body, err := decodeObject(c)
	if err != nil {
		return err
	}
	req, source, err := parseAttach(body)
	if err != nil {
		return err
	}
	if !supportsVirtualMedia(n) {
		return unsupportedExtension(n, "attach_virtual_media")
	}
	// The BMC fetches the image from its URL ("http"; ironflow does not
	// re-serve it for "local"); there is no Swift, and the BMC drivers
	// insert into a virtual CD only (docs/api-versions.md).
	if source == "swift" {
		return badRequest("The image download source \"swift\" is not supported by ironflow yet.")
	}
	if req.DeviceType != "cdrom" {
		return badRequest("Virtual media device type \"%s\" is not supported by ironflow yet.", req.DeviceType)
	}
	if !strings.HasPrefix(req.ImageURL, "http://") && !strings.HasPrefix(req.ImageURL, "https://") {
		return badRequest("Invalid image_url %s: the BMC fetches the image, so it must be an http or https URL.", pyliteral.Repr(req.ImageURL))
	}
	return s.changeVirtualMedia(c, n, req, "attach")
}

// detachVirtualMedia answers DELETE /v1/nodes/{node}/vmedia: every device,
// or those of ?device_types= (a comma-separated list).
func (s *server) detachVirtualMedia(c *gin.Context, n *store.Node) error {
	var types []string
	if v := c.Query("device_types"); v != "" {
		types = strings.Split(v, ",")
	}
	for _, t := range types {
		if err := oneOf(t, vmediaDevices); err != nil {
			return badRequest("Invalid device_types: %s", err.Error())
		}
	}
	if !supportsVirtualMedia(n) {
		return unsupportedExtension(n, "detach_virtual_media")
	}
	// ironflow attaches into the CD only: nothing else to eject.
	if len(types) > 0 && !slices.Contains(types, "cdrom") {
		writeEmpty(c, http.StatusNoContent, "")
		return nil
	}
	return s.changeVirtualMedia(c, n, workflows.VirtualMediaRequest{DeviceTypes: types}, "detach")
}

func (s *server) changeVirtualMedia(c *gin.Context, n *store.Node, req workflows.VirtualMediaRequest, what string) error {
	req.NodeUUID, req.ConductorGroup = n.UUID, n.ConductorGroup
	err := s.eng.ChangeVirtualMedia(c.Request.Context(), req)
	switch {
	case errors.Is(err, ErrNodeLocked):
		return nodeLocked(n.UUID, lockHolder(n))
	case errors.Is(err, ErrHardware):
		msg := fmt.Sprintf("Failed to %s virtual media on node %s: %s", what, n.UUID, strings.TrimPrefix(err.Error(), ErrHardware.Error()+": "))
		s.addHistory(c, n.UUID, store.SeverityError, "virtual media", msg)
		return errorf(http.StatusInternalServerError, "%s", msg)
	case err != nil:
		return fmt.Errorf("%s virtual media on node %s: %w", what, n.UUID, err)
	}
	s.addHistory(c, n.UUID, store.SeverityInfo, "virtual media", fmt.Sprintf("Virtual media %sed", what))
	writeEmpty(c, http.StatusNoContent, "")
	return nil
}

// getVirtualMedia answers GET /v1/nodes/{node}/vmedia (API 1.93, Ironic's
// API reference "Get Virtual Media"): the node's virtual media devices as
// its BMC reads them now, each with media_types, inserted, image and
// image_name (the Redfish VirtualMedia resource's fields, as Ironic's
// redfish management interface returns them), a JSON list. The read runs
// on the node's conductor-group queue without the node's lock (Ironic
// reads under a shared lock), so it answers while an operation runs.
func (s *server) getVirtualMedia(c *gin.Context, n *store.Node) error {
	if !supportsVirtualMedia(n) {
		return unsupportedExtension(n, "get_virtual_media")
	}
	devs, err := s.eng.ReadVirtualMedia(c.Request.Context(), workflows.VirtualMediaRequest{NodeUUID: n.UUID, ConductorGroup: n.ConductorGroup})
	switch {
	case errors.Is(err, ErrHardware):
		msg := fmt.Sprintf("Failed to get virtual media on node %s: %s", n.UUID, strings.TrimPrefix(err.Error(), ErrHardware.Error()+": "))
		return errorf(http.StatusInternalServerError, "%s", msg)
	case err != nil:
		return fmt.Errorf("read virtual media of node %s: %w", n.UUID, err)
	}
	if devs == nil {
		devs = []workflows.VirtualMediaDevice{}
	}
	c.JSON(http.StatusOK, devs)
	return nil
}
