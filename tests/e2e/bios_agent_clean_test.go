package e2e

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestBIOSStepUnderTheAgentThenAgentStepOnVM: a SeaBIOS VM behind `ironflow
// vbmc serve` (Redfish, bios_interface redfish) is cleaned with
// bios.apply_configuration ProcCores=2 and then the agent's
// erase_devices_metadata, the agent booted (no disable_ramdisk). The BIOS
// step reboots the node into the agent again (the vbmc applies the
// setting at the start: QEMU -smp 2); erase_devices_metadata runs only
// after the agent called back from that boot, and the node ends
// manageable with the setting cached.
func TestBIOSStepUnderTheAgentThenAgentStepOnVM(t *testing.T) {
	RequireQEMU(t)
	begin := time.Now()
	lab := NewLab(t)
	s := startStack(t, lab, "--automated-clean=false")
	vm := lab.AddVM("node-bios-agent", "52:54:00:e2:b1:37", FirmwareBIOS, filepath.Join(lab.Dir, "vm-node-bios-agent", "disk.raw"))
	bmc := startRedfishBMC(t, s, vmDefinition(vm, 1, AgentMemoryMB, vmDiskSize))
	uuid := createRedfishNode(t, s, bmc, vm.Name, vm.Firmware, vm.MAC,
		"--deploy-interface", "direct", "--boot-interface", "ipxe", "--bios-interface", "redfish")
	defer printNodeHistory(t, s, uuid)
	s.mustCLI(t, "node", "manage", uuid, "--wait", seconds(manageWait))

	steps := `[{"interface":"bios","step":"apply_configuration","args":{"settings":[{"name":"ProcCores","value":"2"}]}},` +
		`{"interface":"deploy","step":"erase_devices_metadata"}]`
	s.mustCLI(t, "node", "clean", uuid, "--clean-steps", steps)
	n := watchNode(t, lab, uuid, cleanWait, nil, "manageable", "clean failed")
	printTimeline(t, s, uuid, "manual cleaning with a BIOS step under the agent")
	if n.ProvisionState != "manageable" || n.LastError != nil {
		s.failStep(t, uuid, vm.SerialLog, fmt.Errorf("cleaning ended %s: %v", n.ProvisionState, deref(n.LastError)))
	}
	t.Logf("bios under the agent: cleaning took %.0fs", time.Since(begin).Seconds())

	// The order in the node's history: the BIOS step's reboot into the
	// agent, the agent's call-back from that boot, then the agent step.
	requireHistoryOrder(t, lab, uuid,
		"Step bios.apply_configuration reboots the node to apply the BIOS settings",
		"after step bios.apply_configuration rebooted the node",
		"Running step deploy.erase_devices_metadata on the agent")

	// The vbmc started QEMU again with the setting; the agent's kernel
	// of the second boot saw 2 CPUs.
	bmc.checkSMPApplied(t, vm)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := WaitSerial(ctx, vm.SerialLog, "2 CPUs", nil); err != nil {
		t.Errorf("the agent's second boot did not come up with 2 CPUs: %v", err)
	}
	if code, body := biosAPI(t, s, http.MethodGet, "/v1/nodes/"+uuid+"/bios/ProcCores", "1.74", nil); code != http.StatusOK || !strings.Contains(string(body), `"value":"2"`) {
		t.Errorf("GET bios/ProcCores: HTTP %d: %s, want the value 2 cached", code, body)
	}
}
