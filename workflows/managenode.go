package workflows

import (
	"fmt"

	"go.temporal.io/sdk/workflow"

	"github.com/ironflow/ironflow/provision"
)

// ManageNode verifies a node: enroll → verifying → manageable. For real
// drivers the BMC must answer a power-state read with the node's
// credentials; when it does not, the node goes back to enroll with a
// last_error that says why. From clean failed, inspect failed and available,
// manage simply records manageable.
func ManageNode(ctx workflow.Context, req provision.Request) error {
	r, err := newRun(ctx, req, provision.OpManage)
	if err != nil {
		return err
	}
	if req.FromState != provision.Enroll {
		return ended(r.rec.enter(provision.Manageable, "", fmt.Sprintf("Node moved to manageable from %s", req.FromState)))
	}
	if err := r.rec.enter(provision.Verifying, provision.Manageable, "Verifying the node's BMC"); err != nil {
		return ended(err)
	}
	var state string
	err = r.hw.call(ActGetPowerState, r.node, &state)
	if err != nil {
		msg := fmt.Sprintf("Failed to get power state for node %s. Error: %s", r.node.UUID, errorText(err))
		return r.rec.record(RecordStateInput{To: provision.Enroll, LastError: msg, Event: msg, Severity: "ERROR", EventType: "verify"})
	}
	if err := r.rec.local(ActRecordPowerState, PowerStateRecord{NodeUUID: r.node.UUID, PowerState: state}, nil); err != nil {
		return err
	}
	r.cacheBIOS() // workflows/bios.go
	return r.rec.enter(provision.Manageable, "", fmt.Sprintf("Verified: the BMC reports %s", orUnknown(state)))
}
