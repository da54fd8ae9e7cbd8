package apiserver

import (
	"net/http"
	"testing"
)

// TestPortCreateTakesNodeIdent: API 1.94 (Ironic's PORT_SCHEMA) creates a
// port on a node named by node_ident, its name or UUID; node_uuid, now
// deprecated, still works; one of the two and only one, with Ironic's
// jsonschema messages; node_ident below 1.94 is 406.
func TestPortCreateTakesNodeIdent(t *testing.T) {
	serveUpTo(t, v94PortNodeIdent)
	e := newEnv(t)
	n := e.createNode(map[string]any{"driver": "fake-hardware", "name": "ns~host-0"})
	uuid := n["uuid"].(string)

	for i, ident := range []string{"ns~host-0", uuid} {
		mac := []string{"52:54:00:94:00:01", "52:54:00:94:00:02"}[i]
		r := e.do("POST", "/v1/ports", "1.94", map[string]any{"address": mac, "node_ident": ident})
		if r.status != http.StatusCreated {
			t.Fatalf("node_ident %q: %d %s", ident, r.status, r.body)
		}
		if got := r.json(t)["node_uuid"]; got != uuid {
			t.Fatalf("node_ident %q: port node_uuid %v, want %s", ident, got, uuid)
		}
	}
	if r := e.do("POST", "/v1/ports", "1.94", map[string]any{"address": "52:54:00:94:00:03", "node_uuid": uuid}); r.status != http.StatusCreated {
		t.Fatalf("node_uuid at 1.94: %d %s", r.status, r.body)
	}

	for _, tc := range []struct {
		version string
		body    map[string]any
		status  int
		fault   string
	}{
		{"1.94", map[string]any{"address": "52:54:00:94:00:09"}, 400,
			"Schema error for port: {'address': '52:54:00:94:00:09'} is not valid under any of the given schemas. Possible root cause: 'node_ident' is a required property"},
		{"1.94", map[string]any{"address": "52:54:00:94:00:09", "node_ident": "ns~host-0", "node_uuid": uuid}, 400,
			"Schema error for port: {'address': '52:54:00:94:00:09', 'node_ident': 'ns~host-0', 'node_uuid': '" + uuid + "'} is valid under each of {'required': ['node_uuid']}, {'required': ['node_ident']}"},
		{"1.94", map[string]any{"node_ident": "ns~host-0"}, 400, "Schema error for port: 'address' is a required property"},
		{"1.94", map[string]any{"address": "52:54:00:94:00:09", "node_ident": "ns~host-0", "bogus": 1}, 400,
			"Schema error for port: Additional properties are not allowed ('bogus' was unexpected)"},
		{"1.94", map[string]any{"address": "52:54:00:94:00:09", "node_ident": 5}, 400, "Schema error for port: 5 is not of type 'string'"},
		{"1.94", map[string]any{"address": "52:54:00:94:00:09", "node_ident": "no-such-node"}, 400, "Node no-such-node could not be found."},
		{"1.94", map[string]any{"address": "zz", "node_ident": "ns~host-0"}, 400, "Expected a MAC address but received zz."},
		{"1.93", map[string]any{"address": "52:54:00:94:00:09", "node_ident": "ns~host-0"}, 406, ""},
		{"1.93", map[string]any{"address": "52:54:00:94:00:09"}, 400, "Schema error for port: 'node_uuid' is a required property"},
	} {
		r := e.do("POST", "/v1/ports", tc.version, tc.body)
		if r.status != tc.status || (tc.fault != "" && r.faultstring(t) != tc.fault) {
			t.Errorf("%s %v: %d %s, want %d %q", tc.version, tc.body, r.status, r.body, tc.status, tc.fault)
		}
	}
	// Nothing half-written: only the three good ports exist.
	r := e.do("GET", "/v1/ports?node="+uuid, "1.94", nil)
	if ports := r.json(t)["ports"].([]any); len(ports) != 3 {
		t.Fatalf("ports of the node: %s", r.body)
	}
}
