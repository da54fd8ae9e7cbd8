package hooks

import (
	"encoding/json"
	"os"
	"reflect"
	"testing"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/inventory"
)

const nodeUUID = "6a1b2c3d-4e5f-4a6b-8c7d-9e0f1a2b3c4d"

// fixture reads testdata/ipa-inventory-lldp.json, an inventory in IPA's
// documented format with LLDP, and gives the node one enrolled port (eth0's,
// pxe_enabled false so that the ports hook has something to correct).
func fixture(t *testing.T) *Data {
	t.Helper()
	b, err := os.ReadFile("testdata/ipa-inventory-lldp.json")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Inventory  map[string]any `json:"inventory"`
		PluginData map[string]any `json:"plugin_data"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	return &Data{
		NodeUUID:   nodeUUID,
		Properties: map[string]any{"capabilities": "boot_mode:uefi"},
		Ports: []map[string]any{{"uuid": "0e7a8b9c-1d2e-4f3a-8b4c-5d6e7f8a9b0c", "address": "52:54:00:12:34:56", "pxe_enabled": false,
			"extra": map[string]any{}, "local_link_connection": map[string]any{"port_id": "kept"}}},
		Inventory: f.Inventory, PluginData: f.PluginData,
	}
}

func TestDefaultHooksOnAnIPAInventory(t *testing.T) {
	d := fixture(t)
	if err := Run(DefaultHooks, Config{}, d); err != nil {
		t.Fatalf("Run: %v", err)
	}
	all := d.PluginData["all_interfaces"].(map[string]any)
	eth0, eth1 := all["eth0"].(map[string]any), all["eth1"].(map[string]any)
	if eth0["pxe_enabled"] != true || eth1["pxe_enabled"] != false || eth0["ipv6_address"] != "fe80::5054:ff:fe12:3456" {
		t.Errorf("all_interfaces eth0 %v, eth1 %v", eth0, eth1)
	}
	if _, ok := d.PluginData["valid_interfaces"].(map[string]any)["lo"]; ok || len(all) != 3 {
		t.Errorf("lo: in all_interfaces (%d) but never valid: %v", len(all), d.PluginData["valid_interfaces"])
	}
	if !reflect.DeepEqual(d.PluginData["macs"], []any{"52:54:00:12:34:56", "52:54:00:12:34:57"}) {
		t.Errorf("macs = %v", d.PluginData["macs"])
	}
	want := map[string]any{
		"switch_chassis_id": "88:5a:92:ec:54:59", "switch_port_id": "Ethernet1/18", "switch_port_description": "port 18",
		"switch_system_name": "switch-a.example.org", "switch_system_description": "Example OS 1.2",
		"switch_capabilities_support": []any{"Bridge", "Router"}, "switch_capabilities_enabled": []any{"Bridge", "Router"},
		"switch_mgmt_addresses": []any{"192.0.2.10"}, "switch_port_untagged_vlan_id": float64(100),
		"switch_port_vlans":                   []any{map[string]any{"name": "vlan100", "id": float64(100)}, map[string]any{"name": "vlan101", "id": float64(101)}},
		"switch_port_mtu":                     float64(9000),
		"switch_port_autonegotiation_enabled": true, "switch_port_autonegotiation_support": true,
		"switch_port_physical_capabilities": []any{"1000BASE-T fdx", "1000BASE-T hdx", "100BASE-TX fdx", "100BASE-TX hdx", "10BASE-T fdx", "10BASE-T hdx"},
		"switch_port_mau_type":              "100BASE-TX full duplex",
	}
	parsed := d.PluginData["parsed_lldp"].(map[string]any)
	if got := parsed["eth0"]; !reflect.DeepEqual(got, map[string]any(want)) {
		t.Errorf("parsed_lldp eth0:\n got %v\nwant %v", got, want)
	}
	if got := parsed["eth1"].(map[string]any)["switch_port_id"]; got != "52:54:00:12:34:57" {
		t.Errorf("parsed_lldp eth1 port id = %v", got)
	}
	// Ports: eth0's corrected to pxe_enabled, its existing port_id kept;
	// eth1's created, not PXE, with its switch port.
	if len(d.Ports) != 2 {
		t.Fatalf("ports = %v", d.Ports)
	}
	p0, p1 := d.Ports[0], d.Ports[1]
	if p0["pxe_enabled"] != true || !reflect.DeepEqual(p0["local_link_connection"], map[string]any{"port_id": "kept",
		"switch_id": "88:5a:92:ec:54:59", "switch_info": "switch-a.example.org"}) {
		t.Errorf("eth0's port = %v", p0)
	}
	if p1["uuid"] != nil || p1["address"] != "52:54:00:12:34:57" || p1["pxe_enabled"] != false ||
		!reflect.DeepEqual(p1["local_link_connection"], map[string]any{"port_id": "52:54:00:12:34:57",
			"switch_id": "88:5a:92:ec:54:59", "switch_info": "switch-a.example.org"}) {
		t.Errorf("eth1's new port = %v", p1)
	}
	wantProps := map[string]any{"cpu_arch": "x86_64", "cpus": float64(8), "memory_mb": float64(32768), "local_gb": float64(446),
		"capabilities": "boot_mode:uefi,cpu_aes:true,cpu_hugepages:true,cpu_hugepages_1g:true,cpu_vt:true"}
	if !reflect.DeepEqual(d.Properties, wantProps) {
		t.Errorf("properties:\n got %v\nwant %v", d.Properties, wantProps)
	}
	if d.PluginData["root_disk"].(map[string]any)["name"] != "/dev/sda" || d.PluginData["local_gb"] != float64(446) {
		t.Errorf("root_disk %v, local_gb %v", d.PluginData["root_disk"], d.PluginData["local_gb"])
	}

	// What Metal3's baremetal-operator reads: gophercloud's
	// StandardPluginData must decode it (a wrong type fails the host).
	b, _ := json.Marshal(d.PluginData)
	var std inventory.StandardPluginData
	if err := json.Unmarshal(b, &std); err != nil {
		t.Fatalf("plugin_data as gophercloud's StandardPluginData: %v", err)
	}
	if !std.AllInterfaces["eth0"].PXEEnabled || std.AllInterfaces["eth1"].PXEEnabled || std.ParsedLLDP["eth0"]["switch_system_name"] != "switch-a.example.org" ||
		std.RootDisk.Name != "/dev/sda" || len(std.RawLLDP) != 0 {
		t.Errorf("StandardPluginData = %+v", std)
	}
}

func TestAddPortsPXE(t *testing.T) {
	d := fixture(t)
	d.Ports = nil
	if err := Run(DefaultHooks, Config{AddPorts: "pxe"}, d); err != nil {
		t.Fatal(err)
	}
	if len(d.Ports) != 1 || d.Ports[0]["address"] != "52:54:00:12:34:56" || d.Ports[0]["pxe_enabled"] != true {
		t.Errorf("ports with add_ports=pxe: %v", d.Ports)
	}
	if v := d.PluginData["valid_interfaces"].(map[string]any); len(v) != 1 {
		t.Errorf("valid_interfaces = %v", v)
	}
}

func TestKeepPortsPresent(t *testing.T) {
	d := fixture(t)
	d.Ports = append(d.Ports, map[string]any{"uuid": "gone", "address": "52:54:00:99:99:99", "pxe_enabled": true})
	if err := Run(DefaultHooks, Config{KeepPorts: "present"}, d); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(d.DeletePorts, []string{"gone"}) || len(d.Ports) != 2 {
		t.Errorf("delete %v, ports %v", d.DeletePorts, d.Ports)
	}
}

func TestRootDeviceHints(t *testing.T) {
	d := fixture(t)
	d.Properties["root_device"] = map[string]any{"rotational": true}
	if err := Run(DefaultHooks, Config{}, d); err != nil {
		t.Fatal(err)
	}
	if d.PluginData["root_disk"].(map[string]any)["name"] != "/dev/sdb" || d.Properties["local_gb"] != float64(3725) {
		t.Errorf("root_disk %v, local_gb %v", d.PluginData["root_disk"], d.Properties["local_gb"])
	}
	d = fixture(t)
	d.Properties["root_device"] = map[string]any{"serial": "nope"}
	err := Run(DefaultHooks, Config{}, d)
	if err == nil || err.Error() != "Failed to inspect hardware. Reason: No disks satisfied root device hints for node "+nodeUUID {
		t.Errorf("hints matching nothing: %v", err)
	}
	// Without the ramdisk's root_disk and hints: the disk a deploy takes.
	d = fixture(t)
	delete(d.PluginData, "root_disk")
	d.Inventory["disks"] = append(d.Inventory["disks"].([]any), map[string]any{"name": "/dev/sdc", "size": float64(2 << 30)})
	if err := Run(DefaultHooks, Config{}, d); err != nil || d.PluginData["root_disk"].(map[string]any)["name"] != "/dev/sda" {
		t.Errorf("default root disk: %v, %v", err, d.PluginData["root_disk"])
	}
}

func TestHookFailures(t *testing.T) {
	d := fixture(t)
	d.PluginData["error"] = "disk on fire"
	if err := Run(DefaultHooks, Config{}, d); err == nil || err.Error() != "Failed to inspect hardware. Reason: Ramdisk reported error: disk on fire" {
		t.Errorf("ramdisk error: %v", err)
	}
	d = fixture(t)
	delete(d.Inventory["cpu"].(map[string]any), "architecture")
	if err := Run(DefaultHooks, Config{}, d); err == nil || err.(*Error) == nil {
		t.Errorf("missing architecture: %v", err)
	}
	d = fixture(t)
	delete(d.Inventory, "interfaces")
	if err := Run(DefaultHooks, Config{}, d); err == nil || err.Error() != "Inventory for node "+nodeUUID+" is invalid: no interfaces present in inventory" {
		t.Errorf("no interfaces: %v", err)
	}
	d = fixture(t)
	d.Inventory["interfaces"] = []any{map[string]any{"name": "lo", "mac_address": "00:00:00:00:00:00", "ipv4_address": "127.0.0.1"}}
	if err := Run(DefaultHooks, Config{}, d); err == nil || err.Error() != `Inventory for node `+nodeUUID+` is invalid: no network interfaces match the configuration (add_ports set to "all")` {
		t.Errorf("only loopback: %v", err)
	}
}

// A BMC's inventory without network interfaces is no error out-of-band.
func TestOutOfBandWithoutInterfaces(t *testing.T) {
	d := fixture(t)
	delete(d.Inventory, "interfaces")
	d.PluginData = map[string]any{"source": "redfish"}
	d.Inventory["cpu"].(map[string]any)["architecture"] = "aarch64"
	if err := Run(OutOfBandHooks, Config{OutOfBand: true}, d); err != nil {
		t.Fatalf("out-of-band without interfaces: %v", err)
	}
	if len(d.Ports) != 1 || d.Properties["cpus"] != float64(8) || d.Properties["local_gb"] != float64(446) || d.Properties["cpu_arch"] != "aarch64" {
		t.Errorf("ports %v, properties %v", d.Ports, d.Properties)
	}
	delete(d.Inventory["cpu"].(map[string]any), "architecture")
	if err := Run(OutOfBandHooks, Config{OutOfBand: true}, d); err != nil {
		t.Errorf("out-of-band without an architecture: %v", err)
	}
}

func TestUpdatedCapabilities(t *testing.T) {
	if got := UpdatedCapabilities("a:1,cpu_vt:false", []string{"cpu_vt", "cpu_aes"}); got != "a:1,cpu_vt:true,cpu_aes:true" {
		t.Errorf("UpdatedCapabilities = %s", got)
	}
}
