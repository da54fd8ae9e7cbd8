package apiserver

import (
	"testing"

	"github.com/ironflow/ironflow/provision"
)

// TestAdoptFollowsIronic: adopt is 406 below 1.17 and 400 outside
// manageable and adopt failed, changing nothing; accepted, the node is
// adopting with target active and AdoptNode starts with the decided
// transition.
func TestAdoptFollowsIronic(t *testing.T) {
	e := newEnv(t)
	uuid := e.createNode(map[string]any{"driver": "fake-hardware"})["uuid"].(string)
	put := func(version string) resp {
		return e.do("PUT", "/v1/nodes/"+uuid+"/states/provision", version, map[string]any{"target": "adopt"})
	}
	for _, c := range []struct {
		name    string
		state   provision.State
		version string
		status  int
		msg     string
	}{
		{"below 1.17", provision.Manageable, "1.16", 406, ""},
		{"from available", provision.Available, "1.17", 400, provision.NotAllowed("adopt", uuid, "available")},
		{"from active", provision.Active, "1.78", 400, provision.NotAllowed("adopt", uuid, "active")},
		{"from enroll", provision.Enroll, "1.78", 400, provision.NotAllowed("adopt", uuid, "enroll")},
	} {
		t.Run(c.name, func(t *testing.T) {
			e.setState(uuid, c.state)
			r := put(c.version)
			if r.status != c.status || c.msg != "" && r.faultstring(t) != c.msg {
				t.Errorf("%d %s, want %d %s", r.status, r.body, c.status, c.msg)
			}
			if n := e.node(uuid); n.ProvisionState != c.state {
				t.Errorf("a refused adopt moved the node to %s", n.ProvisionState)
			}
		})
	}
	if len(e.eng.provisions) != 0 {
		t.Fatalf("refused verbs started workflows: %+v", e.eng.provisions)
	}
	for i, from := range []provision.State{provision.Manageable, provision.AdoptFailed} {
		e.setState(uuid, from)
		if r := put("1.17"); r.status != 202 {
			t.Fatalf("adopt from %s: %d %s", from, r.status, r.body)
		}
		n := e.node(uuid)
		if n.ProvisionState != provision.Adopting || n.TargetProvisionState == nil || *n.TargetProvisionState != provision.Active {
			t.Fatalf("after adopt from %s: %s %v", from, n.ProvisionState, n.TargetProvisionState)
		}
		req := e.eng.provisions[i]
		if req.FromState != from || req.Transition != (provision.Transition{Operation: provision.OpAdopt, Next: provision.Adopting, Target: provision.Active}) {
			t.Fatalf("the workflow's request: %+v", req)
		}
	}
}
