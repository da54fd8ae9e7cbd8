package workflows

import (
	"fmt"

	"github.com/ironflow/ironflow/provision"
)

// rebootAfterStep is what Ironic's agent_base does after an in-band step
// that declares reboot_requested (Ironic's steps documentation; the
// conductor's reboot_to_finish_step): the machine is pointed at the agent
// ramdisk again and rebooted, the agent's token and URL go (as Ironic's
// power actions wipe them, so that the next boot looks up and gets a new
// token), and the plan goes on only once the agent has called back from
// the new boot.
func (r *run) rebootAfterStep(s provision.Step) error {
	if !s.RebootRequested {
		return nil
	}
	active, wait := r.agentStates() // workflows/bios.go
	if err := r.rec.record(RecordStateInput{To: active, Target: r.rec.target, ClearAgent: true,
		Event: fmt.Sprintf("Step %s requested a reboot: rebooting into the agent; the agent token is removed", s.Name())}); err != nil {
		return err
	}
	if err := r.step("reboot after "+s.Name(), r.bootAgent); err != nil {
		return err
	}
	return r.step("wait call-back after "+s.Name(), func() error {
		_, err := r.waitCallback(wait, func(hb Heartbeat) bool { return hb.CallbackURL != "" })
		if err == nil {
			err = r.rec.enter(active, r.rec.target, fmt.Sprintf("Agent called back from %s after the reboot step %s requested", r.agent.url, s.Name()))
		}
		return err
	})
}
