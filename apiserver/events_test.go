package apiserver

import (
	"context"
	"errors"
	"strings"
	"testing"
)

// POST /v1/events records a valid network event in the history of the
// node whose port has the event's MAC address, or whose UUID Neutron bound
// the port to, answers 204 for an event about no node, and writes nothing
// for a body it refuses. Ironic's own texts for the refusals are compared
// with Ironic's answers in tests/ironic_oracle_test.go.
func TestNetworkEventsGoToTheNodesHistory(t *testing.T) {
	e := newEnv(t)
	byMAC := e.createNode(map[string]any{"driver": "fake-hardware", "name": "ev-mac"})["uuid"].(string)
	byHost := e.createNode(map[string]any{"driver": "fake-hardware", "name": "ev-host"})["uuid"].(string)
	if r := e.do("POST", "/v1/ports", "1.78", map[string]any{"address": "52:54:00:ee:00:01", "node_uuid": byMAC}); r.status != 201 {
		t.Fatalf("create port: %d %s", r.status, r.body)
	}
	event := func(name, mac, host string) map[string]any {
		ev := map[string]any{"event": name, "port_id": "7a1c3f1e-6a3b-4b2a-9d6c-0e5f8a1b2c3d", "mac_address": mac, "status": "ACTIVE",
			"device_id": "3b2c1d0e-6a3b-4b2a-9d6c-0e5f8a1b2c3d", "binding:vnic_type": "baremetal"}
		if host != "" {
			ev["binding:host_id"] = host
		}
		return map[string]any{"events": []any{ev}}
	}
	history := func(node string) []string {
		t.Helper()
		evs, err := e.st.ListHistory(context.Background(), node)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, h := range evs {
			if h.EventType == "network" {
				out = append(out, h.Event)
			}
		}
		return out
	}

	if r := e.do("POST", "/v1/events", "1.54", event("network.bind_port", "52:54:00:EE:00:01", "")); r.status != 204 || len(r.body) != 0 {
		t.Fatalf("bind_port: %d %s, want 204 and no body", r.status, r.body)
	}
	if h := history(byMAC); len(h) != 1 || !strings.Contains(h[0], "network.bind_port") || !strings.Contains(h[0], "52:54:00:ee:00:01") ||
		!strings.Contains(h[0], "status ACTIVE") {
		t.Errorf("history of the port's node: %q, want the bind_port event", h)
	}

	if r := e.do("POST", "/v1/events", "1.93", event("network.unbind_port", "52:54:00:ee:00:99", byHost)); r.status != 204 {
		t.Fatalf("unbind_port: %d %s", r.status, r.body)
	}
	if h := history(byHost); len(h) != 1 || !strings.Contains(h[0], "network.unbind_port") {
		t.Errorf("history of the bound host: %q, want the unbind_port event", h)
	}

	// About no node of ours: accepted and ignored, as Ironic ignores all.
	if r := e.do("POST", "/v1/events", "1.54", event("network.delete_port", "52:54:00:ee:00:98", "")); r.status != 204 {
		t.Errorf("event about no node: %d %s, want 204", r.status, r.body)
	}

	// Refused bodies and versions: nothing recorded. A good body below
	// 1.54 is Ironic's 404; a bad one is its 400 at any version.
	refused := []struct {
		ver    string
		body   any
		status int
		msg    string
	}{
		{"1.53", event("network.bind_port", "52:54:00:ee:00:01", ""), 404, "Resource could not be found."},
		{"1.53", map[string]any{}, 400, "Schema error for evts: 'events' is a required property"},
		{"1.54", `{"events": [`, 400, ""},
		{"1.54", map[string]any{"events": []any{
			event("network.bind_port", "52:54:00:ee:00:01", "")["events"].([]any)[0],
			map[string]any{"event": "network.bind_port", "port_id": "x", "mac_address": "52:54:00:ee:00:01", "status": "DOWN"},
		}}, 400, "Expected UUID for port_id: x"},
	}
	for _, c := range refused {
		r := e.do("POST", "/v1/events", c.ver, c.body)
		if r.status != c.status {
			t.Errorf("%s %v: %d %s, want %d", c.ver, c.body, r.status, r.body, c.status)
			continue
		}
		if c.msg != "" && r.faultstring(t) != c.msg {
			t.Errorf("%s %v: %q, want %q", c.ver, c.body, r.faultstring(t), c.msg)
		}
	}
	if h := history(byMAC); len(h) != 1 {
		t.Errorf("history after refused requests: %q, want only the first event (the batch with a bad event writes none)", h)
	}
	if r := e.do("GET", "/v1/events", "1.54", nil); r.status != 405 {
		t.Errorf("GET /v1/events: %d, want 405", r.status)
	}
	// Below 1.54 the path is unknown to every method, as in Ironic.
	if r := e.do("GET", "/v1/events", "1.53", nil); r.status != 404 || r.faultstring(t) != "Resource could not be found." {
		t.Errorf("GET /v1/events at 1.53: %d %s, want 404", r.status, r.body)
	}
}

// The event schema's errors are jsonschema's best match, as Ironic words
// them: the least deep error wins, the first of equals.
func TestCheckEventsBestMatch(t *testing.T) {
	good := map[string]any{"event": "network.bind_port", "port_id": "7a1c3f1e-6a3b-4b2a-9d6c-0e5f8a1b2c3d", "mac_address": "52:54:00:00:00:01", "status": "x"}
	with := func(k string, v any) map[string]any {
		m := map[string]any{}
		for kk, vv := range good {
			m[kk] = vv
		}
		if v == nil {
			delete(m, k)
		} else {
			m[k] = v
		}
		return m
	}
	cases := []struct {
		name string
		body any
		want string
	}{
		{"not an object", []any{}, "Schema error for evts: [] is not of type 'object'"},
		{"extra key beats a short list", map[string]any{"events": []any{}, "x": 1}, "Schema error for evts: Additional properties are not allowed ('x' was unexpected)"},
		{"empty list", map[string]any{"events": []any{}}, "Schema error for evts: [] is too short"},
		{"missing name of a later event beats a bad name of an earlier one",
			map[string]any{"events": []any{map[string]any{"event": "bad"}, map[string]any{}}}, "Schema error for evts: 'event' is a required property"},
		{"type before enum", map[string]any{"events": []any{map[string]any{"event": 5}}}, "Schema error for evts: 5 is not of type 'string'"},
		{"unknown event", map[string]any{"events": []any{map[string]any{"event": "network.foo"}}},
			"Schema error for evts: 'network.foo' is not one of ['network.bind_port', 'network.unbind_port', 'network.delete_port']"},
		{"required before a type error", map[string]any{"events": []any{with("status", nil)}}, "Schema error for evts: 'status' is a required property"},
		{"nullable type", map[string]any{"events": []any{with("binding:vnic_type", 5)}}, "Schema error for evts: 5 is not of type 'string', 'null'"},
		{"events in order: the first one's UUID before the second one's schema", map[string]any{"events": []any{with("port_id", "x"), with("y", 1)}}, "Expected UUID for port_id: x"},
		{"dashes in a MAC", map[string]any{"events": []any{with("mac_address", "52-54-00-00-00-01")}}, "Expected valid MAC address for mac_address: 52-54-00-00-00-01"},
		{"device_id", map[string]any{"events": []any{with("device_id", "abc")}}, "Expected UUID for device_id: abc"},
	}
	for _, c := range cases {
		_, err := checkEvents(normalizeNumbers(c.body))
		var ae *apiError
		if !errors.As(err, &ae) || ae.status != 400 || ae.msg != c.want {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
	nulls := with("device_id", nil)
	nulls["device_id"], nulls["binding:host_id"], nulls["binding:vnic_type"] = nil, nil, nil
	if evs, err := checkEvents(map[string]any{"events": []any{nulls, with("mac_address", "52:54:00:AA:BB:CC")}}); err != nil || len(evs) != 2 || evs[1].MAC != "52:54:00:aa:bb:cc" {
		t.Errorf("good events: %v %v", evs, err)
	}
}

// PATCH ?reset_interfaces=true (1.45) gives the new driver's defaults to
// every interface the patch does not set, where a driver change alone
// keeps those the new driver supports; refused without a driver change,
// below 1.45, and with a value that is not a boolean.
func TestPatchResetInterfaces(t *testing.T) {
	e := newEnv(t)
	patch := func(node, query, ver string, ops ...map[string]any) resp {
		t.Helper()
		return e.do("PATCH", "/v1/nodes/"+node+query, ver, ops)
	}
	toIPMI := map[string]any{"op": "replace", "path": "/driver", "value": "ipmi"}
	flatNode := func(name string) string {
		return e.createNode(map[string]any{"driver": "fake-hardware", "name": name, "network_interface": "flat", "deploy_interface": "fake"})["uuid"].(string)
	}

	kept := flatNode("ri-kept")
	if r := patch(kept, "", "1.45", toIPMI); r.status != 200 || r.json(t)["network_interface"] != "flat" {
		t.Fatalf("driver change alone: %d %s, want network_interface flat kept", r.status, r.body)
	}

	reset := flatNode("ri-reset")
	r := patch(reset, "?reset_interfaces=True", "1.45", toIPMI, map[string]any{"op": "replace", "path": "/deploy_interface", "value": "ramdisk"})
	if r.status != 200 {
		t.Fatalf("reset: %d %s", r.status, r.body)
	}
	n := r.json(t)
	if n["network_interface"] != "noop" || n["deploy_interface"] != "ramdisk" || n["power_interface"] != "ipmitool" || n["boot_interface"] != "ipxe" {
		t.Errorf("after reset: network %v deploy %v power %v boot %v, want ipmi's defaults but the patched deploy ramdisk",
			n["network_interface"], n["deploy_interface"], n["power_interface"], n["boot_interface"])
	}

	other := flatNode("ri-refused")
	extra := map[string]any{"op": "add", "path": "/extra/k", "value": "v"}
	refused := []struct {
		query, ver string
		ops        []map[string]any
		status     int
		msg        string
	}{
		{"?reset_interfaces=true", "1.44", []map[string]any{toIPMI}, 406, "Request not acceptable."},
		{"?reset_interfaces=bogus", "1.44", []map[string]any{toIPMI}, 400,
			"Invalid reset_interfaces: Unrecognized value 'bogus', acceptable values are: '0', '1', 'f', 'false', 'n', 'no', 'off', 'on', 't', 'true', 'y', 'yes'"},
		{"?reset_interfaces=true", "1.45", []map[string]any{extra}, 400, "The reset_interfaces parameter can only be used when changing the node's driver."},
		{"?reset_interfaces=true", "1.45", []map[string]any{{"op": "remove", "path": "/driver"}}, 400,
			"The reset_interfaces parameter can only be used when changing the node's driver."},
	}
	for _, c := range refused {
		r := patch(other, c.query, c.ver, c.ops...)
		if r.status != c.status || r.faultstring(t) != c.msg {
			t.Errorf("%s at %s: %d %q, want %d %q", c.query, c.ver, r.status, r.faultstring(t), c.status, c.msg)
		}
	}
	if n := e.node(other); n.Driver != "fake-hardware" || n.NetworkInterface != "flat" || len(n.Extra) != 0 {
		t.Errorf("refused patches wrote: driver %s network %s extra %v", n.Driver, n.NetworkInterface, n.Extra)
	}
	if r := patch(other, "?reset_interfaces=false", "1.45", extra); r.status != 200 {
		t.Errorf("reset_interfaces=false without a driver change: %d %s, want 200", r.status, r.body)
	}
}

// ?fields= on GET /v1/drivers and /v1/drivers/{name} (1.77): the named
// fields and the links, a field the body lacks refused, 406 below 1.77.
func TestDriverFields(t *testing.T) {
	e := newEnv(t)
	list := e.do("GET", "/v1/drivers?fields=NAME,name", "1.77", nil)
	if list.status != 200 {
		t.Fatalf("list: %d %s", list.status, list.body)
	}
	for _, d := range list.json(t)["drivers"].([]any) {
		if keys := sortedKeys(d.(map[string]any)); strings.Join(keys, ",") != "links,name" {
			t.Errorf("listed driver keys %v, want links,name", keys)
		}
	}
	show := e.do("GET", "/v1/drivers/ipmi?fields=default_boot_interface,enabled_boot_interfaces", "1.77", nil).json(t)
	if keys := sortedKeys(show); strings.Join(keys, ",") != "default_boot_interface,enabled_boot_interfaces,links" || show["default_boot_interface"] != "ipxe" {
		t.Errorf("shown driver %v", show)
	}
	refused := []struct {
		path, ver string
		status    int
		msg       string
	}{
		{"/v1/drivers?fields=name", "1.76", 406, "Request not acceptable."},
		{"/v1/drivers/ipmi?fields=name", "1.76", 406, "Request not acceptable."},
		{"/v1/drivers/nope?fields=name", "1.76", 406, "Request not acceptable."},
		{"/v1/drivers?fields=default_boot_interface", "1.77", 400, `Field(s) "default_boot_interface" are not valid`},
		{"/v1/drivers/ipmi?fields=bogus", "1.77", 400, `Field(s) "bogus" are not valid`},
		{"/v1/drivers?fields=name&detail=true", "1.20", 400, "Can not specify ?detail=True and fields in the same request."},
		{"/v1/drivers?detail=true", "1.29", 406, "Request not acceptable. The minimal required API version should be 1.30"},
		{"/v1/drivers?type=bogus", "1.77", 400, `"type" filter must be one of "classic" or "dynamic", if specified.`},
	}
	for _, c := range refused {
		r := e.do("GET", c.path, c.ver, nil)
		if r.status != c.status || r.faultstring(t) != c.msg {
			t.Errorf("%s at %s: %d %q, want %d %q", c.path, c.ver, r.status, r.faultstring(t), c.status, c.msg)
		}
	}
	if d := e.do("GET", "/v1/drivers?type=classic", "1.77", nil).json(t)["drivers"].([]any); len(d) != 0 {
		t.Errorf("classic drivers: %v, want none", d)
	}
}
