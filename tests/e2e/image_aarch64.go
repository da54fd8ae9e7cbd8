package e2e

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// The arm64 test image: the x86-64 image's init and layout (an MBR disk,
// one FAT16 EFI system partition at 1 MiB) with Debian's arm64 kernel,
// its modules and busybox, booted by systemd-boot for arm64 from the
// removable-media path AAVMF tries, \EFI\BOOT\BOOTAA64.EFI. Debian's arm64
// vmlinuz is an uncompressed Image, itself an EFI binary that systemd-boot
// starts. The console is the virt machine's PL011 UART.
const (
	loaderEntryARM64 = `title ironflow e2e test image (arm64)
linux /vmlinuz
initrd /initrd.img
options console=ttyAMA0
`
	imageFormatVersionARM64 = "arm64-1"
)

// KernelDirARM64 is Debian's arm64 kernel, its modules and the arm64 boot
// files (boot/: systemd-bootaa64.efi, busybox, the loaders) that
// `KERNEL_ARCH=arm64 scripts/fetch-kernel.sh` (make ramdisk-arm64) puts
// into .data/kernel.arm64, or $KERNEL_DIR_ARM64.
func KernelDirARM64() string {
	if d := os.Getenv("KERNEL_DIR_ARM64"); d != "" {
		return d
	}
	return filepath.Join(RepoRoot(), ".data", "kernel.arm64")
}

// ensureKernelARM64 fetches the arm64 kernel and boot files when they are
// missing and returns the kernel's path, its modules directory and the
// boot files' directory.
func ensureKernelARM64() (vmlinuz, modulesDir, bootDir string, err error) {
	dir := KernelDirARM64()
	if _, err := os.Stat(filepath.Join(dir, "boot", "busybox")); errors.Is(err, fs.ErrNotExist) {
		cmd := exec.Command(filepath.Join(RepoRoot(), "scripts", "fetch-kernel.sh"))
		cmd.Env = append(os.Environ(), "KERNEL_ARCH=arm64", "KERNEL_DIR="+dir)
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", "", "", fmt.Errorf("fetch the arm64 kernel: %w: %s", err, out)
		}
	}
	ver, err := os.ReadFile(filepath.Join(dir, "version"))
	if err != nil {
		return "", "", "", fmt.Errorf("read arm64 kernel version: %w", err)
	}
	return filepath.Join(dir, "vmlinuz"), filepath.Join(dir, "modules", strings.TrimSpace(string(ver))), filepath.Join(dir, "boot"), nil
}

// BuildTestImageARM64 is BuildTestImage for arm64 UEFI machines: a raw
// 64 MiB disk whose init prints the same IRONFLOW-E2E markers, and its
// sha256, cached under dir by every input.
func BuildTestImageARM64(dir string) (path, sum string, err error) {
	vmlinuz, modulesDir, bootDir, err := ensureKernelARM64()
	if err != nil {
		return "", "", err
	}
	busybox, sdboot := filepath.Join(bootDir, "busybox"), filepath.Join(bootDir, "systemd-bootaa64.efi")
	h := sha256.New()
	io.WriteString(h, imageFormatVersionARM64+"\x00"+initScript+"\x00"+loaderConf+"\x00"+loaderEntryARM64+"\x00"+strings.Join(initrdModules, ",")+"\x00")
	for _, f := range []string{vmlinuz, busybox, sdboot} {
		b, err := os.ReadFile(f)
		if err != nil {
			return "", "", fmt.Errorf("arm64 test image input: %w", err)
		}
		h.Write(b)
	}
	final := filepath.Join(dir, "test-image-arm64-"+hex.EncodeToString(h.Sum(nil))[:16])
	path = filepath.Join(final, "disk.img")
	if b, err := os.ReadFile(path + ".sha256"); err == nil {
		return path, strings.TrimSpace(string(b)), nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", fmt.Errorf("create image cache %s: %w", dir, err)
	}
	tmp, err := os.MkdirTemp(dir, "build-arm64-")
	if err != nil {
		return "", "", fmt.Errorf("create image build dir: %w", err)
	}
	defer os.RemoveAll(tmp)
	initrd, err := buildInitrd(busybox, modulesDir, initScript)
	if err != nil {
		return "", "", err
	}
	for name, data := range map[string][]byte{"initrd.img": initrd, "loader.conf": []byte(loaderConf), "entry.conf": []byte(loaderEntryARM64)} {
		if err := os.WriteFile(filepath.Join(tmp, name), data, 0o644); err != nil {
			return "", "", fmt.Errorf("write %s: %w", name, err)
		}
	}
	disk, err := buildESPDisk(tmp, [][2]string{
		{vmlinuz, "::/vmlinuz"},
		{"initrd.img", "::/initrd.img"},
		{sdboot, "::/EFI/BOOT/BOOTAA64.EFI"},
		{"loader.conf", "::/loader/loader.conf"},
		{"entry.conf", "::/loader/entries/ironflow-e2e.conf"},
	})
	if err != nil {
		return "", "", err
	}
	if sum, err = fileSHA256(disk); err != nil {
		return "", "", err
	}
	if err := os.WriteFile(disk+".sha256", []byte(sum+"\n"), 0o644); err != nil {
		return "", "", fmt.Errorf("write test image checksum: %w", err)
	}
	for _, f := range []string{"fat.img", "initrd.img"} {
		_ = os.Remove(filepath.Join(tmp, f))
	}
	// _ = a concurrent build of the same inputs that won the rename is as good.
	if err := os.Rename(tmp, final); err != nil {
		if _, serr := os.Stat(path + ".sha256"); serr != nil {
			return "", "", fmt.Errorf("store arm64 test image in %s: %w", final, err)
		}
	}
	return path, sum, nil
}
