package activities

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"

	"go.temporal.io/sdk/activity"

	"github.com/ironflow/ironflow/provision"
	"github.com/ironflow/ironflow/store"
)

// Some actions cannot be repeated safely: a second reboot boots the agent
// twice, a second wipe of the agent's session locks out the agent that has
// already looked up. A worker that dies after such an action but before
// Temporal recorded the activity's result runs the activity again (a local
// activity when its workflow task is retried, a regular one when its
// attempt times out): with the same workflow run and the same activity ID.
// Before acting, such an activity records that call's identity on the node
// (driver_internal_info); a run of the same call that finds it there knows
// the action was sent, and only makes sure of its outcome
// (docs/crash-safety.md). An activity called outside Temporal (unit tests)
// has no identity and always acts.
const (
	// keyRebootCall is the call that last asked for a reboot.
	keyRebootCall = "reboot_call"
	// keyAgentBootCall is the call that last prepared a boot of the agent
	// (and wiped the previous agent's session).
	keyAgentBootCall = "agent_boot_call"
)

// callID is the identity of this activity call, the same in every attempt
// and every re-run after a crash; "" outside an activity.
func callID(ctx context.Context) string {
	if !activity.IsActivity(ctx) {
		return ""
	}
	info := activity.GetInfo(ctx)
	return fmt.Sprintf("%s/%s", info.WorkflowExecution.RunID, info.ActivityID)
}

// marksColumns are what the marks of this file are read from: the node's
// driver_internal_info, and its provision state for movedByThisRun.
var marksColumns = store.MustNodeColumns("provision_state", "driver_internal_info")

// repeated reports whether an earlier run of this very call recorded key on
// the node; if not, it records it now, before the caller acts.
func (a *Activities) repeated(ctx context.Context, nodeUUID, key string) (bool, error) {
	if callID(ctx) == "" {
		return false, nil
	}
	n, err := a.Store.GetNodeColumns(ctx, nodeUUID, marksColumns)
	if err != nil {
		return false, storeErr(err, "load node %s", nodeUUID)
	}
	return a.repeatedIn(ctx, n, key, nil)
}

// repeatedIn is repeated for a node the activity has loaded already (its
// driver_internal_info as read at the activity's start: only this call
// writes key, and the node's workflow runs one call at a time). When the
// call is not a repeat, the mark is written with drop removed from
// driver_internal_info in the same statement: the caller's first change
// then cannot be lost to a crash between two writes.
func (a *Activities) repeatedIn(ctx context.Context, n *store.Node, key string, drop []string) (bool, error) {
	id := callID(ctx)
	if id == "" {
		if len(drop) == 0 {
			return false, nil
		}
		return false, storeErr(a.Store.DeleteDriverInternalInfoKeys(ctx, n.UUID, drop...), "update driver_internal_info of node %s", n.UUID)
	}
	if prev, _ := n.DriverInternalInfo[key].(string); prev == id {
		return true, nil
	}
	if err := a.Store.MergeDropDriverInternalInfo(ctx, n.UUID, map[string]any{key: id}, drop...); err != nil {
		return false, storeErr(err, "record %s of node %s", key, n.UUID)
	}
	return false, nil
}

// keyProvisionRun is the workflow run that last recorded the node's
// provision state, and that state. A workflow's first record is conditional
// on the state the API recorded (another verb may have won the node since);
// after a worker crash the workflow runs again from its last recorded point
// and that first record finds the node further along, where this same run
// had put it. The mark tells the two apart.
const keyProvisionRun = "provision_run"

type provisionRun struct {
	Run   string          `json:"run"`
	State provision.State `json:"state"`
}

// runID is the workflow run of this activity; "" outside an activity.
func runID(ctx context.Context) string {
	if !activity.IsActivity(ctx) {
		return ""
	}
	return activity.GetInfo(ctx).WorkflowExecution.RunID
}

// movedByThisRun reports whether the node's provision state is the one run
// last recorded.
func (a *Activities) movedByThisRun(ctx context.Context, nodeUUID, run string) bool {
	if run == "" {
		return false
	}
	n, err := a.Store.GetNodeColumns(ctx, nodeUUID, marksColumns)
	if err != nil {
		return false
	}
	raw, err := json.Marshal(n.DriverInternalInfo[keyProvisionRun])
	if err != nil {
		return false
	}
	var mark provisionRun
	if json.Unmarshal(raw, &mark) != nil {
		return false
	}
	return mark.Run == run && mark.State == n.ProvisionState
}

// keyPowerCall is the last power call (a local activity) that completed:
// its run and its sequence number in the run.
const keyPowerCall = "power_call"

// localCall is a local activity's place in its workflow run: local
// activity IDs count up from 1 in the order the workflow calls them, the
// same in every replay.
type localCall struct {
	Run string `json:"run"`
	Seq int64  `json:"seq"`
}

func localCallOf(ctx context.Context) (localCall, bool) {
	if !activity.IsActivity(ctx) {
		return localCall{}, false
	}
	info := activity.GetInfo(ctx)
	if !info.IsLocalActivity {
		return localCall{}, false
	}
	seq, err := strconv.ParseInt(info.ActivityID, 10, 64)
	if err != nil {
		return localCall{}, false
	}
	return localCall{Run: info.WorkflowExecution.RunID, Seq: seq}, true
}

// completedLocalCallIn reports whether this local activity call, or a later
// one of the same run, recorded key as completed on n (the node as the
// activity loaded it): a worker died after it and before its result was
// recorded, and the workflow task runs the local activities after its last
// recorded point again. Regular activities are never run again once
// completed: their results are recorded at once.
func completedLocalCallIn(ctx context.Context, n *store.Node, key string) bool {
	call, ok := localCallOf(ctx)
	return ok && completedIn(n, key, call)
}

// completedCall reports whether call, or a later call of its run, recorded
// key on the node.
func (a *Activities) completedCall(ctx context.Context, nodeUUID, key string, call localCall) (bool, error) {
	n, err := a.Store.GetNodeColumns(ctx, nodeUUID, marksColumns)
	if err != nil {
		return false, storeErr(err, "load node %s", nodeUUID)
	}
	return completedIn(n, key, call), nil
}

// completedIn reports whether n records call, or a later call of its run,
// under key.
func completedIn(n *store.Node, key string, call localCall) bool {
	raw, err := json.Marshal(n.DriverInternalInfo[key])
	if err != nil {
		return false
	}
	var last localCall
	if json.Unmarshal(raw, &last) != nil {
		return false
	}
	return last.Run == call.Run && call.Seq <= last.Seq
}
