package rules

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
)

func decode(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatalf("decode %s: %v", s, err)
	}
	return m
}

func rule(t *testing.T, s string) Rule {
	t.Helper()
	m := decode(t, s)
	r := Rule{Phase: PhaseMain}
	if p, ok := m["priority"].(float64); ok {
		r.Priority = int(p)
	}
	r.UUID, _ = m["uuid"].(string)
	r.Sensitive, _ = m["sensitive"].(bool)
	for _, c := range asList(m["conditions"]) {
		r.Conditions = append(r.Conditions, c.(map[string]any))
	}
	for _, a := range asList(m["actions"]) {
		r.Actions = append(r.Actions, a.(map[string]any))
	}
	return r
}

// subject is the node, inventory and plugin data of Ironic's own rule tests
// (ironic/tests/unit/common/test_inspection_rule.py: bmc_address
// 192.168.1.100, an x86_64 CPU), with a port and a trait.
func subject(t *testing.T) *Subject {
	return &Subject{
		NodeUUID: "1be26c0b-03f2-4d2e-ae87-c02d7f33c123",
		Node: decode(t, `{"uuid": "1be26c0b-03f2-4d2e-ae87-c02d7f33c123", "driver": "fake-hardware", "name": null,
			"provision_state": "inspecting", "driver_info": {}, "properties": {"capabilities": "boot_mode:uefi,other:value"},
			"extra": {"tags": ["existing"]}, "instance_info": {}, "clean_step": null, "auto_discovered": false}`),
		Traits: []string{"CUSTOM_OLD"},
		Ports: []map[string]any{decode(t, `{"uuid": "f4b3a9c2-6d4e-4f1a-9b7e-3c2d1e0f9a8b", "address": "52:54:00:12:34:56",
			"extra": {}, "local_link_connection": {}, "physical_network": null, "pxe_enabled": true}`)},
		Inventory: decode(t, `{"bmc_address": "192.168.1.100", "bmc_password": "hunter2",
			"cpu": {"count": 4, "architecture": "x86_64", "flags": ["vmx", "aes"]},
			"memory": {"physical_mb": 8192},
			"system_vendor": {"manufacturer": "Dell Inc.", "product_name": "PowerEdge R640"},
			"interfaces": [{"name": "eth0", "mac_address": "52:54:00:12:34:56", "ipv4_address": "192.168.1.20"}]}`),
		PluginData: decode(t, `{"keep": "value", "nested": {"drop": 1}}`),
	}
}

func TestValidateBodyMessages(t *testing.T) {
	cases := map[string]string{
		`{"actions": [{"op": "bogus", "args": {}}]}`: "Schema error: 'bogus' is not one of ['fail', 'log', 'set-attribute', " +
			"'extend-attribute', 'del-attribute', 'set-capability', 'unset-capability', 'add-trait', 'remove-trait', " +
			"'set-plugin-data', 'extend-plugin-data', 'unset-plugin-data', 'set-port-attribute', 'extend-port-attribute', " +
			"'del-port-attribute', 'api-call']",
		`{"conditions": [{"op": "near", "args": {}}], "actions": [{"op": "fail", "args": {"msg": "x"}}]}`: "Schema error: 'near' is not one of " +
			"['eq', 'lt', 'gt', 'is-empty', 'in-net', 'matches', 'contains', 'one-of', 'is-none', 'is-true', 'is-false', " +
			"'!eq', '!lt', '!gt', '!is-empty', '!in-net', '!matches', '!contains', '!one-of', '!is-none', '!is-true', '!is-false']",
		`{"description": "x"}`: "Schema error: 'actions' is a required property",
		`{"actions": []}`:      "Schema error: [] should be non-empty",
		`{"actions": [{"op": "fail", "args": {"msg": "x"}}], "priority": -1}`:                                                    "Schema error: -1 is less than the minimum of 0",
		`{"actions": [{"op": "fail", "args": {"msg": "x"}}], "priority": 10000}`:                                                 "Priority must be between 0 and 9999 for user-defined rules.",
		`{"actions": [{"op": "fail", "args": {"msg": "x"}}], "phase": "early"}`:                                                  "Invalid phase: early. Valid phases are: main",
		`{"actions": [{"op": "fail", "args": {"msg": "x"}}], "color": "red"}`:                                                    "Schema error: Additional properties are not allowed ('color' was unexpected)",
		`{"actions": [{"op": "set-attribute", "args": {"path": "/driver"}}]}`:                                                    "Invalid parameters for action operator set-attribute: missing required argument(s): value",
		`{"actions": [{"op": "fail", "args": "x"}]}`:                                                                             "Schema error: 'x' is not of type 'array', 'object'",
		`{"conditions": [{"op": "eq", "args": {"values": [1], "extra": 2}}], "actions": [{"op": "fail", "args": {"msg": "x"}}]}`: "Invalid parameters for condition operator eq: unexpected argument(s): extra",
		`{"conditions": [{"op": "eq", "args": [1, 1], "multiple": "most"}], "actions": [{"op": "fail", "args": {"msg": "x"}}]}`:  "Schema error: 'most' is not one of ['any', 'all', 'first', 'last']",
		`{"actions": [{"op": "set-attribute", "args": {}}, {"op": "add-trait", "args": {}}]}`: "Multiple validation errors occurred: " +
			"Invalid parameters for action operator set-attribute: missing required argument(s): path, value; " +
			"Invalid parameters for action operator add-trait: missing required argument(s): name",
	}
	for body, want := range cases {
		err := ValidateBody(decode(t, body))
		if err == nil || err.Error() != want {
			t.Errorf("ValidateBody(%s) = %v\n want %s", body, err, want)
		}
	}
	// Ironic's own create sample (api-ref inspection-rule-create-request.json).
	ok := `{"description": "BMC credentials", "phase": "main", "priority": 100, "sensitive": true,
		"conditions": [{"op": "contains", "args": {"value": "{inventory[system_vendor][manufacturer]}", "regex": "(?i)dell"}},
			{"op": "is-true", "args": {"value": "{node.auto_discovered}"}}],
		"actions": [{"op": "set-attribute", "args": {"path": "/driver", "value": "idrac"}},
			{"op": "set-attribute", "args": {"path": "driver_info.redfish_address", "value": "https://{inventory[bmc_address]}"}}]}`
	if err := ValidateBody(decode(t, ok)); err != nil {
		t.Errorf("ValidateBody(api-ref sample) = %v", err)
	}
}

// The api-ref's sample rules, applied: values formatted from the inventory
// are strings, as Python's str.format makes them. So the sample's is-true
// on "{inventory[cpu][count]}" sees "4", which Ironic's is-true takes as
// false: that rule is run here with !is-empty instead, and once as written
// to show it does nothing.
func TestApplyAPIRefSamples(t *testing.T) {
	s := subject(t)
	s.Node["auto_discovered"] = true
	asWritten := rule(t, `{"uuid": "r0", "conditions": [{"op": "is-true", "args": {"value": "{inventory[cpu][count]}"}}],
		"actions": [{"op": "set-attribute", "args": {"path": "/properties/cpus", "value": "{inventory[cpu][count]}"}}]}`)
	if err := Apply(context.Background(), []Rule{asWritten}, s); err != nil || s.Node["properties"].(map[string]any)["cpus"] != nil {
		t.Fatalf("is-true on \"4\": %v, properties %v", err, s.Node["properties"])
	}
	rs := []Rule{
		rule(t, `{"uuid": "r1", "priority": 50, "conditions": [{"op": "!is-empty", "args": {"value": "{inventory[cpu][count]}"}}],
			"actions": [{"op": "set-attribute", "args": {"path": "/properties/cpus", "value": "{inventory[cpu][count]}"}},
				{"op": "set-attribute", "args": {"path": "/properties/memory_mb", "value": "{inventory[memory][physical_mb]}"}},
				{"op": "set-attribute", "args": {"path": "/properties/cpu_arch", "value": "{inventory[cpu][architecture]}"}}]}`),
		rule(t, `{"uuid": "r2", "priority": 100, "sensitive": true,
			"conditions": [{"op": "contains", "args": {"value": "{inventory[system_vendor][manufacturer]}", "regex": "(?i)dell"}},
				{"op": "is-true", "args": {"value": "{node.auto_discovered}"}}],
			"actions": [{"op": "set-attribute", "args": {"path": "/driver", "value": "idrac"}},
				{"op": "set-attribute", "args": {"path": "driver_info.redfish_address", "value": "https://{inventory[bmc_address]}"}},
				{"op": "set-attribute", "args": {"path": "/driver_info/redfish_username", "value": "admin"}}]}`),
	}
	if err := Apply(context.Background(), rs, s); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	props := s.Node["properties"].(map[string]any)
	if props["cpus"] != "4" || props["memory_mb"] != "8192" || props["cpu_arch"] != "x86_64" {
		t.Errorf("properties = %v", props)
	}
	di := s.Node["driver_info"].(map[string]any)
	if s.Node["driver"] != "idrac" || di["redfish_address"] != "https://192.168.1.100" || di["redfish_username"] != "admin" {
		t.Errorf("driver %v, driver_info %v", s.Node["driver"], di)
	}
}

// Ironic's test_operator_with_loop: any, all, first and last over a loop.
func TestConditionLoops(t *testing.T) {
	conds := map[string]string{
		"eq":       `{"op": "eq", "args": {"values": [1, "{item}"]}, "loop": [1, 2, 3, 4]}`,
		"contains": `{"op": "contains", "args": {"value": "{item}", "regex": "4"}, "loop": ["test4", "value5", "string6"]}`,
		"one-of":   `{"op": "one-of", "args": {"value": "{inventory[cpu][architecture]}", "values": ["{item}"]}, "loop": ["x86_64", "aarch64", "ppc64le"]}`,
	}
	want := map[string]bool{"any": true, "all": false, "first": true, "last": false}
	for name, c := range conds {
		for multiple, w := range want {
			cond := decode(t, c)
			cond["multiple"] = multiple
			s := subject(t)
			got, err := checkCondition(cond, scope{node: s.Node, inventory: s.Inventory, pluginData: s.PluginData, mask: true})
			if err != nil || got != w {
				t.Errorf("%s multiple %s = %v, %v; want %v", name, multiple, got, err, w)
			}
		}
	}
}

// Ironic's test_rule_operators, plus inversion, the deprecated list form
// and is-empty on a missing field.
func TestOperators(t *testing.T) {
	cases := []struct {
		cond string
		want bool
	}{
		{`{"op": "eq", "args": {"values": [5, 5]}}`, true},
		{`{"op": "eq", "args": {"values": [5, 10]}}`, false},
		{`{"op": "!eq", "args": {"values": [5, 10]}}`, true},
		{`{"op": "lt", "args": {"values": [5, 10]}}`, true},
		{`{"op": "gt", "args": {"values": [5, 10]}}`, false},
		{`{"op": "eq", "args": {"values": ["{node.driver}", "fake-hardware"]}}`, true},
		{`{"op": "eq", "args": {"values": ["{inventory[cpu][count]}", 4]}}`, false}, // "4" != 4, as in Python
		{`{"op": "is-empty", "args": {"value": ""}}`, true},
		{`{"op": "is-empty", "args": {"value": "{inventory[i.do.not.exist]}"}}`, true},
		{`{"op": "is-empty", "args": {"value": "{inventory[bmc_address]}"}}`, false},
		{`{"op": "in-net", "args": {"address": "192.168.1.5", "subnet": "192.168.1.0/24"}}`, true},
		{`{"op": "in-net", "args": {"address": "{inventory[bmc_address]}", "subnet": "10.0.0.0/8"}}`, false},
		{`{"op": "matches", "args": {"value": "abc123", "regex": "abc\\d+"}}`, true},
		{`{"op": "matches", "args": {"value": "abc123x", "regex": "abc\\d+"}}`, false},
		{`{"op": "matches", "args": {"value": "xabc123", "regex": "abc\\d+"}}`, false},
		{`{"op": "contains", "args": {"value": "test-abc123-end", "regex": "abc\\d+"}}`, true},
		{`{"op": "contains", "args": ["testvalue", "test"]}`, true},
		{`{"op": "one-of", "args": {"value": "b", "values": ["a", "b", "c"]}}`, true},
		{`{"op": "one-of", "args": {"value": "test", "values": []}}`, false},
		{`{"op": "is-none", "args": {"value": null}}`, true},
		{`{"op": "is-true", "args": {"value": "TRUE"}}`, true},
		{`{"op": "is-true", "args": {"value": 0.1}}`, true},
		{`{"op": "is-true", "args": {"value": {}}}`, false},
		{`{"op": "is-false", "args": {"value": null}}`, true},
		{`{"op": "is-false", "args": {"value": "{node.auto_discovered}"}}`, true}, // "False"
		{`{"op": "is-true", "args": {"value": "{inventory[bmc_password]}"}}`, false},
		{`{"op": "eq", "args": {"values": ["{inventory[bmc_password]}", "***"]}}`, true}, // masked
	}
	for _, c := range cases {
		s := subject(t)
		got, err := checkCondition(decode(t, c.cond), scope{node: s.Node, inventory: s.Inventory, pluginData: s.PluginData, mask: true})
		if err != nil || got != c.want {
			t.Errorf("%s = %v, %v; want %v", c.cond, got, err, c.want)
		}
	}
	s := subject(t)
	if _, err := checkCondition(decode(t, `{"op": "lt", "args": {"values": ["a", 1]}}`), scope{node: s.Node}); err == nil ||
		err.Error() != "'<' not supported between instances of 'str' and 'int'" {
		t.Errorf("lt str int: %v", err)
	}
	if _, err := checkCondition(decode(t, `{"op": "eq", "args": {"values": 5}}`), scope{node: s.Node}); err == nil ||
		!strings.HasPrefix(err.Error(), "Inspection rule condition check failed. Reason: Failed to check condition: 'eq' on values: 5: Expected list") {
		t.Errorf("eq on a non-list: %v", err)
	}
}

func TestActions(t *testing.T) {
	s := subject(t)
	r := rule(t, `{"uuid": "r", "actions": [
		{"op": "set-attribute", "args": {"path": "{item[path]}", "value": "{item[value]}"},
			"loop": [{"path": "driver_info/ipmi_username", "value": "cidadmin"},
				{"path": "driver_info/ipmi_address", "value": "{inventory[bmc_address]}"}]},
		{"op": "extend-attribute", "args": {"path": "extra.tags", "value": "new_tag"}},
		{"op": "extend-attribute", "args": {"path": "extra.tags", "value": "new_tag", "unique": true}},
		{"op": "del-attribute", "args": {"path": "extra/tags"}},
		{"op": "set-capability", "args": {"name": "cpu_vt", "value": "true"}},
		{"op": "unset-capability", "args": {"name": "other"}},
		{"op": "add-trait", "args": {"name": "CUSTOM_NEW"}},
		{"op": "add-trait", "args": {"name": "CUSTOM_NEW"}},
		{"op": "remove-trait", "args": {"name": "CUSTOM_OLD"}},
		{"op": "remove-trait", "args": {"name": "CUSTOM_ABSENT"}},
		{"op": "set-plugin-data", "args": {"path": "a.b", "value": "{inventory[cpu][architecture]}"}},
		{"op": "extend-plugin-data", "args": {"path": "list", "value": 1}},
		{"op": "extend-plugin-data", "args": {"path": "list", "value": 1, "unique": true}},
		{"op": "unset-plugin-data", "args": {"path": "nested.drop"}},
		{"op": "set-port-attribute", "args": {"port_id": "f4b3a9c2-6d4e-4f1a-9b7e-3c2d1e0f9a8b", "path": "physical_network", "value": "physnet1"}},
		{"op": "extend-port-attribute", "args": {"port_id": "f4b3a9c2-6d4e-4f1a-9b7e-3c2d1e0f9a8b", "path": "extra/seen", "value": "x"}},
		{"op": "log", "args": {"msg": "vendor {inventory[system_vendor][manufacturer]}", "level": "warning"}}]}`)
	if err := Apply(context.Background(), []Rule{r}, s); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	di := s.Node["driver_info"].(map[string]any)
	if di["ipmi_username"] != "cidadmin" || di["ipmi_address"] != "192.168.1.100" {
		t.Errorf("driver_info = %v", di)
	}
	if _, ok := s.Node["extra"].(map[string]any)["tags"]; ok {
		t.Errorf("extra = %v, want tags deleted", s.Node["extra"])
	}
	if caps := s.Node["properties"].(map[string]any)["capabilities"]; caps != "boot_mode:uefi,cpu_vt:true" {
		t.Errorf("capabilities = %v", caps)
	}
	if !reflect.DeepEqual(s.Traits, []string{"CUSTOM_NEW"}) {
		t.Errorf("traits = %v", s.Traits)
	}
	wantPD := decode(t, `{"keep": "value", "a": {"b": "x86_64"}, "list": [1]}`)
	if !reflect.DeepEqual(s.PluginData, wantPD) {
		t.Errorf("plugin_data = %v, want %v", s.PluginData, wantPD)
	}
	p := s.Ports[0]
	if p["physical_network"] != "physnet1" || !reflect.DeepEqual(p["extra"], map[string]any{"seen": []any{"x"}}) {
		t.Errorf("port = %v", p)
	}
	if len(s.Logs) != 1 || s.Logs[0].Message != "vendor Dell Inc." || s.Logs[0].Level != "warning" {
		t.Errorf("logs = %v", s.Logs)
	}
}

// Rules run highest priority first, so a lower one has the last word; the
// fail action stops everything with Ironic's message; a broken action is
// worded as Ironic's RuleActionExecutionFailure.
func TestOrderAndFailures(t *testing.T) {
	s := subject(t)
	rs := []Rule{
		rule(t, `{"uuid": "low", "priority": 1, "actions": [{"op": "set-attribute", "args": {"path": "/extra/who", "value": "low"}}]}`),
		rule(t, `{"uuid": "high", "priority": 90, "actions": [{"op": "set-attribute", "args": {"path": "/extra/who", "value": "high"}}]}`),
	}
	if err := Apply(context.Background(), rs, s); err != nil {
		t.Fatal(err)
	}
	if who := s.Node["extra"].(map[string]any)["who"]; who != "low" {
		t.Errorf("extra.who = %v, want low (applied last)", who)
	}
	fail := rule(t, `{"uuid": "f", "conditions": [{"op": "eq", "args": {"values": ["{inventory[cpu][architecture]}", "x86_64"]}}],
		"actions": [{"op": "fail", "args": {"msg": "no x86 here"}}]}`)
	err := Apply(context.Background(), []Rule{fail}, subject(t))
	if err == nil || err.Error() != "Failed to inspect hardware. Reason: no x86 here" {
		t.Errorf("fail action: %v", err)
	}
	ro := rule(t, `{"uuid": "ro", "actions": [{"op": "set-attribute", "args": {"path": "provision_state", "value": "active"}}]}`)
	err = Apply(context.Background(), []Rule{ro}, subject(t))
	if err == nil || !strings.HasPrefix(err.Error(), "Inspection rule action execution failed. Reason: Failed to set attribute provision_state with value active:") {
		t.Errorf("read-only field: %v", err)
	}
	lt := rule(t, `{"uuid": "3f0c4fd4-4c4a-4a59-8f5e-8d6a6b0c7e11", "conditions": [{"op": "lt", "args": {"values": ["a", 1]}}], "actions": [{"op": "fail", "args": {"msg": "x"}}]}`)
	err = Apply(context.Background(), []Rule{lt}, subject(t))
	if err == nil || err.Error() != "Failed to apply rule 3f0c4fd4-4c4a-4a59-8f5e-8d6a6b0c7e11 to node 1be26c0b-03f2-4d2e-ae87-c02d7f33c123: '<' not supported between instances of 'str' and 'int'" {
		t.Errorf("condition error: %v", err)
	}
	port := rule(t, `{"uuid": "p", "actions": [{"op": "set-port-attribute", "args": {"port_id": "nope", "path": "extra/x", "value": 1}}]}`)
	if err := Apply(context.Background(), []Rule{port}, subject(t)); err == nil || !strings.HasSuffix(err.Error(), "Port nope could not be found.") {
		t.Errorf("unknown port: %v", err)
	}
}

// The api-call action GETs the formatted URL, retrying 503s; a 404 fails
// the rule.
func TestAPICall(t *testing.T) {
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := calls.Add(1)
		switch {
		case r.URL.Path == "/missing":
			w.WriteHeader(http.StatusNotFound)
		case n == 1:
			w.WriteHeader(http.StatusServiceUnavailable)
		case r.URL.Path != "/hook/192.168.1.100" || r.Header.Get("X-Rule") != "yes":
			w.WriteHeader(http.StatusBadRequest)
		}
	}))
	defer srv.Close()
	s := subject(t)
	s.Get = HTTPGet(srv.Client())
	ok := rule(t, `{"uuid": "a", "actions": [{"op": "api-call", "args": {"url": "`+srv.URL+`/hook/{inventory[bmc_address]}",
		"headers": {"X-Rule": "yes"}, "backoff_factor": 0.01}}]}`)
	if err := Apply(context.Background(), []Rule{ok}, s); err != nil || calls.Load() != 2 {
		t.Errorf("api-call: %v after %d calls", err, calls.Load())
	}
	bad := rule(t, `{"uuid": "b", "actions": [{"op": "api-call", "args": {"url": "`+srv.URL+`/missing", "retries": 0}}]}`)
	if err := Apply(context.Background(), []Rule{bad}, s); err == nil || !strings.Contains(err.Error(), "404 Not Found") {
		t.Errorf("api-call 404: %v", err)
	}
}
