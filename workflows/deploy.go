package workflows

import (
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
	r.rec.active, r.rec.fail, r.rec.target = provision.Deploying, provision.DeployFailed, req.Transition.Target

	// Step 3: record deploying; keep the config drive with the node.
	if err := r.rec.enter(provision.Deploying, provision.Active, fmt.Sprintf("Deploy requested (%s)", req.Verb)); err != nil {
		return ended(err)
	}
	if len(req.ConfigDrive) > 0 && string(req.ConfigDrive) != "null" {
		if err := r.step("store config drive", func() error {
			return r.rec.local(ActStoreConfigDrive, ConfigDriveInput{NodeUUID: r.node.UUID, ConfigDrive: req.ConfigDrive}, nil)
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
		return r.finish(r.rec.enter(provision.Active, "", "Deploy finished"))
	}

	// The callback wait shares the agent steps' one timer (agentsession.go
	// waitCallbackOneTimer): fewer commands per deploy
	// (docs/architecture.md, "What a deploy costs").
	r.agent.oneTimer = true
	return r.finish(r.deployWithAgentSteps(req.DeploySteps))
}

// bootAgentAndWait is deploy.deploy: steps 4-8.
func (r *run) bootAgentAndWait(s provision.Step) error {
	if err := r.step(s.Name(), r.bootAgent); err != nil {
		return err
	}
	return r.step("wait call-back", func() error {
		_, err := r.waitCallback(provision.DeployWait, func(hb Heartbeat) bool { return hb.CallbackURL != "" })
		if err == nil {
			err = r.rec.enter(provision.Deploying, provision.Active, fmt.Sprintf("Agent called back from %s", r.agent.url))
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
	if err := r.step("set boot device disk", func() error { return r.hw.bootDevice("disk", true) }); err != nil {
		return err
	}
	return r.secureBootIfRequested(true) // workflows/secureboot.go
}

// tearDownAgent is deploy.tear_down_agent: the agent syncs and powers off;
// the BMC makes sure.
func (r *run) tearDownAgent(s provision.Step) error {
	return r.step(s.Name(), func() error {
		return r.powerOffAgent(r.running())
	})
}

// powerOnInstance is fake's deploy.boot_instance.
func (r *run) powerOnInstance(s provision.Step) error {
	return r.step(s.Name(), func() error { return r.hw.power("power on") })
}

// bootInstance is deploy.boot_instance: step 13, no more network boot, power
// on from disk.
func (r *run) bootInstance(s provision.Step) error {
	if err := r.step("clean up boot", func() error {
		return r.hw.cleanBoot(BootAgent, r.running())
	}); err != nil {
		return err
	}
	return r.step(s.Name(), func() error { return r.hw.power("power on") })
}
