package hooks

import (
	"strings"
	"testing"
)

// The optional hooks, as Ironic's run them on the IPA fixture: boot-mode
// writes the capability from the inventory, physical-network maps eth0's
// address to its network (the longest prefix where two hold it) and
// leaves eth1 (no address) alone, pci-devices counts the aliased devices
// of plugin_data.pci_devices into capabilities; the default hooks do none
// of it.
func TestOptionalHooks(t *testing.T) {
	cfg := Config{
		PhysicalNetworkCIDRMap: []string{"192.0.2.0/24:physnet-wide", "192.0.2.0/27:physnet-rack", "2001:db8::/64:physnet-v6"},
		PCIDeviceAlias:         []PCIAlias{{VendorID: "10de", ProductID: "1eb8", Name: "gpu_t4"}, {VendorID: "8086", ProductID: "0d5c", Name: "qat"}},
	}
	names := append(append([]string(nil), DefaultHooks...), BootMode, PhysicalNetwork, PCIDevices)

	d := fixture(t)
	d.Properties["capabilities"] = "boot_mode:bios,custom:x"
	d.PluginData["pci_devices"] = []any{
		map[string]any{"vendor_id": "10de", "product_id": "1eb8"}, map[string]any{"vendor_id": "10de", "product_id": "1eb8"},
		map[string]any{"vendor_id": "1af4", "product_id": "1000"},
	}
	if err := Run(names, cfg, d); err != nil {
		t.Fatal(err)
	}
	caps, _ := d.Properties["capabilities"].(string)
	for _, want := range []string{"boot_mode:uefi", "custom:x", "gpu_t4:2"} {
		if !strings.Contains(caps, want) {
			t.Errorf("capabilities %q lack %q", caps, want)
		}
	}
	if strings.Contains(caps, "qat") || strings.Index(caps, "boot_mode") != 0 {
		t.Errorf("capabilities %q: an absent alias counted, or boot_mode moved", caps)
	}
	for _, p := range d.Ports {
		want := map[string]any{"52:54:00:12:34:56": "physnet-rack", "52:54:00:12:34:57": nil}[p["address"].(string)]
		if p["physical_network"] != want {
			t.Errorf("port %s: physical_network %v, want %v", p["address"], p["physical_network"], want)
		}
	}

	plain := fixture(t)
	plain.PluginData["pci_devices"] = d.PluginData["pci_devices"]
	if err := Run(DefaultHooks, cfg, plain); err != nil {
		t.Fatal(err)
	}
	if caps, _ := plain.Properties["capabilities"].(string); strings.Contains(caps, "gpu") {
		t.Errorf("the default hooks changed capabilities to %q", caps)
	}
	for _, p := range plain.Ports {
		if _, ok := p["physical_network"]; ok {
			t.Errorf("the default hooks set a physical network: %v", p)
		}
	}
}

func TestOptionalHookSettingsRefused(t *testing.T) {
	for _, bad := range []string{"192.0.2.0/24", "nonsense:physnet", "192.0.2.0/24:"} {
		if _, err := ParseCIDRMap([]string{bad}); err == nil {
			t.Errorf("CIDR map entry %q accepted", bad)
		}
	}
	if m, err := ParseCIDRMap([]string{"2001:db8::/64:physnet-v6"}); err != nil || len(m) != 1 {
		t.Errorf("an IPv6 entry: %v, %v", m, err)
	}
	for _, bad := range []string{`{"vendor_id": "10de", "product_id": "1eb8"}`, `{"vendor_id": "10de", "product_id": "1eb8", "name": "a", "x": 1}`, `not json`} {
		if _, err := ParsePCIAlias(bad); err == nil {
			t.Errorf("pci alias %s accepted", bad)
		}
	}
}
