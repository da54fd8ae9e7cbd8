package workflows

import (
	"fmt"

	"go.temporal.io/sdk/workflow"

	"github.com/ironflow/ironflow/provision"
)

// SetPowerState performs a power change asked through the API and records
// the state the BMC reports (or the error) with target_power_state cleared.
func SetPowerState(ctx workflow.Context, req PowerRequest) error {
	r, err := newNodeRun(ctx, req.NodeUUID, provision.OpPower)
	if err != nil {
		return err
	}
	var state string
	err = r.hw.call(ActSetPower, PowerInput{Node: r.node, Action: req.Target, TimeoutSeconds: req.TimeoutSeconds}, &state)
	rec := PowerStateRecord{NodeUUID: req.NodeUUID, PowerState: state, Event: fmt.Sprintf("Power %s: %s", req.Target, orUnknown(state)), Severity: "INFO"}
	if err != nil {
		rec.PowerState = r.node.PowerState
		rec.LastError = fmt.Sprintf("Failed to change power state to '%s' for node %s: %s", req.Target, req.NodeUUID, errorText(err))
		rec.Event, rec.Severity = rec.LastError, "ERROR"
	}
	return r.rec.local(ActRecordPowerState, rec, nil)
}

func orUnknown(s string) string {
	if s == "" {
		return "an unknown power state"
	}
	return s
}
