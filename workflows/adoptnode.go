package workflows

import (
	"fmt"

	"go.temporal.io/sdk/workflow"

	"github.com/ironflow/ironflow/provision"
)

// AdoptNode takes over a machine that was deployed by other means (API
// 1.17, adopt; Ironic's node adoption documentation): manageable or adopt
// failed → adopting → active. It writes nothing to the machine's disks,
// sends its BMC nothing and leaves its power as it is: like Ironic's
// conductor (_do_adoption), it validates what the boot interface needs to
// boot the instance again, and then the deploy interface's take-over, which
// for ironflow's deploy interfaces, as for Ironic's in the adopting state,
// has nothing to prepare. A node that fails the validation goes to adopt
// failed (target active, as Ironic's state machine keeps it) with Ironic's
// last_error; adopt may be sent again once it is fixed, or manage takes it
// back to manageable.
//
// The run records only the node's state: two store writes and one store
// read, local activities bounded as every store write of a workflow is
// (localOptions). The adopted node is an ordinary active node: the power
// sync reads its power, undeploy tears it down and cleans it.
func AdoptNode(ctx workflow.Context, req provision.Request) error {
	r, err := newRun(ctx, req, provision.OpAdopt)
	if err != nil {
		return err
	}
	r.rec.active, r.rec.fail, r.rec.target = provision.Adopting, provision.AdoptFailed, req.Transition.Target
	if err := r.rec.enter(provision.Adopting, provision.Active, "Adoption requested"); err != nil {
		return ended(err)
	}
	var problem string
	if err := r.rec.local(ActValidateAdoption, r.node.UUID, &problem); err != nil {
		return err
	}
	if problem != "" {
		// Ironic's _do_adoption words the failure so, with the event type
		// of its node history (states.ADOPTION).
		msg := fmt.Sprintf("Error while attempting to adopt node %s: %s.", r.node.UUID, problem)
		return r.rec.record(RecordStateInput{To: provision.AdoptFailed, Target: provision.Active, LastError: msg, Event: msg,
			Severity: "ERROR", EventType: "adoption"})
	}
	return r.rec.record(RecordStateInput{To: provision.Active, Event: "Node adopted: active, its disks and power untouched", EventType: "adoption"})
}
