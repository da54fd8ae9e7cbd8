// Package ramdisk builds ironflow's agent ramdisk: a gzip-compressed
// newc cpio with the static agent as /init, a /dev/console node, the kernel
// modules the agent may need (network, storage, virtio, RNG, EFI, IPMI) with
// their dependencies, the module alias index (agent/kmod), and the
// bootloaders the agent installs for partition images: systemd-boot (UEFI)
// and GRUB's boot.img with core images made here (BIOS, agent/grub). The build is
// reproducible (sorted entries, fixed times) and skipped when its inputs did
// not change.
package ramdisk

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/cavaliergopher/cpio"
	"github.com/klauspost/compress/gzip"

	"github.com/ironflow/ironflow/agent/grub"
	"github.com/ironflow/ironflow/agent/kmod"
)

// builderVersion changes when the layout changes, invalidating caches.
const builderVersion = "ironflow-ramdisk-4"

// DefaultModules are the modules (by name; dependencies follow) the agent
// may need on real and virtual machines.
var DefaultModules = []string{
	// virtio (QEMU/KVM)
	"virtio_pci", "virtio_net", "virtio_blk", "virtio_scsi", "virtio_rng", "virtio_console",
	// common NICs
	"e1000", "e1000e", "igb", "igc", "ixgbe", "i40e", "ice", "tg3", "bnxt_en", "r8169",
	// storage
	"ahci", "ata_piix", "nvme", "sd_mod", "sr_mod", "megaraid_sas", "mpt3sas", "vmw_pvscsi", "hpsa", "smartpqi",
	// RNG, EFI variables, FAT (ESP), IPMI
	"intel_rng", "amd_rng", "tpm_rng", "efivarfs", "vfat", "nls_cp437", "nls_ascii", "nls_iso8859_1",
	"ipmi_si", "ipmi_devintf", "ipmi_ssif",
	// USB keyboards/storage on virtual media
	"xhci_pci", "ehci_pci", "usb_storage", "uas",
	// software RAID (MDModules)
	"md_mod", "raid0", "raid1", "raid10", "raid456",
	// bonds and VLANs of a node's network_data (agent/boot/netdata.go)
	"bonding", "8021q",
}

// Options configure a build.
type Options struct {
	// KernelDir holds vmlinuz, version and modules/<version>/ (scripts/fetch-kernel.sh).
	KernelDir string
	// OutDir receives initramfs.cpio.gz and vmlinuz.
	OutDir string
	// Agent is a prebuilt static agent binary; empty means build
	// ./cmd/ironflow-agent from ModuleRoot with CGO_ENABLED=0.
	Agent string
	// ModuleRoot is the Go module root used to build the agent.
	ModuleRoot string
	// Modules overrides DefaultModules.
	Modules []string
	// Force rebuilds even when inputs are unchanged.
	Force bool
	// SystemdBoot is the systemd-boot EFI binary the agent installs for
	// partition images, carried at the same path in the ramdisk; empty
	// means DefaultSystemdBoot when the build host has it (Debian's
	// systemd-boot-efi), "-" none.
	SystemdBoot string
	// GRUBDir holds GRUB's i386-pc boot.img and modules (Debian's
	// grub-pc-bin, grub.DefaultDir): the build makes the core images the
	// agent installs for partition images in BIOS boot mode with
	// grub-mkimage and carries them with boot.img at grub.DefaultDir.
	// Empty means none: such a ramdisk deploys partition images in UEFI
	// boot mode only.
	GRUBDir string
	// CABundle is the PEM bundle the agent trusts for HTTPS (the API at an
	// https agent-api-url, image servers without image_verify_ca), carried
	// at DefaultCABundle where Go's crypto/x509 reads it; empty means the
	// build host's DefaultCABundle when present (Debian's ca-certificates),
	// "-" none.
	CABundle string
	// Mdadm is the mdadm binary the software RAID steps run, carried at
	// DefaultMdadm with its shared libraries; empty means DefaultMdadm
	// when the build host has it (Debian's mdadm), "-" none (the RAID
	// steps then fail saying mdadm is missing).
	Mdadm string
	// CustomSteps is a directory of custom deploy steps (agent.CustomStep,
	// docs/bmcs-and-boot.md "custom-agent"): each executable file, named as
	// a step, is carried at agent.DefaultCustomStepsDir with what it needs
	// to run there: a dynamically linked program its loader and shared
	// libraries, a "#!" script its interpreter (and the interpreter's
	// libraries). Empty means none.
	CustomSteps string
}

// DefaultCABundle is Debian's CA bundle, and where the ramdisk carries one.
const DefaultCABundle = "/etc/ssl/certs/ca-certificates.crt"

// DefaultSystemdBoot is where Debian's systemd-boot-efi installs the binary
// (and where the agent looks for it, agent.DefaultSystemdBoot).
const DefaultSystemdBoot = "/usr/lib/systemd/boot/efi/systemd-bootx64.efi"

const (
	// grubMkImage makes GRUB's core images (Debian's grub-common, which
	// grub-pc-bin depends on).
	grubMkImage = "grub-mkimage"
	// grubBootImage is the build host's boot.img by default (grub-pc-bin).
	grubBootImage = grub.DefaultDir + "/" + grub.BootImage
)

// HostPackages names the Debian package that installs each file or command
// a default build takes from the build host: the bootloaders and mdadm the
// agent installs and runs, the CA bundle it trusts, and grub-mkimage.
// `make run` builds the ramdisk, so it installs them all
// (scripts/install-deps.sh run; tests/installer checks the script against
// this table).
var HostPackages = map[string]string{
	DefaultSystemdBoot: "systemd-boot-efi",
	DefaultCABundle:    "ca-certificates",
	DefaultMdadm:       "mdadm",
	grubBootImage:      "grub-pc-bin",
	grubMkImage:        "grub-common",
}

// Result says what was built.
type Result struct {
	Initramfs string
	Kernel    string
	Modules   []string
	Cached    bool
}

// Build builds the ramdisk.
func Build(o Options) (Result, error) {
	var res Result
	verB, err := os.ReadFile(filepath.Join(o.KernelDir, "version"))
	if err != nil {
		return res, fmt.Errorf("kernel version (run scripts/fetch-kernel.sh): %w", err)
	}
	version := strings.TrimSpace(string(verB))
	modDir := filepath.Join(o.KernelDir, "modules", version)
	if err := os.MkdirAll(o.OutDir, 0o755); err != nil {
		return res, err
	}
	agentBin := o.Agent
	if agentBin == "" {
		agentBin = filepath.Join(o.OutDir, "ironflow-agent")
		cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w -buildid=", "-o", agentBin, "./cmd/ironflow-agent")
		cmd.Dir = o.ModuleRoot
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux")
		if out, err := cmd.CombinedOutput(); err != nil {
			return res, fmt.Errorf("build the agent: %w\n%s", err, out)
		}
	}
	agentData, err := os.ReadFile(agentBin)
	if err != nil {
		return res, fmt.Errorf("read agent binary: %w", err)
	}
	var sdboot []byte
	switch o.SystemdBoot {
	case "-":
	case "":
		sdboot, _ = os.ReadFile(DefaultSystemdBoot)
	default:
		if sdboot, err = os.ReadFile(o.SystemdBoot); err != nil {
			return res, fmt.Errorf("read systemd-boot: %w", err)
		}
	}
	var caBundle []byte
	switch o.CABundle {
	case "-":
	case "":
		caBundle, _ = os.ReadFile(DefaultCABundle)
	default:
		if caBundle, err = os.ReadFile(o.CABundle); err != nil {
			return res, fmt.Errorf("read CA bundle: %w", err)
		}
	}
	var mdadmFiles map[string][]byte
	switch o.Mdadm {
	case "-":
	case "":
		if exists(DefaultMdadm) {
			if mdadmFiles, err = dynamicBinary(DefaultMdadm); err != nil {
				return res, fmt.Errorf("mdadm: %w", err)
			}
		}
	default:
		if mdadmFiles, err = dynamicBinary(o.Mdadm); err != nil {
			return res, fmt.Errorf("mdadm: %w", err)
		}
		if b := mdadmFiles[strings.TrimPrefix(o.Mdadm, "/")]; b != nil {
			delete(mdadmFiles, strings.TrimPrefix(o.Mdadm, "/"))
			mdadmFiles[strings.TrimPrefix(DefaultMdadm, "/")] = b
		}
	}
	var stepFiles map[string][]byte
	execs := map[string]bool{}
	if o.CustomSteps != "" {
		if stepFiles, execs, err = customStepFiles(o.CustomSteps); err != nil {
			return res, err
		}
	}
	var grubFiles map[string][]byte
	if o.GRUBDir != "" {
		if grubFiles, err = grubImages(o.GRUBDir); err != nil {
			return res, err
		}
	}
	wanted := o.Modules
	if wanted == nil {
		wanted = DefaultModules
	}

	res.Initramfs = filepath.Join(o.OutDir, "initramfs.cpio.gz")
	res.Kernel = filepath.Join(o.OutDir, "vmlinuz")
	// Cache key: builder version, agent binary, kernel version, module list.
	h := sha256.New()
	fmt.Fprintf(h, "%s\n%s\n%s\n", builderVersion, version, strings.Join(wanted, ","))
	h.Write(agentData)
	h.Write(sdboot)
	h.Write(caBundle)
	for _, n := range []string{grub.BootImage, grub.CoreImageMSDOS, grub.CoreImageGPT, grub.CoreImageMD} {
		h.Write(grubFiles[n])
	}
	for _, n := range sortedNames(mdadmFiles) {
		fmt.Fprintf(h, "%s\n", n)
		h.Write(mdadmFiles[n])
	}
	for _, n := range sortedNames(stepFiles) {
		fmt.Fprintf(h, "%s\n", n)
		h.Write(stepFiles[n])
	}
	key := hex.EncodeToString(h.Sum(nil))
	stamp := filepath.Join(o.OutDir, ".inputs")
	if !o.Force {
		if old, err := os.ReadFile(stamp); err == nil && string(old) == key && exists(res.Initramfs) && exists(res.Kernel) {
			res.Cached = true
			return res, nil
		}
	}

	full, err := scanModules(modDir, version)
	if err != nil {
		return res, err
	}
	var present []string
	for _, m := range wanted {
		if _, ok := full.Modules[kmod.Normalize(m)]; ok {
			present = append(present, kmod.Normalize(m))
		}
	}
	closure, err := full.Closure(present...)
	if err != nil {
		return res, err
	}
	res.Modules = closure
	sub := &kmod.Index{Version: version, Modules: map[string]*kmod.Module{}}
	for _, n := range closure {
		sub.Modules[n] = full.Modules[n]
	}
	index, err := sub.Marshal()
	if err != nil {
		return res, err
	}

	files := map[string][]byte{"init": agentData}
	if sdboot != nil {
		files[strings.TrimPrefix(DefaultSystemdBoot, "/")] = sdboot
	}
	if caBundle != nil {
		files[strings.TrimPrefix(DefaultCABundle, "/")] = caBundle
	}
	for n, b := range grubFiles {
		files[strings.TrimPrefix(path.Join(grub.DefaultDir, n), "/")] = b
	}
	for n, b := range mdadmFiles {
		files[n] = b
	}
	for n, b := range stepFiles {
		files[n] = b
	}
	modPrefix := "lib/modules/" + version + "/"
	files[modPrefix+kmod.IndexFile] = index
	for _, n := range closure {
		b, err := os.ReadFile(filepath.Join(modDir, full.Modules[n].Path))
		if err != nil {
			return res, fmt.Errorf("read module %s: %w", n, err)
		}
		files[modPrefix+full.Modules[n].Path] = b
	}
	if err := writeInitramfs(res.Initramfs, files, execs); err != nil {
		return res, err
	}
	if err := copyFile(filepath.Join(o.KernelDir, "vmlinuz"), res.Kernel); err != nil {
		return res, err
	}
	return res, os.WriteFile(stamp, []byte(key), 0o644)
}

// grubImages reads boot.img from dir and makes the core images with
// grub-mkimage (agent/grub says what they hold): one for MBR and one for
// GPT disks of partition images, one for the holders of a software RAID
// root.
func grubImages(dir string) (map[string][]byte, error) {
	missing := func(err error) error {
		return fmt.Errorf("the BIOS bootloader of partition images needs GRUB's i386-pc images and %s (Debian's %s and %s; make run and scripts/install-deps.sh run install them), or build without it (mkramdisk -grub ''), a ramdisk that deploys partition images in UEFI boot mode only: %w",
			grubMkImage, HostPackages[grubBootImage], HostPackages[grubMkImage], err)
	}
	boot, err := os.ReadFile(filepath.Join(dir, grub.BootImage))
	if err != nil {
		return nil, missing(err)
	}
	mkimage, err := exec.LookPath(grubMkImage)
	if err != nil {
		return nil, missing(err)
	}
	tmp, err := os.MkdirTemp("", "ironflow-grub-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	files := map[string][]byte{grub.BootImage: boot}
	mdConfig := filepath.Join(tmp, "md.cfg")
	if err := os.WriteFile(mdConfig, []byte(grub.MDConfig), 0o644); err != nil {
		return nil, err
	}
	for _, label := range []string{"msdos", "gpt", "md"} {
		out := filepath.Join(tmp, grub.CoreImage(label))
		if b, err := exec.Command(mkimage, grub.MkImageArgs(dir, label, out, mdConfig)...).CombinedOutput(); err != nil {
			return nil, fmt.Errorf("grub-mkimage for %s disks: %w\n%s", label, err, b)
		}
		if files[grub.CoreImage(label)], err = os.ReadFile(out); err != nil {
			return nil, err
		}
	}
	return files, nil
}

func exists(p string) bool { _, err := os.Stat(p); return err == nil }

// scanModules builds the full index of a kernel's modules from .modinfo.
func scanModules(modDir, version string) (*kmod.Index, error) {
	ix := &kmod.Index{Version: version, Modules: map[string]*kmod.Module{}}
	err := filepath.WalkDir(modDir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() || !strings.HasSuffix(p, ".ko") {
			return nil
		}
		name, deps, aliases, err := kmod.ModInfo(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(modDir, p)
		ix.Modules[name] = &kmod.Module{Path: filepath.ToSlash(rel), Depends: deps, Aliases: aliases}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("scan kernel modules in %s: %w", modDir, err)
	}
	if len(ix.Modules) == 0 {
		return nil, fmt.Errorf("no kernel modules (.ko) in %s", modDir)
	}
	return ix, nil
}

// consoleArchive is a hand-written newc archive holding /dev and
// /dev/console (char 5:1): the cpio library cannot set device numbers, and
// the kernel opens /dev/console for init before anything mounts devtmpfs.
// The kernel accepts concatenated archives.
func consoleArchive() []byte {
	var b bytes.Buffer
	entry := func(name string, mode, rmaj, rmin uint32) {
		// c_magic ino mode uid gid nlink mtime filesize devmajor devminor rdevmajor rdevminor namesize check
		fmt.Fprintf(&b, "070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
			0, mode, 0, 0, 1, 0, 0, 0, 0, rmaj, rmin, len(name)+1, 0)
		b.WriteString(name)
		b.WriteByte(0)
		for b.Len()%4 != 0 {
			b.WriteByte(0)
		}
	}
	entry("dev", 0o40755, 0, 0)
	entry("dev/console", 0o20600, 5, 1)
	entry("TRAILER!!!", 0, 0, 0)
	return b.Bytes()
}

func writeInitramfs(out string, files map[string][]byte, executableAt map[string]bool) error {
	tmp := out + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return err
	}
	defer os.Remove(tmp)
	gz, err := gzip.NewWriterLevel(f, gzip.BestCompression)
	if err != nil {
		return err
	}
	if _, err := gz.Write(consoleArchive()); err != nil {
		return err
	}
	w := cpio.NewWriter(gz)
	dirs := map[string]bool{"proc": true, "sys": true, "run": true, "tmp": true, "lib": true}
	for name := range files {
		for d := filepath.Dir(name); d != "."; d = filepath.Dir(d) {
			dirs[d] = true
		}
	}
	var dirList []string
	for d := range dirs {
		dirList = append(dirList, d)
	}
	sort.Strings(dirList) // parents sort before children
	for _, d := range dirList {
		if err := w.WriteHeader(&cpio.Header{Name: d, Mode: cpio.TypeDir | 0o755, Links: 2}); err != nil {
			return fmt.Errorf("cpio dir %s: %w", d, err)
		}
	}
	var names []string
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		mode := cpio.FileMode(0o644)
		if n == "init" || n == strings.TrimPrefix(DefaultMdadm, "/") || strings.HasPrefix(path.Base(n), "ld-linux") || executableAt[n] {
			mode = 0o755
		}
		if err := w.WriteHeader(&cpio.Header{Name: n, Mode: cpio.TypeReg | mode, Size: int64(len(files[n])), Links: 1}); err != nil {
			return fmt.Errorf("cpio %s: %w", n, err)
		}
		if _, err := w.Write(files[n]); err != nil {
			return fmt.Errorf("cpio %s: %w", n, err)
		}
	}
	if err := w.Close(); err != nil {
		return err
	}
	if err := gz.Close(); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, out)
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("open kernel: %w", err)
	}
	defer in.Close()
	tmp := dst + ".tmp"
	out, err := os.Create(tmp)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return errors.Join(err, os.Remove(tmp))
	}
	if err := out.Close(); err != nil {
		return err
	}
	return os.Rename(tmp, dst)
}

func sortedNames(m map[string][]byte) []string {
	out := make([]string, 0, len(m))
	for n := range m {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
