package tests

import (
	"context"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/ironflow/ironflow/agent/sim"
	"github.com/ironflow/ironflow/embedded"
	"github.com/ironflow/ironflow/store"
	"github.com/ironflow/ironflow/workflows"
)

// A failed step that waits for an operator keeps the agent token, so that
// `retry` and `skip-step` can reach the agent that still runs (Ironic wipes
// it on entering the failure state and needs a new deploy; docs/security.md,
// "Agent tokens"). The wait ends by abort or by its timeout, and each wipes
// the token with the rest of the agent's session; these tests prove both on
// the real stack.

// failDeployAndWait deploys a node whose image checksum is wrong, with a
// simulated agent, and returns it in deploy failed, its workflow waiting
// for the operator; the token is still there and the agent still
// heartbeats with it.
func failDeployAndWait(t *testing.T, name, mac string, driverInfo map[string]any) (string, *store.Store) {
	t.Helper()
	img := newImageServer(t, 1<<20)
	uuid := enrollAgentNode(t, name, mac, img)
	patch := []map[string]any{
		{"op": "add", "path": "/automated_clean", "value": false},
		{"op": "replace", "path": "/instance_info/image_os_hash_value", "value": strings.Repeat("0", 64)},
	}
	for k, v := range driverInfo {
		patch = append(patch, map[string]any{"op": "add", "path": "/driver_info/" + k, "value": v})
	}
	if code, _ := call(t, "PATCH", "/v1/nodes/"+uuid, patch, nil); code != 200 {
		t.Fatalf("patch: %d", code)
	}
	startSimMachine(t, uuid, []string{mac}, sim.Config{})
	moveTo(t, uuid, [2]string{"manage", "manageable"}, [2]string{"provide", "available"}, [2]string{"active", "deploy failed"})
	st := openStore(t)
	n, err := st.GetNode(context.Background(), uuid)
	if err != nil {
		t.Fatal(err)
	}
	if tok, _ := n.DriverInternalInfo[store.KeyAgentToken].(string); tok == "" {
		t.Fatalf("the agent token was wiped while the failed step waits for the operator: %v", n.DriverInternalInfo)
	}
	// The agent still heartbeats with it: its heartbeats are accepted.
	last := n.DriverInternalInfo["agent_last_heartbeat"]
	waitFor(t, "an accepted heartbeat while the step waits", 30*time.Second, func() bool {
		n, err := st.GetNode(context.Background(), uuid)
		return err == nil && n.DriverInternalInfo["agent_last_heartbeat"] != last
	})
	return uuid, st
}

// waitTokenWiped waits until the node's agent session (token, URL) is gone
// and returns the node. The bound is for liveness, with room for a loaded
// machine; on a failure the test logs the workflow's history, which says
// which task or activity the time went to.
func waitTokenWiped(t *testing.T, st *store.Store, uuid string) *store.Node {
	t.Helper()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("workflow history of node %s:\n%s", uuid, historySummary(t, uuid))
			// Last, so that it is in the tail a CI log keeps: the node as
			// the store has it now.
			if n, err := st.GetNode(context.Background(), uuid); err == nil {
				t.Logf("node %s now: provision_state %q, last_error %q, driver_internal_info %v", uuid, n.ProvisionState, deref(n.LastError), n.DriverInternalInfo)
			} else {
				t.Logf("node %s now: %v", uuid, err)
			}
		}
	})
	var n *store.Node
	waitFor(t, "the agent token to be wiped", 120*time.Second, func() bool {
		var err error
		n, err = st.GetNode(context.Background(), uuid)
		return err == nil && !slices.ContainsFunc(store.AgentSessionKeys(), func(k string) bool { _, ok := n.DriverInternalInfo[k]; return ok })
	})
	return n
}

// historySummary is the node's workflow history, an event a line with its
// time and, for an activity, its type.
func historySummary(t *testing.T, uuid string) string {
	var b strings.Builder
	it := temporalClient(t).GetWorkflowHistory(context.Background(), workflows.WorkflowID(uuid), "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			fmt.Fprintf(&b, "read history: %v\n", err)
			break
		}
		fmt.Fprintf(&b, "%d %s %s %s\n", ev.GetEventId(), ev.GetEventTime().AsTime().Format(time.RFC3339Nano), ev.GetEventType(),
			ev.GetActivityTaskScheduledEventAttributes().GetActivityType().GetName())
	}
	return b.String()
}

func TestAbortOfAFailedStepWipesTheAgentToken(t *testing.T) {
	uuid, st := failDeployAndWait(t, "token-abort-0", "52:54:00:bb:01:18", nil)
	cli, err := embedded.FindTemporalCLI("")
	if err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(cli, "workflow", "signal", "--address", lab.Temporal.Address(), "--workflow-id", workflows.WorkflowID(uuid),
		"--name", workflows.SignalAbort).CombinedOutput(); err != nil {
		t.Fatalf("temporal workflow signal abort: %v\n%s", err, out)
	}
	n := waitTokenWiped(t, st, uuid)
	if n.ProvisionState != "deploy failed" || !strings.Contains(deref(n.LastError), "aborted by operator") {
		t.Fatalf("after abort: %s, last_error %q", n.ProvisionState, deref(n.LastError))
	}
}

func TestOperatorWaitTimeoutWipesTheAgentToken(t *testing.T) {
	uuid, st := failDeployAndWait(t, "token-timeout-0", "52:54:00:bb:01:19", map[string]any{workflows.DriverInfoOperatorWaitTimeout: "8"})
	n := waitTokenWiped(t, st, uuid)
	if n.ProvisionState != "deploy failed" || !strings.Contains(deref(n.LastError), "no retry, skip-step or abort within 8s") {
		t.Fatalf("after the operator wait timed out: %s, last_error %q", n.ProvisionState, deref(n.LastError))
	}
}
