package apiserver

import (
	"context"
	"strings"
	"testing"
)

// TestInspectionRulesAPI: Ironic's /v1/inspection_rules (1.96) on real
// PostgreSQL: gates below 1.96, create with Ironic's validation (400 and
// nothing stored), sensitive rules hidden, ?fields=, ?detail=, PATCH, and
// both DELETEs.
func TestInspectionRulesAPI(t *testing.T) {
	serveUpTo(t, v96InspectionRules)
	e := newEnv(t)
	const v = "1.96"

	if r := e.do("GET", "/v1/inspection_rules", "1.95", nil); r.status != 404 {
		t.Errorf("GET at 1.95: %d %s, want 404", r.status, r.body)
	}
	if r := e.do("POST", "/v1/inspection_rules", "1.95", map[string]any{}); r.status != 405 ||
		r.faultstring(t) != "The API version does not allow inspection rules" {
		t.Errorf("POST at 1.95: %d %s, want 405", r.status, r.body)
	}

	bad := map[string]string{
		`{"actions": [{"op": "reboot", "args": {}}]}`: "Schema error: 'reboot' is not one of ['fail', 'log', 'set-attribute', 'extend-attribute', " +
			"'del-attribute', 'set-capability', 'unset-capability', 'add-trait', 'remove-trait', 'set-plugin-data', 'extend-plugin-data', " +
			"'unset-plugin-data', 'set-port-attribute', 'extend-port-attribute', 'del-port-attribute', 'api-call']",
		`{"conditions": [{"op": "near", "args": {}}], "actions": [{"op": "fail", "args": {"msg": "x"}}]}`: "Schema error: 'near' is not one of ['eq', 'lt', 'gt', " +
			"'is-empty', 'in-net', 'matches', 'contains', 'one-of', 'is-none', 'is-true', 'is-false', '!eq', '!lt', '!gt', '!is-empty', '!in-net', " +
			"'!matches', '!contains', '!one-of', '!is-none', '!is-true', '!is-false']",
		`{"actions": [{"op": "fail", "args": {"msg": "x"}}], "priority": 10000}`: "Priority must be between 0 and 9999 for user-defined rules.",
		`{"actions": [{"op": "fail", "args": {"msg": "x"}}], "priority": -5}`:    "Schema error: -5 is less than the minimum of 0",
		`{"actions": [{"op": "add-trait", "args": {"trait": "CUSTOM_X"}}]}`:      "Invalid parameters for action operator add-trait: missing required argument(s): name; unexpected argument(s): trait",
		`{"actions": [{"op": "fail", "args": {"msg": "x"}}], "uuid": "nope"}`:    "Expected a UUID but received nope.",
	}
	for body, want := range bad {
		r := e.do("POST", "/v1/inspection_rules", v, []byte(body))
		if r.status != 400 || r.faultstring(t) != want {
			t.Errorf("POST %s: %d %s\n want 400 %q", body, r.status, r.body, want)
		}
	}
	if l, _ := e.st.InspectionRulesOfPhase(context.Background(), "main"); len(l) != 0 {
		t.Fatalf("refused rules were stored: %v", l)
	}

	// Ironic's API reference create sample: sensitive, so its conditions
	// and actions are never shown.
	sample := `{"description": "BMC credentials", "phase": "main", "priority": 100, "sensitive": true,
		"conditions": [{"op": "contains", "args": {"value": "{inventory[system_vendor][manufacturer]}", "regex": "(?i)dell"}},
			{"op": "is-true", "args": {"value": "{node.auto_discovered}"}}],
		"actions": [{"op": "set-attribute", "args": {"path": "/driver", "value": "idrac"}},
			{"op": "set-attribute", "args": {"path": "/driver_info/redfish_password", "value": "password"}}]}`
	r := e.do("POST", "/v1/inspection_rules", v, []byte(sample))
	created := r.json(t)
	secret, _ := created["uuid"].(string)
	if r.status != 201 || !isUUID(secret) || created["conditions"] != nil || created["actions"] != nil || created["priority"] != float64(100) ||
		!strings.HasSuffix(r.header.Get("Location"), "/v1/inspection_rules/"+secret) {
		t.Fatalf("create the sample: %d %s (Location %s)", r.status, r.body, r.header.Get("Location"))
	}
	plainUUID := "75a6c1f7-2de0-47b3-9c54-8e6ef3a27bcd"
	plain := `{"uuid": "` + plainUUID + `", "description": "Set properties on discovered data", "priority": 50,
		"conditions": [{"op": "!is-empty", "args": {"value": "{item}"}, "loop": ["a"], "extra": 1}, {"op": "is-true", "args": ["{inventory[cpu][count]}"]}],
		"actions": [{"op": "set-attribute", "args": {"path": "/properties/cpus", "value": "{inventory[cpu][count]}"}, "loop": []}]}`
	if r := e.do("POST", "/v1/inspection_rules", v, []byte(plain)); r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	if r := e.do("POST", "/v1/inspection_rules", v, []byte(plain)); r.status != 409 || r.faultstring(t) != "A rule with UUID "+plainUUID+" already exists." {
		t.Errorf("second create with one UUID: %d %s", r.status, r.body)
	}

	got := e.do("GET", "/v1/inspection_rules/"+plainUUID, v, nil).json(t)
	conds, _ := got["conditions"].([]any)
	if len(conds) != 2 || got["phase"] != "main" || got["sensitive"] != false || got["updated_at"] != nil {
		t.Fatalf("GET one: %v", got)
	}
	c0, c1 := conds[0].(map[string]any), conds[1].(map[string]any)
	if c0["multiple"] != "any" || c0["extra"] != nil || c1["loop"] != nil || c1["multiple"] != nil {
		t.Errorf("conditions as Ironic shows them: %v", conds)
	}
	if a := got["actions"].([]any)[0].(map[string]any); a["loop"] != nil {
		t.Errorf("an empty loop is not shown: %v", a)
	}

	list := e.do("GET", "/v1/inspection_rules", v, nil).json(t)["inspection_rules"].([]any)
	if len(list) != 2 {
		t.Fatalf("list: %v", list)
	}
	for _, it := range list {
		m := it.(map[string]any)
		if _, ok := m["conditions"]; ok || m["links"] == nil || m["priority"] == nil || len(m) != 5 {
			t.Errorf("list without detail shows uuid, priority, phase, description, links: %v", m)
		}
	}
	detail := e.do("GET", "/v1/inspection_rules?detail=true&sort_key=priority&sort_dir=desc", v, nil).json(t)["inspection_rules"].([]any)
	if d0 := detail[0].(map[string]any); d0["uuid"] != secret || d0["actions"] != nil || detail[1].(map[string]any)["actions"] == nil {
		t.Errorf("detail by priority: %v", detail)
	}
	fields := e.do("GET", "/v1/inspection_rules/"+plainUUID+"?fields=uuid,sensitive", v, nil).json(t)
	if len(fields) != 3 || fields["sensitive"] != false {
		t.Errorf("?fields=uuid,sensitive: %v", fields)
	}
	if r := e.do("GET", "/v1/inspection_rules?sort_key=actions", v, nil); r.status != 400 {
		t.Errorf("sort by actions: %d %s", r.status, r.body)
	}
	if l := e.do("GET", "/v1/inspection_rules?phase=early", v, nil).json(t)["inspection_rules"].([]any); len(l) != 0 {
		t.Errorf("?phase=early: %v", l)
	}

	// PATCH: validated as a whole new body, nothing half-written.
	r = e.do("PATCH", "/v1/inspection_rules/"+plainUUID, v, []map[string]any{
		{"op": "replace", "path": "/description", "value": "cpus"}, {"op": "add", "path": "/actions/1", "value": map[string]any{"op": "explode", "args": map[string]any{}}}})
	if r.status != 400 || !strings.HasPrefix(r.faultstring(t), "Schema error: 'explode' is not one of") {
		t.Errorf("PATCH in an unknown action: %d %s", r.status, r.body)
	}
	r = e.do("PATCH", "/v1/inspection_rules/"+plainUUID, v, []map[string]any{
		{"op": "replace", "path": "/description", "value": "cpus"}, {"op": "replace", "path": "/priority", "value": 7}})
	if p := r.json(t); r.status != 200 || p["description"] != "cpus" || p["priority"] != float64(7) || p["updated_at"] == nil {
		t.Errorf("PATCH: %d %s", r.status, r.body)
	}
	if r := e.do("PATCH", "/v1/inspection_rules/"+secret, v, []map[string]any{{"op": "replace", "path": "/sensitive", "value": false}}); r.status != 400 ||
		r.faultstring(t) != "Inspection rules cannot have the sensitive flag unset." {
		t.Errorf("unset sensitive: %d %s", r.status, r.body)
	}
	if r := e.do("PATCH", "/v1/inspection_rules/"+secret, v, []map[string]any{{"op": "remove", "path": "/sensitive"}}); r.status != 400 {
		t.Errorf("remove sensitive: %d %s", r.status, r.body)
	}
	if got := e.do("GET", "/v1/inspection_rules/"+secret, v, nil).json(t); got["sensitive"] != true || got["actions"] != nil {
		t.Errorf("the sensitive rule after refused patches: %v", got)
	}
	if r := e.do("PATCH", "/v1/inspection_rules/"+plainUUID, v, []map[string]any{{"op": "replace", "path": "/uuid", "value": secret}}); r.status != 400 {
		t.Errorf("PATCH uuid: %d %s", r.status, r.body)
	}

	if r := e.do("DELETE", "/v1/inspection_rules/"+plainUUID, v, nil); r.status != 204 {
		t.Errorf("DELETE: %d %s", r.status, r.body)
	}
	if r := e.do("GET", "/v1/inspection_rules/"+plainUUID, v, nil); r.status != 404 || r.faultstring(t) != "Rule "+plainUUID+" could not be found." {
		t.Errorf("GET a deleted rule: %d %s", r.status, r.body)
	}
	if r := e.do("DELETE", "/v1/inspection_rules", v, nil); r.status != 204 {
		t.Errorf("DELETE all: %d %s", r.status, r.body)
	}
	if l := e.do("GET", "/v1/inspection_rules", v, nil).json(t)["inspection_rules"].([]any); len(l) != 0 {
		t.Errorf("after DELETE all: %v", l)
	}
}
