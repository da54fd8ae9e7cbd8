package apiserver

import (
	"errors"
	"fmt"
	"net/http"
	"sync"
	"testing"

	"github.com/ironflow/ironflow/provision"
	"github.com/ironflow/ironflow/store"
)

// TestDecideProvision is the state × verb table of PUT .../states/provision:
// what an accepted verb does, and Ironic's refusal otherwise.
func TestDecideProvision(t *testing.T) {
	const id = "1be26c0b-03f2-4d2e-ae87-c02d7f33c123"
	cases := []struct {
		state     provision.State
		protected bool
		verb      provision.Verb
		held      bool
		// want: the operation started, or the status of the refusal.
		operation       provision.Operation
		abort           bool
		endWaitingFirst bool
		status          int
		msg             string
	}{
		{state: "available", verb: "deploy", operation: "deploy"},
		{state: "available", verb: "active", operation: "deploy"},
		{state: "enroll", verb: "manage", operation: "manage"},
		{state: "manageable", verb: "provide", operation: "provide"},
		{state: "manageable", verb: "inspect", operation: "inspect"},
		{state: "manageable", verb: "clean", operation: "clean"},
		{state: "active", verb: "deleted", operation: "undeploy"},
		{state: "active", verb: "rebuild", operation: "deploy"},
		{state: "deploy failed", verb: "undeploy", operation: "undeploy", endWaitingFirst: true},
		{state: "clean failed", verb: "manage", operation: "manage", endWaitingFirst: true},
		{state: "wait call-back", verb: "abort", operation: "abort", abort: true},
		{state: "deploy failed", verb: "abort", operation: "abort", abort: true},
		{state: "active", verb: "service", operation: "service"},
		{state: "service failed", verb: "service", operation: "service", endWaitingFirst: true},
		{state: "service wait", verb: "abort", operation: "abort", abort: true},
		{state: "service failed", verb: "abort", operation: "abort", abort: true},
		// adopt (API 1.17): from manageable and adopt failed, as Ironic.
		{state: "manageable", verb: "adopt", operation: "adopt"},
		{state: "adopt failed", verb: "adopt", operation: "adopt", endWaitingFirst: true},
		{state: "adopt failed", verb: "manage", operation: "manage", endWaitingFirst: true},
		{state: "available", verb: "adopt", status: http.StatusBadRequest,
			msg: `The requested action "adopt" can not be performed on node "` + id + `" while it is in state "available".`},
		{state: "active", verb: "adopt", status: http.StatusBadRequest,
			msg: `The requested action "adopt" can not be performed on node "` + id + `" while it is in state "active".`},
		{state: "active", verb: "manage", status: http.StatusBadRequest,
			msg: `The requested action "manage" can not be performed on node "` + id + `" while it is in state "active".`},
		{state: "deploying", verb: "undeploy", held: true, status: http.StatusConflict,
			msg: "Node " + id + " is locked by host node-" + id + ", please retry after the current operation is completed."},
		// abort is never told the node is locked.
		{state: "active", verb: "abort", held: true, status: http.StatusBadRequest,
			msg: `The requested action "abort" can not be performed on node "` + id + `" while it is in state "active".`},
		{state: "available", verb: "bogus", status: http.StatusBadRequest,
			msg: `The requested action "bogus" can not be performed on node "` + id + `" while it is in state "available".`},
		{state: "active", protected: true, verb: "deleted", status: http.StatusForbidden,
			msg: "Node " + id + " is protected and cannot be undeployed, rebuilt or deleted"},
		{state: "active", protected: true, verb: "rebuild", status: http.StatusForbidden,
			msg: "Node " + id + " is protected and cannot be undeployed, rebuilt or deleted"},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%s × %s", tc.state, tc.verb), func(t *testing.T) {
			n := &store.Node{UUID: id, ProvisionState: tc.state, Protected: tc.protected}
			asked := false
			plan, err := decideProvision(n, tc.verb, func() bool { asked = true; return tc.held })
			if tc.status != 0 {
				var ae *apiError
				if !errors.As(err, &ae) || ae.status != tc.status || ae.msg != tc.msg {
					t.Fatalf("got %v, want %d %q", err, tc.status, tc.msg)
				}
				return
			}
			if err != nil {
				t.Fatalf("refused: %v", err)
			}
			if asked {
				t.Errorf("asked whether a workflow holds the node for an accepted verb")
			}
			if plan.transition.Operation != tc.operation || plan.abort != tc.abort || plan.endWaitingFirst != tc.endWaitingFirst {
				t.Errorf("plan %+v, want operation %s abort %v endWaitingFirst %v", plan, tc.operation, tc.abort, tc.endWaitingFirst)
			}
		})
	}
}

// TestParallelVerbsOneAccepted: of 20 verbs sent together to one node, one
// is accepted and moves the node; the others are decided again against the
// state it moved to and get Ironic's 400, and no second workflow starts.
func TestParallelVerbsOneAccepted(t *testing.T) {
	e := newEnv(t)
	uuid := e.createNode(map[string]any{"driver": "fake-hardware", "name": "race"})["uuid"].(string)
	e.setState(uuid, "manageable")
	var wg sync.WaitGroup
	statuses := make([]resp, 20)
	for i := range statuses {
		wg.Add(1)
		go func() {
			defer wg.Done()
			statuses[i] = e.do("PUT", "/v1/nodes/"+uuid+"/states/provision", "1.78", map[string]any{"target": "provide"})
		}()
	}
	wg.Wait()
	accepted := 0
	for _, r := range statuses {
		switch {
		case r.status == 202:
			accepted++
		case r.status == 400 && r.faultstring(t) == provision.NotAllowed("provide", uuid, "cleaning"):
		default:
			t.Errorf("loser: %d %s", r.status, r.body)
		}
	}
	if accepted != 1 || len(e.eng.provisions) != 1 {
		t.Fatalf("%d accepted, %d workflows started; want 1 and 1", accepted, len(e.eng.provisions))
	}
	if n := e.node(uuid); n.ProvisionState != "cleaning" || n.TargetProvisionState == nil || *n.TargetProvisionState != "available" {
		t.Errorf("after the race: %s → %v", n.ProvisionState, n.TargetProvisionState)
	}
}
