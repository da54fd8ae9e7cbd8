package apiserver

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/ironflow/ironflow/hardware"
	"github.com/ironflow/ironflow/provision"
	"github.com/ironflow/ironflow/pyliteral"
	"github.com/ironflow/ironflow/store"
	"github.com/ironflow/ironflow/workflows"
)

// PUT /v1/nodes/{node}/states/boot_mode and .../states/secure_boot (API
// 1.76): Ironic validates the target, answers 202 and lets the conductor
// set it; here the ChangeBootMode workflow (workflows/bootmode.go) sets it
// through the BMC and records the read-back in boot_mode / secure_boot,
// or the failure in last_error.

const v76BootModeChange = 76

// BootModeStarter is the Engine's optional boot mode change; an engine
// without it answers 501.
type BootModeStarter interface {
	StartBootMode(ctx context.Context, req workflows.BootModeRequest) error
}

// StartBootMode implements BootModeStarter.
func (e *TemporalEngine) StartBootMode(ctx context.Context, req workflows.BootModeRequest) error {
	_, err := e.start(ctx, req.NodeUUID, provision.OpBootMode, "", workflows.WorkflowChangeBootMode, req)
	return err
}

func (s *server) setBootMode(c *gin.Context, n *store.Node) error {
	body, err := decodeObject(c)
	if err != nil {
		return err
	}
	target, ok := body["target"].(string)
	if !ok || (target != "uefi" && target != "bios") {
		return badRequest("Invalid boot mode %s requested for node.", pyliteral.Str(body["target"]))
	}
	return s.startBootMode(c, n, workflows.BootModeRequest{NodeUUID: n.UUID, BootMode: target, ConductorGroup: n.ConductorGroup},
		fmt.Sprintf("Boot mode change to %s accepted", target))
}

func (s *server) setSecureBoot(c *gin.Context, n *store.Node) error {
	body, err := decodeObject(c)
	if err != nil {
		return err
	}
	target, ok := body["target"].(bool)
	if !ok {
		return badRequest("Invalid secure boot state %s requested for node.", pyliteral.Str(body["target"]))
	}
	// A type without secure boot (ipmi): Ironic's ipmitool management
	// refuses it with UnsupportedDriverExtension before anything is spawned.
	if ht, ok := hardware.Lookup(n.Driver); ok && !ht.SupportsSecureBoot() {
		return unsupportedExtension(n, "set_secure_boot_state")
	}
	return s.startBootMode(c, n, workflows.BootModeRequest{NodeUUID: n.UUID, SecureBoot: &target, ConductorGroup: n.ConductorGroup},
		fmt.Sprintf("Secure boot change to %v accepted", target))
}

func (s *server) startBootMode(c *gin.Context, n *store.Node, req workflows.BootModeRequest, event string) error {
	st, ok := s.eng.(BootModeStarter)
	if !ok {
		return errorf(http.StatusNotImplemented, "Boot mode changes are not supported by this engine.")
	}
	err := st.StartBootMode(c.Request.Context(), req)
	if errors.Is(err, ErrNodeLocked) {
		return nodeLocked(n.UUID, lockHolder(n))
	}
	if err != nil {
		return fmt.Errorf("start boot mode workflow for node %s: %w", n.UUID, err)
	}
	s.addHistory(c, n.UUID, store.SeverityInfo, "management", event)
	writeEmpty(c, http.StatusAccepted, s.baseURL(c)+"/v1/nodes/"+c.Param("node")+"/states")
	return nil
}
