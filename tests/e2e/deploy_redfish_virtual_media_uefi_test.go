package e2e

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ironflow/ironflow/embedded"
)

// TestDeployRedfishVirtualMediaUEFIRescueThenClean is scenario B, a rescue,
// then C on one OVMF VM behind `ironflow vbmc serve` (Redfish):
//
// B: deploy with boot interface redfish-virtual-media: ironflow builds the
// agent ISO, the BMC downloads it from ironflow's boot service and inserts
// it, the agent boots from the virtual CD, writes the image and the config
// drive and adds a UEFI boot entry; the VM then boots from disk. While the
// deploy waits for the agent, the node's graphical console (redfish-graphical,
// its VNC address read from the vbmc's Manager) is enabled, its framebuffer
// read through the API's websocket and in noVNC, and disabled
// (deployWatchingTheScreen).
//
// Rescue: the rescue agent boots from the agent ISO the BMC inserts (once),
// the ISO is ejected once the rescue user is set, and unrescue boots the
// disk through its UEFI boot entry (rescueAndUnrescue).
//
// C: undeploy with automated cleaning: the agent erases the disk's
// metadata, and the disk file no longer has a partition table.
func TestDeployRedfishVirtualMediaUEFIRescueThenClean(t *testing.T) {
	RequireQEMU(t)
	lab := NewLab(t)
	s := startStack(t, lab, "--automated-clean=true")
	_, sum, err := BuildTestImage(DefaultCacheDir())
	if err != nil {
		t.Fatal(err)
	}
	vm := lab.AddVM("node-b", "52:54:00:e2:0b:01", FirmwareUEFI, filepath.Join(lab.Dir, "vm-node-b", "disk.raw"))
	// The VM has a screen (vnc_address), which the deploy's graphical
	// console shows (deployWatchingTheScreen).
	def := agentVM(vm)
	def.VNCAddress = labVNCAddress
	bmc := startRedfishBMC(t, s, def)

	// Scenario B. Cleaning on provide is off for this node until C: the
	// disk is blank, and C cleans the written one.
	begin := time.Now()
	uuid := createRedfishNode(t, s, bmc, vm.Name, vm.Firmware, vm.MAC,
		"--deploy-interface", "direct", "--boot-interface", "redfish-virtual-media", "--no-automated-clean", "--rescue-interface", "agent",
		"--console-interface", "redfish-graphical")
	defer printNodeHistory(t, s, uuid)
	s.availableWithTestImage(t, uuid, sum)
	const pubKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIE2EscenarioB e2e"
	deployWatchingTheScreen(t, s, bmc, uuid, vm, "e2e-b", pubKey)
	printTimeline(t, s, uuid, "deploy over virtual media")
	t.Logf("B: node-b active %.1fs after node create", time.Since(begin).Seconds())

	// The agent came from the ISO ironflow built, inserted through the BMC.
	if _, ok := findLine(bmc.proc.Log, "virtual media inserted"); !ok {
		t.Errorf("B: the vbmc log shows no virtual media insertion:\n%s", embedded.Tail(bmc.proc.Log, 3000))
	}
	// The ISO holds the agent token: its URL carries a random key after the UUID.
	if line, ok := findLine(bmc.proc.Log, "/iso/"+uuid+"-"); !ok {
		t.Errorf("B: the inserted media is not ironflow's agent ISO /iso/%s-<key>.iso:\n%s", uuid, embedded.Tail(bmc.proc.Log, 3000))
	} else {
		t.Logf("B: %s", line)
	}
	waitBootedFromDisk(t, vm, "e2e-b", pubKey)
	injectNMIAndSeeTheKernel(t, s, uuid, vm)
	// OVMF names the entry it boots; the agent's is "ironflow <disk>".
	if line, ok := findLine(vm.SerialLog, `"ironflow vda"`); ok {
		if i := strings.Index(line, "BdsDxe"); i >= 0 {
			line = line[i:] // after the firmware's screen control sequences
		}
		t.Logf("B: firmware used the agent's UEFI boot entry: %s", line)
	} else {
		t.Errorf("B: OVMF did not boot the UEFI entry the agent wrote (\"ironflow vda\"); console tail:\n%s", embedded.Tail(vm.SerialLog, 3000))
	}
	if f := s.nodeFields(t, uuid); f["provision_state"] != "active" || f["power_state"] != "power on" {
		t.Errorf("B: node is %v / %v, want active / power on", f["provision_state"], f["power_state"])
	}
	t.Logf("B: booted from disk %.1fs after node create", time.Since(begin).Seconds())

	inserted := countLines(bmc.proc.Log, "virtual media inserted")
	rescueAndUnrescue(t, s, uuid, vm)
	if n := countLines(bmc.proc.Log, "virtual media inserted"); n != inserted+1 {
		t.Errorf("rescue inserted the agent ISO %d times, want once:\n%s", n-inserted, embedded.Tail(bmc.proc.Log, 3000))
	}

	// Scenario C.
	if !hasPartitionTable(t, vm.Disk) {
		t.Fatalf("C: the deployed disk %s has no partition table to erase", vm.Disk)
	}
	begin = time.Now()
	s.mustCLI(t, "node", "set", uuid, "--automated-clean")
	if _, err := s.baremetal(t, "node", "undeploy", uuid, "--wait", seconds(provideWait)); err != nil {
		s.failStep(t, uuid, vm.SerialLog, fmt.Errorf("C: %w", err))
	}
	printTimeline(t, s, uuid, "undeploy with cleaning")
	t.Logf("C: node-b available %.1fs after undeploy", time.Since(begin).Seconds())
	hist := s.mustCLI(t, "node", "history", "list", uuid, "-f", "value", "-c", "Description of the event")
	if !strings.Contains(hist, "Agent called back") || !strings.Contains(strings.ToLower(hist), "clean") {
		t.Errorf("C: the node history shows no cleaning through the agent:\n%s", hist)
	}
	if f := s.nodeFields(t, uuid); f["provision_state"] != "available" || f["power_state"] != "power off" {
		t.Errorf("C: node is %v / %v, want available / power off", f["provision_state"], f["power_state"])
	}
	if hasPartitionTable(t, vm.Disk) {
		t.Errorf("C: the disk %s still has a partition table after cleaning", vm.Disk)
	}
}

// injectNMIAndSeeTheKernel sends an NMI to the booted instance with the
// baremetal CLI (`node inject nmi`, API 1.29): ironflow's Redfish driver
// resets the system with ResetType Nmi, the vbmc passes it to QEMU
// (inject-nmi), and the test image's kernel, which has no handler for an
// NMI it did not cause, says so on its serial console (arch/x86/kernel/nmi.c:
// "Uhhuh. NMI received for unknown reason ...").
func injectNMIAndSeeTheKernel(t *testing.T, s *stack, uuid string, vm *LabVM) {
	t.Helper()
	if _, ok := findLine(vm.SerialLog, "NMI received for unknown reason"); ok {
		t.Fatalf("the console shows an NMI before one was injected:\n%s", embedded.Tail(vm.SerialLog, 2000))
	}
	s.mustCLI(t, "node", "inject", "nmi", uuid)
	deadline := time.Now().Add(30 * time.Second)
	for {
		if line, ok := findLine(vm.SerialLog, "NMI received for unknown reason"); ok {
			t.Logf("NMI: the guest kernel said %q", strings.TrimSpace(line))
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("NMI: no kernel NMI message on the console 30s after node inject nmi; console tail:\n%s", embedded.Tail(vm.SerialLog, 3000))
		}
		time.Sleep(500 * time.Millisecond)
	}
}
