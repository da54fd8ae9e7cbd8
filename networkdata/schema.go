package networkdata

import (
	"regexp"
	"sync"
)

// The patterns of Ironic's network_data schema, quoted as they are in
// its messages ("... does not match '<pattern>'").
const (
	macPattern      = `(?i)^([0-9A-F]{2}[:-]){5}([0-9A-F]{2})$`
	ipv4HostPattern = `^(?:(?:25[0-5]|2[0-4][0-9]|[01]?[0-9][0-9]?)\.){3}(?:25[0-5]|2[0-4][0-9]|[01]?[0-9][0-9]?)$`
	ipv4MaskPattern = `^(254|252|248|240|224|192|128|0)\.0\.0\.0|255\.(254|252|248|240|224|192|128|0)\.0\.0|255\.255\.(254|252|248|240|224|192|128|0)\.0|255\.255\.255\.(254|252|248|240|224|192|128|0)$`
	ipv4NetPattern  = `^(([0-9]|[1-9][0-9]|1[0-9]{2}|2[0-4][0-9]|25[0-5])\.){3}([0-9]|[1-9][0-9]|1[0-9]{2}|2[0-4][0-9]|25[0-5])$`
	ipv6Groups      = `([0-9a-fA-F]{1,4}:){7,7}[0-9a-fA-F]{1,4}|([0-9a-fA-F]{1,4}:){1,7}:|([0-9a-fA-F]{1,4}:){1,6}:[0-9a-fA-F]{1,4}|([0-9a-fA-F]{1,4}:){1,5}(:[0-9a-fA-F]{1,4}){1,2}|([0-9a-fA-F]{1,4}:){1,4}(:[0-9a-fA-F]{1,4}){1,3}|([0-9a-fA-F]{1,4}:){1,3}(:[0-9a-fA-F]{1,4}){1,4}|([0-9a-fA-F]{1,4}:){1,2}(:[0-9a-fA-F]{1,4}){1,5}|[0-9a-fA-F]{1,4}:((:[0-9a-fA-F]{1,4}){1,6})|`
	ipv6Embedded    = `fe80:(:[0-9a-fA-F]{0,4}){0,4}%[0-9a-zA-Z]{1,}|::(ffff(:0{1,4}){0,1}:){0,1}((25[0-5]|(2[0-4]|1{0,1}[0-9]){0,1}[0-9])\.){3,3}(25[0-5]|(2[0-4]|1{0,1}[0-9]){0,1}[0-9])|([0-9a-fA-F]{1,4}:){1,4}:((25[0-5]|(2[0-4]|1{0,1}[0-9]){0,1}[0-9])\.){3,3}(25[0-5]|(2[0-4]|1{0,1}[0-9]){0,1}[0-9])`
	ipv6HostPattern = `^(` + ipv6Groups + `:((:[0-9a-fA-F]{1,4}){1,7}|:)|` + ipv6Embedded + `)(/[0-9]{1,2})?$`
	ipv6GwPattern   = `^(` + ipv6Groups + `:((:[0-9a-fA-F]{1,4}){1,7}|:)|` + ipv6Embedded + `)$`
	ipv6MaskPattern = `^(` + ipv6Groups + `:((:[0-9a-fA-F]{1,4}){1,7})|(::))$`
)

var (
	rootOnce   sync.Once
	rootSchema *schema
)

// root is network_data's schema: links, networks and services, all three
// required.
func root() *schema {
	rootOnce.Do(func() { rootSchema = build() })
	return rootSchema
}

func build() *schema {
	str := func() *schema { return &schema{types: []string{"string"}} }
	pat := func(p string) *schema { return &schema{types: []string{"string"}, pattern: regexp.MustCompile(p)} }
	enum := func(values ...string) *schema { return &schema{types: []string{"string"}, enum: values} }
	obj := func(required []string, props ...property) *schema {
		return &schema{types: []string{"object"}, required: required, properties: props}
	}
	array := func(items *schema) *schema { return &schema{types: []string{"array"}, items: items} }
	one, most := 1.0, 65535.0

	l2Address := pat(macPattern)
	l2MTU := &schema{anyOf: []*schema{{types: []string{"number"}, min: &one, max: &most}, {types: []string{"null"}}}}
	l2Link := obj([]string{"ethernet_mac_address", "id", "type"},
		property{"id", str()}, property{"ethernet_mac_address", l2Address}, property{"mtu", l2MTU},
		property{"type", enum("bridge", "dvs", "hw_veb", "hyperv", "ovs", "tap", "vhostuser", "vif", "phy")},
		property{"vif_id", str()})
	l2Bond := obj([]string{"ethernet_mac_address", "id", "type", "bond_mode", "bond_links"},
		property{"id", str()}, property{"ethernet_mac_address", l2Address}, property{"mtu", l2MTU},
		property{"type", enum("bond")}, property{"vif_id", str()},
		property{"bond_mode", enum("802.3ad", "balance-rr", "active-backup", "balance-xor", "broadcast", "balance-tlb", "balance-alb")},
		property{"bond_links", array(str())})
	l2VLAN := obj([]string{"vlan_mac_address", "id", "type", "vlan_link", "vlan_id"},
		property{"id", str()}, property{"vlan_mac_address", l2Address}, property{"mtu", l2MTU},
		property{"type", enum("vlan")}, property{"vif_id", str()},
		property{"vlan_id", &schema{types: []string{"integer"}}}, property{"vlan_link", str()})

	ipv4Service := obj([]string{"address", "type"}, property{"address", pat(ipv4HostPattern)}, property{"type", enum("dns")})
	ipv6Service := obj([]string{"address", "type"}, property{"address", pat(ipv6HostPattern)}, property{"type", enum("dns")})
	route := func(nw, mask, gw string, services *schema) *schema {
		return obj([]string{"gateway", "netmask", "network"},
			property{"network", pat(nw)}, property{"netmask", pat(mask)}, property{"gateway", pat(gw)},
			property{"services", services})
	}
	network := func(typ, host, mask *schema, rt *schema) *schema {
		return obj([]string{"id", "link", "network_id", "type"},
			property{"id", str()}, property{"link", str()}, property{"network_id", str()}, property{"type", typ},
			property{"ip_address", host}, property{"netmask", mask}, property{"routes", array(rt)})
	}
	l3IPv4 := network(enum("ipv4", "ipv4_dhcp"), pat(ipv4HostPattern), pat(ipv4MaskPattern),
		route(ipv4NetPattern, ipv4MaskPattern, ipv4HostPattern, array(ipv4Service)))
	l3IPv6 := network(enum("ipv6", "ipv6_dhcp", "ipv6_slaac"), pat(ipv6HostPattern), pat(ipv6MaskPattern),
		route(ipv6MaskPattern, ipv6MaskPattern, ipv6GwPattern, array(ipv6Service)))

	return obj([]string{"links", "networks", "services"},
		property{"links", array(&schema{oneOf: []*schema{l2Link, l2Bond, l2VLAN}})},
		property{"networks", array(&schema{oneOf: []*schema{l3IPv4, l3IPv6}})},
		property{"services", array(&schema{anyOf: []*schema{ipv4Service, ipv6Service}})})
}
