package workflows

import (
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
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
	if req.TimeoutSeconds > 0 {
		// The API's timeout bounds each wait for a power state, twice for
		// a reboot: the call may take that long (Metal3 asks 180 s for a
		// soft power off). Activity timeouts are not compared on replay.
		need := 2*time.Duration(req.TimeoutSeconds)*time.Second + time.Minute
		r.node.Policy.BMCCallTimeout = max(r.node.Policy.BMCCallTimeout, need)
	}
	var state string
	err = r.hw.call(ActSetPower, PowerInput{Node: r.node, Action: req.Target, TimeoutSeconds: req.TimeoutSeconds, Requested: true}, &state)
	rec := PowerStateRecord{NodeUUID: req.NodeUUID, PowerState: state, Event: fmt.Sprintf("Power %s: %s", req.Target, orUnknown(state)), Severity: "INFO"}
	if err != nil {
		rec.PowerState = r.node.PowerState
		rec.LastError = fmt.Sprintf("Failed to change power state to '%s' for node %s: %s", req.Target, req.NodeUUID, errorText(err))
		var app *temporal.ApplicationError
		if errors.As(err, &app) && app.Type() == ErrTypePowerStateFailure {
			// A soft power off the machine ignored: Ironic's
			// node_power_action message, and the power state the BMC
			// read at the deadline (still on), so that the client can
			// fall back to a hard power off.
			var read string
			if app.HasDetails() && app.Details(&read) == nil && read != "" {
				rec.PowerState = read
			}
			rec.LastError = fmt.Sprintf("Failed to change power state to '%s' by '%s': %s", powerTargetState(req.Target), req.Target, app.Message())
		}
		rec.Event, rec.Severity = rec.LastError, "ERROR"
	}
	return r.rec.local(ActRecordPowerState, rec, nil)
}

// powerTargetState is the power state an action ends in (Ironic's
// conductor utils _calculate_target_state).
func powerTargetState(action string) string {
	if action == "power off" || action == "soft power off" {
		return "power off"
	}
	return "power on"
}

func orUnknown(s string) string {
	if s == "" {
		return "an unknown power state"
	}
	return s
}
