package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/ironflow/ironflow/hardware"
	"github.com/ironflow/ironflow/provision"
)

// UnrescueNode boots a rescued node's instance again: rescue (or rescue
// failed, unrescue failed) → unrescuing → power off, the agent's boot
// configuration removed, the instance's boot (disk, or the ramdisk of
// deploy_interface ramdisk) → power on → active. A failure records
// unrescue failed with a last_error.
func UnrescueNode(ctx workflow.Context, req provision.Request) error {
	r, err := newRun(ctx, req, provision.OpUnrescue)
	if err != nil {
		return err
	}
	r.rec.active, r.rec.fail, r.rec.target = provision.Unrescuing, provision.UnrescueFailed, req.Transition.Target
	if err := r.rec.enter(provision.Unrescuing, provision.Active, "Unrescue requested"); err != nil {
		return ended(err)
	}
	if hardware.RescueOf(r.node.RescueInterface).Method() != hardware.RescueAgent {
		return r.finish(r.doneRescue(RecordStateInput{To: provision.Active, Event: "Unrescue finished (" + string(r.node.RescueInterface) + ")"}))
	}
	if err := r.step("power off", func() error { return r.hw.power("power off") }); err != nil {
		return r.finishRescue(err)
	}
	if err := r.step("clean up rescue boot", func() error {
		return r.hw.cleanBoot(BootRescue, nil)
	}); err != nil {
		return r.finishRescue(err)
	}
	if err := r.step("boot instance", r.bootRescuedInstance); err != nil {
		return r.finishRescue(err)
	}
	return r.finish(r.doneRescue(RecordStateInput{To: provision.Active, Event: "Unrescue finished: the instance boots again", ClearAgent: true}))
}

// bootRescuedInstance boots what the deploy left: the instance's ramdisk
// from the network (deploy_interface ramdisk), nothing but power (fake), or
// the disk.
func (r *run) bootRescuedInstance() error {
	switch hardware.DeployOf(r.node.DeployInterface).Flow() {
	case hardware.FlowRamdisk:
		return r.netboot(BootRamdisk, true)
	case hardware.FlowNone:
		return r.hw.power("power on")
	}
	if err := r.hw.bootDevice("disk", true); err != nil {
		return err
	}
	return r.hw.power("power on")
}
