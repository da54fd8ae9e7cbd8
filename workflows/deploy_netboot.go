package workflows

import (
	"fmt"

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
	return r.rec.enter(provision.Active, "", "Deploy finished: the instance boots its ramdisk from the network")
}

func (r *run) deployAnaconda() error {
	if err := r.runPlan(anacondaDeploy, stepsOf(anacondaDeploy)); err != nil {
		return err
	}
	return r.rec.record(RecordStateInput{To: provision.Active, Event: "Deploy finished: the installed system boots from disk", ClearAgent: true})
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
				r.rec.status.Progress = hb.AgentStatusMessage
			}
			return hb.AgentStatus == AgentStatusEnd || hb.AgentStatus == AgentStatusError
		})
		if err != nil {
			return err
		}
		if hb.AgentStatus == AgentStatusError {
			return fmt.Errorf("the installer reported an error: %s", orDefault(hb.AgentStatusMessage, "no message"))
		}
		return r.rec.enter(provision.Deploying, provision.Active, fmt.Sprintf("The installer finished: %s", orDefault(hb.AgentStatusMessage, AgentStatusEnd)))
	})
}

// bootInstalled is anaconda's deploy.boot_instance: the installer's boot
// configuration removed, the installed system booted from disk.
func (r *run) bootInstalled(s provision.Step) error {
	if err := r.step("clean up boot", func() error {
		return r.hw.cleanBoot(BootAnaconda, r.running())
	}); err != nil {
		return err
	}
	if err := r.secureBootForNetbootDeploy(); err != nil { // workflows/secureboot.go
		return err
	}
	return r.step(s.Name(), func() error {
		if err := r.hw.bootDevice("disk", true); err != nil {
			return err
		}
		return r.hw.power("rebooting")
	})
}
