//go:build linux

package boot

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	nl "github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/ironflow/ironflow/pxe"
)

// inNewNetns runs f on a locked thread inside a new network namespace,
// which goes when the test ends: the kernel's real network stack, out of
// the machine's own.
func inNewNetns(t *testing.T, f func()) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("SKIPPING: creating a network namespace needs root")
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		// The thread is left locked: it ends with the goroutine, and no
		// other goroutine ever runs in the test's namespace.
		runtime.LockOSThread()
		ns, err := netns.New()
		if err != nil {
			t.Errorf("new network namespace: %v", err)
			return
		}
		defer ns.Close()
		f()
	}()
	<-done
}

// TestApplyPlanConfiguresTheKernel applies the static part of a node's
// network_data through netlink in a network namespace: the link found by
// its MAC is up with its IPv4 and IPv6 addresses, the default routes of
// both families go through their gateways on it, the extra route is
// there, and the DNS servers are written to the resolver file.
func TestApplyPlanConfiguresTheKernel(t *testing.T) {
	resolv := filepath.Join(t.TempDir(), "resolv.conf")
	inNewNetns(t, func() {
		mac, _ := net.ParseMAC("52:54:00:77:00:50")
		veth := &nl.Veth{LinkAttrs: nl.LinkAttrs{Name: "nd0", HardwareAddr: mac}, PeerName: "nd0peer"}
		if err := nl.LinkAdd(veth); err != nil {
			t.Errorf("ip link add nd0 type veth: %v", err)
			return
		}
		peer, err := nl.LinkByName("nd0peer")
		if err == nil {
			err = nl.LinkSetUp(peer)
		}
		if err != nil {
			t.Errorf("peer: %v", err)
			return
		}
		nd, err := ParseNetworkData([]byte(`{"links": [{"id": "l", "type": "phy", "ethernet_mac_address": "52:54:00:77:00:50", "mtu": 1400}],
		  "networks": [
		    {"id": "a", "type": "ipv4", "link": "l", "network_id": "x", "ip_address": "10.77.0.50", "netmask": "255.255.255.0",
		     "routes": [{"network": "0.0.0.0", "netmask": "0.0.0.0", "gateway": "10.77.0.1"},
		                {"network": "198.51.100.0", "netmask": "255.255.255.0", "gateway": "10.77.0.254"}]},
		    {"id": "b", "type": "ipv6", "link": "l", "network_id": "x", "ip_address": "fd00:77::50", "netmask": "ffff:ffff:ffff:ffff::",
		     "routes": [{"network": "::", "netmask": "::", "gateway": "fd00:77::1"}]}],
		  "services": [{"type": "dns", "address": "10.77.0.53"}, {"type": "dns", "address": "fd00:77::53"}]}`))
		if err != nil {
			t.Error(err)
			return
		}
		plan, err := PlanNetwork(nd, map[string]string{"52:54:00:77:00:50": "nd0"})
		if err != nil {
			t.Error(err)
			return
		}
		if err := applyPlan(plan, resolv); err != nil {
			t.Errorf("applyPlan: %v", err)
			return
		}
		// Applying again (the agent retries when the network is not up)
		// changes nothing and fails on nothing.
		if err := applyPlan(plan, resolv); err != nil {
			t.Errorf("applyPlan a second time: %v", err)
		}
		link, err := nl.LinkByName("nd0")
		if err != nil {
			t.Error(err)
			return
		}
		if a := link.Attrs(); a.Flags&net.FlagUp == 0 || a.MTU != 1400 {
			t.Errorf("nd0 flags %v mtu %d, want up with mtu 1400", a.Flags, a.MTU)
		}
		addrs, err := nl.AddrList(link, nl.FAMILY_ALL)
		if err != nil {
			t.Error(err)
		}
		var got []string
		for _, a := range addrs {
			got = append(got, a.IPNet.String())
		}
		for _, want := range []string{"10.77.0.50/24", "fd00:77::50/64"} {
			if !slices.Contains(got, want) {
				t.Errorf("nd0 addresses %v, want %s among them", got, want)
			}
		}
		routes, err := nl.RouteList(link, nl.FAMILY_ALL)
		if err != nil {
			t.Error(err)
		}
		var rs []string
		for _, r := range routes {
			dst := "default"
			if r.Dst != nil && !r.Dst.IP.IsUnspecified() {
				dst = r.Dst.String()
			}
			if r.Gw != nil {
				rs = append(rs, dst+" via "+r.Gw.String())
			}
		}
		for _, want := range []string{"default via 10.77.0.1", "198.51.100.0/24 via 10.77.0.254", "default via fd00:77::1"} {
			if !slices.Contains(rs, want) {
				t.Errorf("routes on nd0 %v, want %q among them", rs, want)
			}
		}
	})
	b, err := os.ReadFile(resolv)
	if got, want := string(b), "nameserver 10.77.0.53\nnameserver fd00:77::53\n"; err != nil || got != want {
		t.Errorf("resolver file %q, %v; want %q", got, err, want)
	}
}

// TestReadISOFileReadsTheAgentISO: the agent reads network_data from the
// ISO the boot service builds (pxe.BuildAgentISO), without mounting it;
// a file with the ISO's bytes reads as the drive does.
func TestReadISOFileReadsTheAgentISO(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	nd := `{"links": [], "networks": [], "services": [{"type": "dns", "address": "192.0.2.53"}]}`
	iso := filepath.Join(dir, "agent.iso")
	err := pxe.BuildAgentISO(context.Background(), iso, write("vmlinuz", "k"), write("initrd", "i"), pxe.ISOParams{
		NodeUUID: "1be26c0b-03f2-4d2e-ae87-c02d7f33c123", APIURL: "http://a:1", AgentToken: "t",
		ISOLinuxBin: write("isolinux.bin", strings.Repeat("i", 2048)), LDLinuxC32: write("ldlinux.c32", "l"),
		EFILoader: write("systemd-boot.efi", "s"), NetworkData: []byte(nd)})
	if err != nil {
		t.Fatal(err)
	}
	if NetworkDataPath != "/"+pxe.NetworkDataPath {
		t.Fatalf("the agent reads %s, the ISO holds %s", NetworkDataPath, pxe.NetworkDataPath)
	}
	got, err := readISOFile(iso, NetworkDataPath)
	if err != nil || string(got) != nd {
		t.Errorf("readISOFile = %q, %v; want %q", got, err, nd)
	}
	if _, err := readISOFile(iso, "/openstack/latest/meta_data.json"); err == nil {
		t.Error("readISOFile found a file the ISO does not hold")
	}
}

// TestApplyPlanBondAndVLAN applies a bond of two NICs with a VLAN on it
// and an address on the VLAN, in a network namespace. It needs a kernel
// with bonding and 8021q (the agent's ramdisk loads both); a kernel
// without them is reported and the test skipped.
func TestApplyPlanBondAndVLAN(t *testing.T) {
	skip := "" // SkipNow belongs to the test's goroutine, not inNewNetns's
	inNewNetns(t, func() {
		for i, name := range []string{"nd1", "nd2"} {
			mac, _ := net.ParseMAC("52:54:00:77:01:0" + string(rune('1'+i)))
			if err := nl.LinkAdd(&nl.Veth{LinkAttrs: nl.LinkAttrs{Name: name, HardwareAddr: mac}, PeerName: name + "peer"}); err != nil {
				t.Errorf("ip link add %s type veth: %v", name, err)
				return
			}
		}
		if err := nl.LinkAdd(nl.NewLinkBond(nl.LinkAttrs{Name: "probe0"})); err != nil {
			skip = fmt.Sprintf("SKIPPING: this kernel cannot create a bond (%v): the bonding module is missing", err)
			return
		}
		_ = nl.LinkDel(&nl.Bond{LinkAttrs: nl.LinkAttrs{Name: "probe0"}})
		nd, err := ParseNetworkData([]byte(`{"links": [
		    {"id": "a", "type": "phy", "ethernet_mac_address": "52:54:00:77:01:01"},
		    {"id": "b", "type": "phy", "ethernet_mac_address": "52:54:00:77:01:02"},
		    {"id": "bond", "type": "bond", "bond_mode": "active-backup", "bond_links": ["a", "b"], "ethernet_mac_address": "52:54:00:77:01:01"},
		    {"id": "vl", "type": "vlan", "vlan_link": "bond", "vlan_id": 42, "vlan_mac_address": "52:54:00:77:01:01"}],
		  "networks": [{"id": "n", "type": "ipv4", "link": "vl", "network_id": "x", "ip_address": "192.0.2.10", "netmask": "255.255.255.0"}],
		  "services": []}`))
		if err != nil {
			t.Error(err)
			return
		}
		plan, err := PlanNetwork(nd, map[string]string{"52:54:00:77:01:01": "nd1", "52:54:00:77:01:02": "nd2"})
		if err != nil {
			t.Error(err)
			return
		}
		if err := applyPlan(plan, filepath.Join(t.TempDir(), "resolv.conf")); err != nil {
			if strings.Contains(err.Error(), "type vlan") {
				skip = fmt.Sprintf("SKIPPING: this kernel cannot create a VLAN (%v): the 8021q module is missing", err)
				return
			}
			t.Errorf("applyPlan: %v", err)
			return
		}
		for _, m := range []string{"nd1", "nd2"} {
			l, err := nl.LinkByName(m)
			if err != nil || l.Attrs().MasterIndex == 0 {
				t.Errorf("%s is not enslaved: %v", m, err)
			}
		}
		vlan, err := nl.LinkByName("bond0.42")
		if err != nil {
			t.Errorf("no VLAN bond0.42: %v", err)
			return
		}
		if v, ok := vlan.(*nl.Vlan); !ok || v.VlanId != 42 {
			t.Errorf("bond0.42 is %T %+v, want a VLAN with id 42", vlan, vlan)
		}
		addrs, _ := nl.AddrList(vlan, nl.FAMILY_V4)
		if len(addrs) != 1 || addrs[0].IPNet.String() != "192.0.2.10/24" {
			t.Errorf("bond0.42 addresses %v, want 192.0.2.10/24", addrs)
		}
	})
	if skip != "" {
		t.Skip(skip)
	}
}
