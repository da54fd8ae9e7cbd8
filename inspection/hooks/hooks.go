// Package hooks is ironflow's version of Ironic's inspection hooks
// (ironic/drivers/modules/inspector/hooks): they turn the inventory a
// ramdisk or a BMC reported into plugin_data (valid_interfaces,
// all_interfaces with their pxe_enabled flag, macs, parsed_lldp, root_disk,
// local_gb), node properties (cpu_arch, cpus, memory_mb, local_gb, CPU
// capabilities) and ports (created with pxe_enabled, local_link_connection
// from LLDP). Metal3's baremetal-operator builds a host's hardware details
// from those plugin_data keys.
//
// Like package rules it works on plain copies (Data): nothing here reads or
// writes the store, so the caller applies the outcome in one transaction.
package hooks

import (
	"fmt"
	"net/netip"
	"sort"
	"strings"

	"github.com/ironflow/ironflow/agent"
	"github.com/ironflow/ironflow/pyliteral"
)

// Hook names, Ironic's.
const (
	RamdiskError        = "ramdisk-error"
	ValidateInterfaces  = "validate-interfaces"
	Ports               = "ports"
	Architecture        = "architecture"
	Memory              = "memory"
	CPUs                = "cpus"
	RootDevice          = "root-device"
	CPUCapabilities     = "cpu-capabilities"
	ParseLLDPHook       = "parse-lldp"
	LocalLinkConnection = "local-link-connection"
	// The optional hooks (optional.go): not in DefaultHooks, enabled by
	// the worker's --inspection-hooks as Ironic's [inspector]hooks.
	BootMode        = "boot-mode"
	PhysicalNetwork = "physical-network"
	PCIDevices      = "pci-devices"
)

// Known are the hooks Run knows, for the worker's check of its
// --inspection-hooks.
var Known = []string{RamdiskError, ValidateInterfaces, Ports, Architecture, Memory, CPUs, RootDevice, CPUCapabilities,
	ParseLLDPHook, LocalLinkConnection, BootMode, PhysicalNetwork, PCIDevices}

// DefaultHooks run on every in-band inspection: Ironic's default_hooks
// (ramdisk-error, validate-interfaces, ports, architecture) and the hooks
// that fill in what ironflow 0.1.0 already set (memory, cpus, root-device)
// and what Metal3 reads (parse-lldp, local-link-connection), plus
// cpu-capabilities.
var DefaultHooks = []string{RamdiskError, ValidateInterfaces, Ports, Architecture, Memory, CPUs, RootDevice,
	CPUCapabilities, ParseLLDPHook, LocalLinkConnection}

// OutOfBandHooks run on a BMC's inventory: nothing boots, so no ramdisk
// error, no PXE interface and no LLDP; with Config.OutOfBand a missing
// architecture or network interface is no error.
var OutOfBandHooks = []string{ValidateInterfaces, Ports, Architecture, Memory, CPUs, RootDevice, CPUCapabilities}

// Config is the [inspector] options the hooks read.
type Config struct {
	// AddPorts: which interfaces become ports: "all" (ironflow's default,
	// as 0.1.0 did), "pxe" (Ironic's default: only the PXE interface when
	// the inventory names it), "active" (those with an IP address) or
	// "disabled".
	AddPorts string
	// KeepPorts: "all" (default), "present" (delete ports whose MAC is not
	// in the inventory) or "added" (keep only the ports AddPorts selects).
	KeepPorts string
	// KeepPXEEnabled leaves existing ports' pxe_enabled alone (Ironic's
	// update_pxe_enabled = False).
	KeepPXEEnabled bool
	// CPUCapabilities maps a CPU flag to the capability set to "true";
	// nil is Ironic's default (vmx and svm: cpu_vt, aes: cpu_aes, ...).
	CPUCapabilities map[string]string
	// MinRootDiskSize is the smallest disk root-device picks without hints
	// and without the ramdisk's root_disk (agent.DefaultMinRootDiskSize).
	MinRootDiskSize int64
	// PhysicalNetworkCIDRMap: "cidr:physnet" entries (Ironic's
	// [inspector]physical_network_cidr_map) the physical-network hook
	// matches the interfaces' addresses against.
	PhysicalNetworkCIDRMap []string
	// PCIDeviceAlias: the pci-devices hook's aliases (Ironic's
	// [inspector]pci_device_alias, JSON objects with exactly vendor_id,
	// product_id and name).
	PCIDeviceAlias []PCIAlias
	// OutOfBand: the inventory is a BMC's, which may list no network
	// interface and no CPU architecture: validate-interfaces then finds
	// none and architecture sets nothing, instead of failing (Ironic runs
	// no hooks on a Redfish inspection; ironflow 0.1.0 accepted such an
	// inventory).
	OutOfBand bool
}

// DefaultCPUCapabilities is Ironic's [inspector]cpu_capabilities default.
var DefaultCPUCapabilities = map[string]string{"vmx": "cpu_vt", "svm": "cpu_vt", "aes": "cpu_aes", "pse": "cpu_hugepages",
	"pdpe1gb": "cpu_hugepages_1g", "smx": "cpu_txt"}

// Data is the node's copy the hooks work on. Ports are by Ironic's JSON
// names; a port the hooks create is appended without "uuid".
type Data struct {
	NodeUUID   string
	Properties map[string]any
	Ports      []map[string]any
	Inventory  map[string]any
	PluginData map[string]any
	// DeletePorts are the UUIDs of ports KeepPorts removes.
	DeletePorts []string
}

// Error is a hook's refusal of the data (Ironic's
// HardwareInspectionFailure or InvalidNodeInventory); its text is Ironic's.
type Error struct{ msg string }

func (e *Error) Error() string { return e.msg }

func invalidInventory(node, reason string) error {
	return &Error{fmt.Sprintf("Inventory for node %s is invalid: %s", node, reason)}
}

// Run runs the named hooks over d, in Ironic's order: every hook's
// preprocess step (ramdisk-error, validate-interfaces) first, then each
// hook.
func Run(names []string, cfg Config, d *Data) error {
	if cfg.AddPorts == "" {
		cfg.AddPorts = "all"
	}
	if cfg.KeepPorts == "" {
		cfg.KeepPorts = "all"
	}
	if cfg.CPUCapabilities == nil {
		cfg.CPUCapabilities = DefaultCPUCapabilities
	}
	if cfg.MinRootDiskSize == 0 {
		cfg.MinRootDiskSize = agent.DefaultMinRootDiskSize
	}
	if d.PluginData == nil {
		d.PluginData = map[string]any{}
	}
	if d.Properties == nil {
		d.Properties = map[string]any{}
	}
	enabled := map[string]bool{}
	for _, n := range names {
		enabled[n] = true
	}
	if enabled[RamdiskError] && pyliteral.Truthy(d.PluginData["error"]) {
		return &Error{fmt.Sprintf("Failed to inspect hardware. Reason: Ramdisk reported error: %s", pyliteral.Str(d.PluginData["error"]))}
	}
	if enabled[ValidateInterfaces] {
		if err := validateInterfaces(cfg, d); err != nil {
			return err
		}
	}
	for _, n := range names {
		var err error
		switch n {
		case Ports:
			err = ports(cfg, d)
		case Architecture:
			cpu, _ := d.Inventory["cpu"].(map[string]any)
			arch, ok := cpu["architecture"].(string)
			if (!ok || arch == "") && cfg.OutOfBand {
				break // a BMC need not say
			}
			if !ok || arch == "" {
				err = invalidInventory(d.NodeUUID, fmt.Sprintf("Inventory has malformed or missing CPU architecture information: %s for node %s.",
					pyliteral.ReprDecoded(d.Inventory["cpu"]), d.NodeUUID))
				break
			}
			d.Properties["cpu_arch"] = arch
		case Memory:
			// Ironic's memory hook reads physical_mb; a BMC's inventory may
			// only have the total (bytes), which ironflow 0.1.0 used too.
			mem, _ := d.Inventory["memory"].(map[string]any)
			if mb, ok := mem["physical_mb"].(float64); ok && mb > 0 {
				d.Properties["memory_mb"] = mb
			} else if total, ok := mem["total"].(float64); ok && total > 0 {
				d.Properties["memory_mb"] = float64(int64(total) >> 20)
			}
		case CPUs:
			cpu, _ := d.Inventory["cpu"].(map[string]any)
			if c, ok := cpu["count"].(float64); ok && c > 0 {
				d.Properties["cpus"] = c
			}
		case RootDevice:
			err = rootDevice(cfg, d)
		case CPUCapabilities:
			cpuCapabilities(cfg, d)
		case ParseLLDPHook:
			parseLLDP(d)
		case LocalLinkConnection:
			localLinkConnection(d)
		case BootMode:
			bootMode(d)
		case PhysicalNetwork:
			err = physicalNetwork(cfg, d)
		case PCIDevices:
			pciDevices(cfg, d)
		case RamdiskError, ValidateInterfaces:
		default:
			err = fmt.Errorf("unknown inspection hook %q", n)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// pxeMAC is the PXE interface the inventory names (boot.pxe_interface),
// also in pxelinux's 01-aa-bb-cc-dd-ee-ff form.
func pxeMAC(inv map[string]any) string {
	boot, _ := inv["boot"].(map[string]any)
	mac, _ := boot["pxe_interface"].(string)
	if strings.Contains(mac, "-") {
		_, rest, _ := strings.Cut(mac, "-")
		mac = strings.ReplaceAll(rest, "-", ":")
	}
	return strings.ToLower(mac)
}

func normalizeMAC(s string) (string, bool) {
	s = strings.ToLower(strings.TrimSpace(s))
	parts := strings.Split(s, ":")
	if len(parts) != 6 {
		return "", false
	}
	for _, p := range parts {
		if len(p) != 2 || strings.Trim(p, "0123456789abcdef") != "" {
			return "", false
		}
	}
	return s, true
}

// validateInterfaces is Ironic's validate-interfaces: all_interfaces are
// the inventory's interfaces with a name and a valid MAC, each with
// pxe_enabled; valid_interfaces those add_ports selects, without loopback;
// macs their addresses.
func validateInterfaces(cfg Config, d *Data) error {
	list, ok := d.Inventory["interfaces"].([]any)
	if !ok && !cfg.OutOfBand {
		return invalidInventory(d.NodeUUID, "no interfaces present in inventory")
	}
	pxe := pxeMAC(d.Inventory)
	all := map[string]any{}
	var order []string
	for _, it := range list {
		iface, _ := it.(map[string]any)
		name, _ := iface["name"].(string)
		rawMAC, _ := iface["mac_address"].(string)
		if name == "" || rawMAC == "" {
			continue
		}
		mac, ok := normalizeMAC(rawMAC)
		if !ok {
			continue
		}
		cp := make(map[string]any, len(iface)+1)
		for k, v := range iface {
			cp[k] = v
		}
		cp["mac_address"] = mac
		// Without a PXE interface in the inventory (virtual media, or a
		// ramdisk that does not say), every interface may boot, as in
		// ironflow 0.1.0; Ironic would mark none.
		cp["pxe_enabled"] = pxe == "" || mac == pxe
		if v6, ok := cp["ipv6_address"].(string); ok {
			cp["ipv6_address"], _, _ = strings.Cut(v6, "%")
		}
		if _, seen := all[name]; !seen {
			order = append(order, name)
		}
		all[name] = cp
	}
	if len(all) == 0 && !cfg.OutOfBand {
		return invalidInventory(d.NodeUUID, "no valid network interfaces")
	}
	valid := map[string]any{}
	macs := []any{}
	for _, name := range order {
		iface := all[name].(map[string]any)
		ip, _ := iface["ipv4_address"].(string)
		if ip == "" {
			ip, _ = iface["ipv6_address"].(string)
		}
		// An all-zero MAC (a BMC's placeholder) never becomes a port, as in
		// ironflow 0.1.0: ports' MACs are unique across nodes.
		if name == "lo" || isLoopback(ip) || iface["mac_address"] == "00:00:00:00:00:00" {
			continue
		}
		if cfg.AddPorts == "pxe" && pxe != "" && iface["pxe_enabled"] != true {
			continue
		}
		if cfg.AddPorts == "active" && ip == "" {
			continue
		}
		cp := make(map[string]any, len(iface))
		for k, v := range iface {
			cp[k] = v
		}
		valid[name] = cp
		macs = append(macs, iface["mac_address"])
	}
	if len(valid) == 0 && !cfg.OutOfBand {
		return invalidInventory(d.NodeUUID, fmt.Sprintf("no network interfaces match the configuration (add_ports set to \"%s\")", cfg.AddPorts))
	}
	d.PluginData["all_interfaces"] = all
	d.PluginData["valid_interfaces"] = valid
	d.PluginData["macs"] = macs
	return nil
}

func isLoopback(ip string) bool {
	a, err := netip.ParseAddr(ip)
	return err == nil && a.IsLoopback()
}

// sortedInterfaces returns a plugin_data interface dict's entries by name.
func sortedInterfaces(v any) []map[string]any {
	m, _ := v.(map[string]any)
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make([]map[string]any, 0, len(names))
	for _, n := range names {
		if iface, ok := m[n].(map[string]any); ok {
			out = append(out, iface)
		}
	}
	return out
}

func (d *Data) portByMAC(mac string) map[string]any {
	for _, p := range d.Ports {
		if p["address"] == mac {
			return p
		}
	}
	return nil
}

// ports is Ironic's ports hook: a port for every valid interface the node
// has none for (pxe_enabled as the interface, extra client-id), then the
// existing ports' pxe_enabled and client-id brought in line and, with
// keep_ports, ports of other MACs dropped. A MAC that another node's port
// has is the caller's to skip (the store refuses duplicates).
func ports(cfg Config, d *Data) error {
	if cfg.AddPorts != "disabled" {
		for _, iface := range sortedInterfaces(d.PluginData["valid_interfaces"]) {
			mac, _ := iface["mac_address"].(string)
			if d.portByMAC(mac) != nil {
				continue
			}
			extra := map[string]any{}
			if cid, ok := iface["client_id"].(string); ok && cid != "" {
				extra["client-id"] = cid
			}
			d.Ports = append(d.Ports, map[string]any{"address": mac, "pxe_enabled": iface["pxe_enabled"],
				"extra": extra, "local_link_connection": map[string]any{}})
		}
	}
	all := sortedInterfaces(d.PluginData["all_interfaces"])
	var expected map[string]bool
	switch cfg.KeepPorts {
	case "present":
		expected = map[string]bool{}
		for _, iface := range all {
			expected[iface["mac_address"].(string)] = true
		}
	case "added":
		expected = map[string]bool{}
		for _, m := range d.PluginData["macs"].([]any) {
			expected[m.(string)] = true
		}
	}
	pxeMACs, clientIDs := map[string]bool{}, map[string]string{}
	for _, iface := range all {
		mac := iface["mac_address"].(string)
		if iface["pxe_enabled"] == true {
			pxeMACs[mac] = true
		}
		if cid, ok := iface["client_id"].(string); ok {
			clientIDs[mac] = cid
		}
	}
	kept := d.Ports[:0]
	for _, p := range d.Ports {
		mac, _ := p["address"].(string)
		if len(expected) > 0 && !expected[mac] {
			if id, ok := p["uuid"].(string); ok {
				d.DeletePorts = append(d.DeletePorts, id)
			}
			continue
		}
		if !cfg.KeepPXEEnabled && pxeMAC(d.Inventory) != "" {
			p["pxe_enabled"] = pxeMACs[mac]
		}
		if cid := clientIDs[mac]; cid != "" {
			extra, _ := p["extra"].(map[string]any)
			if extra == nil {
				extra = map[string]any{}
				p["extra"] = extra
			}
			extra["client-id"] = cid
		}
		kept = append(kept, p)
	}
	d.Ports = kept
	return nil
}

// rootDevice is Ironic's root-device hook: with root device hints the disk
// they select (none: inspection fails), else the ramdisk's own root_disk,
// else (ironflow: a BMC's inventory, or a ramdisk that does not say) the
// disk the agent would deploy to, the smallest of at least 4 GiB. local_gb
// is its size in GiB less one (Ironic's disk_partitioning_spacing).
func rootDevice(cfg Config, d *Data) error {
	disks, _ := d.Inventory["disks"].([]any)
	var devs []agent.BlockDevice
	byName := map[string]map[string]any{}
	for _, it := range disks {
		m, _ := it.(map[string]any)
		name, _ := m["name"].(string)
		if name == "" {
			continue
		}
		size, _ := m["size"].(float64)
		s := func(k string) string { v, _ := m[k].(string); return v }
		rot, _ := m["rotational"].(bool)
		devs = append(devs, agent.BlockDevice{Name: name, Size: int64(size), Model: s("model"), Vendor: s("vendor"),
			Serial: s("serial"), WWN: s("wwn"), ByPath: s("by_path"), HCTL: s("hctl"), Rotational: rot})
		byName[name] = m
	}
	hints, _ := d.Properties["root_device"].(map[string]any)
	if len(hints) > 0 {
		bd, err := agent.ChooseRootDevice(devs, hints, cfg.MinRootDiskSize)
		if err != nil {
			return &Error{fmt.Sprintf("Failed to inspect hardware. Reason: No disks satisfied root device hints for node %s", d.NodeUUID)}
		}
		d.PluginData["root_disk"] = byName[bd.Name]
	} else if _, ok := d.PluginData["root_disk"].(map[string]any); !ok && len(devs) > 0 {
		if bd, err := agent.ChooseRootDevice(devs, nil, cfg.MinRootDiskSize); err == nil {
			d.PluginData["root_disk"] = byName[bd.Name]
		}
	}
	localGB := float64(0)
	if root, ok := d.PluginData["root_disk"].(map[string]any); ok {
		size, _ := root["size"].(float64)
		if gb := int64(size) >> 30; gb > 0 {
			localGB = float64(gb - 1)
		}
	}
	d.PluginData["local_gb"] = localGB
	d.Properties["local_gb"] = localGB
	return nil
}

// cpuCapabilities is Ironic's cpu-capabilities hook: a capability
// "<name>:true" for every mapped CPU flag, merged into
// properties.capabilities.
func cpuCapabilities(cfg Config, d *Data) {
	cpu, _ := d.Inventory["cpu"].(map[string]any)
	flags, _ := cpu["flags"].([]any)
	if len(flags) == 0 {
		return
	}
	have := map[string]bool{}
	for _, f := range flags {
		if s, ok := f.(string); ok {
			have[s] = true
		}
	}
	var names []string
	for flag, name := range cfg.CPUCapabilities {
		if have[flag] {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return
	}
	sort.Strings(names)
	current, _ := d.Properties["capabilities"].(string)
	d.Properties["capabilities"] = UpdatedCapabilities(current, names)
}

// UpdatedCapabilities is Ironic's get_updated_capabilities with every new
// capability "true": existing ones keep their place (and get the new
// value), new ones are appended.
func UpdatedCapabilities(current string, set []string) string {
	vals := make(map[string]string, len(set))
	for _, k := range set {
		vals[k] = "true"
	}
	return updatedCapabilityValues(current, set, vals)
}

// updatedCapabilityValues is Ironic's get_updated_capabilities: the keys
// (in order) take their values from set; existing capabilities keep their
// place, new ones are appended.
func updatedCapabilityValues(current string, keysInOrder []string, set map[string]string) string {
	var keys []string
	vals := map[string]string{}
	if current != "" {
		for _, kv := range strings.Split(current, ",") {
			k, v, _ := strings.Cut(kv, ":")
			if _, ok := vals[k]; !ok {
				keys = append(keys, k)
			}
			vals[k] = v
		}
	}
	for _, k := range keysInOrder {
		if _, ok := vals[k]; !ok {
			keys = append(keys, k)
		}
		vals[k] = set[k]
	}
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + ":" + vals[k]
	}
	return strings.Join(parts, ",")
}

// lldpOf returns an interface's raw TLVs: plugin_data lldp_raw first, then
// the inventory interface's own lldp list.
func (d *Data) lldpOf(iface map[string]any) (any, bool) {
	name, _ := iface["name"].(string)
	raw, _ := d.PluginData["lldp_raw"].(map[string]any)
	if v, ok := raw[name]; ok && pyliteral.Truthy(v) {
		return v, true
	}
	v, ok := iface["lldp"]
	return v, ok && v != nil
}

// maxLLDPInterfaces bounds the interfaces parse-lldp reads, as Ironic's.
const maxLLDPInterfaces = 64

// parseLLDP is Ironic's parse-lldp hook: parsed_lldp[interface] = the
// interface's LLDP TLVs by name.
func parseLLDP(d *Data) {
	list, _ := d.Inventory["interfaces"].([]any)
	if len(list) > maxLLDPInterfaces {
		list = list[:maxLLDPInterfaces]
	}
	for _, it := range list {
		iface, _ := it.(map[string]any)
		name, _ := iface["name"].(string)
		raw, ok := d.lldpOf(iface)
		if !ok {
			continue
		}
		tlvs, _ := rawTLVs(raw)
		nv := ParseLLDP(tlvs)
		if len(nv) == 0 {
			continue
		}
		parsed, _ := d.PluginData["parsed_lldp"].(map[string]any)
		if parsed == nil {
			parsed = map[string]any{}
			d.PluginData["parsed_lldp"] = parsed
		}
		parsed[name] = nv
	}
}

// localLinkConnection is Ironic's local-link-connection hook: a port's
// local_link_connection gets port_id, switch_id and switch_info from its
// interface's LLDP, keys it already has kept.
func localLinkConnection(d *Data) {
	all, _ := d.PluginData["all_interfaces"].(map[string]any)
	list, _ := d.Inventory["interfaces"].([]any)
	for _, it := range list {
		iface, _ := it.(map[string]any)
		name, _ := iface["name"].(string)
		if _, ok := all[name]; !ok {
			continue
		}
		mac, _ := normalizeMAC(fmt.Sprint(iface["mac_address"]))
		port := d.portByMAC(mac)
		if port == nil {
			continue
		}
		raw, ok := d.lldpOf(iface)
		if !ok {
			continue
		}
		tlvs, bad := rawTLVs(raw)
		if bad > 0 {
			continue // Ironic leaves the port alone when a TLV is not hex
		}
		llc, _ := port["local_link_connection"].(map[string]any)
		if llc == nil {
			llc = map[string]any{}
			port["local_link_connection"] = llc
		}
		for k, v := range localLink(tlvs) {
			if _, has := llc[k]; !has {
				llc[k] = v
			}
		}
	}
}
