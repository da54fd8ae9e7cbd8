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

// TestSecureBootRamdiskDeployOverPXE deploys a ramdisk instance (Debian's
// signed kernel and a busybox ramdisk) with the secure_boot capability on
// an OVMF VM behind `ironflow vbmc serve`, booted over PXE: the ramdisk
// deploy turns secure boot on first (change netboot-deploy-secure-boot),
// so the VM starts with OVMF's secure-boot build and Microsoft's keys, and
// its PXE boot goes through the signed chain without iPXE — DHCP offers
// shim over TFTP, shim loads Debian's signed network GRUB, GRUB the node's
// config by MAC, then the kernel and initrd over TFTP (pxe/grubnet.go).
// The instance's kernel reports secure boot on.
func TestSecureBootRamdiskDeployOverPXE(t *testing.T) {
	RequireQEMU(t)
	for _, f := range []string{pxe.DefaultShim, pxe.DefaultSignedNetGrub, "/usr/share/OVMF/OVMF_CODE_4M.secboot.fd", "/usr/share/OVMF/OVMF_VARS_4M.ms.fd"} {
		if _, err := os.Stat(f); err != nil {
			t.Skipf("SKIPPING SECURE BOOT VM TEST: %s missing (scripts/install-deps.sh: ovmf shim-signed grub-efi-amd64-signed)", f)
		}
	}
	begin := time.Now()
	lab := NewLab(t)
	s := startStack(t, lab, "--automated-clean=false")
	kernelURL, ramdiskURL := publishRamdiskInstance(t, lab, s)
	vm := lab.AddVM("node-sbpxe", "52:54:00:e2:5b:0c", FirmwareUEFI, filepath.Join(lab.Dir, "vm-node-sbpxe", "disk.raw"))
	bmc := startRedfishBMC(t, s, vmDefinition(vm, 1, 512, vmDiskSize))
	uuid := createRedfishNode(t, s, bmc, vm.Name, vm.Firmware, vm.MAC, "--deploy-interface", "ramdisk", "--boot-interface", "ipxe")
	defer printNodeHistory(t, s, uuid)
	s.mustCLI(t, "node", "manage", uuid, "--wait", seconds(manageWait))
	s.mustCLI(t, "node", "provide", uuid, "--wait", seconds(provideWait))
	s.mustCLI(t, "node", "set", uuid,
		"--instance-info", "kernel="+kernelURL,
		"--instance-info", "ramdisk="+ramdiskURL,
		"--instance-info", "ramdisk_kernel_arguments=console=ttyS0,115200",
		"--instance-info", `capabilities={"secure_boot": "true"}`)
	mark, _ := os.Stat(vm.SerialLog)
	if _, err := s.baremetal(t, "node", "deploy", uuid, "--wait", seconds(deployWait)); err != nil {
		s.failStep(t, uuid, vm.SerialLog, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), DefaultBootTimeout)
	defer cancel()
	if _, err := WaitSerial(ctx, vm.SerialLog, ramdiskInstanceMarker, nil); err != nil {
		t.Fatalf("the ramdisk instance did not boot: %v; console tail:\n%s\n%s", err, embedded.Tail(vm.SerialLog, 3000), s.logTail())
	}
	if f := s.nodeFields(t, uuid); f["provision_state"] != "active" || f["secure_boot"] != true {
		t.Errorf("node is %v with secure_boot %v, want active with secure_boot true", f["provision_state"], f["secure_boot"])
	}
	for _, want := range []string{"NBP filename is shimx64.efi", "Fetching Netboot Image grubx64.efi", "secureboot: Secure boot enabled"} {
		if line, ok := findLineAfter(vm.SerialLog, mark, want); !ok {
			t.Errorf("console lacks %q; tail:\n%s", want, embedded.Tail(vm.SerialLog, 3000))
		} else {
			t.Logf("console: %s", line)
		}
	}
	if _, ok := findLineAfter(vm.SerialLog, mark, "NBP filename is ipxe.efi"); ok {
		t.Errorf("iPXE was offered under secure boot")
	}
	t.Logf("ramdisk instance booted over PXE under secure boot %.1fs after the test began", time.Since(begin).Seconds())
}

// TestSecureBootAgentInspectionOverPXE turns secure boot on for a managed
// OVMF node (PUT states/secure_boot, API 1.76) and inspects it in-band
// over PXE: the agent boots through the signed chain (shim → signed GRUB
// → Debian's signed kernel, all over TFTP), its kernel reports secure
// boot on, and it calls back with its inventory: the node is manageable
// with the VM's MAC in the inventory.
func TestSecureBootAgentInspectionOverPXE(t *testing.T) {
	RequireQEMU(t)
	for _, f := range []string{pxe.DefaultShim, pxe.DefaultSignedNetGrub, "/usr/share/OVMF/OVMF_CODE_4M.secboot.fd", "/usr/share/OVMF/OVMF_VARS_4M.ms.fd"} {
		if _, err := os.Stat(f); err != nil {
			t.Skipf("SKIPPING SECURE BOOT VM TEST: %s missing (scripts/install-deps.sh: ovmf shim-signed grub-efi-amd64-signed)", f)
		}
	}
	begin := time.Now()
	lab := NewLab(t)
	s := startStack(t, lab, "--automated-clean=false")
	vm := lab.AddVM("node-sbagent", "52:54:00:e2:5b:0d", FirmwareUEFI, filepath.Join(lab.Dir, "vm-node-sbagent", "disk.raw"))
	bmc := startRedfishBMC(t, s, vmDefinition(vm, 1, 1024, vmDiskSize))
	uuid := createRedfishNode(t, s, bmc, vm.Name, vm.Firmware, vm.MAC, "--boot-interface", "ipxe", "--inspect-interface", "agent")
	defer printNodeHistory(t, s, uuid)
	s.mustCLI(t, "node", "manage", uuid, "--wait", seconds(manageWait))
	if code := labAPI(t, lab, "1.76", http.MethodPut, "/v1/nodes/"+uuid+"/states/secure_boot", map[string]any{"target": true}, nil); code != http.StatusAccepted {
		t.Fatalf("PUT states/secure_boot: %d, want 202", code)
	}
	deadline := time.Now().Add(manageWait)
	for s.nodeFields(t, uuid)["secure_boot"] != true {
		if time.Now().After(deadline) {
			f := s.nodeFields(t, uuid)
			t.Fatalf("secure_boot is %v after the switch (last_error %v)", f["secure_boot"], f["last_error"])
		}
		time.Sleep(time.Second)
	}
	mark, _ := os.Stat(vm.SerialLog)
	if _, err := s.baremetal(t, "node", "inspect", uuid, "--wait", seconds(deployWait)); err != nil {
		s.failStep(t, uuid, vm.SerialLog, err)
	}
	for _, want := range []string{"NBP filename is shimx64.efi", "Fetching Netboot Image grubx64.efi", "secureboot: Secure boot enabled", "ipa-api-url="} {
		if line, ok := findLineAfter(vm.SerialLog, mark, want); !ok {
			t.Errorf("console lacks %q; tail:\n%s", want, embedded.Tail(vm.SerialLog, 3000))
		} else {
			t.Logf("console: %s", line)
		}
	}
	inv := readInventory(t, s, uuid)
	if !inv.hasMAC(vm.MAC) {
		t.Errorf("inventory interfaces %+v: no %s (the agent did not report)", inv.Inventory.Interfaces, vm.MAC)
	}
	if f := s.nodeFields(t, uuid); f["provision_state"] != "manageable" || f["secure_boot"] != true {
		t.Errorf("after inspection the node is %v with secure_boot %v, want manageable with secure boot on", f["provision_state"], f["secure_boot"])
	}
	t.Logf("agent booted over PXE under secure boot and reported its inventory %.1fs after the test began", time.Since(begin).Seconds())
}
