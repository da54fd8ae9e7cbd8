package workflows

import (
	"fmt"

	"github.com/ironflow/ironflow/provision"
)

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
			err = r.rec.enter(provision.Cleaning, target, fmt.Sprintf("Agent called back from %s", r.agent.url))
		}
		return err
	}); err != nil {
		return err
	}
	var offered []provision.Step
	if err := r.step("get clean steps", func() error {
		return r.agent.call(ActGetAgentSteps, AgentStepsInput{Agent: r.agent.input(nil), Kind: provision.StepKindClean}, &offered)
	}); err != nil {
		return err
	}
	for _, s := range r.cleanPlan(offered) {
		if err := r.runStep(s, (*run).inBand); err != nil {
			return err
		}
	}
	if err := r.step("tear down agent", func() error {
		return r.powerOffAgent(nil)
	}); err != nil {
		return err
	}
	return r.step("clean up boot", func() error {
		return r.hw.cleanBoot(BootAgent, nil)
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
