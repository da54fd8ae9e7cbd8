package apiserver

import (
	"encoding/json"
	"net/http"
	"reflect"
	"testing"
)

// staticNetworkData is a node's network_data for a network without DHCP:
// a static IPv4 and IPv6 address on its NIC, default routes, DNS.
var staticNetworkData = map[string]any{
	"links": []any{map[string]any{"id": "nic0", "type": "phy", "ethernet_mac_address": "52:54:00:12:34:56", "mtu": 1500}},
	"networks": []any{
		map[string]any{"id": "v4", "type": "ipv4", "link": "nic0", "network_id": "prov", "ip_address": "192.0.2.10", "netmask": "255.255.255.0",
			"routes": []any{map[string]any{"network": "0.0.0.0", "netmask": "0.0.0.0", "gateway": "192.0.2.1"}}},
		map[string]any{"id": "v6", "type": "ipv6", "link": "nic0", "network_id": "prov", "ip_address": "2001:db8::10", "netmask": "ffff:ffff:ffff:ffff::"},
	},
	"services": []any{map[string]any{"type": "dns", "address": "192.0.2.53"}},
}

// TestNodeNetworkDataIsChecked: network_data that Ironic's schema accepts
// is stored and shown as sent, on create and on PATCH; what it refuses is
// refused with 400 and Ironic's message, in each of the three places
// Ironic checks it (a create, a PATCH of /network_data, a PATCH below
// it), and the node keeps its network_data. The messages are those the
// jsonschema library of Ironic gives with its schema; its "root cause"
// heuristic (best_match) picks odd ones, Ironic's all the same.
func TestNodeNetworkDataIsChecked(t *testing.T) {
	e := newEnv(t)
	const v = "1.78"
	id := e.createNode(map[string]any{"driver": "fake-hardware", "network_data": staticNetworkData})["uuid"].(string)
	if got := e.node(id).NetworkData; !reflect.DeepEqual(jsonRoundTrip(t, got), jsonRoundTrip(t, staticNetworkData)) {
		t.Fatalf("stored network_data %v, want %v", got, staticNetworkData)
	}
	shown := e.do("GET", "/v1/nodes/"+id+"?fields=network_data", v, nil).json(t)["network_data"]
	if !reflect.DeepEqual(shown, jsonRoundTrip(t, staticNetworkData)) {
		t.Errorf("GET shows network_data %v", shown)
	}

	badMAC := map[string]any{"links": []any{map[string]any{"id": "nic0", "type": "phy", "ethernet_mac_address": "52:54:00:12:34"}},
		"networks": []any{}, "services": []any{}}
	cases := []struct {
		name, method, path string
		body               any
		want               string
	}{
		{"create without services", "POST", "/v1/nodes", map[string]any{"driver": "fake-hardware",
			"network_data": map[string]any{"links": []any{}, "networks": []any{}}},
			"Schema error for node: {'links': [], 'networks': []} is not valid under any of the given schemas. " +
				"Possible root cause: {'links': [], 'networks': []} is not of type 'null'"},
		{"create with a short MAC", "POST", "/v1/nodes", map[string]any{"driver": "fake-hardware", "network_data": badMAC},
			"Schema error for node: {'ethernet_mac_address': '52:54:00:12:34', 'id': 'nic0', 'type': 'phy'} is not valid under any of the given schemas. " +
				"Possible root cause: 'bond_mode' is a required property"},
		{"PATCH /network_data with a short MAC", "PATCH", "/v1/nodes/" + id,
			[]any{map[string]any{"op": "replace", "path": "/network_data", "value": badMAC}},
			"Invalid network_data: {'ethernet_mac_address': '52:54:00:12:34', 'id': 'nic0', 'type': 'phy'} is not valid under any of the given schemas "},
		{"PATCH /network_data {}", "PATCH", "/v1/nodes/" + id,
			[]any{map[string]any{"op": "add", "path": "/network_data", "value": map[string]any{}}},
			"Invalid network_data: 'links' is a required property "},
		{"PATCH a route without gateway", "PATCH", "/v1/nodes/" + id,
			[]any{map[string]any{"op": "replace", "path": "/network_data/networks/0/routes/0", "value": map[string]any{"network": "0.0.0.0", "netmask": "0.0.0.0"}}},
			"Schema error for patch: {'id': 'v4', 'ip_address': '192.0.2.10', 'link': 'nic0', 'netmask': '255.255.255.0', 'network_id': 'prov', " +
				"'routes': [{'netmask': '0.0.0.0', 'network': '0.0.0.0'}], 'type': 'ipv4'} is not valid under any of the given schemas. " +
				"Possible root cause: 'ipv4' is not one of ['ipv6', 'ipv6_dhcp', 'ipv6_slaac']"},
		{"PATCH an MTU of 0", "PATCH", "/v1/nodes/" + id,
			[]any{map[string]any{"op": "replace", "path": "/network_data/links/0/mtu", "value": 0}},
			"Schema error for patch: {'ethernet_mac_address': '52:54:00:12:34:56', 'id': 'nic0', 'mtu': 0, 'type': 'phy'} is not valid under any of the given schemas. " +
				"Possible root cause: 'bond_mode' is a required property"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := e.do(c.method, c.path, v, c.body)
			if r.status != http.StatusBadRequest || r.faultstring(t) != c.want {
				t.Errorf("%d %s\nwant 400 %q", r.status, r.body, c.want)
			}
		})
	}
	if got := e.node(id).NetworkData; !reflect.DeepEqual(jsonRoundTrip(t, got), jsonRoundTrip(t, staticNetworkData)) {
		t.Errorf("a refused PATCH changed network_data to %v", got)
	}

	// PATCH sets valid network_data and removes it.
	v6only := map[string]any{"links": []any{map[string]any{"id": "nic0", "type": "phy", "ethernet_mac_address": "52:54:00:12:34:56"}},
		"networks": []any{map[string]any{"id": "v6", "type": "ipv6", "link": "nic0", "network_id": "prov", "ip_address": "2001:db8::10/64",
			"routes": []any{map[string]any{"network": "::", "netmask": "::", "gateway": "2001:db8::1"}}}},
		"services": []any{map[string]any{"type": "dns", "address": "2001:db8::53"}}}
	if r := e.do("PATCH", "/v1/nodes/"+id, v, []any{map[string]any{"op": "replace", "path": "/network_data", "value": v6only}}); r.status != http.StatusOK {
		t.Fatalf("PATCH valid network_data: %d %s", r.status, r.body)
	}
	if got := e.node(id).NetworkData; !reflect.DeepEqual(jsonRoundTrip(t, got), jsonRoundTrip(t, v6only)) {
		t.Errorf("network_data after PATCH %v, want %v", got, v6only)
	}
	if r := e.do("PATCH", "/v1/nodes/"+id, v, []any{map[string]any{"op": "remove", "path": "/network_data"}}); r.status != http.StatusOK {
		t.Fatalf("PATCH remove network_data: %d %s", r.status, r.body)
	}
	if got := e.node(id).NetworkData; len(got) != 0 {
		t.Errorf("network_data after remove %v, want {}", got)
	}
}

// jsonRoundTrip is v as JSON decodes it, for comparing what was sent with
// what was stored.
func jsonRoundTrip(t *testing.T, v any) any {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}
