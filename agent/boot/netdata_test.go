package boot

import (
	"slices"
	"strings"
	"testing"
)

// The network_data of a node with two NICs bonded, a VLAN on the bond,
// static IPv4 and IPv6 with default routes and an extra route, DHCP on a
// third NIC, and DNS at the top and on a network, as Nova writes it.
const bondVLANData = `{
  "links": [
    {"id": "vlan-link", "type": "vlan", "vlan_link": "bond-link", "vlan_id": 42, "vlan_mac_address": "52:54:00:00:00:0A"},
    {"id": "bond-link", "type": "bond", "bond_mode": "active-backup", "bond_links": ["nic1", "nic2"],
     "ethernet_mac_address": "52:54:00:00:00:01", "mtu": 9000},
    {"id": "nic1", "type": "phy", "ethernet_mac_address": "52:54:00:00:00:01"},
    {"id": "nic2", "type": "phy", "ethernet_mac_address": "52-54-00-00-00-02"},
    {"id": "nic3", "type": "phy", "ethernet_mac_address": "52:54:00:00:00:03"}
  ],
  "networks": [
    {"id": "v4", "type": "ipv4", "link": "vlan-link", "network_id": "n4", "ip_address": "192.0.2.10", "netmask": "255.255.255.0",
     "routes": [{"network": "0.0.0.0", "netmask": "0.0.0.0", "gateway": "192.0.2.1"},
                {"network": "198.51.100.0", "netmask": "255.255.255.128", "gateway": "192.0.2.254"}],
     "services": [{"type": "dns", "address": "192.0.2.53"}]},
    {"id": "v6", "type": "ipv6", "link": "bond-link", "network_id": "n6", "ip_address": "2001:db8::10", "netmask": "ffff:ffff:ffff:ffff::",
     "routes": [{"network": "::", "netmask": "::", "gateway": "2001:db8::1"}]},
    {"id": "d4", "type": "ipv4_dhcp", "link": "nic3", "network_id": "n3"},
    {"id": "s6", "type": "ipv6_slaac", "link": "nic3", "network_id": "n3"}
  ],
  "services": [{"type": "dns", "address": "2001:db8::53"}, {"type": "dns", "address": "192.0.2.53"}, {"type": "ntp", "address": "192.0.2.123"}]
}`

var testNICs = map[string]string{"52:54:00:00:00:01": "enp1s0", "52:54:00:00:00:02": "enp2s0", "52:54:00:00:00:03": "enp3s0"}

// TestPlanNetworkRendersIPCommands: network_data becomes, in order, the
// physical links found by MAC, the bond over its members, the VLAN on the
// bond, the static addresses, the routes (0.0.0.0/0 and ::/0 as default
// routes), DHCP only where network_data asks for it, and the DNS servers
// once each; SLAAC and services other than DNS add no step.
func TestPlanNetworkRendersIPCommands(t *testing.T) {
	nd, err := ParseNetworkData([]byte(bondVLANData))
	if err != nil {
		t.Fatal(err)
	}
	p, err := PlanNetwork(nd, testNICs)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"ip link set enp1s0 up",
		"ip link set enp2s0 up",
		"ip link set enp3s0 up",
		"ip link add bond0 type bond mode active-backup",
		"ip link set enp1s0 down", "ip link set enp1s0 master bond0",
		"ip link set enp2s0 down", "ip link set enp2s0 master bond0",
		"ip link set bond0 address 52:54:00:00:00:01",
		"ip link set bond0 mtu 9000",
		"ip link set bond0 up",
		"ip link add link bond0 name bond0.42 type vlan id 42",
		"ip link set bond0.42 address 52:54:00:00:00:0a",
		"ip link set bond0.42 up",
		"ip address add 192.0.2.10/24 dev bond0.42",
		"ip address add 2001:db8::10/64 dev bond0",
		"ip -4 route replace default via 192.0.2.1 dev bond0.42",
		"ip -4 route replace 198.51.100.0/25 via 192.0.2.254 dev bond0.42",
		"ip -6 route replace default via 2001:db8::1 dev bond0",
		"dhcp enp3s0",
		"echo nameserver 192.0.2.53 >> /etc/resolv.conf",
		"echo nameserver 2001:db8::53 >> /etc/resolv.conf",
	}
	if got := p.Commands(); !slices.Equal(got, want) {
		t.Errorf("commands:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if got := p.Modules(); !slices.Equal(got, []string{"bonding", "8021q"}) {
		t.Errorf("modules %v, want bonding and 8021q", got)
	}
	if got, want := p.ResolvConf(), "nameserver 192.0.2.53\nnameserver 2001:db8::53\n"; got != want {
		t.Errorf("resolv.conf %q, want %q", got, want)
	}
}

// TestPlanNetworkStaticAddresses: the common case, one NIC with a static
// IPv4 and IPv6 address; an IPv6 address may carry its prefix length
// instead of a netmask (the schema allows "/64"), and an uppercase MAC
// matches.
func TestPlanNetworkStaticAddresses(t *testing.T) {
	nd, err := ParseNetworkData([]byte(`{"links": [{"id": "l", "type": "phy", "ethernet_mac_address": "52:54:00:00:00:03", "mtu": null}],
	  "networks": [
	    {"id": "a", "type": "ipv4", "link": "l", "network_id": "x", "ip_address": "10.77.0.50", "netmask": "255.255.255.0",
	     "routes": [{"network": "0.0.0.0", "netmask": "0.0.0.0", "gateway": "10.77.0.1"}]},
	    {"id": "b", "type": "ipv6", "link": "l", "network_id": "x", "ip_address": "fd00:77::50/64"}],
	  "services": []}`))
	if err != nil {
		t.Fatal(err)
	}
	p, err := PlanNetwork(nd, testNICs)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"ip link set enp3s0 up", "ip address add 10.77.0.50/24 dev enp3s0", "ip address add fd00:77::50/64 dev enp3s0",
		"ip -4 route replace default via 10.77.0.1 dev enp3s0"}
	if got := p.Commands(); !slices.Equal(got, want) {
		t.Errorf("commands:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestPlanNetworkRefusesWhatItCannotApply: each mistake is named with the
// network_data id it is in, rather than half a network being configured.
func TestPlanNetworkRefusesWhatItCannotApply(t *testing.T) {
	phy := `{"id": "l", "type": "phy", "ethernet_mac_address": "52:54:00:00:00:01"}`
	cases := []struct{ name, links, networks, want string }{
		{"unknown MAC", `{"id": "x", "type": "phy", "ethernet_mac_address": "52:54:00:ff:ff:ff"}`, ``,
			`link "x": no interface has MAC address 52:54:00:ff:ff:ff`},
		{"network on a missing link", phy, `{"id": "n", "type": "ipv4", "link": "nope", "ip_address": "192.0.2.1", "netmask": "255.255.255.0"}`,
			`network "n": link "nope" is not a link of network_data`},
		{"IPv6 address on an ipv4 network", phy, `{"id": "n", "type": "ipv4", "link": "l", "ip_address": "2001:db8::1", "netmask": "255.255.255.0"}`,
			`network "n": ip_address "2001:db8::1" is not an IPv4 address`},
		{"no netmask", phy, `{"id": "n", "type": "ipv4", "link": "l", "ip_address": "192.0.2.1"}`,
			`network "n": netmask is missing`},
		{"IPv6 gateway on an IPv4 route", phy, `{"id": "n", "type": "ipv4", "link": "l", "ip_address": "192.0.2.1", "netmask": "255.255.255.0",
			"routes": [{"network": "0.0.0.0", "netmask": "0.0.0.0", "gateway": "fe80::1"}]}`,
			`network "n": route 0.0.0.0: gateway "fe80::1" is not an address of the route's family`},
		{"bond of an unknown member", phy + `, {"id": "b", "type": "bond", "bond_mode": "802.3ad", "bond_links": ["l", "m"]}`, ``,
			`bond "b": member link "m" is not a physical link of network_data`},
		{"VLAN id out of range", phy + `, {"id": "v", "type": "vlan", "vlan_link": "l", "vlan_id": 4095}`, ``,
			`vlan "v": vlan_id "4095" is not between 1 and 4094`},
		{"a link id twice", phy + `, ` + phy, ``, `link id "l" is used twice`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			nd, err := ParseNetworkData([]byte(`{"links": [` + c.links + `], "networks": [` + c.networks + `], "services": []}`))
			if err != nil {
				t.Fatal(err)
			}
			_, err = PlanNetwork(nd, testNICs)
			if err == nil || err.Error() != c.want {
				t.Errorf("error %v, want %q", err, c.want)
			}
		})
	}
}

// TestVLANNameFitsTheKernel: <parent>.<id>, the parent's name cut so the
// whole fits the kernel's 15 characters.
func TestVLANNameFitsTheKernel(t *testing.T) {
	if got := vlanName("eno1", 42); got != "eno1.42" {
		t.Errorf("vlanName = %q, want eno1.42", got)
	}
	if got := vlanName("enp129s0f1np1", 4000); got != "enp129s0f1.4000" {
		t.Errorf("vlanName = %q, want enp129s0f1.4000", got)
	}
}
