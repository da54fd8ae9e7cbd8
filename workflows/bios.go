package workflows

import (
	"fmt"

	"go.temporal.io/sdk/workflow"

	"github.com/ironflow/ironflow/hardware"
	"github.com/ironflow/ironflow/provision"
)

// ActCacheBIOSSettings reads the node's BIOS settings through its bios
// interface and makes them the node's cached ones (Ironic's
// cache_bios_settings; a hardware activity).
const ActCacheBIOSSettings = "CacheBIOSSettings"

// cacheBIOS refreshes the cached BIOS settings of a node whose bios
// interface reads them (redfish), as Ironic does when a node is verified
// and when cleaning starts. A failure is logged, not the operation's, as in
// Ironic.
func (r *run) cacheBIOS() {
	if !hardware.BIOSOf(r.node.BIOSInterface).CachesSettings() {
		return
	}
	if err := r.hw.call(ActCacheBIOSSettings, r.node, nil); err != nil {
		workflow.GetLogger(r.ctx).Warn("cache BIOS settings", "node", r.node.UUID, "error", errorText(err))
	}
}

// cacheBIOSManual is cacheBIOS when manual cleaning starts: Ironic's
// do_node_clean caches the BIOS settings for manual and automated cleaning
// alike.
func (r *run) cacheBIOSManual() {
	if !hardware.BIOSOf(r.node.BIOSInterface).CachesSettings() {
		return
	}
	r.cacheBIOSNow()
}

// cacheBIOSService is cacheBIOS when servicing starts, so that the cached
// settings an operator reads (GET /v1/nodes/{id}/bios) are the machine's
// before its service steps change them; the bios steps refresh them again
// once they ran (activities/bios.go), as Ironic's cache_bios_settings
// decorator does after a bios step.
func (r *run) cacheBIOSService() {
	if !hardware.BIOSOf(r.node.BIOSInterface).CachesSettings() {
		return
	}
	r.cacheBIOSNow()
}

// cacheBIOSNow runs ActCacheBIOSSettings; a failure is logged, not the
// operation's, as in Ironic.
func (r *run) cacheBIOSNow() {
	if err := r.hw.call(ActCacheBIOSSettings, r.node, nil); err != nil {
		workflow.GetLogger(r.ctx).Warn("cache BIOS settings", "node", r.node.UUID, "error", errorText(err))
	}
}

// biosStepUnderAgent reports whether s is a bios step that reboots the node
// (redfish's apply_configuration and factory_reset: the firmware applies
// them at the reboot) while the agent runs on it (underAgent: a manual
// cleaning or a servicing that booted the agent, a deploy step between
// deploy.deploy and deploy.tear_down_agent).
func (r *run) biosStepUnderAgent(s provision.Step, underAgent bool) bool {
	return s.Interface == "bios" && hardware.BIOSOf(r.node.BIOSInterface).AppliesAtReboot() && underAgent
}

// biosStepWithAgent runs a bios step that reboots the node while the agent
// is up, as Ironic's redfish bios interface does through
// reboot_to_finish_step: the agent's token goes (the new boot looks up and
// gets a new one; a heartbeat with the old token is refused), the agent's
// boot is prepared again and the step's reboot goes into it, and the plan
// goes on only once the agent has called back from that boot, so that the
// next in-band step finds it. A call-back that does not come fails the
// operation with the callback timeout, naming the step.
func (r *run) biosStepWithAgent(s provision.Step) error {
	active, _ := r.agentStates()
	if err := r.rec.record(RecordStateInput{To: active, Target: r.rec.target, ClearAgent: true,
		Event: fmt.Sprintf("Step %s reboots the node to apply the BIOS settings: it boots into the agent again; the agent token is removed", s.Name())}); err != nil {
		return err
	}
	if err := r.step(s.Name(), func() error {
		if err := r.hw.prepareBoot(BootAgent, r.running()); err != nil {
			return err
		}
		return r.hw.call(ActRunInterfaceStep, InterfaceStepInput{Node: r.node, Kind: r.rec.stepKind(), Step: s, RebootInto: r.hw.netbootDevice()}, nil)
	}); err != nil {
		return err
	}
	return r.waitAgentAfter(s)
}

// waitAgentAfter waits, in the operation's wait state, for the call-back of
// the agent that out-of-band step s rebooted the node into.
func (r *run) waitAgentAfter(s provision.Step) error {
	active, wait := r.agentStates()
	return r.step("wait call-back after "+s.Name(), func() error {
		_, err := r.waitCallback(wait, func(hb Heartbeat) bool { return hb.CallbackURL != "" })
		if err == nil {
			err = r.rec.enter(active, r.rec.target, fmt.Sprintf("Agent called back from %s after step %s rebooted the node", r.agent.url, s.Name()))
		}
		return err
	})
}

// agentStates are the operation's active and wait states.
func (r *run) agentStates() (active, wait provision.State) {
	switch r.rec.stepKind() {
	case provision.StepKindService:
		return provision.Servicing, provision.ServiceWait
	case provision.StepKindDeploy:
		return provision.Deploying, provision.DeployWait
	}
	return provision.Cleaning, provision.CleanWait
}
