package apiserver

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/ironflow/ironflow/hardware"
	"github.com/ironflow/ironflow/provision"
	"github.com/ironflow/ironflow/store"
	"github.com/ironflow/ironflow/workflows"
)

// checkSteps refuses, before anything runs, a manual cleaning or a
// servicing whose steps the node cannot run: Ironic's step checks
// (ironic/conductor/steps.py), against the steps the node's interfaces
// declare and the agent's (those it reported last, else the ones the
// ironflow agent advertises), with Ironic's messages. The workflow checks
// again against the list the agent returns once it is up.
func checkSteps(n *store.Node, req provisionBody) error {
	kind, raw, what := provision.StepKindClean, req.cleanSteps, "clean"
	switch req.verb {
	case provision.VerbClean:
	case provision.VerbService:
		kind, raw, what = provision.StepKindService, req.serviceSteps, "service"
	default:
		return nil
	}
	user, err := workflows.ParseUserSteps(raw)
	if err != nil {
		return badRequest("Invalid %s_steps: %s", what, err.Error())
	}
	ifaces := map[string]hardware.Interface{
		"bios": hardware.Interface(n.BIOSInterface), "raid": hardware.Interface(n.RAIDInterface),
		"firmware": hardware.Interface(n.FirmwareInterface)}
	available := workflows.InterfaceSteps(kind, ifaces)
	// raid_interface agent: the agent's software RAID steps (agent/raid.go).
	available = append(available, workflows.WithAgentInterfaceSteps(kind, ifaces, workflows.KnownAgentSteps(kind, cachedAgentSteps(n, kind)))...)
	available = append(available, workflows.FlowSteps(user)...) // hold, wait, power_on, ...
	_, err = workflows.MergeSteps(workflows.PlanInput{Kind: kind, Available: available, User: user,
		Manual: true, DisableRamdisk: req.disableRamdisk})
	var perr *workflows.PlanError
	if errors.As(err, &perr) {
		return badRequest("Cannot %s node %s: %s", what, n.UUID, perr.Error())
	}
	if err != nil {
		return fmt.Errorf("check the %s steps of node %s: %w", what, n.UUID, err)
	}
	// A firmware update's components and checksums are checked here too,
	// so that a malformed one is the request's 400, not a failed step.
	for _, u := range user {
		if u.StepID != (provision.StepID{Interface: "firmware", Step: "update"}) {
			continue
		}
		if _, err := workflows.ParseFirmwareSettings(u.Args); err != nil {
			return badRequest("Cannot %s node %s: %s", what, n.UUID, err.Error())
		}
	}
	return nil
}

// cachedAgentSteps are the agent's steps of kind as the node's last
// operation recorded them (driver_internal_info agent_cached_<kind>_steps).
func cachedAgentSteps(n *store.Node, kind provision.StepKind) []provision.Step {
	v, ok := n.DriverInternalInfo[fmt.Sprintf("agent_cached_%s_steps", kind)]
	if !ok || v == nil {
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	var steps []provision.Step
	if json.Unmarshal(b, &steps) != nil {
		return nil
	}
	return steps
}
