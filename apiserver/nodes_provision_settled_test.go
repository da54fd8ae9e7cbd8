package apiserver

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestVerbFromASettledStateStartsOnceTheClosingWorkflowEnds: a verb from a
// settled state (provision.State.Settled) asks no lock check before it
// records its transition. A workflow that still holds the node (it has
// recorded manageable and is closing) makes the start fail; the API keeps
// the transition, retries the start once the holder is gone, and answers
// 202 with one workflow started.
func TestVerbFromASettledStateStartsOnceTheClosingWorkflowEnds(t *testing.T) {
	e := newEnv(t)
	uuid := e.createNode(map[string]any{"driver": "fake-hardware"})["uuid"].(string)
	e.setState(uuid, "manageable")
	e.eng.hold(uuid, true)
	go func() {
		time.Sleep(300 * time.Millisecond)
		e.eng.hold(uuid, false)
	}()
	r := e.do("PUT", "/v1/nodes/"+uuid+"/states/provision", "1.78", map[string]any{"target": "provide"})
	if r.status != http.StatusAccepted {
		t.Fatalf("provide while the last workflow closes: %d %s", r.status, r.body)
	}
	if n := e.node(uuid); n.ProvisionState != "cleaning" {
		t.Errorf("state after provide: %s, want cleaning", n.ProvisionState)
	}
	e.eng.mu.Lock()
	defer e.eng.mu.Unlock()
	if len(e.eng.provisions) != 1 || e.eng.provisions[0].Verb != "provide" {
		t.Errorf("workflows started: %+v, want one provide", e.eng.provisions)
	}
	if e.eng.runningCalls != 0 {
		t.Errorf("the verb from manageable asked %d lock checks, want none", e.eng.runningCalls)
	}
}

// TestVerbFromASettledStateOnAHeldNodeIsRefused: when the holder (a power
// change, say) does not end within Ironic's node_locked_retry_attempts,
// the verb is refused with NodeLocked and the node goes back to the state
// it was in, with the history saying why; nothing was started.
func TestVerbFromASettledStateOnAHeldNodeIsRefused(t *testing.T) {
	e := newEnv(t)
	uuid := e.createNode(map[string]any{"driver": "fake-hardware"})["uuid"].(string)
	e.setState(uuid, "manageable")
	e.eng.hold(uuid, true)
	r := e.do("PUT", "/v1/nodes/"+uuid+"/states/provision", "1.78", map[string]any{"target": "provide"})
	want := "Node " + uuid + " is locked by host node-" + uuid + ", please retry after the current operation is completed."
	if r.status != http.StatusConflict || r.faultstring(t) != want {
		t.Fatalf("provide on a held node: %d %s", r.status, r.body)
	}
	if n := e.node(uuid); n.ProvisionState != "manageable" || n.TargetProvisionState != nil {
		t.Errorf("state after the refused provide: %s (target %v), want manageable", n.ProvisionState, n.TargetProvisionState)
	}
	hist, err := e.st.ListHistory(context.Background(), uuid)
	if err != nil {
		t.Fatal(err)
	}
	reverted := false
	for _, h := range hist {
		reverted = reverted || strings.Contains(h.Event, `Provision action "provide" not started`)
	}
	if !reverted {
		t.Errorf("history does not say the provide was not started: %+v", hist)
	}
	e.eng.mu.Lock()
	defer e.eng.mu.Unlock()
	if len(e.eng.provisions) != 0 {
		t.Errorf("workflows started: %+v, want none", e.eng.provisions)
	}
}

// TestVerbFromAWaitStateChecksTheLock: from a state where a workflow waits
// (deploy wait), the lock is checked before anything is recorded: the
// node's state does not move while its workflow runs.
func TestVerbFromAWaitStateChecksTheLock(t *testing.T) {
	e := newEnv(t)
	uuid := e.createNode(map[string]any{"driver": "fake-hardware"})["uuid"].(string)
	e.setState(uuid, "wait call-back")
	e.eng.hold(uuid, true)
	r := e.do("PUT", "/v1/nodes/"+uuid+"/states/provision", "1.78", map[string]any{"target": "deleted"})
	if r.status != http.StatusConflict {
		t.Fatalf("deleted during wait call-back: %d %s", r.status, r.body)
	}
	if n := e.node(uuid); n.ProvisionState != "wait call-back" {
		t.Errorf("state: %s, want wait call-back", n.ProvisionState)
	}
	hist, err := e.st.ListHistory(context.Background(), uuid)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range hist {
		if strings.Contains(h.Event, `Provision action "deleted"`) {
			t.Errorf("the refused verb left history: %s", h.Event)
		}
	}
	e.eng.mu.Lock()
	defer e.eng.mu.Unlock()
	if e.eng.runningCalls == 0 {
		t.Error("no lock check asked from wait call-back")
	}
}
