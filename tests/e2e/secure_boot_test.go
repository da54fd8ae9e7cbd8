package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ironflow/ironflow/embedded"
	"github.com/ironflow/ironflow/pxe"
)

// TestSecureBootDeploySignedAndUnsignedImage deploys, on one OVMF VM
// behind `ironflow vbmc serve` (Redfish, virtual media), an instance that
// asks for secure boot (instance_info capabilities secure_boot:true):
//
//  1. a signed whole-disk image (shim → Debian's signed GRUB → Debian's
//     signed kernel on its ESP): the deploy turns secure boot on through
//     the BMC before the instance's first boot, the node is active with
//     secure_boot true, and the instance's kernel reports secure boot on.
//     Rebuilt, with secure boot on, the agent boots from its ISO's signed
//     chain (shim → Debian's signed GRUB → Debian's kernel).
//  2. undeploy: the teardown turns secure boot off again.
//  3. the usual unsigned test image (systemd-boot): before the instance's
//     first boot the agent checks its loader's Authenticode signature as
//     the firmware would (agent/secureboot.go) and refuses it: the node is
//     deploy failed with a last_error naming the unsigned loader, secure
//     boot was not turned on, and the image never boots.
func TestSecureBootDeploySignedAndUnsignedImage(t *testing.T) {
	RequireQEMU(t)
	for _, f := range []string{pxe.DefaultShim, pxe.DefaultSignedGrub, "/usr/share/OVMF/OVMF_CODE_4M.secboot.fd", "/usr/share/OVMF/OVMF_VARS_4M.ms.fd"} {
		if _, err := os.Stat(f); err != nil {
			t.Skipf("SKIPPING SECURE BOOT VM TEST: %s missing (scripts/install-deps.sh: ovmf shim-signed grub-efi-amd64-signed)", f)
		}
	}
	lab := NewLab(t)
	s := startStack(t, lab)
	unsigned, unsignedSum, err := BuildTestImage(DefaultCacheDir())
	if err != nil {
		t.Fatal(err)
	}
	signed, signedSum := buildSignedTestImage(t, unsigned)
	signedURL := s.publishImage(t, signed, "e2e-signed.img")

	vm := lab.AddVM("node-sb", "52:54:00:e2:5b:01", FirmwareUEFI, filepath.Join(lab.Dir, "vm-node-sb", "disk.raw"))
	bmc := startRedfishBMC(t, s, agentVM(vm))
	uuid := createRedfishNode(t, s, bmc, vm.Name, vm.Firmware, vm.MAC,
		"--deploy-interface", "direct", "--boot-interface", "redfish-virtual-media", "--no-automated-clean")
	defer printNodeHistory(t, s, uuid)
	s.mustCLI(t, "node", "manage", uuid, "--wait", seconds(manageWait))
	s.mustCLI(t, "node", "provide", uuid, "--wait", seconds(provideWait))

	// 1. The signed image.
	begin := time.Now()
	s.mustCLI(t, "node", "set", uuid,
		"--instance-info", "image_source="+signedURL,
		"--instance-info", "image_os_hash_algo=sha256",
		"--instance-info", "image_os_hash_value="+signedSum,
		"--instance-info", `capabilities={"secure_boot": "true"}`)
	const pubKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIE2EsecureBoot e2e"
	mark, _ := os.Stat(vm.SerialLog)
	s.deploy(t, uuid, vm, "e2e-sb", pubKey)
	printTimeline(t, s, uuid, "secure boot deploy")
	waitBootedFromDisk(t, vm, "e2e-sb", pubKey)
	if f := s.nodeFields(t, uuid); f["provision_state"] != "active" || f["secure_boot"] != true {
		t.Errorf("1: node is %v with secure_boot %v, want active with secure_boot true", f["provision_state"], f["secure_boot"])
	}
	if line, ok := findLineAfter(vm.SerialLog, mark, "Secure boot enabled"); ok {
		t.Logf("1: the instance's kernel: %s", line)
	} else {
		t.Errorf("1: the instance's kernel does not report secure boot on; console tail:\n%s", embedded.Tail(vm.SerialLog, 3000))
	}
	t.Logf("1: signed image booted with secure boot %.1fs after deploy", time.Since(begin).Seconds())

	// 1b. Rebuild: secure boot is on now, so the agent ISO boots through
	// its signed chain (shim → signed GRUB → Debian's kernel) too; then
	// the instance boots again, both kernels with secure boot on.
	mark, _ = os.Stat(vm.SerialLog)
	cd := `{"meta_data":{"hostname":"e2e-sb-rebuilt","public_keys":{"0":"` + pubKey + `"}}}`
	if _, err := s.baremetal(t, "node", "rebuild", uuid, "--config-drive", cd, "--wait", seconds(deployWait)); err != nil {
		s.failStep(t, uuid, vm.SerialLog, fmt.Errorf("1b: %w", err))
	}
	waitBootedFromDisk(t, vm, "e2e-sb-rebuilt", pubKey)
	if n := countLinesAfter(vm.SerialLog, mark, "secureboot: Secure boot enabled"); n < 2 {
		t.Errorf("1b: %d kernels reported secure boot on during the rebuild, want 2 (the agent's, the instance's); console tail:\n%s",
			n, embedded.Tail(vm.SerialLog, 3000))
	}
	if _, ok := findLineAfter(vm.SerialLog, mark, "ipa-api-url="); !ok {
		t.Errorf("1b: the agent's kernel command line is not on the console")
	}

	// 2. Teardown turns secure boot off.
	s.mustCLI(t, "node", "undeploy", uuid, "--wait", seconds(provideWait))
	if f := s.nodeFields(t, uuid); f["provision_state"] != "available" || f["secure_boot"] != false {
		t.Errorf("2: node is %v with secure_boot %v after undeploy, want available with secure_boot false", f["provision_state"], f["secure_boot"])
	}

	// 3. The unsigned image with secure boot asked for.
	s.mustCLI(t, "node", "set", uuid,
		"--instance-info", "image_source="+s.imageURL("e2e-test.img"),
		"--instance-info", "image_os_hash_algo=sha256",
		"--instance-info", "image_os_hash_value="+unsignedSum,
		"--instance-info", `capabilities={"secure_boot": "true"}`)
	mark, _ = os.Stat(vm.SerialLog)
	cd = `{"meta_data":{"hostname":"e2e-sb-unsigned","public_keys":{"0":"` + pubKey + `"}}}`
	begin = time.Now()
	if _, err := s.baremetal(t, "node", "deploy", uuid, "--config-drive", cd); err != nil {
		t.Fatalf("3: deploy: %v", err)
	}
	s.waitProvisionState(t, uuid, "deploy failed", deployWait, vm)
	f := s.nodeFields(t, uuid)
	last, _ := f["last_error"].(string)
	const want = `Secure boot is enabled for the instance but its boot loader \EFI\BOOT\BOOTX64.EFI on /dev/`
	if !strings.Contains(last, want) || !strings.Contains(last, "is not signed") {
		t.Errorf("3: last_error %q, want it to say %q ... is not signed", last, want)
	}
	if f["secure_boot"] == true {
		t.Errorf("3: secure boot was turned on for an instance whose loader is unsigned")
	}
	t.Logf("3: unsigned image refused by the agent %.1fs after deploy: provision_state %v, last_error %q",
		time.Since(begin).Seconds(), f["provision_state"], last)
	if _, ok := findLineAfter(vm.SerialLog, mark, "IRONFLOW-E2E hostname=e2e-sb-unsigned"); ok {
		t.Errorf("3: the unsigned image booted")
	}
}

// buildSignedTestImage copies the unsigned test image and replaces the
// loader on its ESP with the signed chain: shim as \EFI\BOOT\BOOTX64.EFI,
// Debian's signed GRUB next to it as grubx64.efi, and grub.cfg in
// \EFI\debian (the signed GRUB's prefix) booting the image's kernel
// (Debian's, signed) and initrd. It returns the image and its sha256.
func buildSignedTestImage(t *testing.T, unsigned string) (string, string) {
	t.Helper()
	dir := t.TempDir()
	disk := filepath.Join(dir, "signed.img")
	// A copy of its own: the unsigned image is cached and served too.
	b, err := os.ReadFile(unsigned)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(disk, b, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg := filepath.Join(dir, "grub.cfg")
	if err := os.WriteFile(cfg, []byte("set timeout=0\nmenuentry \"ironflow e2e signed\" {\n\tlinux /vmlinuz console=ttyS0,115200 no_timer_check\n\tinitrd /initrd.img\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	esp := fmt.Sprintf("%s@@%d", disk, partOffset)
	for _, argv := range [][]string{
		{"mmd", "-i", esp, "::/EFI/debian"},
		{"mcopy", "-o", "-i", esp, pxe.DefaultShim, "::/EFI/BOOT/BOOTX64.EFI"},
		{"mcopy", "-o", "-i", esp, pxe.DefaultSignedGrub, "::/EFI/BOOT/grubx64.efi"},
		{"mcopy", "-o", "-i", esp, cfg, "::/EFI/debian/grub.cfg"},
	} {
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Env = append(os.Environ(), "MTOOLS_SKIP_CHECK=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("signed test image: %s: %v: %s", strings.Join(argv, " "), err, out)
		}
	}
	sum, err := fileSHA256(disk)
	if err != nil {
		t.Fatal(err)
	}
	return disk, sum
}

// findLineAfter is findLine on what the console printed after mark (the
// log's size then; nil: the whole log).
func findLineAfter(path string, mark os.FileInfo, substr string) (string, bool) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", false
	}
	if mark != nil && mark.Size() <= int64(len(b)) {
		b = b[mark.Size():]
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.Contains(l, substr) {
			return strings.TrimSpace(l), true
		}
	}
	return "", false
}

// countLinesAfter counts the lines with substr the console printed after
// mark.
func countLinesAfter(path string, mark os.FileInfo, substr string) int {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	if mark != nil && mark.Size() <= int64(len(b)) {
		b = b[mark.Size():]
	}
	return strings.Count(string(b), substr)
}
