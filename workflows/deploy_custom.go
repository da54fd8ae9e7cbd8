package workflows

import (
	"github.com/ironflow/ironflow/hardware"
	"github.com/ironflow/ironflow/provision"
)

// customAgentDeploy is the plan of deploy_interface custom-agent, as
// Ironic's CustomAgentDeploy has it (ironic/drivers/modules/agent.py and
// agent_base.py): the agent boots and calls back, the user's deploy steps
// run on it by name (deploySteps' agent steps), then the instance boots from
// disk. No write_image, no image download, no bootloader installed in-band:
// prepare_instance_boot is only the boot interface's (boot device disk).
var customAgentDeploy = []builtinStep{
	{provision.Step{StepID: provision.StepDeploy, Priority: 100}, (*run).bootAgentAndWait},
	{provision.Step{StepID: provision.StepPrepareInstanceBoot, Priority: 60}, (*run).prepareInstanceBootOutOfBand},
	{provision.Step{StepID: provision.StepTearDownAgent, Priority: 40}, (*run).tearDownAgent},
	{provision.Step{StepID: provision.StepBootInstance, Priority: 20}, (*run).bootInstance},
}

// deployTableOf is the built-in plan of an agent deploy interface:
// directDeploy, or customAgentDeploy for an interface that writes no image
// of its own (hardware.Deploy WritesImage).
func deployTableOf(iface hardware.Interface) []builtinStep {
	if d := hardware.DeployOf(iface); d.Flow() == hardware.FlowAgent && !d.WritesImage() {
		return customAgentDeploy
	}
	return directDeploy
}

// deployTable is the built-in plan of the run's node.
func (r *run) deployTable() []builtinStep { return deployTableOf(r.node.DeployInterface) }

// prepareInstanceBootOutOfBand is custom-agent's
// deploy.prepare_instance_boot: the boot interface's part only (boot
// device disk, secure boot if asked), nothing in-band.
func (r *run) prepareInstanceBootOutOfBand(s provision.Step) error {
	if err := r.step(s.Name(), func() error { return r.hw.bootDevice("disk", true) }); err != nil {
		return err
	}
	return r.secureBootIfRequested(true) // workflows/secureboot.go
}
