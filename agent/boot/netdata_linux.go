//go:build linux

package boot

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/diskfs/go-diskfs/backend/file"
	"github.com/diskfs/go-diskfs/filesystem/iso9660"
	"github.com/ironflow/ironflow/agent/kmod"
	nl "github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// CDWait is how long the agent booted from virtual media waits for its
// CD-ROM drive to appear before it gives up looking for network_data.
const CDWait = 15 * time.Second

// maxNetworkData bounds network_data.json as read from a CD.
const maxNetworkData = 1 << 20

// ReadNetworkData returns network_data.json from the first CD-ROM drive
// whose ISO9660 filesystem holds NetworkDataPath (the agent ISO the BMC
// inserted), or nil when none does. wait says how long to wait for a
// first drive to appear: the kernel's SCSI scan may still run after the
// modules are loaded. The ISO is read directly, without mounting it:
// the ramdisk needs no isofs module.
func ReadNetworkData(ctx context.Context, wait time.Duration, log *slog.Logger) ([]byte, error) {
	deadline := time.Now().Add(wait)
	for {
		drives, _ := filepath.Glob("/sys/block/sr*")
		for _, d := range drives {
			dev := "/dev/" + filepath.Base(d)
			b, err := readISOFile(dev, NetworkDataPath)
			if err != nil {
				log.Info("no network_data on drive", "device", dev, "err", err)
				continue
			}
			log.Info("network_data found on virtual media", "device", dev, "bytes", len(b))
			return b, nil
		}
		// A drive without the file: the ISO carries no network_data.
		if len(drives) > 0 || time.Now().After(deadline) {
			return nil, nil
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func readISOFile(dev, name string) ([]byte, error) {
	f, err := os.Open(dev)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	size, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return nil, err
	}
	if size == 0 {
		return nil, errors.New("no medium")
	}
	fs, err := iso9660.Read(file.New(f, true), size, 0, 2048)
	if err != nil {
		return nil, err
	}
	r, err := fs.OpenFile(name, os.O_RDONLY)
	if err != nil {
		return nil, err
	}
	defer r.Close()
	b, err := io.ReadAll(io.LimitReader(r, maxNetworkData+1))
	if err != nil {
		return nil, err
	}
	if len(b) > maxNetworkData {
		return nil, fmt.Errorf("%s is larger than %d bytes", name, maxNetworkData)
	}
	return b, nil
}

// NICs maps the lower-case MAC address of every Ethernet interface to its
// name, for PlanNetwork.
func NICs() map[string]string {
	out := map[string]string{}
	ents, _ := os.ReadDir("/sys/class/net")
	for _, e := range ents {
		name := e.Name()
		if readFile(filepath.Join("/sys/class/net", name, "type")) != "1" {
			continue
		}
		if mac := strings.ToLower(readFile(filepath.Join("/sys/class/net", name, "address"))); mac != "" {
			if _, ok := out[mac]; !ok { // a bond's members share its MAC
				out[mac] = name
			}
		}
	}
	return out
}

// ApplyNetworkData configures the network from a node's network_data, as
// the agent does before its lookup when it was booted from virtual media
// on a network without DHCP: links, bonds and VLANs, static addresses,
// routes and DNS, then DHCP on the links network_data says use it.
func ApplyNetworkData(ctx context.Context, nd *NetworkData, log *slog.Logger) ([]Interface, error) {
	if err := linkUp("lo"); err != nil {
		log.Warn("bring up lo failed", "err", err)
	}
	plan, err := PlanNetwork(nd, NICs())
	if err != nil {
		return nil, fmt.Errorf("network_data: %w", err)
	}
	for _, c := range plan.Commands() {
		log.Info("network_data", "step", c)
	}
	if mods := plan.Modules(); len(mods) > 0 {
		l, err := kmod.NewLoader(filepath.Join("/lib/modules", KernelRelease()), log)
		if err == nil {
			err = l.Load(mods...)
		}
		if err != nil {
			log.Warn("network_data: kernel modules", "modules", mods, "err", err)
		}
	}
	if err := applyPlan(plan, "/etc/resolv.conf"); err != nil {
		return nil, fmt.Errorf("network_data: %w", err)
	}
	var done []Interface
	for _, l := range plan.Links {
		if err := waitCarrier(ctx, l.Name); err != nil {
			log.Warn("network_data link has no carrier", "interface", l.Name, "err", err)
		}
	}
	for _, a := range plan.Addrs {
		ifc := Interface{Name: a.Link, MAC: readFile(filepath.Join("/sys/class/net", a.Link, "address")),
			Addr: net.IPNet{IP: a.Prefix.Addr().AsSlice(), Mask: net.CIDRMask(a.Prefix.Bits(), a.Prefix.Addr().BitLen())}}
		done = append(done, ifc)
	}
	for _, l := range plan.DHCP {
		ifc, err := configure(ctx, l, Families{V4: true}, log)
		if err != nil {
			log.Warn("network_data: DHCP failed", "interface", l, "err", err)
			continue
		}
		if ifc.Gateway != nil {
			if err := addDefaultRoute(ifc.Name, ifc.Gateway); err != nil {
				log.Warn("default route failed", "interface", ifc.Name, "gateway", ifc.Gateway, "err", err)
			}
		}
		done = append(done, ifc)
	}
	if len(done) == 0 {
		return nil, errors.New("network_data configured no address")
	}
	return done, nil
}

// applyPlan makes the kernel's network what p says, through netlink, and
// writes the DNS servers to resolvConf.
func applyPlan(p *NetPlan, resolvConf string) error {
	for _, l := range p.Links {
		if err := applyLink(l); err != nil {
			return err
		}
	}
	for _, a := range p.Addrs {
		link, err := nl.LinkByName(a.Link)
		if err != nil {
			return fmt.Errorf("address %s: %w", a.Prefix, err)
		}
		addr := &nl.Addr{IPNet: &net.IPNet{IP: a.Prefix.Addr().AsSlice(), Mask: net.CIDRMask(a.Prefix.Bits(), a.Prefix.Addr().BitLen())}}
		if a.Prefix.Addr().Is6() {
			// No duplicate address detection: the address is usable at
			// once, as the lookup needs it (the operator assigned it).
			addr.Flags = unix.IFA_F_NODAD
		}
		if err := nl.AddrReplace(link, addr); err != nil {
			return fmt.Errorf("ip address add %s dev %s: %w", a.Prefix, a.Link, err)
		}
	}
	for _, r := range p.Routes {
		link, err := nl.LinkByName(r.Link)
		if err != nil {
			return fmt.Errorf("route %s: %w", r.Dst, err)
		}
		route := &nl.Route{LinkIndex: link.Attrs().Index, Gw: r.Via.AsSlice(), Protocol: unix.RTPROT_STATIC,
			Dst: &net.IPNet{IP: r.Dst.Addr().AsSlice(), Mask: net.CIDRMask(r.Dst.Bits(), r.Dst.Addr().BitLen())}}
		if r.Dst.Bits() == 0 {
			route.Dst = nil // the default route
			route.Family = nl.FAMILY_V4
			if r.Dst.Addr().Is6() {
				route.Family = nl.FAMILY_V6
			}
		}
		if err := nl.RouteReplace(route); err != nil {
			return fmt.Errorf("route %s via %s dev %s: %w", r.Dst, r.Via, r.Link, err)
		}
	}
	if len(p.DNS) > 0 {
		if err := os.MkdirAll(filepath.Dir(resolvConf), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(resolvConf, []byte(p.ResolvConf()), 0o644); err != nil {
			return fmt.Errorf("write %s: %w", resolvConf, err)
		}
	}
	return nil
}

func applyLink(l PlanLink) error {
	var link nl.Link
	var err error
	switch l.Kind {
	case "bond":
		bond := nl.NewLinkBond(nl.LinkAttrs{Name: l.Name})
		bond.Mode = nl.StringToBondMode(l.Mode)
		if bond.Mode == nl.BOND_MODE_UNKNOWN {
			return fmt.Errorf("bond %s: mode %q unknown", l.Name, l.Mode)
		}
		// Link monitoring, which every mode needs to pick or drop a member
		// (ifupdown and NetworkManager default to the same 100 ms).
		bond.Miimon = 100
		if err := nl.LinkAdd(bond); err != nil && !errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("ip link add %s type bond: %w", l.Name, err)
		}
		if link, err = nl.LinkByName(l.Name); err != nil {
			return err
		}
		for _, s := range l.Slaves {
			sl, err := nl.LinkByName(s)
			if err != nil {
				return fmt.Errorf("bond %s member %s: %w", l.Name, s, err)
			}
			// A member must be down to be enslaved.
			if err := nl.LinkSetDown(sl); err != nil {
				return fmt.Errorf("ip link set %s down: %w", s, err)
			}
			if err := nl.LinkSetBondSlave(sl, bond); err != nil {
				return fmt.Errorf("ip link set %s master %s: %w", s, l.Name, err)
			}
			if err := nl.LinkSetUp(sl); err != nil {
				return fmt.Errorf("ip link set %s up: %w", s, err)
			}
		}
	case "vlan":
		parent, err := nl.LinkByName(l.Parent)
		if err != nil {
			return fmt.Errorf("vlan %s: parent %s: %w", l.Name, l.Parent, err)
		}
		if err := nl.LinkSetUp(parent); err != nil {
			return fmt.Errorf("ip link set %s up: %w", l.Parent, err)
		}
		v := &nl.Vlan{LinkAttrs: nl.LinkAttrs{Name: l.Name, ParentIndex: parent.Attrs().Index}, VlanId: l.VLANID}
		if err := nl.LinkAdd(v); err != nil && !errors.Is(err, unix.EEXIST) {
			return fmt.Errorf("ip link add link %s name %s type vlan id %d: %w", l.Parent, l.Name, l.VLANID, err)
		}
		if link, err = nl.LinkByName(l.Name); err != nil {
			return err
		}
	default:
		if link, err = nl.LinkByName(l.Name); err != nil {
			return err
		}
	}
	if l.MAC != "" && l.Kind != "" {
		hw, err := net.ParseMAC(l.MAC)
		if err != nil {
			return fmt.Errorf("link %s: address %q: %w", l.Name, l.MAC, err)
		}
		if err := nl.LinkSetHardwareAddr(link, hw); err != nil {
			return fmt.Errorf("ip link set %s address %s: %w", l.Name, l.MAC, err)
		}
	}
	if l.MTU > 0 {
		if err := nl.LinkSetMTU(link, l.MTU); err != nil {
			return fmt.Errorf("ip link set %s mtu %d: %w", l.Name, l.MTU, err)
		}
	}
	if err := nl.LinkSetUp(link); err != nil {
		return fmt.Errorf("ip link set %s up: %w", l.Name, err)
	}
	return nil
}

func waitCarrier(ctx context.Context, name string) error {
	deadline := time.Now().Add(CarrierWait)
	for readFile(filepath.Join("/sys/class/net", name, "carrier")) != "1" {
		if time.Now().After(deadline) {
			return fmt.Errorf("no carrier after %s", CarrierWait)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	return nil
}
