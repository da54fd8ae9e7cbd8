package hooks

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"sort"
	"strings"
)

// Ironic's optional inspection hooks (ironic/drivers/modules/inspector/
// hooks): boot-mode, physical-network and pci-devices. They run only when
// named in the worker's --inspection-hooks (docs/inspection.md).

// bootMode is Ironic's boot-mode hook: the capability boot_mode takes the
// inventory's boot.current_boot_mode; without one nothing changes.
func bootMode(d *Data) {
	boot, _ := d.Inventory["boot"].(map[string]any)
	mode, _ := boot["current_boot_mode"].(string)
	if mode == "" {
		return
	}
	current, _ := d.Properties["capabilities"].(string)
	d.Properties["capabilities"] = updatedCapabilityValues(current, []string{"boot_mode"}, map[string]string{"boot_mode": mode})
}

// ParseCIDRMap reads physical_network_cidr_map entries ("cidr:physnet",
// split at the last colon, so IPv6 networks work).
func ParseCIDRMap(entries []string) (map[netip.Prefix]string, error) {
	out := make(map[netip.Prefix]string, len(entries))
	for _, e := range entries {
		i := strings.LastIndex(e, ":")
		if i <= 0 || i == len(e)-1 {
			return nil, fmt.Errorf("physical network CIDR map entry %q: want <cidr>:<physical network>", e)
		}
		p, err := netip.ParsePrefix(e[:i])
		if err != nil {
			return nil, fmt.Errorf("physical network CIDR map entry %q: %v", e, err)
		}
		out[p.Masked()] = e[i+1:]
	}
	return out, nil
}

// physicalNetwork is Ironic's physical-network hook: a port of an
// interface validate-interfaces kept gets the physical network of the
// first CIDR that holds the interface's IPv4, else its IPv6 address.
func physicalNetwork(cfg Config, d *Data) error {
	cidrs, err := ParseCIDRMap(cfg.PhysicalNetworkCIDRMap)
	if err != nil || len(cidrs) == 0 {
		return err
	}
	prefixes := make([]netip.Prefix, 0, len(cidrs))
	for p := range cidrs {
		prefixes = append(prefixes, p)
	}
	// A stable order where networks overlap: the longest prefix first.
	sort.Slice(prefixes, func(i, j int) bool {
		if prefixes[i].Bits() != prefixes[j].Bits() {
			return prefixes[i].Bits() > prefixes[j].Bits()
		}
		return prefixes[i].String() < prefixes[j].String()
	})
	all, _ := d.PluginData["all_interfaces"].(map[string]any)
	ifaces, _ := d.Inventory["interfaces"].([]any)
	for _, v := range ifaces {
		iface, _ := v.(map[string]any)
		name, _ := iface["name"].(string)
		if _, ok := all[name]; !ok {
			continue
		}
		mac, _ := iface["mac_address"].(string)
		port := d.portByMAC(strings.ToLower(mac))
		if port == nil {
			continue
		}
		physnet := ""
		for _, key := range []string{"ipv4_address", "ipv6_address"} {
			s, _ := iface[key].(string)
			ip, err := netip.ParseAddr(strings.SplitN(s, "%", 2)[0])
			if err != nil {
				continue
			}
			for _, p := range prefixes {
				if p.Contains(ip.Unmap()) {
					physnet = cidrs[p]
					break
				}
			}
			if physnet != "" {
				break
			}
		}
		if physnet != "" {
			port["physical_network"] = physnet
		}
	}
	return nil
}

// PCIAlias is one pci_device_alias entry.
type PCIAlias struct {
	VendorID  string `json:"vendor_id"`
	ProductID string `json:"product_id"`
	Name      string `json:"name"`
}

// ParsePCIAlias reads one pci_device_alias entry: a JSON object with
// exactly vendor_id, product_id and name.
func ParsePCIAlias(s string) (PCIAlias, error) {
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		return PCIAlias{}, fmt.Errorf("pci device alias %q: %v", s, err)
	}
	var a PCIAlias
	if len(m) != 3 {
		return a, fmt.Errorf(`pci device alias %q: the entry should contain exactly the "vendor_id", "product_id" and "name" keys`, s)
	}
	for k, dst := range map[string]*string{"vendor_id": &a.VendorID, "product_id": &a.ProductID, "name": &a.Name} {
		v, ok := m[k].(string)
		if !ok {
			return PCIAlias{}, fmt.Errorf(`pci device alias %q: the entry should contain exactly the "vendor_id", "product_id" and "name" keys`, s)
		}
		*dst = v
	}
	return a, nil
}

// pciDevices is Ironic's pci-devices hook: plugin_data.pci_devices (the
// ramdisk's pci-devices collector: vendor_id and product_id per device)
// counted per alias into capabilities (<name>:<count>).
func pciDevices(cfg Config, d *Data) {
	devs, ok := d.PluginData["pci_devices"].([]any)
	if !ok || len(cfg.PCIDeviceAlias) == 0 {
		return
	}
	names := map[[2]string]string{}
	for _, a := range cfg.PCIDeviceAlias {
		names[[2]string{a.VendorID, a.ProductID}] = a.Name
	}
	count := map[string]int{}
	var order []string
	for _, v := range devs {
		dev, _ := v.(map[string]any)
		vendor, _ := dev["vendor_id"].(string)
		product, _ := dev["product_id"].(string)
		if name, ok := names[[2]string{vendor, product}]; ok {
			if count[name] == 0 {
				order = append(order, name)
			}
			count[name]++
		}
	}
	if len(order) == 0 {
		return
	}
	vals := make(map[string]string, len(order))
	for _, n := range order {
		vals[n] = fmt.Sprint(count[n])
	}
	current, _ := d.Properties["capabilities"].(string)
	d.Properties["capabilities"] = updatedCapabilityValues(current, order, vals)
}
