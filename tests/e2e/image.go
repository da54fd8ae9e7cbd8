package e2e

import (
	"crypto/sha256"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
)

// The test image's boot files. The kernel command line puts the console on
// the first serial port, where the tests read it; no_timer_check skips the
// kernel's check of the IO-APIC timer, which a guest under TCG on a loaded
// host can fail ("IO-APIC + timer doesn't work!", a panic at boot) though
// its timer works (KVM guests skip it on their own).
const (
	syslinuxCfg = `SERIAL 0 115200
DEFAULT ironflow-e2e
PROMPT 0
TIMEOUT 0
LABEL ironflow-e2e
  LINUX /vmlinuz
  INITRD /initrd.img
  APPEND console=ttyS0,115200 no_timer_check
`
	loaderConf  = "default ironflow-e2e.conf\ntimeout 0\n"
	loaderEntry = `title ironflow e2e test image
linux /vmlinuz
initrd /initrd.img
options console=ttyS0,115200 no_timer_check
`
)

//go:embed init.sh
var initScript string

// Test image geometry: a 64 MiB disk, one FAT16 EFI system partition from
// 1 MiB to the end, marked bootable for SeaBIOS's MBR code.
const (
	imageSize      = 64 << 20
	partOffset     = 1 << 20
	imageDiskLabel = "0x1f2e3d4c"
	// imageFormatVersion changes whenever the way the image is built
	// changes in a way its inputs do not show, so the cache is rebuilt.
	imageFormatVersion = "1"
)

// Host files the image is built from (Debian packages syslinux,
// systemd-boot-efi, busybox-static).
var (
	SystemdBootEFI = "/usr/lib/systemd/boot/efi/systemd-bootx64.efi"
	SyslinuxMBR    = "/usr/lib/syslinux/mbr/mbr.bin"
	Busybox        = "/bin/busybox"
)

// RepoRoot is the ironflow checkout these tests belong to.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(filepath.Dir(filepath.Dir(file)))
}

// DefaultCacheDir is where built test images are kept between runs.
func DefaultCacheDir() string { return filepath.Join(RepoRoot(), ".data", "e2e") }

// KernelDir is the Debian kernel the test image boots (and the agent
// ramdisk uses): $KERNEL_DIR or .data/kernel, as scripts/fetch-kernel.sh.
func KernelDir() string {
	if d := os.Getenv("KERNEL_DIR"); d != "" {
		return d
	}
	return filepath.Join(RepoRoot(), ".data", "kernel")
}

// ensureKernel runs scripts/fetch-kernel.sh when the kernel is missing and
// returns the kernel's path and its modules directory.
func ensureKernel() (vmlinuz, modulesDir string, err error) {
	dir := KernelDir()
	if _, err := os.Stat(filepath.Join(dir, "vmlinuz")); errors.Is(err, fs.ErrNotExist) {
		cmd := exec.Command(filepath.Join(RepoRoot(), "scripts", "fetch-kernel.sh"))
		cmd.Env = append(os.Environ(), "KERNEL_DIR="+dir)
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", "", fmt.Errorf("fetch the kernel: %w: %s", err, out)
		}
	}
	ver, err := os.ReadFile(filepath.Join(dir, "version"))
	if err != nil {
		return "", "", fmt.Errorf("read kernel version: %w", err)
	}
	return filepath.Join(dir, "vmlinuz"), filepath.Join(dir, "modules", strings.TrimSpace(string(ver))), nil
}

// BuildTestImage returns a raw 64 MiB disk image bootable by SeaBIOS
// (syslinux) and OVMF (systemd-boot) whose init prints the IRONFLOW-E2E
// markers, and its sha256. Images are cached under dir, keyed by every
// input, and built without loop devices or mounts: the host kernel need
// not read FAT.
func BuildTestImage(dir string) (path, sum string, err error) {
	vmlinuz, modulesDir, err := ensureKernel()
	if err != nil {
		return "", "", err
	}
	syslinuxBin, err := exec.LookPath("syslinux")
	if err != nil {
		return "", "", fmt.Errorf("syslinux (Debian package syslinux) is needed to build the test image: %w", err)
	}
	key, err := imageKey(vmlinuz, modulesDir, syslinuxBin)
	if err != nil {
		return "", "", err
	}
	final := filepath.Join(dir, "test-image-"+key)
	path = filepath.Join(final, "disk.img")
	if b, err := os.ReadFile(path + ".sha256"); err == nil {
		return path, strings.TrimSpace(string(b)), nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", "", fmt.Errorf("create image cache %s: %w", dir, err)
	}
	tmp, err := os.MkdirTemp(dir, "build-")
	if err != nil {
		return "", "", fmt.Errorf("create image build dir: %w", err)
	}
	defer os.RemoveAll(tmp)
	sum, err = buildImage(tmp, vmlinuz, modulesDir)
	if err != nil {
		return "", "", err
	}
	for _, f := range []string{"fat.img", "initrd.img"} {
		_ = os.Remove(filepath.Join(tmp, f))
	}
	// _ = a concurrent build of the same inputs that won the rename is as good.
	if err := os.Rename(tmp, final); err != nil {
		if _, serr := os.Stat(path + ".sha256"); serr != nil {
			return "", "", fmt.Errorf("store test image in %s: %w", final, err)
		}
	}
	b, err := os.ReadFile(path + ".sha256")
	if err != nil {
		return "", "", fmt.Errorf("read cached test image checksum: %w", err)
	}
	return path, strings.TrimSpace(string(b)), nil
}

// imageKey hashes every input of the image: a changed kernel, module,
// bootloader, busybox or init script gives a new image.
func imageKey(vmlinuz, modulesDir, syslinuxBin string) (string, error) {
	h := sha256.New()
	io.WriteString(h, imageFormatVersion+"\x00"+initScript+"\x00"+syslinuxCfg+"\x00"+loaderConf+"\x00"+loaderEntry+"\x00"+strings.Join(initrdModules, ",")+"\x00")
	files := []string{vmlinuz, Busybox, SystemdBootEFI, SyslinuxMBR, syslinuxBin}
	ms, err := newModuleSet(modulesDir)
	if err != nil {
		return "", err
	}
	for _, m := range initrdModules {
		if err := ms.add(m); err != nil {
			return "", fmt.Errorf("resolve initrd modules: %w", err)
		}
	}
	for _, m := range ms.order {
		files = append(files, ms.paths[m])
	}
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			return "", fmt.Errorf("test image input: %w", err)
		}
		_, err = io.Copy(h, fh)
		fh.Close()
		if err != nil {
			return "", fmt.Errorf("hash test image input %s: %w", f, err)
		}
	}
	return hex.EncodeToString(h.Sum(nil))[:16], nil
}

// buildImage assembles disk.img (and disk.img.sha256) in dir.
func buildImage(dir, vmlinuz, modulesDir string) (string, error) {
	initrd, err := buildInitrd(Busybox, modulesDir, initScript)
	if err != nil {
		return "", err
	}
	files := map[string][]byte{
		"initrd.img":   initrd,
		"syslinux.cfg": []byte(syslinuxCfg),
		"loader.conf":  []byte(loaderConf),
		"entry.conf":   []byte(loaderEntry),
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			return "", fmt.Errorf("write %s: %w", name, err)
		}
	}
	disk, err := buildESPDisk(dir, [][2]string{
		{vmlinuz, "::/vmlinuz"},
		{"initrd.img", "::/initrd.img"},
		{"syslinux.cfg", "::/syslinux.cfg"},
		{SystemdBootEFI, "::/EFI/BOOT/BOOTX64.EFI"},
		{"loader.conf", "::/loader/loader.conf"},
		{"entry.conf", "::/loader/entries/ironflow-e2e.conf"},
	})
	if err != nil {
		return "", err
	}
	if err := runIn(dir, "", "syslinux", "--offset", fmt.Sprint(partOffset), "--install", disk); err != nil {
		return "", err
	}
	// syslinux's MBR boot code: the first 440 bytes, before the disk
	// signature and the partition table sfdisk wrote.
	if err := copyInto(disk, SyslinuxMBR, 0, 440); err != nil {
		return "", err
	}
	sum, err := fileSHA256(disk)
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(disk+".sha256", []byte(sum+"\n"), 0o644); err != nil {
		return "", fmt.Errorf("write test image checksum: %w", err)
	}
	return sum, nil
}

// buildESPDisk makes dir/disk.img: imageSize bytes, an MBR with one
// bootable EFI system partition (type EF) from partOffset to the end, a
// FAT16 file system in it with /EFI/BOOT and /loader/entries and the
// files of copies ({source, "::/destination"}, sources relative to dir),
// built with mtools: no loop device, no mount.
func buildESPDisk(dir string, copies [][2]string) (string, error) {
	fat := filepath.Join(dir, "fat.img")
	disk := filepath.Join(dir, "disk.img")
	fatKiB := (imageSize - partOffset) >> 10
	steps := [][]string{
		{"mkfs.vfat", "-C", "-F", "16", "-n", "IRONFLOW", "-i", "1f2e3d4c", fat, fmt.Sprint(fatKiB)},
		{"mmd", "-i", fat, "::/EFI", "::/EFI/BOOT", "::/loader", "::/loader/entries"},
	}
	for _, c := range copies {
		steps = append(steps, []string{"mcopy", "-i", fat, c[0], c[1]})
	}
	steps = append(steps, []string{"truncate", "-s", fmt.Sprint(imageSize), disk})
	for _, argv := range steps {
		if err := runIn(dir, "", argv[0], argv[1:]...); err != nil {
			return "", err
		}
	}
	table := fmt.Sprintf("label: dos\nlabel-id: %s\nstart=%d, size=%d, type=ef, bootable\n", imageDiskLabel, partOffset/512, (imageSize-partOffset)/512)
	if err := runIn(dir, table, "sfdisk", "--no-reread", "--no-tell-kernel", "-q", disk); err != nil {
		return "", err
	}
	return disk, copyInto(disk, fat, partOffset, 0)
}

// runIn runs a step of an image build in dir, stdin as its input.
func runIn(dir, stdin, name string, args ...string) error {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	// mtools refuses FAT images whose geometry it cannot check unless told.
	cmd.Env = append(os.Environ(), "MTOOLS_SKIP_CHECK=1")
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("build test image: %s %s: %w: %s", name, strings.Join(args, " "), err, out)
	}
	return nil
}

// copyInto writes src (its first limit bytes when limit > 0) into dst at off.
func copyInto(dst, src string, off int64, limit int) error {
	data, err := os.ReadFile(src)
	if err != nil {
		return fmt.Errorf("build test image: read %s: %w", src, err)
	}
	if limit > 0 {
		if len(data) < limit {
			return fmt.Errorf("build test image: %s is shorter than %d bytes", src, limit)
		}
		data = data[:limit]
	}
	f, err := os.OpenFile(dst, os.O_WRONLY, 0)
	if err != nil {
		return fmt.Errorf("build test image: %w", err)
	}
	if _, err := f.WriteAt(data, off); err != nil {
		f.Close()
		return fmt.Errorf("build test image: write %s into %s: %w", src, dst, err)
	}
	return f.Close()
}

func fileSHA256(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("hash %s: %w", path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
