package workflows

import (
	"go.temporal.io/sdk/workflow"

	"github.com/ironflow/ironflow/provision"
)

// UndeployNode tears an instance down: deleting → power off → boot config
// removed → instance_info cleared → cleaning → available.
func UndeployNode(ctx workflow.Context, req provision.Request) error {
	r, err := newRun(ctx, req, provision.OpUndeploy)
	if err != nil {
		return err
	}
	r.rec.active, r.rec.fail, r.rec.target = provision.Deleting, provision.Error, req.Transition.Target
	if err := r.rec.enter(provision.Deleting, provision.Available, "Undeploy requested"); err != nil {
		return ended(err)
	}
	if err := r.step("power off", func() error { return r.hw.power("power off") }); err != nil {
		return r.finish(err)
	}
	if err := r.step("clean up boot", func() error {
		return r.hw.cleanBoot(BootInstance, nil)
	}); err != nil {
		return r.finish(err)
	}
	if err := r.secureBootIfRequested(false); err != nil { // workflows/secureboot.go
		return r.finish(err)
	}
	if r.node.DisablePowerOff && workflow.GetVersion(ctx, changeUndeployNext, workflow.DefaultVersion, 1) == 1 {
		// The power off above kept the machine on, running the instance:
		// a reset takes it off the instance, as Ironic's clean_up reboots
		// a node with disable_power_off.
		if err := r.step("reboot", func() error { return r.hw.power("rebooting") }); err != nil {
			return r.finish(err)
		}
	}
	if err := r.rec.local(ActClearInstanceInfo, r.node.UUID, nil); err != nil {
		return err
	}
	r.rec.active, r.rec.fail = provision.Cleaning, provision.CleanFailed
	if err := r.rec.enter(provision.Cleaning, provision.Available, r.cleaningEvent()); err != nil {
		return err
	}
	if err := r.clean(provision.Available); err != nil {
		return r.finish(err)
	}
	return r.finish(r.rec.record(RecordStateInput{To: provision.Available, Event: "Undeploy finished: node available", ClearAgent: true}))
}
