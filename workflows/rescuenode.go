package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/ironflow/ironflow/hardware"
	"github.com/ironflow/ironflow/provision"
)

// RescueNode boots a deployed node into the agent for its rescue user
// (Ironic's agent rescue interface): active (or rescue, rescue failed,
// unrescue failed) → rescuing → power off, the agent's boot prepared, power
// on → rescue wait until the agent's first heartbeat (durable timer,
// rescue_callback_timeout) → rescuing → rescue.finalize_rescue with the
// hash of the rescue password (read from the store by the activity; the
// API stored only the hash, and this workflow's input names the node
// alone) → the agent's boot configuration removed → rescue. The agent stops
// heartbeating and serving its API once it has set the password, as IPA
// does; the instance's disk is not touched. A failure records rescue failed
// with a last_error and waits for retry, skip-step or abort, as every
// provisioning workflow does.
func RescueNode(ctx workflow.Context, req provision.Request) error {
	r, err := newRun(ctx, req, provision.OpRescue)
	if err != nil {
		return err
	}
	r.rec.active, r.rec.fail, r.rec.target = provision.Rescuing, provision.RescueFailed, req.Transition.Target
	if err := r.rec.enter(provision.Rescuing, provision.Rescue, "Rescue requested"); err != nil {
		return ended(err)
	}
	if hardware.RescueOf(r.node.RescueInterface).Method() != hardware.RescueAgent {
		// Ironic's fake rescue interface: rescued at once.
		return r.finish(r.doneRescue(RecordStateInput{To: provision.Rescue, Event: "Rescue finished (" + string(r.node.RescueInterface) + ")"}))
	}
	if err := r.step("prepare rescue", func() error {
		if err := r.hw.power("power off"); err != nil {
			return err
		}
		return r.netboot(BootRescue, false)
	}); err != nil {
		return r.finishRescue(err)
	}
	if err := r.step("wait for the rescue agent", func() error {
		_, err := r.waitCallbackFor(provision.RescueWait, r.rescueCallbackTimeout(), func(hb Heartbeat) bool { return hb.CallbackURL != "" })
		if err == nil {
			err = r.rec.enter(provision.Rescuing, provision.Rescue, fmt.Sprintf("Agent called back from %s", r.agent.url))
		}
		return err
	}); err != nil {
		return r.finishRescue(err)
	}
	if err := r.step("finalize rescue", func() error {
		return r.agent.call(ActFinalizeRescue, r.agent.input(nil), nil)
	}); err != nil {
		return r.finishRescue(err)
	}
	// The agent runs from memory: its boot configuration goes, as Ironic's
	// rescue clean_up removes the rescue ramdisk's.
	if err := r.step("clean up rescue boot", func() error {
		return r.hw.cleanBoot(BootRescue, nil)
	}); err != nil {
		return r.finishRescue(err)
	}
	return r.finish(r.doneRescue(RecordStateInput{To: provision.Rescue, Event: "Rescue finished: the rescue user can log in", ClearAgent: true}))
}

// rescueCallbackTimeout is the node's rescue wait bound; a policy that
// leaves it unset (built by hand, not from DefaultPolicy) uses the
// deploy's callback timeout.
func (r *run) rescueCallbackTimeout() time.Duration {
	if d := r.node.Policy.RescueCallbackTimeout; d > 0 {
		return d
	}
	return r.node.Policy.CallbackTimeout
}

// doneRescue records the end of a rescue or unrescue, the rescue
// password's hash removed from the node first, as Ironic's rescue clean_up
// removes it.
func (r *run) doneRescue(end RecordStateInput) error {
	if err := r.rec.local(ActForgetRescuePassword, r.node.UUID, nil); err != nil {
		return err
	}
	return r.rec.record(end)
}

// finishRescue is finish for a rescue or unrescue that failed: the rescue
// password's hash leaves the node whatever happens next.
func (r *run) finishRescue(err error) error {
	if ferr := r.rec.local(ActForgetRescuePassword, r.node.UUID, nil); ferr != nil {
		workflow.GetLogger(r.ctx).Error("remove the rescue password", "node", r.node.UUID, "error", ferr)
	}
	return r.finish(err)
}
