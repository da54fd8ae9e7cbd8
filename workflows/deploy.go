package workflows

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"

	"go.temporal.io/sdk/workflow"

	"github.com/ironflow/ironflow/hardware"
)

// Built-in deploy steps and their priorities, as Ironic's direct deploy
// interface defines them (reference/ironic-states.md §3).
var builtinDeploySteps = []Step{
	{Interface: "deploy", Step: "deploy", Priority: 100},
	{Interface: "deploy", Step: "write_image", Priority: 80},
	{Interface: "deploy", Step: "prepare_instance_boot", Priority: 60},
	{Interface: "deploy", Step: "tear_down_agent", Priority: 40},
	{Interface: "deploy", Step: "boot_instance", Priority: 20},
}

// DeployNode takes a node from available (or deploy failed, or active for a
// rebuild) to active. It reads as ARCHITECTURE.md's thirteen steps:
//
//	1-3  the API accepted the verb; record deploying and the config drive
//	4    out-of-band: prepare boot, boot device pxe (or cdrom), power on
//	5-8  wait call-back until the agent's first heartbeat (durable timer)
//	9-11 in-band deploy steps in priority order: write_image (+ config drive)
//	12   install_bootloader; tear down the agent; boot device disk
//	13   boot config removed, power on, active
func DeployNode(ctx workflow.Context, req ProvisionRequest) error {
	r, err := newRun(ctx, req, "deploy")
	if err != nil {
		return err
	}
	r.active, r.fail = StateDeploying, StateDeployFailed

	// Step 3: record deploying; keep the config drive with the node.
	if err := r.enter(StateDeploying, StateActive, fmt.Sprintf("Deploy requested (%s)", req.Verb)); err != nil {
		return err
	}
	if len(req.ConfigDrive) > 0 && string(req.ConfigDrive) != "null" {
		if err := r.step("store config drive", func() error {
			return r.local(ActStoreConfigDrive, ConfigDriveInput{NodeUUID: r.node.UUID, ConfigDrive: req.ConfigDrive}, nil)
		}); err != nil {
			return r.finish(err)
		}
	}

	switch hardware.DeployOf(r.node.DeployInterface).Flow() {
	case hardware.FlowRamdisk:
		return r.finish(r.deployRamdisk())
	case hardware.FlowInstaller:
		return r.finish(r.deployAnaconda())
	}
	if !r.node.UsesAgent() {
		// deploy_interface fake: nothing to write; power the instance on.
		if err := r.step("boot_instance", func() error { return r.power("power on") }); err != nil {
			return r.finish(err)
		}
		return r.finish(r.enter(StateActive, "", "Deploy finished"))
	}

	steps, err := planSteps(builtinDeploySteps, req.DeploySteps)
	if err != nil {
		return r.finish(r.failNow("plan deploy steps", err))
	}
	for _, s := range steps {
		if err := r.deployStep(s); err != nil {
			return r.finish(err)
		}
	}
	return r.finish(r.record(RecordStateInput{To: StateActive, Event: "Deploy finished: the instance is booting from disk", ClearAgent: true}))
}

// deployStep runs one step of the plan.
func (r *run) deployStep(s Step) error {
	switch {
	case s.Interface == "deploy" && s.Step == "deploy":
		// Step 4-8: boot the agent and wait for it.
		if err := r.step(s.Name(), r.bootAgent); err != nil {
			return err
		}
		return r.step("wait call-back", func() error {
			_, err := r.waitCallback(StateDeployWait, func(hb Heartbeat) bool { return hb.CallbackURL != "" })
			if err == nil {
				err = r.enter(StateDeploying, StateActive, fmt.Sprintf("Agent called back from %s", r.agent))
			}
			return err
		})
	case s.Interface == "deploy" && s.Step == "prepare_instance_boot":
		// Step 12: bootloader in-band, then boot device disk out-of-band.
		if err := r.step(s.Name(), func() error { return r.agentStep("deploy", s) }); err != nil {
			return err
		}
		return r.step("set boot device disk", func() error { return r.bootDevice("disk", true) })
	case s.Interface == "deploy" && s.Step == "tear_down_agent":
		return r.step(s.Name(), func() error {
			// The agent syncs and powers off; the BMC makes sure.
			if err := r.agentCall(ActAgentPowerOff, AgentInput{NodeUUID: r.node.UUID, CallbackURL: r.agent}, nil); err != nil {
				workflow.GetLogger(r.ctx).Warn("agent power off failed, using the BMC", "node", r.node.UUID, "error", errorText(err))
			}
			return r.power("power off")
		})
	case s.Interface == "deploy" && s.Step == "boot_instance":
		// Step 13: no more network boot; power on from disk.
		if err := r.step("clean up boot", func() error {
			return r.hardware(ActCleanBoot, BootInput{Node: r.node, Kind: "agent"}, nil)
		}); err != nil {
			return err
		}
		return r.step(s.Name(), func() error { return r.power("power on") })
	default:
		// Steps 9-11 and any agent step: run in-band.
		return r.step(s.Name(), func() error { return r.agentStep("deploy", s) })
	}
}

// bootAgent prepares the agent's boot (PXE config or virtual-media ISO),
// points the next boot at it and powers the machine on (or reboots it).
func (r *run) bootAgent() error { return r.netboot("agent", false) }

// netboot prepares what the machine is to boot from ironflow (kind: agent,
// inspect, ramdisk, anaconda), points its next boot (or every boot) at the
// network or the virtual CD, and powers it on or reboots it.
func (r *run) netboot(kind string, persistent bool) error {
	if err := r.hardware(ActPrepareBoot, BootInput{Node: r.node, Kind: kind}, nil); err != nil {
		return err
	}
	if err := r.bootDevice(r.netbootDevice(), persistent); err != nil {
		return err
	}
	return r.power("rebooting")
}

func (r *run) bootDevice(device string, persistent bool) error {
	return r.hardware(ActSetBootDevice, BootDeviceInput{Node: r.node, Device: device, Persistent: persistent}, nil)
}

func (r *run) power(action string) error {
	var state string
	if err := r.hardware(ActSetPower, PowerInput{Node: r.node, Action: action}, &state); err != nil {
		return err
	}
	r.node.PowerState = state
	return nil
}

// failNow records a failure that no operator action can fix in place.
func (r *run) failNow(what string, err error) error {
	msg := fmt.Sprintf("%s failed: %s: %s", capitalize(r.status.Operation), what, errorText(err))
	if rerr := r.record(RecordStateInput{To: r.fail, LastError: msg, Event: msg, Severity: "ERROR", EventType: r.status.Operation, ClearAgent: true}); rerr != nil {
		return rerr
	}
	return errGaveUp
}

// finish turns the outcome into the node's final record. A workflow that
// ends through abort or an operator wait that timed out leaves the node in
// its failure state with a last_error that says so, boot config removed and
// power off, so that nothing is left booting.
func (r *run) finish(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, errAborted), errors.Is(err, errGaveUp), errors.Is(err, errAgentLost):
		reason := "aborted by operator"
		switch {
		case errors.Is(err, errGaveUp):
			reason = fmt.Sprintf("no retry, skip-step or abort within %s", r.node.Policy.OperatorWaitTimeout)
		case errors.Is(err, errAgentLost):
			reason = "boot configuration removed and power off; deploy again when the machine is back"
		}
		// Whatever this workflow prepared to boot (agent, installer and its
		// kickstart with a token, ramdisk) is removed; CleanBoot is
		// idempotent when there is nothing.
		if hardware.DeployOf(r.node.DeployInterface).PreparesBoot() || r.node.VirtualMedia() {
			if cerr := r.hardware(ActCleanBoot, BootInput{Node: r.node, Kind: "agent"}, nil); cerr != nil {
				workflow.GetLogger(r.ctx).Warn("clean up boot after failure", "node", r.node.UUID, "error", errorText(cerr))
			}
		}
		if perr := r.power("power off"); perr != nil {
			workflow.GetLogger(r.ctx).Warn("power off after failure", "node", r.node.UUID, "error", errorText(perr))
		}
		last := r.status.LastError
		if last == "" || errors.Is(err, errAborted) {
			last = fmt.Sprintf("%s %s at step %s", capitalize(r.status.Operation), reason, r.status.Step)
		} else {
			last = fmt.Sprintf("%s (%s)", last, reason)
		}
		if rerr := r.record(RecordStateInput{To: r.fail, LastError: last, Event: last, Severity: "ERROR", EventType: r.status.Operation, ClearAgent: true}); rerr != nil {
			return rerr
		}
		// The node says why; the workflow itself completed its job.
		return nil
	default:
		return err
	}
}

// planSteps merges user-requested steps (API 1.69 deploy_steps) into the
// built-in plan as Ironic does: a user step with the same interface and name
// overrides priority and args (priority 0 disables it), other user steps are
// added; the result runs from highest to lowest priority.
func planSteps(builtin []Step, user json.RawMessage) ([]Step, error) {
	steps := append([]Step(nil), builtin...)
	if len(user) > 0 && string(user) != "null" {
		var extra []Step
		if err := json.Unmarshal(user, &extra); err != nil {
			return nil, fmt.Errorf("deploy_steps: %w", err)
		}
		for _, u := range extra {
			if u.Interface == "" || u.Step == "" {
				return nil, fmt.Errorf("deploy_steps: every step needs interface and step, got %+v", u)
			}
			found := false
			for i := range steps {
				if steps[i].Interface == u.Interface && steps[i].Step == u.Step {
					steps[i].Priority = u.Priority
					if len(u.Args) > 0 {
						steps[i].Args = u.Args
					}
					found = true
				}
			}
			if !found {
				steps = append(steps, u)
			}
		}
	}
	out := steps[:0]
	for _, s := range steps {
		if s.Priority > 0 {
			out = append(out, s)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Priority > out[j].Priority })
	return out, nil
}
