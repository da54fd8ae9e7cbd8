package apiserver

import (
	"errors"
	"net/http"
	"testing"

	"github.com/ironflow/ironflow/provision"
	"github.com/ironflow/ironflow/workflows"
)

// TestFailedStatesRest: a node in a failed state whose workflow waits for an
// operator (retry, skip-step, abort) takes what Ironic takes in that resting
// state — a power change, a maintenance change, its deletion in
// maintenance, the verbs of the state machine — and each ends the wait with
// an abort that names the request, instead of a 409 "locked".
func TestFailedStatesRest(t *testing.T) {
	for _, state := range []provision.State{provision.DeployFailed, provision.CleanFailed, provision.InspectFailed, provision.ServiceFailed} {
		t.Run(string(state), func(t *testing.T) {
			e := newEnv(t)
			e.eng.abortEnds = true
			uuid := e.createNode(map[string]any{"driver": "fake-hardware"})["uuid"].(string)
			e.setState(uuid, state)

			e.eng.hold(uuid, true)
			if r := e.do("PUT", "/v1/nodes/"+uuid+"/states/power", "1.93", map[string]any{"target": "power off"}); r.status != http.StatusAccepted {
				t.Fatalf("power off in %s: %d %s", state, r.status, r.body)
			}
			e.wantAbort(uuid, provision.AbortRequest{Request: `Power action "power off"`})

			e.eng.hold(uuid, true)
			if r := e.do("PUT", "/v1/nodes/"+uuid+"/maintenance", "1.93", map[string]any{"reason": "forcing deletion in baremetal-operator"}); r.status != http.StatusAccepted {
				t.Fatalf("maintenance in %s: %d %s", state, r.status, r.body)
			}
			if r := e.do("DELETE", "/v1/nodes/"+uuid, "1.93", nil); r.status != http.StatusNoContent {
				t.Fatalf("delete in %s and maintenance: %d %s", state, r.status, r.body)
			}
			e.wantAbort(uuid, provision.AbortRequest{Request: "Node deletion"})
			if r := e.do("GET", "/v1/nodes/"+uuid, "1.93", nil); r.status != http.StatusNotFound {
				t.Fatalf("GET after delete: %d %s", r.status, r.body)
			}
		})
	}
}

// TestFailedStateDeleteStillRefusedWhenTheWaitDoesNotEnd: when the abort
// that would end the wait cannot be sent (Temporal fails), the deletion is
// a server error and nothing is deleted under the workflow that holds the
// node.
func TestFailedStateDeleteStillRefusedWhenTheWaitDoesNotEnd(t *testing.T) {
	e := newEnv(t)
	uuid := e.createNode(map[string]any{"driver": "fake-hardware"})["uuid"].(string)
	e.setState(uuid, provision.DeployFailed)
	e.eng.hold(uuid, true)
	e.eng.signalErr = errTestSignal
	if r := e.do("PUT", "/v1/nodes/"+uuid+"/maintenance", "1.93", map[string]any{}); r.status != http.StatusAccepted {
		t.Fatalf("maintenance: %d %s", r.status, r.body)
	}
	if r := e.do("DELETE", "/v1/nodes/"+uuid, "1.93", nil); r.status < 500 {
		t.Fatalf("delete with a signal that fails: %d %s, want a server error", r.status, r.body)
	}
	if r := e.do("GET", "/v1/nodes/"+uuid, "1.93", nil); r.status != http.StatusOK {
		t.Fatalf("the node went although its workflow holds it: %d", r.status)
	}
}

var errTestSignal = errors.New("temporal: signal failed")

// wantAbort checks the last signal the node got is an abort naming why.
func (e *env) wantAbort(uuid string, why provision.AbortRequest) {
	e.t.Helper()
	e.eng.mu.Lock()
	defer e.eng.mu.Unlock()
	for i := len(e.eng.signals) - 1; i >= 0; i-- {
		s := e.eng.signals[i]
		if s.node != uuid {
			continue
		}
		if s.name != workflows.SignalAbort || s.arg != any(why) {
			e.t.Fatalf("last signal %s %#v, want abort %#v", s.name, s.arg, why)
		}
		return
	}
	e.t.Fatalf("no abort signal sent to %s", uuid)
}
