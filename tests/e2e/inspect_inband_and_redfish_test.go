package e2e

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ironflow/ironflow/inspection/hooks"
	"github.com/ironflow/ironflow/vbmc"
)

// inventoryAPIVersion is the microversion that added GET
// /v1/nodes/{node}/inventory.
const inventoryAPIVersion = "1.81"

// inspectedInventory is the part of IPA's inventory the scenario checks.
type inspectedInventory struct {
	Inventory struct {
		CPU struct {
			Count        int    `json:"count"`
			Architecture string `json:"architecture"`
		} `json:"cpu"`
		Memory struct {
			PhysicalMB int   `json:"physical_mb"`
			Total      int64 `json:"total"`
		} `json:"memory"`
		Disks []struct {
			Name string `json:"name"`
			Size int64  `json:"size"`
		} `json:"disks"`
		Interfaces []struct {
			Name       string `json:"name"`
			MACAddress string `json:"mac_address"`
			PCIAddress string `json:"pci_address"`
			LLDP       []any  `json:"lldp"`
		} `json:"interfaces"`
		Boot struct {
			PXEInterface string `json:"pxe_interface"`
		} `json:"boot"`
	} `json:"inventory"`
	PluginData struct {
		ParsedLLDP map[string]map[string]any `json:"parsed_lldp"`
	} `json:"plugin_data"`
}

func (inv inspectedInventory) hasMAC(mac string) bool {
	for _, i := range inv.Inventory.Interfaces {
		if strings.EqualFold(i.MACAddress, mac) {
			return true
		}
	}
	return false
}

func (inv inspectedInventory) hasDisk(size int64) bool {
	for _, d := range inv.Inventory.Disks {
		if d.Size == size {
			return true
		}
	}
	return false
}

// TestInspectInBandAndRedfish inspects two VMs behind `ironflow vbmc serve`:
//
// In-band: node-ia (2 vCPUs, 512 MiB, a 5 GiB disk) is inspected by the
// agent it network-boots: its inventory, read back through the API at
// microversion 1.81, and the properties filled from it describe the VM as
// QEMU runs it, the NIC it booted from is the inventory's PXE interface,
// and the lab's switch (lldpd) is that NIC's LLDP neighbour in plugin_data
// and in its port's local_link_connection; with the optional hooks
// boot-mode and physical-network on, the port's physical_network comes
// from the CIDR map that holds the NIC's address; the machine is off
// afterwards; a built-in rule (--inspection-rules-built-in) tags it with
// the switch it hears.
//
// Out-of-band: node-ib (3 vCPUs, 768 MiB, a 7 GiB disk, never powered on)
// with inspect_interface redfish: the properties come from the BMC's
// Processors, Memory and SimpleStorage, and the MAC of its
// EthernetInterfaces becomes the node's port.
func TestInspectInBandAndRedfish(t *testing.T) {
	RequireQEMU(t)
	begin := time.Now()
	lab := NewLab(t)
	// Two of Ironic's optional hooks as an operator turns them on, and a
	// built-in rule that tags machines by the switch they hear.
	rulesFile := filepath.Join(lab.Dir, "built-in-rules.yaml")
	if err := os.WriteFile(rulesFile, []byte(`- description: machines on the e2e switch
  conditions:
    - op: eq
      args: {values: ["{plugin_data[parsed_lldp][eth0][switch_system_name]}", "e2e-lab-switch"]}
  actions:
    - op: add-trait
      args: {name: CUSTOM_E2E_SWITCH}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	s := startStack(t, lab, "--inspection-hooks", strings.Join(append(slices.Clone(hooks.DefaultHooks), hooks.BootMode, hooks.PhysicalNetwork), ","),
		"--inspection-physical-network-cidr-map", "10.77.0.0/24:physnet-lab,192.0.2.0/24:physnet-other",
		"--inspection-rules-built-in", rulesFile)
	const (
		memA  = 512
		cpusA = 2
		diskA = 5 << 30
		memB  = 768
		cpusB = 3
		diskB = 7 << 30
		macB  = "52:54:00:e2:0f:02"
	)
	vmA := lab.AddVM("node-ia", "52:54:00:e2:0f:01", FirmwareBIOS, filepath.Join(lab.Dir, "vm-node-ia", "disk.raw"))
	// node-ib has no NIC in the lab: it is only ever asked about.
	defB := vbmc.VM{Name: "node-ib", MAC: macB, Disk: filepath.Join(lab.Dir, "vm-node-ib.raw"), DiskSize: "7G",
		MemoryMB: memB, CPUs: cpusB, Firmware: FirmwareBIOS, Netdev: "none", SerialLog: filepath.Join(lab.Dir, "vm-node-ib.log")}
	bmc := startRedfishBMC(t, s, vmDefinition(vmA, cpusA, memA, "5G"), defB)
	const switchName, switchPort = "e2e-lab-switch", "swp3"
	lab.StartLLDPSwitch(switchName, switchPort)

	t.Run("agent", func(t *testing.T) {
		uuid := createRedfishNode(t, s, bmc, vmA.Name, vmA.Firmware, vmA.MAC,
			"--boot-interface", "ipxe", "--inspect-interface", "agent")
		defer printNodeHistory(t, s, uuid)
		s.mustCLI(t, "node", "manage", uuid, "--wait", seconds(manageWait))
		start := time.Now()
		if _, err := s.baremetal(t, "node", "inspect", uuid, "--wait", seconds(deployWait)); err != nil {
			s.failStep(t, uuid, vmA.SerialLog, err)
		}
		printTimeline(t, s, uuid, "agent inspection")
		t.Logf("agent inspection took %.1fs", time.Since(start).Seconds())

		inv := readInventory(t, s, uuid)
		t.Logf("inventory: cpu %+v, memory %+v, disks %+v, interfaces %+v",
			inv.Inventory.CPU, inv.Inventory.Memory, inv.Inventory.Disks, inv.Inventory.Interfaces)
		if inv.Inventory.CPU.Count != cpusA {
			t.Errorf("inventory cpu.count %d, want the VM's %d vCPUs", inv.Inventory.CPU.Count, cpusA)
		}
		if inv.Inventory.CPU.Architecture != "x86_64" {
			t.Errorf("inventory cpu.architecture %q, want x86_64", inv.Inventory.CPU.Architecture)
		}
		if inv.Inventory.Memory.PhysicalMB != memA {
			t.Errorf("inventory memory.physical_mb %d, want the VM's %d MiB", inv.Inventory.Memory.PhysicalMB, memA)
		}
		if !inv.hasDisk(diskA) {
			t.Errorf("inventory disks %+v: none of the VM's %d bytes", inv.Inventory.Disks, int64(diskA))
		}
		if !inv.hasMAC(vmA.MAC) {
			t.Errorf("inventory interfaces %+v: no %s", inv.Inventory.Interfaces, vmA.MAC)
		}
		// The NIC the machine booted from, and the switch port it hears
		// (the agent's LLDP, Ironic's parse-lldp and local-link-connection).
		if !strings.EqualFold(strings.ReplaceAll(strings.TrimPrefix(inv.Inventory.Boot.PXEInterface, "01-"), "-", ":"), vmA.MAC) {
			t.Errorf("inventory boot.pxe_interface %q, want the VM's NIC %s", inv.Inventory.Boot.PXEInterface, vmA.MAC)
		}
		for _, i := range inv.Inventory.Interfaces {
			if !strings.EqualFold(i.MACAddress, vmA.MAC) {
				continue
			}
			lldp := inv.PluginData.ParsedLLDP[i.Name]
			t.Logf("interface %s (PCI %s): %d LLDP TLVs, parsed_lldp %v", i.Name, i.PCIAddress, len(i.LLDP), lldp)
			if lldp["switch_system_name"] != switchName || lldp["switch_port_id"] != switchPort {
				t.Errorf("plugin_data.parsed_lldp[%s] = %v; want switch %s port %s", i.Name, lldp, switchName, switchPort)
			}
		}
		var ports struct {
			Ports []struct {
				Address         string         `json:"address"`
				LLC             map[string]any `json:"local_link_connection"`
				PhysicalNetwork *string        `json:"physical_network"`
			} `json:"ports"`
		}
		code, body := labGet(t, s.lab, "http://"+apiListen+"/v1/ports?node="+uuid+"&fields=address,local_link_connection,physical_network",
			"X-OpenStack-Ironic-API-Version", inventoryAPIVersion)
		if err := json.Unmarshal(body, &ports); code != http.StatusOK || err != nil {
			t.Fatalf("GET ports of %s: HTTP %d, %v: %s", uuid, code, err, body)
		}
		for _, p := range ports.Ports {
			if !strings.EqualFold(p.Address, vmA.MAC) {
				continue
			}
			if p.LLC["port_id"] != switchPort || p.LLC["switch_info"] != switchName {
				t.Errorf("port %s: local_link_connection %v; want port_id %s, switch_info %s", p.Address, p.LLC, switchPort, switchName)
			}
			// physical-network: the NIC's DHCP address is in the lab's
			// 10.77.0.0/24.
			if p.PhysicalNetwork == nil || *p.PhysicalNetwork != "physnet-lab" {
				t.Errorf("port %s: physical_network %v; want physnet-lab from the CIDR map", p.Address, p.PhysicalNetwork)
			}
		}
		f := s.nodeFields(t, uuid)
		if traits, _ := f["traits"].([]any); !slices.Contains(traits, any("CUSTOM_E2E_SWITCH")) {
			t.Errorf("traits %v: the built-in rule's CUSTOM_E2E_SWITCH is missing", f["traits"])
		}
		checkProperties(t, f, cpusA, memA, diskA/(1<<30)-1)
		if f["provision_state"] != "manageable" || f["power_state"] != "power off" {
			t.Errorf("after inspection node-ia is %v / %v, want manageable / power off", f["provision_state"], f["power_state"])
		}
		if f["inspection_finished_at"] == nil {
			t.Errorf("inspection_finished_at is not set")
		}
		if code, _ := labGet(t, lab, "http://"+bootListen+"/boot/"+uuid+"/boot.ipxe"); code != http.StatusNotFound {
			t.Errorf("after inspection the node's iPXE script answers %d, want 404", code)
		}
	})

	t.Run("redfish", func(t *testing.T) {
		uuid := createRedfishNode(t, s, bmc, defB.Name, defB.Firmware, "", "--inspect-interface", "redfish")
		defer printNodeHistory(t, s, uuid)
		s.mustCLI(t, "node", "manage", uuid, "--wait", seconds(manageWait))
		start := time.Now()
		if _, err := s.baremetal(t, "node", "inspect", uuid, "--wait", seconds(manageWait)); err != nil {
			s.failStep(t, uuid, defB.SerialLog, err)
		}
		t.Logf("out-of-band inspection took %.1fs", time.Since(start).Seconds())
		f := s.nodeFields(t, uuid)
		checkProperties(t, f, cpusB, memB, diskB/(1<<30)-1)
		if f["provision_state"] != "manageable" || f["power_state"] != "power off" {
			t.Errorf("after inspection node-ib is %v / %v, want manageable / power off", f["provision_state"], f["power_state"])
		}
		inv := readInventory(t, s, uuid)
		if !inv.hasMAC(macB) || !inv.hasDisk(diskB) {
			t.Errorf("inventory from the BMC: interfaces %+v, disks %+v; want %s and %d bytes", inv.Inventory.Interfaces, inv.Inventory.Disks, macB, int64(diskB))
		}
		ports := s.mustCLI(t, "port", "list", "--node", uuid, "-f", "value", "-c", "Address")
		if strings.TrimSpace(ports) != macB {
			t.Errorf("ports of node-ib after inspection: %q, want the BMC's NIC %s", ports, macB)
		}
		// Nothing booted: QEMU never started for node-ib.
		if line, ok := findLine(bmc.proc.Log, "vm=node-ib pid="); ok {
			t.Errorf("out-of-band inspection powered node-ib on: %s", line)
		}
	})
	t.Logf("inspection scenario took %.1fs", time.Since(begin).Seconds())
}

// readInventory reads the node's inventory through the API.
func readInventory(t *testing.T, s *stack, uuid string) inspectedInventory {
	t.Helper()
	code, body := labGet(t, s.lab, "http://"+apiListen+"/v1/nodes/"+uuid+"/inventory",
		"X-OpenStack-Ironic-API-Version", inventoryAPIVersion)
	if code != http.StatusOK {
		t.Fatalf("GET inventory of %s at %s: HTTP %d: %s", uuid, inventoryAPIVersion, code, body)
	}
	var inv inspectedInventory
	if err := json.Unmarshal(body, &inv); err != nil {
		t.Fatalf("inventory of %s: %v: %s", uuid, err, body)
	}
	return inv
}

// checkProperties compares the properties inspection fills with the
// machine's; the CLI prints properties as a JSON object.
func checkProperties(t *testing.T, fields map[string]any, cpus, memoryMB, localGB int) {
	t.Helper()
	props, _ := fields["properties"].(map[string]any)
	t.Logf("properties: %v", props)
	want := map[string]any{"cpus": float64(cpus), "memory_mb": float64(memoryMB), "local_gb": float64(localGB), "cpu_arch": "x86_64"}
	for k, v := range want {
		if props[k] != v {
			t.Errorf("property %s is %v (%T), want %v", k, props[k], props[k], v)
		}
	}
}
