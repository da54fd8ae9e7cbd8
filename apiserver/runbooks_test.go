package apiserver

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/ironflow/ironflow/store"
)

const vRunbooks = "1.92"

// needRunbookVersion skips the HTTP runbook tests until MaxVersionMinor
// (version.go) reaches 1.92: the version middleware refuses the header
// before the resource is read.
func needRunbookVersion(t *testing.T) {
	t.Helper()
	if MaxVersionMinor < v92Runbooks {
		t.Skipf("SKIPPED: the API's maximum microversion is 1.%d, runbooks need 1.92 (raise MaxVersionMinor)", MaxVersionMinor)
	}
}

func TestRunbookCRUD(t *testing.T) {
	e := newEnv(t)
	if r := e.do("GET", "/v1/runbooks", "1.82", nil); r.status != http.StatusNotFound {
		t.Errorf("GET below 1.92: %d", r.status)
	}
	needRunbookVersion(t)
	r := e.do("POST", "/v1/runbooks", vRunbooks, map[string]any{
		"name": "CUSTOM_FW", "public": true, "owner": "p1", "disable_ramdisk": false,
		"steps": []any{map[string]any{"interface": "deploy", "step": "erase_devices", "args": map[string]any{}, "order": 1}},
	})
	if r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	m := r.json(t)
	if m["public"] != true || m["owner"] != "p1" || m["steps"].([]any)[0].(map[string]any)["order"] != float64(1) {
		t.Errorf("created %v", m)
	}
	r = e.do("POST", "/v1/runbooks", vRunbooks, map[string]any{"name": "CUSTOM_FW",
		"steps": []any{map[string]any{"interface": "deploy", "step": "x", "args": map[string]any{}, "order": 0}}})
	if r.status != 409 || r.faultstring(t) != "A runbook with name CUSTOM_FW already exists." {
		t.Errorf("duplicate: %d %s", r.status, r.body)
	}
	r = e.do("POST", "/v1/runbooks", vRunbooks, map[string]any{"name": "CUSTOM_X",
		"steps": []any{map[string]any{"interface": "deploy", "step": "x", "args": map[string]any{}, "priority": 0}}})
	if r.status != 400 || r.faultstring(t) != "Schema error for runbook: Additional properties are not allowed ('priority' was unexpected)" {
		t.Errorf("priority in a runbook step: %d %s", r.status, r.body)
	}
	r = e.do("PATCH", "/v1/runbooks/CUSTOM_FW", vRunbooks, []map[string]any{{"op": "replace", "path": "/public", "value": false}})
	if r.status != 200 || r.json(t)["public"] != false {
		t.Errorf("patch: %d %s", r.status, r.body)
	}
	if r := e.do("DELETE", "/v1/runbooks/CUSTOM_FW", vRunbooks, nil); r.status != 204 {
		t.Errorf("delete: %d %s", r.status, r.body)
	}
	if r := e.do("GET", "/v1/runbooks/CUSTOM_FW", vRunbooks, nil); r.status != 404 || r.faultstring(t) != "Runbook CUSTOM_FW could not be found." {
		t.Errorf("after delete: %d %s", r.status, r.body)
	}
}

// TestRunbookStepsForANode resolves a runbook for a clean: by name or
// UUID, its steps by order, refused for a node without its trait.
func TestRunbookStepsForANode(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	rb := &store.Runbook{Name: "CUSTOM_FW", DisableRamdisk: true, Steps: []store.RunbookStep{
		{Interface: "deploy", Step: "erase_devices", Args: map[string]any{}, Order: 2},
		{Interface: "bios", Step: "apply_configuration", Args: map[string]any{"settings": []any{}}, Order: 1},
	}}
	if err := e.st.CreateRunbook(ctx, rb); err != nil {
		t.Fatal(err)
	}
	uuid := e.createNode(map[string]any{"driver": "fake-hardware"})["uuid"].(string)
	n := e.node(uuid)
	if _, err := RunbookSteps(ctx, e.st, n, "CUSTOM_FW", v92Runbooks); err == nil || err.(*apiError).status != 400 {
		t.Errorf("a node without the trait: %v", err)
	}
	if _, err := RunbookSteps(ctx, e.st, n, "CUSTOM_NONE", v92Runbooks); err == nil || err.(*apiError).status != 404 {
		t.Errorf("an unknown runbook: %v", err)
	}
	n.Traits = []string{"CUSTOM_FW"}
	for _, ident := range []string{"CUSTOM_FW", rb.UUID} {
		plan, err := RunbookSteps(ctx, e.st, n, ident, v92Runbooks)
		if err != nil {
			t.Fatalf("%s: %v", ident, err)
		}
		var steps []map[string]any
		if err := json.Unmarshal(plan.Steps, &steps); err != nil {
			t.Fatal(err)
		}
		if len(steps) != 2 || steps[0]["step"] != "apply_configuration" || steps[1]["step"] != "erase_devices" || !plan.DisableRamdisk {
			t.Errorf("%s: %+v", ident, plan)
		}
		if _, ok := steps[0]["order"]; ok {
			t.Errorf("a clean step keeps the runbook's order key: %v", steps[0])
		}
	}
}

func TestEveryRunbookFieldRoundTrips(t *testing.T) {
	needRunbookVersion(t)
	serveFieldsOf(t, runbookFields)
	e := newEnv(t)
	r := e.do("POST", "/v1/runbooks", vRunbooks, map[string]any{"name": "CUSTOM_RT",
		"steps": []any{map[string]any{"interface": "deploy", "step": "x", "args": map[string]any{}, "order": 0}}})
	if r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	roundTrip(t, e, runbookResource, "runbooks", r.json(t)["uuid"].(string))
}

// TestCleanWithRunbook: the provision body's runbook is refused below
// 1.92 (406), and at 1.92 resolved before the clean starts: a node
// without the runbook's trait is refused.
func TestCleanWithRunbook(t *testing.T) {
	e := newEnv(t)
	uuid := e.createNode(map[string]any{"driver": "fake-hardware"})["uuid"].(string)
	e.setState(uuid, "manageable")
	body := map[string]any{"target": "clean", "runbook": "CUSTOM_FW"}
	if r := e.do("PUT", "/v1/nodes/"+uuid+"/states/provision", "1.78", body); r.status != http.StatusNotAcceptable {
		t.Errorf("runbook at 1.78: %d %s", r.status, r.body)
	}
	needRunbookVersion(t)
	if err := e.st.CreateRunbook(context.Background(), &store.Runbook{Name: "CUSTOM_FW",
		Steps: []store.RunbookStep{{Interface: "deploy", Step: "erase_devices", Order: 0}}}); err != nil {
		t.Fatal(err)
	}
	r := e.do("PUT", "/v1/nodes/"+uuid+"/states/provision", vRunbooks, body)
	if r.status != 400 || !strings.Contains(r.faultstring(t), "is not compatible with node "+uuid) {
		t.Errorf("a node without the runbook's trait: %d %s", r.status, r.body)
	}
	if r := e.do("PUT", "/v1/nodes/"+uuid+"/states/provision", vRunbooks, map[string]any{"target": "provide", "runbook": "CUSTOM_FW"}); r.status != 400 {
		t.Errorf("runbook with provide: %d %s", r.status, r.body)
	}
	if e.node(uuid).ProvisionState != "manageable" {
		t.Errorf("a refused clean moved the node: %s", e.node(uuid).ProvisionState)
	}
}

// Ironic's runbook patch: a public runbook has no owner. Setting an owner
// on a public runbook is refused unless the same patch makes it
// non-public; changing public clears the owner.
func TestRunbookPatchOwnerAndPublic(t *testing.T) {
	needRunbookVersion(t)
	e := newEnv(t)
	mk := func(name string, body map[string]any) {
		t.Helper()
		body["name"] = name
		body["steps"] = []any{map[string]any{"interface": "deploy", "step": "erase_devices", "args": map[string]any{}, "order": 1}}
		if r := e.do("POST", "/v1/runbooks", vRunbooks, body); r.status != 201 {
			t.Fatalf("create %s: %d %s", name, r.status, r.body)
		}
	}
	mk("CUSTOM_RB_PUB", map[string]any{"public": true})
	setOwner := []map[string]any{{"op": "replace", "path": "/owner", "value": "p1"}}
	want := "Couldn't apply patch '[{'op': 'replace', 'path': '/owner', 'value': 'p1'}]'. Reason: There cannot be an owner for a public runbook"
	if r := e.do("PATCH", "/v1/runbooks/CUSTOM_RB_PUB", vRunbooks, setOwner); r.status != 400 || r.faultstring(t) != want {
		t.Errorf("owner on a public runbook: %d %s, want 400 %q", r.status, r.body, want)
	}
	both := []map[string]any{{"op": "replace", "path": "/public", "value": false}, {"op": "replace", "path": "/owner", "value": "p1"}}
	if r := e.do("PATCH", "/v1/runbooks/CUSTOM_RB_PUB", vRunbooks, both); r.status != 200 || r.json(t)["owner"] != "p1" || r.json(t)["public"] != false {
		t.Errorf("non-public and owned in one patch: %d %s", r.status, r.body)
	}
	mk("CUSTOM_RB_OWNED", map[string]any{"owner": "p2"})
	pub := []map[string]any{{"op": "replace", "path": "/public", "value": true}}
	if r := e.do("PATCH", "/v1/runbooks/CUSTOM_RB_OWNED", vRunbooks, pub); r.status != 200 || r.json(t)["owner"] != nil || r.json(t)["public"] != true {
		t.Errorf("public clears the owner: %d %s", r.status, r.body)
	}
	both[0]["value"] = true
	if r := e.do("PATCH", "/v1/runbooks/CUSTOM_RB_OWNED", vRunbooks, both); r.status != 400 || !strings.Contains(r.faultstring(t), "There cannot be an owner for a public runbook") {
		t.Errorf("public and owned in one patch: %d %s, want 400", r.status, r.body)
	}
}
