package apiserver

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/ironflow/ironflow/store"
)

const vTemplates = "1.55"

func raidStep(name string, prio any) map[string]any {
	return map[string]any{"interface": "raid", "step": name, "args": map[string]any{"delete_configuration": true}, "priority": prio}
}

func TestDeployTemplateCRUD(t *testing.T) {
	e := newEnv(t)
	// Below 1.55 the resource does not exist: 404 for GET, 405 otherwise.
	if r := e.do("GET", "/v1/deploy_templates", "1.54", nil); r.status != http.StatusNotFound {
		t.Errorf("GET at 1.54: %d", r.status)
	}
	if r := e.do("POST", "/v1/deploy_templates", "1.54", map[string]any{}); r.status != http.StatusMethodNotAllowed {
		t.Errorf("POST at 1.54: %d %s", r.status, r.body)
	}

	r := e.do("POST", "/v1/deploy_templates", vTemplates, map[string]any{
		"name": "CUSTOM_RAID1", "extra": map[string]any{"foo": "bar"},
		"steps": []any{raidStep("create_configuration", 10),
			map[string]any{"interface": "bios", "step": "apply_configuration", "args": map[string]any{"admin_password": "s3cret"}, "priority": "20"}},
	})
	if r.status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	created := r.json(t)
	uuid := created["uuid"].(string)
	if loc := r.header.Get("Location"); loc != e.srv.URL+"/v1/deploy_templates/"+uuid {
		t.Errorf("Location %q", loc)
	}
	steps := created["steps"].([]any)
	if len(steps) != 2 || steps[1].(map[string]any)["priority"] != float64(20) {
		t.Errorf("steps %v", steps)
	}
	if args := steps[1].(map[string]any)["args"].(map[string]any); args["admin_password"] != "******" {
		t.Errorf("a password in step args is shown: %v", args)
	}
	for _, k := range []string{"uuid", "name", "extra", "steps", "links", "created_at", "updated_at"} {
		if _, ok := created[k]; !ok {
			t.Errorf("no %s in %v", k, created)
		}
	}

	// Shown by UUID and by name; ?fields= selects.
	for _, id := range []string{uuid, "CUSTOM_RAID1"} {
		got := e.do("GET", "/v1/deploy_templates/"+id+"?fields=name,steps", vTemplates, nil)
		if got.status != 200 {
			t.Fatalf("show %s: %d %s", id, got.status, got.body)
		}
		if m := got.json(t); m["name"] != "CUSTOM_RAID1" || m["extra"] != nil || len(m["steps"].([]any)) != 2 {
			t.Errorf("show %s: %v", id, m)
		}
	}
	if got := e.do("GET", "/v1/deploy_templates/CUSTOM_NOPE", vTemplates, nil); got.status != 404 ||
		got.faultstring(t) != "Deploy template CUSTOM_NOPE could not be found." {
		t.Errorf("missing: %d %s", got.status, got.body)
	}

	// A second template of the same name: 409.
	r = e.do("POST", "/v1/deploy_templates", vTemplates, map[string]any{"name": "CUSTOM_RAID1", "steps": []any{raidStep("x", 1)}})
	if r.status != http.StatusConflict || r.faultstring(t) != "A deploy template with name CUSTOM_RAID1 already exists." {
		t.Errorf("duplicate name: %d %s", r.status, r.body)
	}

	// PATCH name, extra and one step's priority; uuid may not be patched.
	r = e.do("PATCH", "/v1/deploy_templates/"+uuid, vTemplates, []map[string]any{
		{"op": "replace", "path": "/name", "value": "CUSTOM_RAID10"},
		{"op": "add", "path": "/extra/baz", "value": 1},
		{"op": "replace", "path": "/steps/0/priority", "value": 30},
	})
	if r.status != 200 {
		t.Fatalf("patch: %d %s", r.status, r.body)
	}
	p := r.json(t)
	if p["name"] != "CUSTOM_RAID10" || p["extra"].(map[string]any)["baz"] != float64(1) || p["updated_at"] == nil ||
		p["steps"].([]any)[0].(map[string]any)["priority"] != float64(30) {
		t.Errorf("after patch: %v", p)
	}
	stored, err := e.st.GetDeployTemplate(context.Background(), uuid)
	if err != nil || stored.Steps[0].Priority != 30 || stored.Steps[1].Args["admin_password"] != "s3cret" {
		t.Errorf("stored after patch: %+v %v", stored, err)
	}
	r = e.do("PATCH", "/v1/deploy_templates/"+uuid, vTemplates, []map[string]any{{"op": "replace", "path": "/uuid", "value": uuid}})
	if r.status != 400 || r.faultstring(t) != "Cannot patch /uuid. Only the following can be updated: extra, name, steps" {
		t.Errorf("patch uuid: %d %s", r.status, r.body)
	}
	r = e.do("PATCH", "/v1/deploy_templates/"+uuid, vTemplates, []map[string]any{{"op": "replace", "path": "/name", "value": "raid"}})
	if r.status != 400 || r.faultstring(t) != "Schema error for patch: 'raid' is not valid under any of the given schemas" {
		t.Errorf("patch a name that is no trait: %d %s", r.status, r.body)
	}
	r = e.do("PATCH", "/v1/deploy_templates/"+uuid, vTemplates, []map[string]any{{"op": "add", "path": "/steps/2", "value": raidStep("create_configuration", 5)}})
	if r.status != 400 || !strings.Contains(r.faultstring(t), "Duplicate deploy steps") {
		t.Errorf("patch a duplicate step: %d %s", r.status, r.body)
	}

	// Delete by name; then it is gone.
	if r := e.do("DELETE", "/v1/deploy_templates/CUSTOM_RAID10", vTemplates, nil); r.status != 204 {
		t.Fatalf("delete: %d %s", r.status, r.body)
	}
	if r := e.do("GET", "/v1/deploy_templates/"+uuid, vTemplates, nil); r.status != 404 {
		t.Errorf("after delete: %d", r.status)
	}
	if r := e.do("DELETE", "/v1/deploy_templates/"+uuid, vTemplates, nil); r.status != 404 {
		t.Errorf("delete again: %d", r.status)
	}
}

func TestDeployTemplateValidation(t *testing.T) {
	e := newEnv(t)
	ok := []any{raidStep("create_configuration", 10)}
	cases := []struct {
		name string
		body map[string]any
		msg  string
	}{
		{"no name", map[string]any{"steps": ok}, "Schema error for template: 'name' is a required property"},
		{"no steps", map[string]any{"name": "CUSTOM_A"}, "Schema error for template: 'steps' is a required property"},
		{"name no trait", map[string]any{"name": "foo", "steps": ok}, "Schema error for template: 'foo' is not valid under any of the given schemas"},
		{"name lower custom", map[string]any{"name": "CUSTOM_a", "steps": ok}, "Schema error for template: 'CUSTOM_a' is not valid under any of the given schemas"},
		{"unknown key", map[string]any{"name": "CUSTOM_A", "steps": ok, "owner": "x"}, "Schema error for template: Additional properties are not allowed ('owner' was unexpected)"},
		{"empty steps", map[string]any{"name": "CUSTOM_A", "steps": []any{}}, "Schema error for template: [] is too short"},
		{"bad interface", map[string]any{"name": "CUSTOM_A", "steps": []any{map[string]any{"interface": "network", "step": "x", "args": map[string]any{}, "priority": 1}}},
			"Schema error for template: 'network' is not one of ['vendor', 'power', 'management', 'deploy', 'firmware', 'bios', 'raid']"},
		{"negative priority", map[string]any{"name": "CUSTOM_A", "steps": []any{raidStep("x", -1)}}, "Schema error for template: -1 is not valid under any of the given schemas"},
		{"no args", map[string]any{"name": "CUSTOM_A", "steps": []any{map[string]any{"interface": "raid", "step": "x", "priority": 1}}},
			"Schema error for template: 'args' is a required property"},
		{"step key", map[string]any{"name": "CUSTOM_A", "steps": []any{map[string]any{"interface": "raid", "step": "x", "args": map[string]any{}, "priority": 1, "order": 1}}},
			"Schema error for template: Additional properties are not allowed ('order' was unexpected)"},
		{"duplicate", map[string]any{"name": "CUSTOM_A", "steps": []any{raidStep("x", 1), raidStep("x", 2)}},
			"Deploy template invalid: Duplicate deploy steps. A deploy template cannot have multiple deploy steps with the same interface and step. Duplicates: interface: raid, step: x."},
		{"bad uuid", map[string]any{"name": "CUSTOM_A", "steps": ok, "uuid": "nope"}, "Expected UUID for uuid: nope"},
	}
	for _, c := range cases {
		r := e.do("POST", "/v1/deploy_templates", vTemplates, c.body)
		if r.status != 400 || r.faultstring(t) != c.msg {
			t.Errorf("%s: %d %s, want 400 %s", c.name, r.status, r.body, c.msg)
		}
	}
	// A standard trait is a valid name.
	if r := e.do("POST", "/v1/deploy_templates", vTemplates, map[string]any{"name": "HW_CPU_X86_VMX", "steps": ok}); r.status != 201 {
		t.Errorf("standard trait: %d %s", r.status, r.body)
	}
}

func TestDeployTemplateListPaging(t *testing.T) {
	e := newEnv(t)
	var uuids []string
	for i := 0; i < 3; i++ {
		r := e.do("POST", "/v1/deploy_templates", vTemplates, map[string]any{"name": fmt.Sprintf("CUSTOM_T%d", i), "steps": []any{raidStep("x", 1)}})
		if r.status != 201 {
			t.Fatalf("create: %d %s", r.status, r.body)
		}
		uuids = append(uuids, r.json(t)["uuid"].(string))
	}
	list := e.do("GET", "/v1/deploy_templates?limit=2", vTemplates, nil).json(t)
	items := list["deploy_templates"].([]any)
	if len(items) != 2 {
		t.Fatalf("page: %v", list)
	}
	first := items[0].(map[string]any)
	if _, ok := first["steps"]; ok || first["name"] != "CUSTOM_T0" || first["links"] == nil {
		t.Errorf("a list without detail shows uuid, name and links: %v", first)
	}
	next, _ := list["next"].(string)
	if !strings.Contains(next, "/v1/deploy_templates?") || !strings.Contains(next, "marker="+uuids[1]) {
		t.Errorf("next %q", next)
	}
	rest := e.do("GET", "/v1/deploy_templates?limit=2&marker="+uuids[1]+"&detail=true", vTemplates, nil).json(t)["deploy_templates"].([]any)
	if len(rest) != 1 || rest[0].(map[string]any)["uuid"] != uuids[2] || rest[0].(map[string]any)["steps"] == nil {
		t.Errorf("second page: %v", rest)
	}
	desc := e.do("GET", "/v1/deploy_templates?sort_key=name&sort_dir=desc", vTemplates, nil).json(t)["deploy_templates"].([]any)
	if desc[0].(map[string]any)["name"] != "CUSTOM_T2" {
		t.Errorf("sorted by name desc: %v", desc)
	}
	if r := e.do("GET", "/v1/deploy_templates?sort_key=steps", vTemplates, nil); r.status != 400 ||
		r.faultstring(t) != "The sort_key value steps is an invalid field for sorting" {
		t.Errorf("sort by steps: %d %s", r.status, r.body)
	}
	if r := e.do("GET", "/v1/deploy_templates?marker=9c3a2b4e-0000-4000-8000-000000000000", vTemplates, nil); r.status != 404 {
		t.Errorf("unknown marker: %d %s", r.status, r.body)
	}
}

func TestEveryDeployTemplateFieldRoundTrips(t *testing.T) {
	e := newEnv(t)
	r := e.do("POST", "/v1/deploy_templates", vTemplates, map[string]any{"name": "CUSTOM_RT", "steps": []any{raidStep("x", 1)}})
	if r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	roundTrip(t, e, templateResource, "deploy_templates", r.json(t)["uuid"].(string))
}

// TestDeployAppliesMatchingTemplates: a deploy of a node whose
// instance_info/traits name templates hands the workflow the templates'
// steps after the user's, the user's overriding a template's.
func TestDeployAppliesMatchingTemplates(t *testing.T) {
	e := newEnv(t)
	for _, tpl := range []map[string]any{
		{"name": "CUSTOM_A", "steps": []any{map[string]any{"interface": "deploy", "step": "erase_devices_metadata", "args": map[string]any{}, "priority": 85}}},
		{"name": "CUSTOM_B", "steps": []any{raidStep("create_configuration", 10), raidStep("delete_configuration", 11)}},
		{"name": "CUSTOM_C", "steps": []any{map[string]any{"interface": "deploy", "step": "erase_devices_metadata", "args": map[string]any{}, "priority": 70}}},
	} {
		if r := e.do("POST", "/v1/deploy_templates", vTemplates, tpl); r.status != 201 {
			t.Fatalf("create: %d %s", r.status, r.body)
		}
	}
	uuid := e.createNode(map[string]any{"driver": "fake-hardware", "name": "tn"})["uuid"].(string)
	// Ironic deploys only instance traits the node has.
	if r := e.do("PUT", "/v1/nodes/"+uuid+"/traits", "1.78", map[string]any{"traits": []string{"CUSTOM_A", "CUSTOM_B", "CUSTOM_C", "CUSTOM_OTHER"}}); r.status != 204 {
		t.Fatalf("set node traits: %d %s", r.status, r.body)
	}
	setTraits := func(traits ...string) {
		t.Helper()
		r := e.do("PATCH", "/v1/nodes/"+uuid, "1.78", []map[string]any{{"op": "add", "path": "/instance_info/traits", "value": traits}})
		if r.status != 200 {
			t.Fatalf("set instance traits: %d %s", r.status, r.body)
		}
	}
	setTraits("CUSTOM_A", "CUSTOM_B", "CUSTOM_OTHER")
	e.setState(uuid, "available")
	r := e.do("PUT", "/v1/nodes/"+uuid+"/states/provision", "1.78", map[string]any{
		"target": "active", "deploy_steps": []any{raidStep("delete_configuration", 0)},
	})
	if r.status != 202 {
		t.Fatalf("deploy: %d %s", r.status, r.body)
	}
	var got []map[string]any
	if err := json.Unmarshal(e.eng.provisions[len(e.eng.provisions)-1].DeploySteps, &got); err != nil {
		t.Fatal(err)
	}
	want := []string{"raid.delete_configuration:0", "deploy.erase_devices_metadata:85", "raid.create_configuration:10"}
	if len(got) != len(want) {
		t.Fatalf("deploy steps %v, want %v", got, want)
	}
	for i, s := range got {
		if id := fmt.Sprintf("%s.%s:%v", s["interface"], s["step"], s["priority"]); id != want[i] {
			t.Errorf("step %d: %s, want %s", i, id, want[i])
		}
	}

	// Two matching templates with the same step: Ironic's 400, nothing starts.
	e.setState(uuid, "available")
	setTraits("CUSTOM_A", "CUSTOM_C")
	before := len(e.eng.provisions)
	r = e.do("PUT", "/v1/nodes/"+uuid+"/states/provision", "1.78", map[string]any{"target": "active"})
	if r.status != 400 || !strings.Contains(r.faultstring(t), "Matching deploy templates: CUSTOM_A,CUSTOM_C. Errors: deploy steps from all deploy templates "+
		"matching this node's instance traits cannot have the same interface and step. Duplicate deploy steps for deploy.erase_devices_metadata") {
		t.Errorf("duplicate template steps: %d %s", r.status, r.body)
	}
	if len(e.eng.provisions) != before || e.node(uuid).ProvisionState != "available" {
		t.Errorf("a refused deploy started: %d provisions, state %s", len(e.eng.provisions), e.node(uuid).ProvisionState)
	}
}

func TestDeployTemplateAndRunbookSortKeysAreTheStores(t *testing.T) {
	e := newEnv(t)
	for _, c := range []struct {
		fields []string
		keys   map[string]string
	}{
		{sortableNames(templateResource), store.DeployTemplateSortKeys},
		{sortableNames(runbookResource), store.RunbookSortKeys},
	} {
		var want []string
		for k := range c.keys {
			if k != "id" {
				want = append(want, k)
			}
		}
		sort.Strings(want)
		got := append([]string(nil), c.fields...)
		sort.Strings(got)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("sort keys in the field table %v, in the store %v", got, want)
		}
	}
	for _, k := range append(sortableNames(templateResource), "id") {
		if r := e.do("GET", "/v1/deploy_templates?sort_key="+k, vTemplates, nil); r.status != http.StatusOK {
			t.Errorf("sort by %s: %d %s", k, r.status, r.body)
		}
	}
	// The runbooks' keys are checked against the database through the store.
	for _, k := range append(sortableNames(runbookResource), "id") {
		if _, err := e.st.ListRunbooks(context.Background(), store.StepListFilter{SortKey: k, Limit: 10}); err != nil {
			t.Errorf("list runbooks sorted by %s: %v", k, err)
		}
	}
}
