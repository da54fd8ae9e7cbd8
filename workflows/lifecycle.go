package workflows

import (
	"fmt"

	"github.com/ironflow/ironflow/provision"
	"go.temporal.io/sdk/workflow"
)

// ManageNode verifies a node: enroll → verifying → manageable. For real
// drivers the BMC must answer a power-state read with the node's
// credentials; when it does not, the node goes back to enroll with a
// last_error that says why. From clean failed, inspect failed and available,
// manage simply records manageable.
func ManageNode(ctx workflow.Context, req provision.Request) error {
	r, err := newRun(ctx, req, provision.OpManage)
	if err != nil {
		return err
	}
	if req.FromState != provision.Enroll {
		return ended(r.enter(provision.Manageable, "", fmt.Sprintf("Node moved to manageable from %s", req.FromState)))
	}
	if err := r.enter(provision.Verifying, provision.Manageable, "Verifying the node's BMC"); err != nil {
		return ended(err)
	}
	var state string
	err = r.hardware(ActGetPowerState, r.node, &state)
	if err != nil {
		msg := fmt.Sprintf("Failed to get power state for node %s. Error: %s", r.node.UUID, errorText(err))
		return r.record(RecordStateInput{To: provision.Enroll, LastError: msg, Event: msg, Severity: "ERROR", EventType: "verify"})
	}
	if err := r.local(ActRecordPowerState, PowerStateRecord{NodeUUID: r.node.UUID, PowerState: state}, nil); err != nil {
		return err
	}
	r.cacheBIOS() // workflows/bios.go
	return r.enter(provision.Manageable, "", fmt.Sprintf("Verified: the BMC reports %s", orUnknown(state)))
}

// ProvideNode makes a manageable node available, through automated cleaning
// when the node boots the agent and cleaning is enabled.
func ProvideNode(ctx workflow.Context, req provision.Request) error {
	r, err := newRun(ctx, req, provision.OpProvide)
	if err != nil {
		return err
	}
	r.active, r.fail = provision.Cleaning, provision.CleanFailed
	if err := r.enter(provision.Cleaning, provision.Available, r.cleaningEvent()); err != nil {
		return ended(err)
	}
	if err := r.clean(provision.Available); err != nil {
		return r.finish(err)
	}
	return r.finish(r.record(RecordStateInput{To: provision.Available, Event: "Node available", ClearAgent: true}))
}

// UndeployNode tears an instance down: deleting → power off → boot config
// removed → instance_info cleared → cleaning → available.
func UndeployNode(ctx workflow.Context, req provision.Request) error {
	r, err := newRun(ctx, req, provision.OpUndeploy)
	if err != nil {
		return err
	}
	r.active, r.fail = provision.Deleting, provision.Error
	if err := r.enter(provision.Deleting, provision.Available, "Undeploy requested"); err != nil {
		return ended(err)
	}
	if err := r.step("power off", func() error { return r.power("power off") }); err != nil {
		return r.finish(err)
	}
	if err := r.step("clean up boot", func() error {
		return r.hardware(ActCleanBoot, BootInput{Node: r.node, Kind: BootInstance}, nil)
	}); err != nil {
		return r.finish(err)
	}
	if err := r.secureBootIfRequested(false); err != nil { // workflows/secureboot.go
		return r.finish(err)
	}
	if err := r.local(ActClearInstanceInfo, r.node.UUID, nil); err != nil {
		return err
	}
	r.active, r.fail = provision.Cleaning, provision.CleanFailed
	if err := r.enter(provision.Cleaning, provision.Available, r.cleaningEvent()); err != nil {
		return err
	}
	if err := r.clean(provision.Available); err != nil {
		return r.finish(err)
	}
	return r.finish(r.record(RecordStateInput{To: provision.Available, Event: "Undeploy finished: node available", ClearAgent: true}))
}

// clean runs automated cleaning through the agent: boot it, wait for it,
// run its clean steps with priority above zero (erase_devices_metadata by
// default), then power off and remove the boot config. Nodes that do not
// boot the agent, or with automated_clean false, skip it.
func (r *run) clean(target provision.State) error {
	if !r.node.Cleans() {
		return nil
	}
	r.cacheBIOS() // workflows/bios.go
	if err := r.step("prepare cleaning", r.bootAgent); err != nil {
		return err
	}
	if err := r.step("wait call-back", func() error {
		_, err := r.waitCallback(provision.CleanWait, func(hb Heartbeat) bool { return hb.CallbackURL != "" })
		if err == nil {
			err = r.enter(provision.Cleaning, target, fmt.Sprintf("Agent called back from %s", r.agent))
		}
		return err
	}); err != nil {
		return err
	}
	var offered []provision.Step
	if err := r.step("get clean steps", func() error {
		return r.agentCall(ActGetAgentSteps, AgentStepsInput{Agent: AgentInput{NodeUUID: r.node.UUID, CallbackURL: r.agent}, Kind: provision.StepKindClean}, &offered)
	}); err != nil {
		return err
	}
	for _, s := range r.cleanPlan(offered) {
		if err := r.runStep(s, (*run).inBand); err != nil {
			return err
		}
	}
	if err := r.step("tear down agent", func() error {
		if err := r.agentCall(ActAgentPowerOff, AgentInput{NodeUUID: r.node.UUID, CallbackURL: r.agent}, nil); err != nil {
			workflow.GetLogger(r.ctx).Warn("agent power off failed, using the BMC", "node", r.node.UUID, "error", errorText(err))
		}
		return r.power("power off")
	}); err != nil {
		return err
	}
	return r.step("clean up boot", func() error {
		return r.hardware(ActCleanBoot, BootInput{Node: r.node, Kind: BootAgent}, nil)
	})
}

// cleaningEvent says in the node history whether cleaning runs.
func (r *run) cleaningEvent() string {
	if r.node.Cleans() {
		return "Automated cleaning"
	}
	return "Automated cleaning skipped (automated_clean is off, or the deploy interface leaves nothing to erase)"
}

// cleanPlan applies the configured priorities to the agent's erase steps and
// keeps the steps with priority above zero, highest first.
// It is MergeSteps without user steps (Ironic's automated cleaning).
func (r *run) cleanPlan(offered []provision.Step) []provision.Step {
	out, _ := MergeSteps(PlanInput{Kind: provision.StepKindClean, Available: offered, Priorities: map[string]int{
		provision.StepEraseDevicesMetadata.String(): r.node.Policy.EraseDevicesMetadataPriority,
		provision.StepEraseDevices.String():         r.node.Policy.EraseDevicesPriority,
	}})
	return out
}

// SetPowerState performs a power change asked through the API and records
// the state the BMC reports (or the error) with target_power_state cleared.
func SetPowerState(ctx workflow.Context, req PowerRequest) error {
	r, err := newRun(ctx, provision.Request{NodeUUID: req.NodeUUID}, provision.OpPower)
	if err != nil {
		return err
	}
	var state string
	err = r.hardware(ActSetPower, PowerInput{Node: r.node, Action: req.Target, TimeoutSeconds: req.TimeoutSeconds}, &state)
	rec := PowerStateRecord{NodeUUID: req.NodeUUID, PowerState: state, Event: fmt.Sprintf("Power %s: %s", req.Target, orUnknown(state)), Severity: "INFO"}
	if err != nil {
		rec.PowerState = r.node.PowerState
		rec.LastError = fmt.Sprintf("Failed to change power state to '%s' for node %s: %s", req.Target, req.NodeUUID, errorText(err))
		rec.Event, rec.Severity = rec.LastError, "ERROR"
	}
	return r.local(ActRecordPowerState, rec, nil)
}

// ChangeBootDevice sets the boot device asked through the API; the API waits
// for its result.
func ChangeBootDevice(ctx workflow.Context, req BootDeviceRequest) error {
	r, err := newRun(ctx, provision.Request{NodeUUID: req.NodeUUID}, provision.OpBootDevice)
	if err != nil {
		return err
	}
	return r.bootDevice(req.BootDevice, req.Persistent)
}

func orUnknown(s string) string {
	if s == "" {
		return "an unknown power state"
	}
	return s
}
