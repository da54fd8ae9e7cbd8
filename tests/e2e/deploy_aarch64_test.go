package e2e

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ironflow/ironflow/embedded"
	"github.com/ironflow/ironflow/vbmc"
)

// TestDeployARM64OverPXE deploys an aarch64 VM (qemu-system-aarch64's virt
// machine under TCG, AAVMF firmware) behind `ironflow vbmc serve` with an
// arm64 whole-disk image, and boots it: one agent boot, one disk boot.
// The node's cpu_arch is aarch64 and the worker boots x86_64 and aarch64
// (--agent-architectures). AAVMF's PXE asks DHCP with client architecture
// 11 (arm64 UEFI) and is offered Debian's signed network GRUB over TFTP,
// which boots the node's GRUB config, the arm64 agent kernel and initramfs
// (make ramdisk-arm64; docs/bmcs-and-boot.md, "arm64"); the agent writes
// the image and the config drive; the VM then boots systemd-boot and
// Debian's arm64 kernel from its disk and prints the config drive's
// hostname. The arm64 test image is built here (BuildTestImageARM64).
func TestDeployARM64OverPXE(t *testing.T) {
	RequireQEMU(t)
	if _, err := exec.LookPath(vbmc.DefaultQEMUBinaryAArch64); err != nil {
		t.Skipf("SKIPPING THE ARM64 VM TEST: %s missing (scripts/install-deps.sh test: qemu-system-arm)", vbmc.DefaultQEMUBinaryAArch64)
	}
	if _, err := os.Stat(vbmc.AAVMFCode); err != nil {
		t.Skipf("SKIPPING THE ARM64 VM TEST: %s missing (scripts/install-deps.sh test: qemu-efi-aarch64)", vbmc.AAVMFCode)
	}
	for _, name := range arm64ImageNames[:3] {
		if findImage(name) == "" {
			t.Fatalf("no %s in $IRONFLOW_IMAGES_DIR or .data/images: run `make ramdisk-arm64`", name)
		}
	}
	img, sum, err := BuildTestImageARM64(DefaultCacheDir())
	if err != nil {
		t.Fatal(err)
	}
	begin := time.Now()
	lab := NewLab(t)
	s := startStack(t, lab, "--automated-clean=false", "--agent-architectures", "x86_64,aarch64")
	imageURL := s.publishImage(t, img, "e2e-test-arm64.img")
	vm := lab.AddVM("node-arm64", "52:54:00:e2:a6:01", FirmwareUEFI, filepath.Join(lab.Dir, "vm-node-arm64", "disk.raw"))
	def := vmDefinition(vm, 1, 1024, vmDiskSize)
	def.Arch = vbmc.ArchAArch64
	bmc := startRedfishBMC(t, s, def)
	uuid := createRedfishNode(t, s, bmc, vm.Name, vm.Firmware, vm.MAC,
		"--deploy-interface", "direct", "--boot-interface", "pxe", "--property", "cpu_arch=aarch64")
	defer printNodeHistory(t, s, uuid)
	s.mustCLI(t, "node", "manage", uuid, "--wait", seconds(manageWait))
	s.mustCLI(t, "node", "provide", uuid, "--wait", seconds(provideWait))
	s.mustCLI(t, "node", "set", uuid,
		"--instance-info", "image_source="+imageURL,
		"--instance-info", "image_os_hash_algo=sha256",
		"--instance-info", "image_os_hash_value="+sum)
	const pubKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIE2Earm64 e2e"
	deployStart := time.Now()
	s.deploy(t, uuid, vm, "e2e-arm64", pubKey)
	t.Logf("node-arm64 active %.1fs after the deploy began", time.Since(deployStart).Seconds())
	waitBootedFromDisk(t, vm, "e2e-arm64", pubKey)
	t.Logf("node-arm64 booted its disk %.1fs after the deploy began (%.1fs after the test began)", time.Since(deployStart).Seconds(), time.Since(begin).Seconds())

	// The QEMU the vbmc ran is the aarch64 one, on the virt machine.
	if starts := bmc.qemuStarts(vm); len(starts) == 0 || !strings.Contains(starts[0], vbmc.DefaultQEMUBinaryAArch64) || !strings.Contains(starts[0], "-machine virt") {
		t.Errorf("the vbmc did not start an aarch64 virt machine:\n%s", strings.Join(starts, "\n"))
	}
	// The boot service offered the arm64 loader to the client that said
	// it was arm64 UEFI, and served it over TFTP.
	devLog := s.procs[0].Log
	if line, ok := lineWithAll(devLog, "boot file offered", "grubaa64.efi", "EFI ARM64"); !ok {
		t.Errorf("the DHCP service offered no grubaa64.efi to an arm64 UEFI client:\n%s", embedded.Tail(devLog, 3000))
	} else {
		t.Logf("DHCP: %s", line)
	}
	if line, ok := lineWithAll(devLog, "TFTP transfer done", "grubaa64.efi"); !ok {
		t.Errorf("the TFTP service did not serve grubaa64.efi:\n%s", embedded.Tail(devLog, 3000))
	} else {
		t.Logf("TFTP: %s", line)
	}
	for _, off := range []string{"ipxe.efi", "undionly.kpxe"} {
		if line, ok := lineWithAll(devLog, "boot file offered", off); ok {
			t.Errorf("an x86 loader was offered or served: %s", line)
		}
	}
	// The firmware loaded GRUB, GRUB the arm64 agent, once; the disk
	// then booted the arm64 kernel.
	if _, ok := findLine(vm.SerialLog, "grubaa64.efi"); !ok {
		t.Errorf("the console does not show the firmware loading grubaa64.efi; tail:\n%s", embedded.Tail(vm.SerialLog, 3000))
	}
	if n := countLines(vm.SerialLog, "ironflow-agent starting"); n != 1 {
		t.Errorf("the agent started %d times, want once; console tail:\n%s", n, embedded.Tail(vm.SerialLog, 3000))
	}
	if line, ok := findLine(vm.SerialLog, "ironflow-agent starting"); !ok || !strings.Contains(line, "-arm64") {
		t.Errorf("the agent did not start on Debian's arm64 kernel: %q", line)
	}
	if f := s.nodeFields(t, uuid); f["provision_state"] != "active" || f["power_state"] != "power on" {
		t.Errorf("node is %v / %v, want active / power on", f["provision_state"], f["power_state"])
	}
}

// lineWithAll is the first line of the file holding every one of subs.
func lineWithAll(path string, subs ...string) (string, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", false
	}
next:
	for _, l := range strings.Split(string(b), "\n") {
		for _, sub := range subs {
			if !strings.Contains(l, sub) {
				continue next
			}
		}
		return strings.TrimSpace(l), true
	}
	return "", false
}
