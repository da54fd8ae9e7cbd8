package e2e

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/ironflow/ironflow/embedded"
	"github.com/ironflow/ironflow/pxe"
)

// TestSecureBootAgentInspectionThenRamdiskDeployOverPXE boots one OVMF VM
// behind `ironflow vbmc serve` over PXE under secure boot twice, through
// the signed chain without iPXE — DHCP offers shim over TFTP, shim loads
// Debian's signed network GRUB, GRUB the node's config by MAC, then the
// kernel and initrd over TFTP (pxe/grubnet.go):
//
//  1. Agent inspection: secure boot is turned on for the managed node
//     (PUT states/secure_boot, API 1.76) and the node is inspected in-band:
//     the agent's kernel (Debian's signed one) reports secure boot on and
//     the agent calls back with its inventory; the node is manageable with
//     the VM's MAC in the inventory.
//  2. Ramdisk deploy: secure boot is turned off again, and a ramdisk
//     instance (Debian's signed kernel and a busybox ramdisk) with the
//     secure_boot capability is deployed: the ramdisk deploy turns secure
//     boot on first (change netboot-deploy-secure-boot), so the VM starts
//     with OVMF's secure-boot build and Microsoft's keys, and the
//     instance's kernel reports secure boot on.
//
// One VM and one stack serve both (they were two tests, each with its own
// stack: docs/contributing.md, "How long make test takes").
func TestSecureBootAgentInspectionThenRamdiskDeployOverPXE(t *testing.T) {
	RequireQEMU(t)
	for _, f := range []string{pxe.DefaultShim, pxe.DefaultSignedNetGrub, "/usr/share/OVMF/OVMF_CODE_4M.secboot.fd", "/usr/share/OVMF/OVMF_VARS_4M.ms.fd"} {
		if _, err := os.Stat(f); err != nil {
			t.Skipf("SKIPPING SECURE BOOT VM TEST: %s missing (scripts/install-deps.sh: ovmf shim-signed grub-efi-amd64-signed)", f)
		}
	}
	begin := time.Now()
	lab := NewLab(t)
	s := startStack(t, lab, "--automated-clean=false")
	// A rack's switch announces itself: the inspection's LLDP listening
	// ends as soon as the NIC hears it.
	lab.StartLLDPSwitch("e2e-lab-switch", "swp1")
	kernelURL, ramdiskURL := publishRamdiskInstance(t, lab, s)
	vm := lab.AddVM("node-sbpxe", "52:54:00:e2:5b:0c", FirmwareUEFI, filepath.Join(lab.Dir, "vm-node-sbpxe", "disk.raw"))
	bmc := startRedfishBMC(t, s, vmDefinition(vm, 1, 1024, vmDiskSize))
	uuid := createRedfishNode(t, s, bmc, vm.Name, vm.Firmware, vm.MAC,
		"--deploy-interface", "ramdisk", "--boot-interface", "ipxe", "--inspect-interface", "agent")
	defer printNodeHistory(t, s, uuid)
	s.mustCLI(t, "node", "manage", uuid, "--wait", seconds(manageWait))

	// setSecureBoot switches secure boot through the API and waits for
	// the node to show it.
	setSecureBoot := func(on bool) {
		t.Helper()
		if code := labAPI(t, lab, "1.76", http.MethodPut, "/v1/nodes/"+uuid+"/states/secure_boot", map[string]any{"target": on}, nil); code != http.StatusAccepted {
			t.Fatalf("PUT states/secure_boot %v: %d, want 202", on, code)
		}
		deadline := time.Now().Add(manageWait)
		for s.nodeFields(t, uuid)["secure_boot"] != on {
			if time.Now().After(deadline) {
				f := s.nodeFields(t, uuid)
				t.Fatalf("secure_boot is %v after the switch to %v (last_error %v)", f["secure_boot"], on, f["last_error"])
			}
			time.Sleep(time.Second)
		}
	}

	// 1. Agent inspection under secure boot.
	setSecureBoot(true)
	mark, _ := os.Stat(vm.SerialLog)
	if _, err := s.baremetal(t, "node", "inspect", uuid, "--wait", seconds(deployWait)); err != nil {
		s.failStep(t, uuid, vm.SerialLog, err)
	}
	for _, want := range []string{"NBP filename is shimx64.efi", "Fetching Netboot Image grubx64.efi", "secureboot: Secure boot enabled", "ipa-api-url="} {
		if line, ok := findLineAfter(vm.SerialLog, mark, want); !ok {
			t.Errorf("1: console lacks %q; tail:\n%s", want, embedded.Tail(vm.SerialLog, 3000))
		} else {
			t.Logf("1: console: %s", line)
		}
	}
	inv := readInventory(t, s, uuid)
	if !inv.hasMAC(vm.MAC) {
		t.Errorf("1: inventory interfaces %+v: no %s (the agent did not report)", inv.Inventory.Interfaces, vm.MAC)
	}
	if f := s.nodeFields(t, uuid); f["provision_state"] != "manageable" || f["secure_boot"] != true {
		t.Errorf("1: after inspection the node is %v with secure_boot %v, want manageable with secure boot on", f["provision_state"], f["secure_boot"])
	}
	t.Logf("1: agent booted over PXE under secure boot and reported its inventory %.1fs after the test began", time.Since(begin).Seconds())

	// 2. The ramdisk deploy turns secure boot on itself.
	setSecureBoot(false)
	s.mustCLI(t, "node", "provide", uuid, "--wait", seconds(provideWait))
	s.mustCLI(t, "node", "set", uuid,
		"--instance-info", "kernel="+kernelURL,
		"--instance-info", "ramdisk="+ramdiskURL,
		"--instance-info", "ramdisk_kernel_arguments=console=ttyS0,115200 no_timer_check",
		"--instance-info", `capabilities={"secure_boot": "true"}`)
	mark, _ = os.Stat(vm.SerialLog)
	if _, err := s.baremetal(t, "node", "deploy", uuid, "--wait", seconds(deployWait)); err != nil {
		s.failStep(t, uuid, vm.SerialLog, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), DefaultBootTimeout)
	defer cancel()
	if _, err := WaitSerial(ctx, vm.SerialLog, ramdiskInstanceMarker, nil); err != nil {
		t.Fatalf("2: the ramdisk instance did not boot: %v; console tail:\n%s\n%s", err, embedded.Tail(vm.SerialLog, 3000), s.logTail())
	}
	if f := s.nodeFields(t, uuid); f["provision_state"] != "active" || f["secure_boot"] != true {
		t.Errorf("2: node is %v with secure_boot %v, want active with secure_boot true", f["provision_state"], f["secure_boot"])
	}
	for _, want := range []string{"NBP filename is shimx64.efi", "Fetching Netboot Image grubx64.efi", "secureboot: Secure boot enabled"} {
		if line, ok := findLineAfter(vm.SerialLog, mark, want); !ok {
			t.Errorf("2: console lacks %q; tail:\n%s", want, embedded.Tail(vm.SerialLog, 3000))
		} else {
			t.Logf("2: console: %s", line)
		}
	}
	if _, ok := findLineAfter(vm.SerialLog, mark, "NBP filename is ipxe.efi"); ok {
		t.Errorf("2: iPXE was offered under secure boot")
	}
	t.Logf("2: ramdisk instance booted over PXE under secure boot %.1fs after the test began", time.Since(begin).Seconds())
}
