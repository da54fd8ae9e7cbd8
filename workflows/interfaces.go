package workflows

import (
	"fmt"

	"go.temporal.io/sdk/workflow"

	"github.com/ironflow/ironflow/hardware"
	"github.com/ironflow/ironflow/provision"
)

// ramdiskDeploy is the plan of deploy_interface ramdisk: the instance is a
// kernel and ramdisk (or an ISO) that the machine network-boots on every
// boot. Nothing is written to disk and no agent runs; the boot
// configuration stays in place while the node is active and is removed on
// undeploy.
var ramdiskDeploy = []builtinStep{
	{provision.Step{StepID: provision.StepBootInstance, Priority: 20}, (*run).bootRamdisk},
}

// anacondaDeploy is the plan of deploy_interface anaconda: the machine boots
// the installer with a kickstart that ironflow renders and serves; the
// kickstart's %pre, %post and %onerror sections heartbeat with agent_status
// start, end and error. The workflow waits (durable timer, reset by every
// heartbeat) for end, then boots the machine from its disk.
var anacondaDeploy = []builtinStep{
	{provision.Step{StepID: provision.StepDeploy, Priority: 100}, (*run).installAndWait},
	{provision.Step{StepID: provision.StepBootInstance, Priority: 20}, (*run).bootInstalled},
}

func (r *run) deployRamdisk() error {
	if err := r.runPlan(ramdiskDeploy, stepsOf(ramdiskDeploy)); err != nil {
		return err
	}
	return r.enter(provision.Active, "", "Deploy finished: the instance boots its ramdisk from the network")
}

func (r *run) deployAnaconda() error {
	if err := r.runPlan(anacondaDeploy, stepsOf(anacondaDeploy)); err != nil {
		return err
	}
	return r.record(RecordStateInput{To: provision.Active, Event: "Deploy finished: the installed system boots from disk", ClearAgent: true})
}

// bootRamdisk is ramdisk's deploy.boot_instance: the instance's own boot,
// on every boot.
func (r *run) bootRamdisk(s provision.Step) error {
	// Secure boot first: the instance's boot (ISO or PXE) is then prepared
	// as the signed chain (workflows/secureboot.go).
	if err := r.secureBootForNetbootDeploy(); err != nil {
		return err
	}
	return r.step(s.Name(), func() error { return r.netboot(BootRamdisk, true) })
}

// installAndWait is anaconda's deploy.deploy: boot the installer, wait for
// its end.
func (r *run) installAndWait(provision.Step) error {
	if err := r.step("boot the installer", func() error { return r.netboot(BootAnaconda, false) }); err != nil {
		return err
	}
	return r.step("wait for the installer", func() error {
		hb, err := r.waitCallback(provision.DeployWait, func(hb Heartbeat) bool {
			if hb.AgentStatus == AgentStatusStart {
				r.status.Progress = hb.AgentStatusMessage
			}
			return hb.AgentStatus == AgentStatusEnd || hb.AgentStatus == AgentStatusError
		})
		if err != nil {
			return err
		}
		if hb.AgentStatus == AgentStatusError {
			return fmt.Errorf("the installer reported an error: %s", orDefault(hb.AgentStatusMessage, "no message"))
		}
		return r.enter(provision.Deploying, provision.Active, fmt.Sprintf("The installer finished: %s", orDefault(hb.AgentStatusMessage, AgentStatusEnd)))
	})
}

// bootInstalled is anaconda's deploy.boot_instance: the installer's boot
// configuration removed, the installed system booted from disk.
func (r *run) bootInstalled(s provision.Step) error {
	if err := r.step("clean up boot", func() error {
		return r.hardware(ActCleanBoot, BootInput{Node: r.node, Kind: BootAnaconda, Starts: r.running()}, nil)
	}); err != nil {
		return err
	}
	if err := r.secureBootForNetbootDeploy(); err != nil { // workflows/secureboot.go
		return err
	}
	return r.step(s.Name(), func() error {
		if err := r.bootDevice("disk", true); err != nil {
			return err
		}
		return r.power("rebooting")
	})
}

// netbootDevice is how the node boots what ironflow serves it.
func (r *run) netbootDevice() string {
	if r.node.VirtualMedia() {
		return "cdrom"
	}
	return "pxe"
}

// InspectNode learns what a machine is: manageable → inspecting → inspect
// wait → manageable. With inspect_interface redfish the BMC answers
// out-of-band and nothing boots; otherwise the agent boots, reports its
// inventory (POST /v1/continue_inspection, or ironflow asks it), the node's
// properties and missing ports are filled in, and the machine is powered
// off.
func InspectNode(ctx workflow.Context, req provision.Request) error {
	r, err := newRun(ctx, req, provision.OpInspect)
	if err != nil {
		return err
	}
	r.active, r.fail = provision.Inspecting, provision.InspectFailed
	if err := r.local(ActRecordInspection, InspectionRecord{NodeUUID: r.node.UUID, Started: true}, nil); err != nil {
		return err
	}
	if err := r.enter(provision.Inspecting, provision.Manageable, "Inspection started"); err != nil {
		return ended(err)
	}
	method := hardware.InspectOf(r.node.InspectInterface).Method()
	if method == hardware.InspectNothing {
		// Nothing to learn (fake-hardware): Ironic's fake inspection.
		return r.record(RecordStateInput{To: provision.Manageable, Event: "Inspection finished (" + string(r.node.InspectInterface) + ")"})
	}
	if method == hardware.InspectOutOfBand {
		if err := r.step("inspect out-of-band", func() error {
			return r.hardware(ActInspectOutOfBand, r.node, nil)
		}); err != nil {
			return r.finishInspect(err)
		}
	} else {
		if err := r.inspectInBand(); err != nil {
			return r.finishInspect(err)
		}
	}
	if err := r.step("apply inventory", func() error {
		return r.local(ActApplyInventory, r.node.UUID, nil)
	}); err != nil {
		return r.finishInspect(err)
	}
	if err := r.local(ActRecordInspection, InspectionRecord{NodeUUID: r.node.UUID, Finished: true}, nil); err != nil {
		return err
	}
	return r.finishInspect(r.record(RecordStateInput{To: provision.Manageable, Event: "Inspection finished", ClearAgent: true}))
}

func (r *run) inspectInBand() error {
	if err := r.step("boot the agent", func() error { return r.netboot(BootInspect, false) }); err != nil {
		return err
	}
	var reported bool
	if err := r.step("wait for the agent", func() error {
		hb, err := r.waitCallback(provision.InspectWait, func(hb Heartbeat) bool { return hb.CallbackURL != "" || hb.AgentStatus == AgentStatusEnd })
		reported = hb.AgentStatus == AgentStatusEnd
		return err
	}); err != nil {
		return err
	}
	if !reported {
		// The agent heartbeats but did not post its inventory: ask it.
		if err := r.step("collect inventory", func() error {
			return r.agentCall(ActCollectInventory, AgentInput{NodeUUID: r.node.UUID, CallbackURL: r.agent}, nil)
		}); err != nil {
			return err
		}
	}
	return r.step("power off", func() error {
		if r.agent != "" {
			if err := r.agentCall(ActAgentPowerOff, AgentInput{NodeUUID: r.node.UUID, CallbackURL: r.agent}, nil); err != nil {
				workflow.GetLogger(r.ctx).Warn("agent power off failed, using the BMC", "node", r.node.UUID, "error", errorText(err))
			}
		}
		if err := r.power("power off"); err != nil {
			return err
		}
		return r.hardware(ActCleanBoot, BootInput{Node: r.node, Kind: BootInspect}, nil)
	})
}

// finishInspect is finish for inspection: its failure state says why and
// the machine is left off with no boot configuration.
func (r *run) finishInspect(err error) error {
	return r.finish(err)
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
