package networkdata

import (
	"encoding/json"
	"strings"
	"testing"
)

// ironicCases are network_data values with the messages Ironic's API
// answers for them: a PATCH of /network_data (validate_network_data), and
// the node schema's check of a create ("node") and of a patched node
// ("patch"), root cause included. The messages were produced by the
// jsonschema library Ironic uses (4.10) with Ironic's network_data
// schema; keys are sorted in the values so that Python's repr of them is
// the one ironflow writes.
var ironicCases = []struct{ name, value, patchMsg, nodeMsg, patchedMsg string }{
	{"empty object",
		`{}`,
		`Invalid network_data: 'links' is a required property `,
		``,
		``},
	{"not an object",
		`"eth0"`,
		`Invalid network_data: 'eth0' is not of type 'object' `,
		`Schema error for node: 'eth0' is not valid under any of the given schemas. Possible root cause: 'eth0' is not of type 'null'`,
		`Schema error for patch: 'eth0' is not valid under any of the given schemas. Possible root cause: 'eth0' is not of type 'null'`},
	{"links not an array",
		`{"links": {"id": "a"}, "networks": [], "services": []}`,
		`Invalid network_data: {'id': 'a'} is not of type 'array' `,
		`Schema error for node: {'id': 'a'} is not of type 'array'`,
		`Schema error for patch: {'id': 'a'} is not of type 'array'`},
	{"phy link without MAC",
		`{"links": [{"id": "a", "type": "phy"}], "networks": [], "services": []}`,
		`Invalid network_data: {'id': 'a', 'type': 'phy'} is not valid under any of the given schemas `,
		`Schema error for node: {'id': 'a', 'type': 'phy'} is not valid under any of the given schemas. Possible root cause: 'ethernet_mac_address' is a required property`,
		`Schema error for patch: {'id': 'a', 'type': 'phy'} is not valid under any of the given schemas. Possible root cause: 'ethernet_mac_address' is a required property`},
	{"bad MAC",
		`{"links": [{"ethernet_mac_address": "52:54:00:zz:00:01", "id": "a", "type": "phy"}], "networks": [], "services": []}`,
		`Invalid network_data: {'ethernet_mac_address': '52:54:00:zz:00:01', 'id': 'a', 'type': 'phy'} is not valid under any of the given schemas `,
		`Schema error for node: {'ethernet_mac_address': '52:54:00:zz:00:01', 'id': 'a', 'type': 'phy'} is not valid under any of the given schemas. Possible root cause: 'bond_mode' is a required property`,
		`Schema error for patch: {'ethernet_mac_address': '52:54:00:zz:00:01', 'id': 'a', 'type': 'phy'} is not valid under any of the given schemas. Possible root cause: 'bond_mode' is a required property`},
	{"unknown link type",
		`{"links": [{"ethernet_mac_address": "52:54:00:00:00:01", "id": "a", "type": "wifi"}], "networks": [], "services": []}`,
		`Invalid network_data: {'ethernet_mac_address': '52:54:00:00:00:01', 'id': 'a', 'type': 'wifi'} is not valid under any of the given schemas `,
		`Schema error for node: {'ethernet_mac_address': '52:54:00:00:00:01', 'id': 'a', 'type': 'wifi'} is not valid under any of the given schemas. Possible root cause: 'bond_mode' is a required property`,
		`Schema error for patch: {'ethernet_mac_address': '52:54:00:00:00:01', 'id': 'a', 'type': 'wifi'} is not valid under any of the given schemas. Possible root cause: 'bond_mode' is a required property`},
	{"mtu zero",
		`{"links": [{"ethernet_mac_address": "52:54:00:00:00:01", "id": "a", "mtu": 0, "type": "phy"}], "networks": [], "services": []}`,
		`Invalid network_data: {'ethernet_mac_address': '52:54:00:00:00:01', 'id': 'a', 'mtu': 0, 'type': 'phy'} is not valid under any of the given schemas `,
		`Schema error for node: {'ethernet_mac_address': '52:54:00:00:00:01', 'id': 'a', 'mtu': 0, 'type': 'phy'} is not valid under any of the given schemas. Possible root cause: 'bond_mode' is a required property`,
		`Schema error for patch: {'ethernet_mac_address': '52:54:00:00:00:01', 'id': 'a', 'mtu': 0, 'type': 'phy'} is not valid under any of the given schemas. Possible root cause: 'bond_mode' is a required property`},
	{"vlan id a string",
		`{"links": [{"id": "v", "type": "vlan", "vlan_id": "42", "vlan_link": "a", "vlan_mac_address": "52:54:00:00:00:01"}], "networks": [], "services": []}`,
		`Invalid network_data: {'id': 'v', 'type': 'vlan', 'vlan_id': '42', 'vlan_link': 'a', 'vlan_mac_address': '52:54:00:00:00:01'} is not valid under any of the given schemas `,
		`Schema error for node: {'id': 'v', 'type': 'vlan', 'vlan_id': '42', 'vlan_link': 'a', 'vlan_mac_address': '52:54:00:00:00:01'} is not valid under any of the given schemas. Possible root cause: 'ethernet_mac_address' is a required property`,
		`Schema error for patch: {'id': 'v', 'type': 'vlan', 'vlan_id': '42', 'vlan_link': 'a', 'vlan_mac_address': '52:54:00:00:00:01'} is not valid under any of the given schemas. Possible root cause: 'ethernet_mac_address' is a required property`},
	{"bond without members",
		`{"links": [{"bond_mode": "active-backup", "ethernet_mac_address": "52:54:00:00:00:01", "id": "b", "type": "bond"}], "networks": [], "services": []}`,
		`Invalid network_data: {'bond_mode': 'active-backup', 'ethernet_mac_address': '52:54:00:00:00:01', 'id': 'b', 'type': 'bond'} is not valid under any of the given schemas `,
		`Schema error for node: {'bond_mode': 'active-backup', 'ethernet_mac_address': '52:54:00:00:00:01', 'id': 'b', 'type': 'bond'} is not valid under any of the given schemas. Possible root cause: 'bond_links' is a required property`,
		`Schema error for patch: {'bond_mode': 'active-backup', 'ethernet_mac_address': '52:54:00:00:00:01', 'id': 'b', 'type': 'bond'} is not valid under any of the given schemas. Possible root cause: 'bond_links' is a required property`},
	{"link a string",
		`{"links": ["eth0"], "networks": [], "services": []}`,
		`Invalid network_data: 'eth0' is not valid under any of the given schemas `,
		`Schema error for node: 'eth0' is not valid under any of the given schemas. Possible root cause: 'eth0' is not of type 'object'`,
		`Schema error for patch: 'eth0' is not valid under any of the given schemas. Possible root cause: 'eth0' is not of type 'object'`},
	{"network type unknown",
		`{"links": [], "networks": [{"id": "n", "link": "a", "network_id": "x", "type": "ipv5"}], "services": []}`,
		`Invalid network_data: {'id': 'n', 'link': 'a', 'network_id': 'x', 'type': 'ipv5'} is not valid under any of the given schemas `,
		`Schema error for node: {'id': 'n', 'link': 'a', 'network_id': 'x', 'type': 'ipv5'} is not valid under any of the given schemas. Possible root cause: 'ipv5' is not one of ['ipv4', 'ipv4_dhcp']`,
		`Schema error for patch: {'id': 'n', 'link': 'a', 'network_id': 'x', 'type': 'ipv5'} is not valid under any of the given schemas. Possible root cause: 'ipv5' is not one of ['ipv4', 'ipv4_dhcp']`},
	{"IPv4 address out of range",
		`{"links": [], "networks": [{"id": "n", "ip_address": "10.0.0.300", "link": "a", "netmask": "255.255.255.0", "network_id": "x", "type": "ipv4"}], "services": []}`,
		`Invalid network_data: {'id': 'n', 'ip_address': '10.0.0.300', 'link': 'a', 'netmask': '255.255.255.0', 'network_id': 'x', 'type': 'ipv4'} is not valid under any of the given schemas `,
		`Schema error for node: {'id': 'n', 'ip_address': '10.0.0.300', 'link': 'a', 'netmask': '255.255.255.0', 'network_id': 'x', 'type': 'ipv4'} is not valid under any of the given schemas. Possible root cause: '10.0.0.300' does not match '^(?:(?:25[0-5]|2[0-4][0-9]|[01]?[0-9][0-9]?)\\.){3}(?:25[0-5]|2[0-4][0-9]|[01]?[0-9][0-9]?)$'`,
		`Schema error for patch: {'id': 'n', 'ip_address': '10.0.0.300', 'link': 'a', 'netmask': '255.255.255.0', 'network_id': 'x', 'type': 'ipv4'} is not valid under any of the given schemas. Possible root cause: '10.0.0.300' does not match '^(?:(?:25[0-5]|2[0-4][0-9]|[01]?[0-9][0-9]?)\\.){3}(?:25[0-5]|2[0-4][0-9]|[01]?[0-9][0-9]?)$'`},
	{"IPv4 netmask not contiguous",
		`{"links": [], "networks": [{"id": "n", "ip_address": "10.0.0.3", "link": "a", "netmask": "255.0.255.0", "network_id": "x", "type": "ipv4"}], "services": []}`,
		`Invalid network_data: {'id': 'n', 'ip_address': '10.0.0.3', 'link': 'a', 'netmask': '255.0.255.0', 'network_id': 'x', 'type': 'ipv4'} is not valid under any of the given schemas `,
		`Schema error for node: {'id': 'n', 'ip_address': '10.0.0.3', 'link': 'a', 'netmask': '255.0.255.0', 'network_id': 'x', 'type': 'ipv4'} is not valid under any of the given schemas. Possible root cause: '255.0.255.0' does not match '^(254|252|248|240|224|192|128|0)\\.0\\.0\\.0|255\\.(254|252|248|240|224|192|128|0)\\.0\\.0|255\\.255\\.(254|252|248|240|224|192|128|0)\\.0|255\\.255\\.255\\.(254|252|248|240|224|192|128|0)$'`,
		`Schema error for patch: {'id': 'n', 'ip_address': '10.0.0.3', 'link': 'a', 'netmask': '255.0.255.0', 'network_id': 'x', 'type': 'ipv4'} is not valid under any of the given schemas. Possible root cause: '255.0.255.0' does not match '^(254|252|248|240|224|192|128|0)\\.0\\.0\\.0|255\\.(254|252|248|240|224|192|128|0)\\.0\\.0|255\\.255\\.(254|252|248|240|224|192|128|0)\\.0|255\\.255\\.255\\.(254|252|248|240|224|192|128|0)$'`},
	{"route without gateway",
		`{"links": [], "networks": [{"id": "n", "ip_address": "10.0.0.3", "link": "a", "netmask": "255.255.255.0", "network_id": "x", "routes": [{"netmask": "0.0.0.0", "network": "0.0.0.0"}], "type": "ipv4"}], "services": []}`,
		`Invalid network_data: {'id': 'n', 'ip_address': '10.0.0.3', 'link': 'a', 'netmask': '255.255.255.0', 'network_id': 'x', 'routes': [{'netmask': '0.0.0.0', 'network': '0.0.0.0'}], 'type': 'ipv4'} is not valid under any of the given schemas `,
		`Schema error for node: {'id': 'n', 'ip_address': '10.0.0.3', 'link': 'a', 'netmask': '255.255.255.0', 'network_id': 'x', 'routes': [{'netmask': '0.0.0.0', 'network': '0.0.0.0'}], 'type': 'ipv4'} is not valid under any of the given schemas. Possible root cause: 'ipv4' is not one of ['ipv6', 'ipv6_dhcp', 'ipv6_slaac']`,
		`Schema error for patch: {'id': 'n', 'ip_address': '10.0.0.3', 'link': 'a', 'netmask': '255.255.255.0', 'network_id': 'x', 'routes': [{'netmask': '0.0.0.0', 'network': '0.0.0.0'}], 'type': 'ipv4'} is not valid under any of the given schemas. Possible root cause: 'ipv4' is not one of ['ipv6', 'ipv6_dhcp', 'ipv6_slaac']`},
	{"IPv6 address malformed",
		`{"links": [], "networks": [{"id": "n", "ip_address": "fd00::zz", "link": "a", "netmask": "ffff:ffff:ffff:ffff::", "network_id": "x", "type": "ipv6"}], "services": []}`,
		`Invalid network_data: {'id': 'n', 'ip_address': 'fd00::zz', 'link': 'a', 'netmask': 'ffff:ffff:ffff:ffff::', 'network_id': 'x', 'type': 'ipv6'} is not valid under any of the given schemas `,
		`Schema error for node: {'id': 'n', 'ip_address': 'fd00::zz', 'link': 'a', 'netmask': 'ffff:ffff:ffff:ffff::', 'network_id': 'x', 'type': 'ipv6'} is not valid under any of the given schemas. Possible root cause: 'ipv6' is not one of ['ipv4', 'ipv4_dhcp']`,
		`Schema error for patch: {'id': 'n', 'ip_address': 'fd00::zz', 'link': 'a', 'netmask': 'ffff:ffff:ffff:ffff::', 'network_id': 'x', 'type': 'ipv6'} is not valid under any of the given schemas. Possible root cause: 'ipv6' is not one of ['ipv4', 'ipv4_dhcp']`},
	{"network without link",
		`{"links": [], "networks": [{"id": "n", "network_id": "x", "type": "ipv4_dhcp"}], "services": []}`,
		`Invalid network_data: 'ipv4_dhcp' is not one of ['ipv6', 'ipv6_dhcp', 'ipv6_slaac'] `,
		`Schema error for node: 'ipv4_dhcp' is not one of ['ipv6', 'ipv6_dhcp', 'ipv6_slaac']`,
		`Schema error for patch: 'ipv4_dhcp' is not one of ['ipv6', 'ipv6_dhcp', 'ipv6_slaac']`},
	{"DNS not an address",
		`{"links": [], "networks": [], "services": [{"address": "ns1.example.com", "type": "dns"}]}`,
		`Invalid network_data: {'address': 'ns1.example.com', 'type': 'dns'} is not valid under any of the given schemas `,
		`Schema error for node: {'address': 'ns1.example.com', 'type': 'dns'} is not valid under any of the given schemas. Possible root cause: 'ns1.example.com' does not match '^(?:(?:25[0-5]|2[0-4][0-9]|[01]?[0-9][0-9]?)\\.){3}(?:25[0-5]|2[0-4][0-9]|[01]?[0-9][0-9]?)$'`,
		`Schema error for patch: {'address': 'ns1.example.com', 'type': 'dns'} is not valid under any of the given schemas. Possible root cause: 'ns1.example.com' does not match '^(?:(?:25[0-5]|2[0-4][0-9]|[01]?[0-9][0-9]?)\\.){3}(?:25[0-5]|2[0-4][0-9]|[01]?[0-9][0-9]?)$'`},
	{"service type unknown",
		`{"links": [], "networks": [], "services": [{"address": "192.0.2.1", "type": "ntp"}]}`,
		`Invalid network_data: {'address': '192.0.2.1', 'type': 'ntp'} is not valid under any of the given schemas `,
		`Schema error for node: {'address': '192.0.2.1', 'type': 'ntp'} is not valid under any of the given schemas. Possible root cause: 'ntp' is not one of ['dns']`,
		`Schema error for patch: {'address': '192.0.2.1', 'type': 'ntp'} is not valid under any of the given schemas. Possible root cause: 'ntp' is not one of ['dns']`},
	{"services missing",
		`{"links": [], "networks": []}`,
		`Invalid network_data: 'services' is a required property `,
		`Schema error for node: {'links': [], 'networks': []} is not valid under any of the given schemas. Possible root cause: {'links': [], 'networks': []} is not of type 'null'`,
		`Schema error for patch: {'links': [], 'networks': []} is not valid under any of the given schemas. Possible root cause: {'links': [], 'networks': []} is not of type 'null'`},
	{"valid",
		`{"links": [{"ethernet_mac_address": "52:54:00:00:00:01", "id": "l", "mtu": 1500, "type": "phy"}, {"bond_links": ["l"], "bond_mode": "802.3ad", "ethernet_mac_address": "52:54:00:00:00:01", "id": "b", "type": "bond"}, {"id": "v", "type": "vlan", "vlan_id": 42, "vlan_link": "b", "vlan_mac_address": "52:54:00:00:00:01"}], "networks": [{"id": "n4", "ip_address": "192.0.2.10", "link": "v", "netmask": "255.255.255.0", "network_id": "x", "routes": [{"gateway": "192.0.2.1", "netmask": "0.0.0.0", "network": "0.0.0.0"}], "type": "ipv4"}, {"id": "n6", "ip_address": "2001:db8::10/64", "link": "l", "network_id": "y", "routes": [{"gateway": "2001:db8::1", "netmask": "::", "network": "::"}], "type": "ipv6"}, {"id": "d", "link": "l", "network_id": "z", "type": "ipv4_dhcp"}], "services": [{"address": "192.0.2.53", "type": "dns"}, {"address": "2001:db8::53", "type": "dns"}]}`,
		``,
		``,
		``},
}

// decode reads JSON as the API does: integers as int64, other numbers as
// float64.
func decode(t *testing.T, s string) any {
	t.Helper()
	d := json.NewDecoder(strings.NewReader(s))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatal(err)
	}
	var norm func(any) any
	norm = func(v any) any {
		switch x := v.(type) {
		case json.Number:
			if i, err := x.Int64(); err == nil {
				return i
			}
			f, _ := x.Float64()
			return f
		case map[string]any:
			for k, e := range x {
				x[k] = norm(e)
			}
		case []any:
			for i, e := range x {
				x[i] = norm(e)
			}
		}
		return v
	}
	return norm(v)
}

// TestMessagesAreIronics: every case gets Ironic's message, word for
// word, in all three places Ironic checks network_data; a valid value
// gets none.
func TestMessagesAreIronics(t *testing.T) {
	for _, c := range ironicCases {
		t.Run(c.name, func(t *testing.T) {
			if got := Message(decode(t, c.value)); got != c.patchMsg {
				t.Errorf("PATCH /network_data:\n got %q\nwant %q", got, c.patchMsg)
			}
			if got := FieldMessage("node", decode(t, c.value)); got != c.nodeMsg {
				t.Errorf("create:\n got %q\nwant %q", got, c.nodeMsg)
			}
			if got := FieldMessage("patch", decode(t, c.value)); got != c.patchedMsg {
				t.Errorf("patched node:\n got %q\nwant %q", got, c.patchedMsg)
			}
		})
	}
}

// TestNullAndEmpty: a node's network_data may be null or {} (no network
// data) on create and in a patched node; a PATCH that sets /network_data
// itself must hold network_data, as Ironic's validate_network_data says.
func TestNullAndEmpty(t *testing.T) {
	for _, v := range []any{nil, map[string]any{}} {
		if got := FieldMessage("node", v); got != "" {
			t.Errorf("create with network_data %v: %q", v, got)
		}
	}
	if got, want := Message(nil), "Invalid network_data: None is not of type 'object' "; got != want {
		t.Errorf("PATCH /network_data null: %q, want %q", got, want)
	}
	if got, want := Message(map[string]any{}), "Invalid network_data: 'links' is a required property "; got != want {
		t.Errorf("PATCH /network_data {}: %q, want %q", got, want)
	}
}
