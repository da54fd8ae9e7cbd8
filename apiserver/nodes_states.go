package apiserver

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/ironflow/ironflow/provision"
	"github.com/ironflow/ironflow/pyliteral"
	"github.com/ironflow/ironflow/store"
	"github.com/ironflow/ironflow/workflows"
)

func (s *server) states(c *gin.Context, n *store.Node) error {
	st := map[string]any{
		"console_enabled":        n.ConsoleEnabled,
		"last_error":             strOrNil(n.LastError),
		"power_state":            strOrNil(n.PowerState),
		"provision_state":        provisionStateAt(n.ProvisionState, ver(c)),
		"provision_updated_at":   timeOrNil(n.ProvisionUpdatedAt),
		"target_power_state":     strOrNil(n.TargetPowerState),
		"target_provision_state": nil,
	}
	if n.TargetProvisionState != nil {
		st["target_provision_state"] = provisionStateAt(*n.TargetProvisionState, ver(c))
	}
	if ver(c) >= v12RAIDConfig {
		st["raid_config"] = mapOrEmpty(n.RAIDConfig)
		st["target_raid_config"] = mapOrEmpty(n.TargetRAIDConfig)
	}
	if ver(c) >= v75BootMode {
		st["boot_mode"] = strOrNil(n.BootMode)
		st["secure_boot"] = boolOrNil(n.SecureBoot)
	}
	writeJSON(c, http.StatusOK, st)
	return nil
}

// Power targets, Ironic's names.
var powerTargets = map[string]int{
	"power on": 1, "power off": 1, "rebooting": 1,
	"soft power off": v27SoftPower, "soft rebooting": v27SoftPower,
}

// power answers PUT /v1/nodes/{id}/states/power: parse the body, then
// record the target and start the power workflow.
func (s *server) power(c *gin.Context) error {
	req, err := parsePower(c)
	if err != nil {
		return err
	}
	target, timeout, known := req.target, req.timeout, req.known
	n, err := s.loadNode(c, c.Param("node"))
	if err != nil {
		return err
	}
	if !known {
		state := "None"
		if n.PowerState != nil {
			state = *n.PowerState
		}
		return badRequest("%s", provision.NotAllowed(target, n.UUID, state))
	}
	final := "power on"
	if target == "power off" || target == "soft power off" {
		final = "power off"
		if n.DisablePowerOff {
			// Ironic's API refuses it with PowerStateFailure (409) for a
			// node whose power must stay on (API 1.95), at any version.
			return errorf(http.StatusConflict, "Failed to set node power state to %s.", target)
		}
	}
	ctx := c.Request.Context()
	if n.ProvisionState.Failed() {
		// Ironic changes the power of a node in a failed state, which no
		// operation holds there: the operator wait ends first.
		if err := s.abortWaiting(ctx, n.UUID, provision.AbortRequest{Request: fmt.Sprintf("Power action \"%s\"", target)}); err != nil {
			return err
		}
	}
	if err := s.requireEngine(ctx); err != nil {
		return err
	}
	// target_power_state is recorded before the workflow starts so that the
	// workflow's own completion (which clears it) always comes after.
	var previous *string
	if _, err := s.store.UpdateNode(ctx, n.UUID, func(cur *store.Node) error {
		previous = cur.TargetPowerState
		cur.TargetPowerState = &final
		return nil
	}); err != nil {
		return nodeWriteError(err, n)
	}
	err = s.eng.StartPower(ctx, workflows.PowerRequest{
		NodeUUID: n.UUID, Target: target, TimeoutSeconds: timeout, ConductorGroup: n.ConductorGroup,
	})
	if err != nil {
		s.restorePowerTarget(c, n.UUID, final, previous)
		if errors.Is(err, ErrNodeLocked) {
			return nodeLocked(n.UUID, lockHolder(n))
		}
		return fmt.Errorf("start power workflow for node %s: %w", n.UUID, err)
	}
	s.addHistory(c, n.UUID, store.SeverityInfo, "power", fmt.Sprintf("Power action \"%s\" accepted", target))
	writeEmpty(c, http.StatusAccepted, s.baseURL(c)+"/v1/nodes/"+n.UUID+"/states")
	return nil
}

// powerBody is a parsed PUT .../states/power body.
type powerBody struct {
	target  string
	timeout int  // seconds, 0: the driver's
	known   bool // target is one of Ironic's power targets
}

// parsePower reads and checks the body with Ironic's messages and version
// gates; an unknown target is refused once the node is found (its message
// names the node's power state).
func parsePower(c *gin.Context) (powerBody, error) {
	var req powerBody
	body, err := decodeObject(c)
	if err != nil {
		return req, err
	}
	for k := range body {
		if k != "target" && k != "timeout" {
			return req, badRequest("Unknown argument: \"%s\"", k)
		}
	}
	target, ok := body["target"].(string)
	if !ok {
		return req, badRequest("Missing argument: \"target\"")
	}
	req.target = target
	if tv, ok := body["timeout"]; ok && tv != nil {
		if ver(c) < v27SoftPower {
			return req, notAcceptable()
		}
		num, ok := tv.(json.Number)
		i, err := num.Int64()
		if !ok || err != nil || i <= 0 || i > 1<<31 {
			return req, badRequest("Invalid timeout value %s. The timeout must be a positive integer.", pyliteral.Repr(tv))
		}
		req.timeout = int(i)
	}
	since, known := powerTargets[target]
	if known && ver(c) < since {
		return req, notAcceptable()
	}
	req.known = known
	return req, nil
}

// restorePowerTarget undoes the target this request recorded, unless
// someone changed it since.
func (s *server) restorePowerTarget(c *gin.Context, uuid, ours string, previous *string) {
	_, err := s.store.UpdateNode(c.Request.Context(), uuid, func(cur *store.Node) error {
		if cur.TargetPowerState != nil && *cur.TargetPowerState == ours {
			cur.TargetPowerState = previous
		}
		return nil
	})
	if err != nil {
		s.log.WarnContext(c.Request.Context(), "clear target power state", "node", uuid, "err", err)
	}
}
