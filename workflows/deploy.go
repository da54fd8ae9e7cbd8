package workflows

import (
	"errors"
	"fmt"

	"go.temporal.io/sdk/workflow"

	"github.com/ironflow/ironflow/hardware"
	"github.com/ironflow/ironflow/provision"
)

// directDeploy is the plan of deploy_interface direct: Ironic's built-in
// deploy steps with their priorities (Ironic's node deployment
// documentation), each with what ironflow does for it. DeployNode merges the
// request's deploy_steps into it; a step the table does not know runs
// in-band on the agent.
var directDeploy = []builtinStep{
	// Steps 4-8: boot the agent, wait for its first heartbeat.
	{provision.Step{StepID: provision.StepDeploy, Priority: 100}, (*run).bootAgentAndWait},
	// Steps 9-11: the agent writes the image and the config drive.
	{provision.Step{StepID: provision.StepWriteImage, Priority: 80}, (*run).inBand},
	// Step 12: bootloader in-band, boot device disk out-of-band.
	{provision.Step{StepID: provision.StepPrepareInstanceBoot, Priority: 60}, (*run).prepareInstanceBoot},
	// Step 12: the agent syncs and powers off.
	{provision.Step{StepID: provision.StepTearDownAgent, Priority: 40}, (*run).tearDownAgent},
	// Step 13: no more network boot; power on from disk.
	{provision.Step{StepID: provision.StepBootInstance, Priority: 20}, (*run).bootInstance},
}

// fakeDeploy is the plan of deploy_interface fake: nothing to write; the
// instance is powered on.
var fakeDeploy = []builtinStep{
	{provision.Step{StepID: provision.StepBootInstance, Priority: 20}, (*run).powerOnInstance},
}

// builtinStep is a step ironflow knows and the handler that runs it.
type builtinStep struct {
	provision.Step
	run func(r *run, s provision.Step) error
}

// builtinDeploySteps are directDeploy's steps with their default priorities.
var builtinDeploySteps = stepsOf(directDeploy)

func stepsOf(table []builtinStep) []provision.Step {
	out := make([]provision.Step, len(table))
	for i, b := range table {
		out[i] = b.Step
	}
	return out
}

// DeployNode takes a node from available (or deploy failed, or active for a
// rebuild) to active. It reads as docs/architecture.md's thirteen steps:
//
//	1-3  the API accepted the verb; record deploying and the config drive
//	4    out-of-band: prepare boot, boot device pxe (or cdrom), power on
//	5-8  wait call-back until the agent's first heartbeat (durable timer)
//	9-11 in-band deploy steps in priority order: write_image (+ config drive)
//	12   install_bootloader; tear down the agent; boot device disk
//	13   boot config removed, power on, active
//
// Steps 4 to 13 are the plan of directDeploy.
func DeployNode(ctx workflow.Context, req provision.Request) error {
	r, err := newRun(ctx, req, provision.OpDeploy)
	if err != nil {
		return err
	}
	r.active, r.fail = provision.Deploying, provision.DeployFailed

	// Step 3: record deploying; keep the config drive with the node.
	if err := r.enter(provision.Deploying, provision.Active, fmt.Sprintf("Deploy requested (%s)", req.Verb)); err != nil {
		return ended(err)
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
		if err := r.runPlan(fakeDeploy, stepsOf(fakeDeploy)); err != nil {
			return r.finish(err)
		}
		return r.finish(r.enter(provision.Active, "", "Deploy finished"))
	}

	// The callback wait shares the agent steps' one timer (run.go
	// waitCallbackOneTimer): fewer commands per deploy
	// (docs/architecture.md, "What a deploy costs").
	r.oneTimer = true
	return r.finish(r.deployWithAgentSteps())
}

// runPlan runs steps in order, each with its handler in table.
func (r *run) runPlan(table []builtinStep, steps []provision.Step) error {
	for _, s := range steps {
		fn := handlerOf(table, s.StepID)
		if h := r.deployFlowStep(s); h != nil { // hold, wait, power_on, ... (workflows/hold.go)
			fn = h
		}
		if err := r.runStep(s, fn); err != nil {
			return err
		}
	}
	return nil
}

// handlerOf is what runs step id: its entry in table, else the agent.
func handlerOf(table []builtinStep, id provision.StepID) func(*run, provision.Step) error {
	for _, b := range table {
		if b.StepID == id {
			return b.run
		}
	}
	return (*run).inBand
}

// runStep runs a real deploy or clean step: while it runs, every state the
// workflow records, and the first activity of the step (RunningStep), show
// it as the node's deploy_step or clean_step. The stages the workflow runs
// between steps (waiting for the agent, cleaning up boot) have no identity
// of their own and record none.
func (r *run) runStep(s provision.Step, fn func(*run, provision.Step) error) error {
	r.current = &s
	defer func() { r.current = nil }()
	return fn(r, s)
}

// running is the step an activity begins, for its input's Starts; nil
// between steps.
func (r *run) running() *provision.RunningStep {
	if r.current == nil {
		return nil
	}
	return &provision.RunningStep{Kind: r.stepKind(), Step: *r.current, Index: r.takeIndex()}
}

// takeIndex hands the step's pending index to the first activity that
// asks (nil once taken, and for every other activity).
func (r *run) takeIndex() *int {
	idx := r.pendingIndex
	r.pendingIndex = nil
	return idx
}

// inBand runs s on the agent: steps 9-11, and every deploy or clean step the
// agent offers.
func (r *run) inBand(s provision.Step) error {
	if err := r.step(s.Name(), func() error { return r.agentStep(r.stepKind(), s) }); err != nil {
		return err
	}
	return r.rebootAfterStep(s) // a step with reboot_requested (workflows/rebootstep.go)
}

// bootAgentAndWait is deploy.deploy: steps 4-8.
func (r *run) bootAgentAndWait(s provision.Step) error {
	if err := r.step(s.Name(), r.bootAgent); err != nil {
		return err
	}
	return r.step("wait call-back", func() error {
		_, err := r.waitCallback(provision.DeployWait, func(hb Heartbeat) bool { return hb.CallbackURL != "" })
		if err == nil {
			err = r.enter(provision.Deploying, provision.Active, fmt.Sprintf("Agent called back from %s", r.agent))
		}
		return err
	})
}

// prepareInstanceBoot is deploy.prepare_instance_boot: step 12's bootloader
// in-band, then boot device disk out-of-band.
func (r *run) prepareInstanceBoot(s provision.Step) error {
	if err := r.inBand(s); err != nil {
		return err
	}
	if err := r.step("set boot device disk", func() error { return r.bootDevice("disk", true) }); err != nil {
		return err
	}
	return r.secureBootIfRequested(true) // workflows/secureboot.go
}

// tearDownAgent is deploy.tear_down_agent: the agent syncs and powers off;
// the BMC makes sure.
func (r *run) tearDownAgent(s provision.Step) error {
	return r.step(s.Name(), func() error {
		if err := r.agentCall(ActAgentPowerOff, AgentInput{NodeUUID: r.node.UUID, CallbackURL: r.agent, Starts: r.running()}, nil); err != nil {
			workflow.GetLogger(r.ctx).Warn("agent power off failed, using the BMC", "node", r.node.UUID, "error", errorText(err))
		}
		return r.power("power off")
	})
}

// powerOnInstance is fake's deploy.boot_instance.
func (r *run) powerOnInstance(s provision.Step) error {
	return r.step(s.Name(), func() error { return r.power("power on") })
}

// bootInstance is deploy.boot_instance: step 13, no more network boot, power
// on from disk.
func (r *run) bootInstance(s provision.Step) error {
	if err := r.step("clean up boot", func() error {
		return r.hardware(ActCleanBoot, BootInput{Node: r.node, Kind: BootAgent, Starts: r.running()}, nil)
	}); err != nil {
		return err
	}
	return r.step(s.Name(), func() error { return r.power("power on") })
}

// bootAgent prepares the agent's boot (PXE config or virtual-media ISO),
// points the next boot at it and powers the machine on (or reboots it).
func (r *run) bootAgent() error { return r.netboot(BootAgent, false) }

// netboot prepares what the machine is to boot from ironflow, points its
// next boot (or every boot) at the network or the virtual CD, and powers it
// on or reboots it.
func (r *run) netboot(kind BootKind, persistent bool) error {
	if err := r.hardware(ActPrepareBoot, BootInput{Node: r.node, Kind: kind, Starts: r.running()}, nil); err != nil {
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
		// (Rescue, unrescue and servicing always boot the agent.)
		if hardware.DeployOf(r.node.DeployInterface).PreparesBoot() || r.node.VirtualMedia() ||
			r.status.Operation == provision.OpRescue || r.status.Operation == provision.OpUnrescue || r.status.Operation == provision.OpService {
			if cerr := r.hardware(ActCleanBoot, BootInput{Node: r.node, Kind: BootAgent}, nil); cerr != nil {
				workflow.GetLogger(r.ctx).Warn("clean up boot after failure", "node", r.node.UUID, "error", errorText(cerr))
			}
		}
		if perr := r.power("power off"); perr != nil {
			workflow.GetLogger(r.ctx).Warn("power off after failure", "node", r.node.UUID, "error", errorText(perr))
		}
		last := r.status.LastError
		event, severity := "", "ERROR"
		switch {
		case r.supersededBy != "" && errors.Is(err, errAborted):
			// A new verb ended the wait (AbortRequest): the failure's
			// last_error stands, and nobody aborted anything.
			event, severity = fmt.Sprintf("Provision action \"%s\" requested in state \"%s\": the wait for retry, skip-step or abort ended",
				r.supersededBy, r.fail), "INFO"
		case r.abortMessage != "" && errors.Is(err, errAborted):
			last = r.abortMessage
		case last == "" || errors.Is(err, errAborted):
			last = fmt.Sprintf("%s %s at step %s", capitalize(string(r.status.Operation)), reason, r.status.Step)
		default:
			last = fmt.Sprintf("%s (%s)", last, reason)
		}
		if event == "" {
			event = last
		}
		if rerr := r.record(RecordStateInput{To: r.fail, LastError: last, Event: event, Severity: severity, EventType: string(r.status.Operation), ClearAgent: true}); rerr != nil {
			return rerr
		}
		// The node says why; the workflow itself completed its job.
		return nil
	default:
		return err
	}
}
