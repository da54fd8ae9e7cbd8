package apiserver

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/ironflow/ironflow/provision"
	"github.com/ironflow/ironflow/shadow"
	"github.com/ironflow/ironflow/store"
	"github.com/ironflow/ironflow/workflows"
)

// TestRescueFollowsIronic: the rescue and unrescue verbs (1.38) with
// Ironic's rules and messages for rescue_password and the rescue
// interface; an accepted rescue stores only the password's hash, masked in
// every view, and the workflow's request carries no password.
func TestRescueFollowsIronic(t *testing.T) {
	e := newEnv(t)
	uuid := e.createNode(map[string]any{"driver": "fake-hardware", "rescue_interface": "agent", "deploy_interface": "direct"})["uuid"].(string)
	norescue := e.createNode(map[string]any{"driver": "fake-hardware", "rescue_interface": "no-rescue"})["uuid"].(string)
	const password = "Tenant's 0wn rescue password"
	put := func(node, version string, body map[string]any) resp {
		return e.do("PUT", "/v1/nodes/"+node+"/states/provision", version, body)
	}
	for _, c := range []struct {
		name, node string
		state      provision.State
		version    string
		body       map[string]any
		status     int
		msg        string
	}{
		{"rescue below 1.38", uuid, "active", "1.37", map[string]any{"target": "rescue", "rescue_password": password}, 406, ""},
		{"unrescue below 1.38", uuid, "rescue", "1.37", map[string]any{"target": "unrescue"}, 406, ""},
		{"no password", uuid, "active", "1.78", map[string]any{"target": "rescue"}, 400,
			`A non-empty "rescue_password" is required when setting target provision state to rescue`},
		{"blank password", uuid, "active", "1.78", map[string]any{"target": "rescue", "rescue_password": "  "}, 400,
			`A non-empty "rescue_password" is required when setting target provision state to rescue`},
		{"password with another verb", uuid, "active", "1.78", map[string]any{"target": "deleted", "rescue_password": password}, 400,
			`"rescue_password" is only valid when setting target provision state to rescue`},
		{"password not a string", uuid, "active", "1.78", map[string]any{"target": "rescue", "rescue_password": 7}, 400,
			"Invalid rescue_password: 7 is not a string"},
		{"rescue from available", uuid, "available", "1.78", map[string]any{"target": "rescue", "rescue_password": password}, 400,
			provision.NotAllowed("rescue", uuid, "available")},
		{"unrescue from active", uuid, "active", "1.78", map[string]any{"target": "unrescue"}, 400,
			provision.NotAllowed("unrescue", uuid, "active")},
		{"no-rescue", norescue, "active", "1.78", map[string]any{"target": "rescue", "rescue_password": password}, 500,
			"Failed to rescue instance None for node " + norescue + ": Validation failed: Driver fake-hardware does not support rescue (disabled or not implemented)."},
	} {
		t.Run(c.name, func(t *testing.T) {
			e.setState(c.node, c.state)
			r := put(c.node, c.version, c.body)
			if r.status != c.status || c.msg != "" && r.faultstring(t) != c.msg {
				t.Errorf("%d %s, want %d %s", r.status, r.body, c.status, c.msg)
			}
			if n := e.node(c.node); n.ProvisionState != c.state || n.InstanceInfo[store.KeyHashedRescuePassword] != nil {
				t.Errorf("a refused verb changed the node: %s %v", n.ProvisionState, n.InstanceInfo)
			}
		})
	}
	if len(e.eng.provisions) != 0 {
		t.Fatalf("refused verbs started workflows: %+v", e.eng.provisions)
	}

	e.setState(uuid, "active")
	if r := put(uuid, "1.38", map[string]any{"target": "rescue", "rescue_password": password}); r.status != 202 {
		t.Fatalf("rescue: %d %s", r.status, r.body)
	}
	n := e.node(uuid)
	if n.ProvisionState != "rescuing" || n.TargetProvisionState == nil || *n.TargetProvisionState != "rescue" {
		t.Fatalf("after rescue: %s %v", n.ProvisionState, n.TargetProvisionState)
	}
	hash, _ := n.InstanceInfo[store.KeyHashedRescuePassword].(string)
	if !shadow.Verify(password, hash) || !strings.HasPrefix(hash, "$6$") {
		t.Fatalf("stored %q is not the SHA-512 crypt hash of the rescue password", hash)
	}
	stored, _ := json.Marshal(n)
	sent, _ := json.Marshal(e.eng.provisions)
	for what, data := range map[string][]byte{"the store": stored, "the workflow request": sent} {
		if strings.Contains(string(data), password) {
			t.Errorf("the clear rescue password is in %s", what)
		}
	}
	if strings.Contains(string(sent), hash) {
		t.Error("the password's hash is in the workflow request")
	}
	view := e.do("GET", "/v1/nodes/"+uuid, "1.78", nil)
	if ii := view.json(t)["instance_info"].(map[string]any); ii[store.KeyHashedRescuePassword] != "******" || strings.Contains(string(view.body), hash) {
		t.Fatalf("instance_info shows the hash: %s", view.body)
	}
	if got := e.eng.provisions[0]; got.Verb != "rescue" || got.FromState != "active" {
		t.Fatalf("workflow request %+v", got)
	}

	// abort in rescue wait is the running workflow's abort signal.
	e.setState(uuid, "rescue wait")
	e.eng.hold(uuid, true)
	if r := put(uuid, "1.78", map[string]any{"target": "abort"}); r.status != 202 || len(e.eng.signals) != 1 || e.eng.signals[0].name != workflows.SignalAbort {
		t.Fatalf("abort in rescue wait: %d %s %+v", r.status, r.body, e.eng.signals)
	}
	e.eng.hold(uuid, false)

	e.setState(uuid, "rescue")
	if r := put(uuid, "1.38", map[string]any{"target": "unrescue"}); r.status != 202 {
		t.Fatalf("unrescue: %d %s", r.status, r.body)
	}
	if n := e.node(uuid); n.ProvisionState != "unrescuing" || *n.TargetProvisionState != "active" {
		t.Fatalf("after unrescue: %s %v", n.ProvisionState, n.TargetProvisionState)
	}
	// Rescue again from rescue failed (a new password replaces the hash).
	e.setState(uuid, "rescue failed")
	if r := put(uuid, "1.78", map[string]any{"target": "rescue", "rescue_password": "another"}); r.status != 202 {
		t.Fatalf("rescue from rescue failed: %d %s", r.status, r.body)
	}
	if h, _ := e.node(uuid).InstanceInfo[store.KeyHashedRescuePassword].(string); !shadow.Verify("another", h) {
		t.Fatal("a new rescue did not store its own password's hash")
	}
}

// A rescue whose workflow cannot start leaves no password behind.
func TestRescueThatDoesNotStartForgetsThePassword(t *testing.T) {
	e := newEnv(t)
	uuid := e.createNode(map[string]any{"driver": "fake-hardware", "rescue_interface": "agent"})["uuid"].(string)
	e.setState(uuid, "active")
	e.eng.hold(uuid, true)
	r := e.do("PUT", "/v1/nodes/"+uuid+"/states/provision", "1.78", map[string]any{"target": "rescue", "rescue_password": "pw"})
	if r.status != 409 {
		t.Fatalf("locked: %d %s", r.status, r.body)
	}
	if n := e.node(uuid); n.InstanceInfo[store.KeyHashedRescuePassword] != nil {
		t.Fatalf("hash kept after a refused start: %v", n.InstanceInfo)
	}
}
