package boot

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// NetworkDataPath is where a node's network_data sits on its agent ISO,
// as on an OpenStack config drive (Ironic's redfish virtual media puts it
// there; docs/bmcs-and-boot.md, "Virtual media without DHCP").
const NetworkDataPath = "/openstack/latest/network_data.json"

// NetworkData is the part of OpenStack's network_data.json (Nova's
// network metadata format, the node's network_data field) the agent
// applies: links, L3 networks and services.
type NetworkData struct {
	Links    []NDLink    `json:"links"`
	Networks []NDNetwork `json:"networks"`
	Services []NDService `json:"services"`
}

// NDLink is an L2 link: a physical interface ("phy" and the other
// hypervisor kinds, matched by MAC), a bond or a VLAN.
type NDLink struct {
	ID        string      `json:"id"`
	Type      string      `json:"type"`
	MAC       string      `json:"ethernet_mac_address"`
	MTU       json.Number `json:"mtu"`
	BondMode  string      `json:"bond_mode"`
	BondLinks []string    `json:"bond_links"`
	VLANID    json.Number `json:"vlan_id"`
	VLANLink  string      `json:"vlan_link"`
	VLANMAC   string      `json:"vlan_mac_address"`
}

// NDNetwork is an L3 network on a link.
type NDNetwork struct {
	ID        string      `json:"id"`
	Link      string      `json:"link"`
	Type      string      `json:"type"` // ipv4, ipv4_dhcp, ipv6, ipv6_dhcp, ipv6_slaac
	IPAddress string      `json:"ip_address"`
	Netmask   string      `json:"netmask"`
	Routes    []NDRoute   `json:"routes"`
	Services  []NDService `json:"services"` // Nova writes a network's DNS here
}

// NDRoute is a route of a network; network 0.0.0.0 (or ::) with netmask
// 0.0.0.0 (or ::) is the default route.
type NDRoute struct {
	Network  string      `json:"network"`
	Netmask  string      `json:"netmask"`
	Gateway  string      `json:"gateway"`
	Services []NDService `json:"services"`
}

// NDService is a service; the agent uses type dns.
type NDService struct {
	Type    string `json:"type"`
	Address string `json:"address"`
}

// ParseNetworkData decodes network_data.json.
func ParseNetworkData(b []byte) (*NetworkData, error) {
	var nd NetworkData
	d := json.NewDecoder(strings.NewReader(string(b)))
	d.UseNumber()
	if err := d.Decode(&nd); err != nil {
		return nil, fmt.Errorf("network_data.json: %w", err)
	}
	return &nd, nil
}

// NetPlan is what the agent does to the kernel's network for a node's
// network_data, in order: create and configure links, add addresses,
// add routes, write the resolver configuration. It is computed without
// touching the system (PlanNetwork), so it can be shown and tested as
// the ip(8) commands it amounts to (Commands).
type NetPlan struct {
	Links  []PlanLink
	Addrs  []PlanAddr
	Routes []PlanRoute
	// DHCP names the links that get their IPv4 address from DHCP
	// (network type ipv4_dhcp); the others are static.
	DHCP []string
	DNS  []netip.Addr
}

// PlanLink is one interface to set up: an existing one (Kind ""), or a
// bond or VLAN to create.
type PlanLink struct {
	Name   string
	Kind   string // "", "bond", "vlan"
	MTU    int
	Parent string   // vlan: the link it is on
	VLANID int      // vlan
	Mode   string   // bond mode
	Slaves []string // bond members
	MAC    string   // bond or vlan: the address to set, when given
}

// PlanAddr is a static address on a link.
type PlanAddr struct {
	Link   string
	Prefix netip.Prefix
}

// PlanRoute is a route through a gateway on a link; Dst is 0.0.0.0/0 or
// ::/0 for a default route.
type PlanRoute struct {
	Link string
	Dst  netip.Prefix
	Via  netip.Addr
}

// PlanNetwork maps network_data onto the machine's interfaces: nics maps
// a lower-case MAC address to the interface that has it. Physical links
// are found by MAC; a bond is named bond0, bond1… in the order of the
// links, a VLAN <parent>.<id> (the name ip(8) and ifupdown give it).
func PlanNetwork(nd *NetworkData, nics map[string]string) (*NetPlan, error) {
	p := &NetPlan{}
	names := map[string]string{} // network_data link id → interface name
	bonds := 0
	// A bond or VLAN may name links listed after it: place the physical
	// links first, then bonds, then VLANs (a VLAN may sit on a bond).
	order := []func(NDLink) bool{
		func(l NDLink) bool { return l.Type != "bond" && l.Type != "vlan" },
		func(l NDLink) bool { return l.Type == "bond" },
		func(l NDLink) bool { return l.Type == "vlan" },
	}
	for _, pass := range order {
		for _, l := range nd.Links {
			if !pass(l) {
				continue
			}
			pl := PlanLink{}
			mtu, err := ndInt(l.MTU)
			if err != nil {
				return nil, fmt.Errorf("link %q: mtu: %w", l.ID, err)
			}
			pl.MTU = mtu
			switch l.Type {
			case "bond":
				pl.Name, pl.Kind, pl.Mode = "bond"+strconv.Itoa(bonds), "bond", l.BondMode
				bonds++
				pl.MAC = strings.ToLower(l.MAC)
				for _, m := range l.BondLinks {
					n, ok := names[m]
					if !ok {
						return nil, fmt.Errorf("bond %q: member link %q is not a physical link of network_data", l.ID, m)
					}
					pl.Slaves = append(pl.Slaves, n)
				}
			case "vlan":
				parent, ok := names[l.VLANLink]
				if !ok {
					return nil, fmt.Errorf("vlan %q: vlan_link %q is not a link of network_data", l.ID, l.VLANLink)
				}
				id, err := ndInt(l.VLANID)
				if err != nil || id < 1 || id > 4094 {
					return nil, fmt.Errorf("vlan %q: vlan_id %q is not between 1 and 4094", l.ID, l.VLANID)
				}
				pl.Kind, pl.Parent, pl.VLANID = "vlan", parent, id
				pl.Name = vlanName(parent, id)
				pl.MAC = strings.ToLower(l.VLANMAC)
			default:
				mac := strings.ToLower(strings.ReplaceAll(l.MAC, "-", ":"))
				n, ok := nics[mac]
				if !ok {
					return nil, fmt.Errorf("link %q: no interface has MAC address %s", l.ID, l.MAC)
				}
				pl.Name = n
			}
			if _, dup := names[l.ID]; dup {
				return nil, fmt.Errorf("link id %q is used twice", l.ID)
			}
			names[l.ID] = pl.Name
			p.Links = append(p.Links, pl)
		}
	}
	for _, n := range nd.Networks {
		link, ok := names[n.Link]
		if !ok {
			return nil, fmt.Errorf("network %q: link %q is not a link of network_data", n.ID, n.Link)
		}
		switch n.Type {
		case "ipv4_dhcp":
			if !slices.Contains(p.DHCP, link) {
				p.DHCP = append(p.DHCP, link)
			}
			continue
		case "ipv6_slaac", "ipv6_dhcp":
			// The kernel configures SLAAC itself on an interface that
			// is up (router advertisements are accepted by default);
			// DHCPv6 is not run by the agent.
			continue
		case "ipv4", "ipv6":
		default:
			return nil, fmt.Errorf("network %q: type %q is not one the agent applies", n.ID, n.Type)
		}
		pfx, err := hostPrefix(n.IPAddress, n.Netmask, n.Type == "ipv6")
		if err != nil {
			return nil, fmt.Errorf("network %q: %w", n.ID, err)
		}
		p.Addrs = append(p.Addrs, PlanAddr{Link: link, Prefix: pfx})
		for _, r := range n.Routes {
			dst, err := routePrefix(r.Network, r.Netmask)
			if err != nil {
				return nil, fmt.Errorf("network %q: route %s: %w", n.ID, r.Network, err)
			}
			gw, err := netip.ParseAddr(r.Gateway)
			if err != nil || gw.Is4() != dst.Addr().Is4() {
				return nil, fmt.Errorf("network %q: route %s: gateway %q is not an address of the route's family", n.ID, r.Network, r.Gateway)
			}
			p.Routes = append(p.Routes, PlanRoute{Link: link, Dst: dst, Via: gw})
			p.addDNS(r.Services)
		}
		p.addDNS(n.Services)
	}
	p.addDNS(nd.Services)
	return p, nil
}

func (p *NetPlan) addDNS(svcs []NDService) {
	for _, s := range svcs {
		if s.Type != "dns" {
			continue
		}
		if a, err := netip.ParseAddr(s.Address); err == nil && !slices.Contains(p.DNS, a) {
			p.DNS = append(p.DNS, a)
		}
	}
}

// vlanName is <parent>.<id>, shortened to the kernel's 15 characters by
// cutting the parent's name.
func vlanName(parent string, id int) string {
	suffix := "." + strconv.Itoa(id)
	if len(parent)+len(suffix) > 15 {
		parent = parent[:15-len(suffix)]
	}
	return parent + suffix
}

func ndInt(n json.Number) (int, error) {
	if n == "" {
		return 0, nil
	}
	f, err := n.Float64()
	if err != nil || f != float64(int(f)) {
		return 0, fmt.Errorf("%q is not a whole number", n)
	}
	return int(f), nil
}

// hostPrefix is an address with its prefix length, from ip_address and
// netmask (a dotted IPv4 mask, an IPv6 mask written as an address, or a
// /len on an IPv6 ip_address, which the schema allows).
func hostPrefix(ip, mask string, v6 bool) (netip.Prefix, error) {
	if a, l, ok := strings.Cut(ip, "/"); ok {
		bits, err := strconv.Atoi(l)
		addr, aerr := netip.ParseAddr(a)
		if err != nil || aerr != nil || addr.Is4() == v6 || bits < 0 || bits > addr.BitLen() {
			return netip.Prefix{}, fmt.Errorf("ip_address %q is not an IPv%s address with a prefix length", ip, map[bool]string{true: "6", false: "4"}[v6])
		}
		return netip.PrefixFrom(addr, bits), nil
	}
	addr, err := netip.ParseAddr(ip)
	if err != nil || addr.Is4() == v6 {
		return netip.Prefix{}, fmt.Errorf("ip_address %q is not an IPv%s address", ip, map[bool]string{true: "6", false: "4"}[v6])
	}
	bits, err := maskBits(mask, addr.Is4())
	if err != nil {
		return netip.Prefix{}, err
	}
	return netip.PrefixFrom(addr, bits), nil
}

// routePrefix is a route's destination from network and netmask.
func routePrefix(network, mask string) (netip.Prefix, error) {
	addr, err := netip.ParseAddr(network)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("network %q is not an address", network)
	}
	bits, err := maskBits(mask, addr.Is4())
	if err != nil {
		return netip.Prefix{}, err
	}
	return netip.PrefixFrom(addr, bits).Masked(), nil
}

// maskBits is the prefix length of a netmask written as an address.
func maskBits(mask string, v4 bool) (int, error) {
	if mask == "" {
		return 0, errors.New("netmask is missing")
	}
	m, err := netip.ParseAddr(mask)
	if err != nil || m.Is4() != v4 {
		return 0, fmt.Errorf("netmask %q is not an IPv%s mask", mask, map[bool]string{true: "4", false: "6"}[v4])
	}
	ones, bits := net.IPMask(m.AsSlice()).Size()
	if bits == 0 {
		return 0, fmt.Errorf("netmask %q is not contiguous", mask)
	}
	return ones, nil
}

// Modules are the kernel modules the plan's links need.
func (p *NetPlan) Modules() []string {
	var out []string
	for _, l := range p.Links {
		m := map[string]string{"bond": "bonding", "vlan": "8021q"}[l.Kind]
		if m != "" && !slices.Contains(out, m) {
			out = append(out, m)
		}
	}
	return out
}

// Commands renders the plan as the ip(8) commands that do the same, one
// per step, in order: what the agent logs before applying it.
func (p *NetPlan) Commands() []string {
	var out []string
	for _, l := range p.Links {
		switch l.Kind {
		case "bond":
			out = append(out, "ip link add "+l.Name+" type bond mode "+l.Mode)
			for _, s := range l.Slaves {
				out = append(out, "ip link set "+s+" down", "ip link set "+s+" master "+l.Name)
			}
		case "vlan":
			out = append(out, fmt.Sprintf("ip link add link %s name %s type vlan id %d", l.Parent, l.Name, l.VLANID))
		}
		if l.MAC != "" && l.Kind != "" {
			out = append(out, "ip link set "+l.Name+" address "+l.MAC)
		}
		if l.MTU > 0 {
			out = append(out, fmt.Sprintf("ip link set %s mtu %d", l.Name, l.MTU))
		}
		out = append(out, "ip link set "+l.Name+" up")
	}
	for _, a := range p.Addrs {
		out = append(out, "ip address add "+a.Prefix.String()+" dev "+a.Link)
	}
	for _, r := range p.Routes {
		fam := "-4"
		if r.Dst.Addr().Is6() {
			fam = "-6"
		}
		dst := r.Dst.String()
		if r.Dst.Bits() == 0 {
			dst = "default"
		}
		out = append(out, fmt.Sprintf("ip %s route replace %s via %s dev %s", fam, dst, r.Via, r.Link))
	}
	for _, l := range p.DHCP {
		out = append(out, "dhcp "+l)
	}
	for _, d := range p.DNS {
		out = append(out, "echo nameserver "+d.String()+" >> /etc/resolv.conf")
	}
	return out
}

// ResolvConf is the resolver configuration for the plan's DNS servers.
func (p *NetPlan) ResolvConf() string {
	var b strings.Builder
	for _, d := range p.DNS {
		b.WriteString("nameserver " + d.String() + "\n")
	}
	return b.String()
}
