package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestFirmwareUpdateUnderTheAgentThenAgentStepOnVM: a SeaBIOS VM behind
// `ironflow vbmc serve` is cleaned with firmware.update (a BIOS image) and
// then the agent's erase_devices_metadata, the agent booted (no
// disable_ramdisk). The VM runs the agent, so the BMC's task waits for the
// host's reset; the step reboots the node into the agent, the vbmc applies
// the image at that reset, and erase_devices_metadata runs only after the
// agent called back from the new boot. The node ends manageable with the
// new version in GET /v1/nodes/{id}/firmware.
func TestFirmwareUpdateUnderTheAgentThenAgentStepOnVM(t *testing.T) {
	RequireQEMU(t)
	begin := time.Now()
	lab := NewLab(t)
	s := startStack(t, lab, "--automated-clean=false")
	vm := lab.AddVM("node-fw-agent", "52:54:00:e2:f7:3b", FirmwareBIOS, filepath.Join(lab.Dir, "vm-node-fw-agent", "disk.raw"))
	bmc := startUpdateBMC(t, s, 5, vmDefinition(vm, 1, AgentMemoryMB, vmDiskSize))
	image := filepath.Join(lab.Dir, "bios-3.1.bin")
	if err := os.WriteFile(image, []byte("ironflow e2e BIOS image 3.1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	imageURL := s.publishImage(t, image, "bios-3.1.bin")
	uuid := createRedfishNode(t, s, bmc, vm.Name, vm.Firmware, vm.MAC,
		"--deploy-interface", "direct", "--boot-interface", "ipxe")
	defer printNodeHistory(t, s, uuid)
	// firmware_interface is API 1.86, newer than Debian's client.
	apiJSON(t, s, "PATCH", "/v1/nodes/"+uuid, []map[string]any{
		{"op": "replace", "path": "/firmware_interface", "value": "redfish"},
		{"op": "add", "path": "/driver_info/firmware_update_poll_interval", "value": 2}}, 200, nil)
	s.mustCLI(t, "node", "manage", uuid, "--wait", seconds(manageWait))

	steps := `[{"interface":"firmware","step":"update","args":{"settings":[{"component":"bios","url":"` + imageURL + `"}]}},` +
		`{"interface":"deploy","step":"erase_devices_metadata"}]`
	s.mustCLI(t, "node", "clean", uuid, "--clean-steps", steps)
	n := watchNode(t, lab, uuid, cleanWait, nil, "manageable", "clean failed")
	printTimeline(t, s, uuid, "manual cleaning with a firmware update under the agent")
	if n.ProvisionState != "manageable" || n.LastError != nil {
		s.failStep(t, uuid, vm.SerialLog, fmt.Errorf("cleaning ended %s: %v", n.ProvisionState, deref(n.LastError)))
	}
	t.Logf("firmware under the agent: cleaning took %.0fs", time.Since(begin).Seconds())

	requireHistoryOrder(t, lab, uuid,
		"Step firmware.update reboots the node (the BMC applies the bios image at the host's reset)",
		"after step firmware.update rebooted the node",
		"Running step deploy.erase_devices_metadata on the agent")
	var fw struct {
		Firmware []struct {
			Component      string `json:"component"`
			CurrentVersion string `json:"current_version"`
		} `json:"firmware"`
	}
	apiJSON(t, s, "GET", "/v1/nodes/"+uuid+"/firmware", nil, 200, &fw)
	bios := ""
	for _, c := range fw.Firmware {
		if c.Component == "bios" {
			bios = c.CurrentVersion
		}
	}
	if bios != "bios-3.1" {
		t.Fatalf("bios version after the update %q, want bios-3.1 (firmware %+v)", bios, fw.Firmware)
	}
	if !strings.Contains(readFile(bmc.proc.Log), "firmware applied at reset") {
		t.Fatalf("the vbmc applied no firmware at a reset:\n%s", readFile(bmc.proc.Log))
	}
}
