package agent

import (
	"bytes"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/diskfs/go-diskfs/partition/gpt"

	"github.com/ironflow/ironflow/agent/authenticode"
	"github.com/ironflow/ironflow/agent/client"
)

const (
	testShim = "/usr/lib/shim/shimx64.efi.signed"
	testGrub = "/usr/lib/grub/x86_64-efi-signed/grubx64.efi.signed"
	testFB   = "/usr/lib/shim/fbx64.efi" // shim's unsigned fallback loader
)

// secureBootDisk writes a GPT disk whose 16 MiB FAT16 ESP (as whole-disk
// images have, made by dosfstools) holds files (ESP path → host file).
func secureBootDisk(t *testing.T, hw *fileHardware, files map[string]string) {
	t.Helper()
	b := secureBootESP(t, files)
	const start = 2048
	f, err := os.OpenFile(hw.path(0), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	size := hw.disks[0].Size
	tbl := &gpt.Table{LogicalSectorSize: 512, PhysicalSectorSize: 512, ProtectiveMBR: true, Partitions: []*gpt.Partition{
		{Index: 1, Start: start, End: start + uint64(len(b))/512 - 1, Type: gpt.EFISystemPartition, Name: "esp"},
	}}
	if err := tbl.Write(&diskFile{Device: fileDevice{File: f, size: size}}, size); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(b, start*512); err != nil {
		t.Fatal(err)
	}
}

// secureBootESP is a 16 MiB FAT16 ESP holding files (ESP path → host
// file), made by dosfstools and mtools.
func secureBootESP(t *testing.T, files map[string]string) []byte {
	t.Helper()
	for _, tool := range []string{"mkfs.vfat", "mcopy", "mmd"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("SKIPPING: %s missing (dosfstools, mtools)", tool)
		}
	}
	for _, src := range files {
		if _, err := os.Stat(src); err != nil {
			t.Skipf("SKIPPING: %s missing (scripts/install-deps.sh installs shim-signed and grub-efi-amd64-signed)", src)
		}
	}
	vol := filepath.Join(t.TempDir(), "esp")
	run := func(argv ...string) {
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Env = append(os.Environ(), "MTOOLS_SKIP_CHECK=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%v: %v: %s", argv, err, out)
		}
	}
	run("mkfs.vfat", "-C", "-F", "16", vol, "16384")
	run("mmd", "-i", vol, "::/EFI", "::/EFI/BOOT")
	for dst, src := range files {
		run("mcopy", "-i", vol, src, "::"+dst)
	}
	b, err := os.ReadFile(vol)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func installSecureBoot(t *testing.T, files map[string]string) (string, error) {
	t.Helper()
	hw := newFileHardware(t, 64<<20)
	secureBootDisk(t, hw, files)
	_, c := startAgent(t, newFakeAPI(t), hw, nil)
	ctx := t.Context()
	r, err := c.InstallBootloader(ctx, client.InstallBootloaderParams{TargetBootMode: "uefi", SecureBoot: true})
	if err == nil {
		r, err = c.WaitCommand(ctx, r.ID, 10*time.Millisecond, nil)
	}
	return string(r.CommandResult), err
}

// An unsigned loader fails install_bootloader before the instance's first
// boot under secure boot, naming the file and the disk.
func TestSecureBootRefusesAnUnsignedLoader(t *testing.T) {
	_, err := installSecureBoot(t, map[string]string{"/EFI/BOOT/BOOTX64.EFI": testFB})
	if err == nil || !strings.Contains(err.Error(), `Secure boot is enabled for the instance but its boot loader \EFI\BOOT\BOOTX64.EFI on /dev/vda (EFI system partition 1) is not signed`) {
		t.Fatalf("unsigned loader: %v, want the secure boot refusal", err)
	}
	t.Logf("refused: %v", err)
}

// shim (Microsoft-signed) with Debian's signed GRUB next to it passes:
// shim chains to Microsoft's UEFI CA, GRUB to shim's vendor certificate.
func TestSecureBootAcceptsShimAndSignedGRUB(t *testing.T) {
	msg, err := installSecureBoot(t, map[string]string{"/EFI/BOOT/BOOTX64.EFI": testShim, "/EFI/BOOT/grubx64.efi": testGrub})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"Microsoft Corporation UEFI CA 2011", "Debian Secure Boot CA"} {
		if !strings.Contains(msg, want) {
			t.Errorf("result %q does not name %s", msg, want)
		}
	}
	t.Logf("accepted: %s", msg)
}

// shim whose second stage is unsigned (shim's fallback as grubx64.efi) or
// missing is refused too: shim would not start it.
func TestSecureBootRefusesShimWithoutASignedSecondStage(t *testing.T) {
	_, err := installSecureBoot(t, map[string]string{"/EFI/BOOT/BOOTX64.EFI": testShim, "/EFI/BOOT/grubx64.efi": testFB})
	if err == nil || !strings.Contains(err.Error(), `\EFI\BOOT\grubx64.efi (shim's second stage) on /dev/vda (EFI system partition 1) is not signed`) {
		t.Errorf("unsigned second stage: %v", err)
	}
	_, err = installSecureBoot(t, map[string]string{"/EFI/BOOT/BOOTX64.EFI": testShim})
	if err == nil || !strings.Contains(err.Error(), `\EFI\BOOT\grubx64.efi (shim's second stage) on /dev/vda (EFI system partition 1) does not exist`) {
		t.Errorf("missing second stage: %v", err)
	}
}

// The firmware's db, when the agent can read it, is what is trusted: a db
// holding only another CA refuses Microsoft-signed shim.
func TestSecureBootTrustsTheFirmwaresDB(t *testing.T) {
	cas := authenticode.MicrosoftUEFICAs()
	db := []byte{0, 0, 0, 0} // efivarfs attributes
	for _, c := range cas {
		if strings.Contains(c.Subject.CommonName, "Windows Production PCA") {
			db = append(db, signatureList(c.Raw)...)
		}
	}
	p := filepath.Join(t.TempDir(), "db")
	if err := os.WriteFile(p, db, 0o644); err != nil {
		t.Fatal(err)
	}
	old := efiDBPath
	efiDBPath = p
	t.Cleanup(func() { efiDBPath = old })
	if certs, source := secureBootTrust(); len(certs) != 1 || source != "the firmware's db" {
		t.Fatalf("trust from db: %d certificates from %s", len(certs), source)
	}
	_, err := installSecureBoot(t, map[string]string{"/EFI/BOOT/BOOTX64.EFI": testShim, "/EFI/BOOT/grubx64.efi": testGrub})
	if err == nil || !strings.Contains(err.Error(), "not by a key of the firmware's db") {
		t.Errorf("shim against a db without Microsoft's UEFI CA: %v", err)
	}
}

func signatureList(der []byte) []byte {
	b := append([]byte(nil), efiCertX509...)
	b = binary.LittleEndian.AppendUint32(b, uint32(28+16+len(der)))
	b = binary.LittleEndian.AppendUint32(b, 0)
	b = binary.LittleEndian.AppendUint32(b, uint32(16+len(der)))
	b = append(b, bytes.Repeat([]byte{0x77}, 16)...) // owner GUID
	return append(b, der...)
}
