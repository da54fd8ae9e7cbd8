package e2e

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ironflow/ironflow/embedded"
)

// staticAgentAddress is the node's address in its network_data: in the
// lab's network, outside the DHCP pool the other scenarios give ironflow.
const staticAgentAddress = "10.77.0.50"

// TestDeployVirtualMediaWithoutDHCP deploys an OVMF VM through
// redfish-virtual-media on a bridge where no DHCP server runs (ironflow
// dev with its DHCP off, nothing else in the lab's namespace answers
// DHCP): the node's network_data (its NIC found by MAC in a bond, a
// static IPv4 address with a default route and a static IPv6 address on
// the bond, a VLAN on the bond, DNS) goes onto the agent ISO, the agent
// applies it before its lookup, looks up and heartbeats from the static
// address, writes the image, and the VM boots its disk.
func TestDeployVirtualMediaWithoutDHCP(t *testing.T) {
	RequireQEMU(t)
	lab := NewLab(t)
	// The later --dhcp-interface wins: empty turns ironflow's DHCP off.
	s := startStack(t, lab, "--dhcp-interface=")
	dev := s.procs[0]
	if line, ok := findLine(dev.Log, "dhcp serving"); ok {
		t.Fatalf("the stack serves DHCP, the scenario needs none: %s", line)
	}
	_, sum, err := BuildTestImage(DefaultCacheDir())
	if err != nil {
		t.Fatal(err)
	}
	const mac = "52:54:00:e2:0d:01"
	vm := lab.AddVM("node-nodhcp", mac, FirmwareUEFI, filepath.Join(lab.Dir, "vm-node-nodhcp", "disk.raw"))
	bmc := startRedfishBMC(t, s, agentVM(vm))

	begin := time.Now()
	// The VM's NIC in an active-backup bond (as servers' provisioning
	// NICs often are), the static addresses on the bond, and a VLAN on
	// the bond with an address of its own: the lab's bridge carries no
	// VLAN, but the agent must create it, or it never looks up.
	nd, err := json.Marshal(map[string]any{
		"links": []any{
			map[string]any{"id": "nic0", "type": "phy", "ethernet_mac_address": strings.ToUpper(mac)},
			map[string]any{"id": "prov0", "type": "bond", "bond_mode": "active-backup", "bond_links": []any{"nic0"}, "ethernet_mac_address": mac},
			map[string]any{"id": "storage0", "type": "vlan", "vlan_link": "prov0", "vlan_id": 42, "vlan_mac_address": mac},
		},
		"networks": []any{
			map[string]any{"id": "prov-v4", "type": "ipv4", "link": "prov0", "network_id": "provisioning",
				"ip_address": staticAgentAddress, "netmask": "255.255.255.0",
				"routes": []any{map[string]any{"network": "0.0.0.0", "netmask": "0.0.0.0", "gateway": LabAddress}}},
			map[string]any{"id": "prov-v6", "type": "ipv6", "link": "prov0", "network_id": "provisioning",
				"ip_address": "fd00:77::50", "netmask": "ffff:ffff:ffff:ffff::"},
			map[string]any{"id": "storage-v4", "type": "ipv4", "link": "storage0", "network_id": "storage",
				"ip_address": "192.0.2.50", "netmask": "255.255.255.0"},
		},
		"services": []any{map[string]any{"type": "dns", "address": LabAddress}},
	})
	if err != nil {
		t.Fatal(err)
	}
	uuid := createRedfishNode(t, s, bmc, vm.Name, vm.Firmware, mac,
		"--deploy-interface", "direct", "--boot-interface", "redfish-virtual-media", "--no-automated-clean",
		"--network-data", string(nd))
	defer printNodeHistory(t, s, uuid)
	s.availableWithTestImage(t, uuid, sum)
	const pubKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIE2Enodhcp e2e"
	s.deploy(t, uuid, vm, "e2e-nodhcp", pubKey)
	t.Logf("node-nodhcp active %.1fs after node create", time.Since(begin).Seconds())

	// The agent configured the static address from the ISO's
	// network_data and called back from it.
	// Each step is logged before it is applied; the agent looks up only
	// once all succeeded.
	for _, step := range []string{"ip link add bond0 type bond mode active-backup", " master bond0",
		"ip link add link bond0 name bond0.42 type vlan id 42",
		"ip address add " + staticAgentAddress + "/24 dev bond0", "ip address add fd00:77::50/64 dev bond0",
		"ip address add 192.0.2.50/24 dev bond0.42", "ip -4 route replace default via " + LabAddress + " dev bond0",
		"echo nameserver " + LabAddress} {
		if _, ok := findLine(vm.SerialLog, step); !ok {
			t.Errorf("the agent's console shows no network_data step %q; console tail:\n%s", step, embedded.Tail(vm.SerialLog, 3000))
		}
	}
	if line, ok := findLine(vm.SerialLog, "network_data found on virtual media"); ok {
		t.Logf("agent: %s", strings.TrimSpace(line))
	}
	if line, ok := findLine(vm.SerialLog, "network not up"); ok {
		t.Errorf("applying network_data failed at least once: %s", line)
	}
	if line, ok := findLine(vm.SerialLog, "DHCP attempt"); ok {
		t.Errorf("the agent tried DHCP although network_data was on its ISO: %s", line)
	}
	hist := s.mustCLI(t, "node", "history", "list", uuid, "-f", "value", "-c", "Description of the event")
	if !strings.Contains(hist, "Agent called back") {
		t.Errorf("the node history shows no call back from the agent:\n%s", hist)
	}
	// The agent's callback_url (the address the worker commanded it at)
	// is its static address.
	if line, ok := findLine(vm.SerialLog, "callback_url=http://"+staticAgentAddress+":"); !ok {
		t.Errorf("the agent did not listen at its static address %s; console tail:\n%s", staticAgentAddress, embedded.Tail(vm.SerialLog, 3000))
	} else {
		t.Logf("agent at its static address: %s", strings.TrimSpace(line))
	}
	waitBootedFromDisk(t, vm, "e2e-nodhcp", pubKey)
	if f := s.nodeFields(t, uuid); f["provision_state"] != "active" || f["power_state"] != "power on" {
		t.Errorf("node is %v / %v, want active / power on", f["provision_state"], f["power_state"])
	}
	t.Logf("node-nodhcp booted from disk %.1fs after node create", time.Since(begin).Seconds())
}
