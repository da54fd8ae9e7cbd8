package pxe

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/diskfs/go-diskfs/backend/file"
	"github.com/diskfs/go-diskfs/filesystem/fat32"
	"github.com/diskfs/go-diskfs/filesystem/iso9660"
	"github.com/google/uuid"
)

// Boot loaders the agent ISO is built from, as Debian installs them
// (packages isolinux, syslinux-common, systemd-boot-efi).
var (
	DefaultISOLinuxBin = "/usr/lib/ISOLINUX/isolinux.bin"
	DefaultLDLinuxC32  = "/usr/lib/syslinux/modules/bios/ldlinux.c32"
	DefaultEFILoader   = "/usr/lib/systemd/boot/efi/systemd-bootx64.efi"
	// The signed chain for secure boot (packages shim-signed and
	// grub-efi-amd64-signed): shim, signed by Microsoft's UEFI CA, loads
	// grubx64.efi from its own directory; Debian's signed GRUB reads its
	// configuration from /EFI/debian/grub.cfg on the device it was loaded
	// from (its built-in prefix) and, through shim, boots only a kernel
	// signed by Debian (or by a key shim trusts).
	DefaultShim       = "/usr/lib/shim/shimx64.efi.signed"
	DefaultSignedGrub = "/usr/lib/grub/x86_64-efi-signed/grubx64.efi.signed"
)

// ISOHostPackages names the Debian package that installs each default boot
// loader. A missing one is named in BuildAgentISO's error with its
// package; `make run` installs them all (scripts/install-deps.sh run),
// since virtual media, the default boot of a Redfish node, boots this ISO.
// tests/installer checks the script against this table.
var ISOHostPackages = map[string]string{
	DefaultISOLinuxBin: "isolinux",
	DefaultLDLinuxC32:  "syslinux-common",
	DefaultEFILoader:   "systemd-boot-efi",
	DefaultShim:        "shim-signed",
	DefaultSignedGrub:  "grub-efi-amd64-signed",
}

const (
	// minEFIBootImage keeps efiboot.img above 65525 clusters of 512
	// bytes: below that, firmware reads a FAT32 volume as FAT16 and fails.
	minEFIBootImage = 36 << 20
	// efiBootSlack is free room in efiboot.img for FAT metadata.
	efiBootSlack = 4 << 20
	isoVolumeID  = "IRONFLOW_AGENT"
	// NetworkDataPath is where the agent ISO holds the node's
	// network_data, as on an OpenStack config drive (Ironic's virtual
	// media ISO puts it there too).
	NetworkDataPath = "openstack/latest/network_data.json"
)

// ISOParams is what the agent ISO tells the agent on its command line.
type ISOParams struct {
	NodeUUID string
	APIURL   string // ipa-api-url=
	// AgentToken is pre-generated for virtual media boots, as Ironic does
	// (ipa-agent-token=). It is a secret: it is written into the ISO and
	// nowhere else, never into logs or errors.
	AgentToken   string
	KernelParams string // extra parameters, e.g. "console=ttyS0"
	// NetworkData is the node's network_data (JSON), written on the ISO
	// as NetworkDataPath, where the agent reads it before its lookup on
	// a network without DHCP; empty: none.
	NetworkData []byte
	// Boot loaders; the Default* paths when empty.
	ISOLinuxBin, LDLinuxC32, EFILoader string
	// SecureBoot builds the UEFI entry as the signed chain shim → GRUB →
	// kernel (Shim, SignedGrub; the Default* paths when empty) instead of
	// systemd-boot, for a machine that boots with secure boot on. The
	// kernel must then be signed (Debian's vmlinuz is).
	SecureBoot       bool
	Shim, SignedGrub string
}

// KernelCommandLine returns the agent's kernel command line. It holds the
// agent token: never log it.
func (p ISOParams) KernelCommandLine() (string, error) {
	var words []string
	words = append(words, strings.Fields(p.KernelParams)...)
	if p.APIURL != "" {
		if strings.ContainsFunc(p.APIURL, isCmdlineBreak) {
			return "", errors.New("agent ISO: API URL contains whitespace or control characters")
		}
		words = append(words, "ipa-api-url="+p.APIURL)
	}
	if p.AgentToken != "" {
		if strings.ContainsFunc(p.AgentToken, isCmdlineBreak) {
			// The message must not quote the token.
			return "", errors.New("agent ISO: agent token contains whitespace or control characters")
		}
		words = append(words, "ipa-agent-token="+p.AgentToken)
	}
	for _, w := range words {
		if strings.ContainsFunc(w, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
			return "", errors.New("agent ISO: kernel parameters contain control characters")
		}
	}
	return strings.Join(words, " "), nil
}

func isCmdlineBreak(r rune) bool { return r <= 0x20 || r == 0x7f }

// BuildAgentISO writes to out an ISO that boots kernel and initrd with the
// node's parameters under BIOS (El Torito, isolinux) and UEFI (El Torito
// EFI entry: a FAT image holding systemd-boot, the kernel, the initrd and a
// loader entry). The file is written next to out and renamed into place,
// mode 0600 since it holds the agent token.
func BuildAgentISO(ctx context.Context, out, kernel, initrd string, params ISOParams) error {
	if params.ISOLinuxBin == "" {
		params.ISOLinuxBin = DefaultISOLinuxBin
	}
	if params.LDLinuxC32 == "" {
		params.LDLinuxC32 = DefaultLDLinuxC32
	}
	if params.EFILoader == "" {
		params.EFILoader = DefaultEFILoader
	}
	if params.Shim == "" {
		params.Shim = DefaultShim
	}
	if params.SignedGrub == "" {
		params.SignedGrub = DefaultSignedGrub
	}
	loaders := []string{params.ISOLinuxBin, params.LDLinuxC32, params.EFILoader}
	if params.SecureBoot {
		loaders = []string{params.ISOLinuxBin, params.LDLinuxC32, params.Shim, params.SignedGrub}
	}
	for _, f := range []string{kernel, initrd} {
		if _, err := os.Stat(f); errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("build agent ISO for node %s: the agent ramdisk is missing (make ramdisk builds it; make run does when it can): %w", params.NodeUUID, err)
		} else if err != nil {
			return fmt.Errorf("build agent ISO for node %s: %w", params.NodeUUID, err)
		}
	}
	for _, f := range loaders {
		if err := bootLoaderPresent(f); err != nil {
			return fmt.Errorf("build agent ISO for node %s: %w", params.NodeUUID, err)
		}
	}
	cmdline, err := params.KernelCommandLine()
	if err != nil {
		return fmt.Errorf("build agent ISO for node %s: %w", params.NodeUUID, err)
	}
	work, err := os.MkdirTemp(filepath.Dir(out), ".agent-iso-")
	if err != nil {
		return fmt.Errorf("build agent ISO for node %s: %w", params.NodeUUID, err)
	}
	defer os.RemoveAll(work)
	tree := filepath.Join(work, "tree")

	// BIOS: isolinux reads its config and the kernel from the ISO9660 tree.
	isolinuxCfg := "DEFAULT agent\nPROMPT 0\nTIMEOUT 0\nLABEL agent\n  KERNEL /vmlinuz\n  INITRD /initrd\n  APPEND " + cmdline + "\n"
	steps := []func() error{
		func() error { return placeFile(params.ISOLinuxBin, filepath.Join(tree, "isolinux", "isolinux.bin")) },
		func() error { return placeFile(params.LDLinuxC32, filepath.Join(tree, "isolinux", "ldlinux.c32")) },
		func() error { return writeFile(filepath.Join(tree, "isolinux", "isolinux.cfg"), isolinuxCfg) },
		func() error { return placeFile(kernel, filepath.Join(tree, "vmlinuz")) },
		func() error { return placeFile(initrd, filepath.Join(tree, "initrd")) },
		// UEFI: firmware mounts only the El Torito FAT image, so the loader
		// and what it boots live inside it.
		func() error {
			return buildEFIBootImage(ctx, filepath.Join(tree, "efiboot.img"), kernel, initrd, efiLoaderFiles(params, cmdline))
		},
	}
	if len(params.NetworkData) > 0 {
		steps = append(steps, func() error { return writeFile(filepath.Join(tree, NetworkDataPath), string(params.NetworkData)) })
	}
	if params.SecureBoot {
		// Debian's signed GRUB, started from the El Torito image, finds
		// no device for its /EFI/debian prefix there; its built-in
		// configuration then searches for the file /.disk/info and reads
		// /boot/grub/grub.cfg on that filesystem: the ISO9660 tree,
		// which holds the kernel and initrd as well.
		steps = append(steps,
			func() error { return writeFile(filepath.Join(tree, ".disk", "info"), "ironflow agent\n") },
			func() error { return writeFile(filepath.Join(tree, "boot", "grub", "grub.cfg"), grubConfig(cmdline)) })
	}
	for _, step := range steps {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("build agent ISO for node %s: %w", params.NodeUUID, err)
		}
		if err := step(); err != nil {
			return fmt.Errorf("build agent ISO for node %s: %w", params.NodeUUID, err)
		}
	}
	tmp := filepath.Join(work, "agent.iso")
	if err := writeISO(tmp, tree, isoVolumeID, &iso9660.ElTorito{
		BootCatalog: "/isolinux/boot.cat",
		Entries: []*iso9660.ElToritoEntry{
			{Platform: iso9660.BIOS, Emulation: iso9660.NoEmulation, BootFile: "/isolinux/isolinux.bin", BootTable: true, LoadSegment: 0},
			{Platform: iso9660.EFI, Emulation: iso9660.NoEmulation, BootFile: "/efiboot.img"},
		},
	}); err != nil {
		return fmt.Errorf("build agent ISO for node %s: %w", params.NodeUUID, err)
	}
	if err := os.Chmod(tmp, 0o600); err != nil {
		return fmt.Errorf("build agent ISO for node %s: %w", params.NodeUUID, err)
	}
	if err := os.Rename(tmp, out); err != nil {
		return fmt.Errorf("build agent ISO for node %s: %w", params.NodeUUID, err)
	}
	return nil
}

// bootLoaderPresent checks that the boot loader file f is there; a missing
// default one is reported with the Debian package that installs it, the
// fix an operator needs, rather than as a bare stat error.
func bootLoaderPresent(f string) error {
	_, err := os.Stat(f)
	if err == nil {
		return nil
	}
	if pkg, ok := ISOHostPackages[f]; ok && errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("a boot loader is missing: install Debian's %s (make run and scripts/install-deps.sh run install it): %w", pkg, err)
	}
	return fmt.Errorf("boot loader: %w", err)
}

// writeISO writes the directory tree as an ISO9660 image with Rock Ridge
// names, bootable when et is set.
func writeISO(out, tree, volumeID string, et *iso9660.ElTorito) error {
	f, err := os.OpenFile(out, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	fs, err := iso9660.Create(file.New(f, false), 0, 0, 2048, tree)
	if err != nil {
		return fmt.Errorf("create ISO9660: %w", err)
	}
	if err := fs.Finalize(iso9660.FinalizeOptions{RockRidge: true, VolumeIdentifier: volumeID, ElTorito: et}); err != nil {
		return fmt.Errorf("write ISO9660: %w", err)
	}
	return f.Close()
}

// efiFile is one file of efiboot.img: copied from src, or content.
type efiFile struct{ src, content, dst string }

// efiLoaderFiles are the boot loader's files in efiboot.img: systemd-boot
// and its loader entry, or for secure boot shim as \EFI\BOOT\BOOTX64.EFI,
// signed GRUB next to it as grubx64.efi (the name shim loads) and GRUB's
// configuration where Debian's signed GRUB looks for it (/EFI/debian, its
// prefix; /EFI/BOOT too, its fallback next to itself).
func efiLoaderFiles(p ISOParams, cmdline string) []efiFile {
	if p.SecureBoot {
		cfg := grubConfig(cmdline)
		return []efiFile{
			{src: p.Shim, dst: "/EFI/BOOT/BOOTX64.EFI"},
			{src: p.SignedGrub, dst: "/EFI/BOOT/grubx64.efi"},
			{content: cfg, dst: "/EFI/debian/grub.cfg"},
			{content: cfg, dst: "/EFI/BOOT/grub.cfg"},
		}
	}
	entry := "title ironflow agent\nlinux /vmlinuz\ninitrd /initrd\noptions " + cmdline + "\n"
	return []efiFile{
		{src: p.EFILoader, dst: "/EFI/BOOT/BOOTX64.EFI"},
		{content: "default ironflow.conf\ntimeout 0\n", dst: "/loader/loader.conf"},
		{content: entry, dst: "/loader/entries/ironflow.conf"},
	}
}

// grubConfig boots /vmlinuz and /initrd of GRUB's root with cmdline.
func grubConfig(cmdline string) string {
	return "set timeout=0\nset default=0\nmenuentry \"ironflow agent\" {\n\tlinux /vmlinuz " + cmdline + "\n\tinitrd /initrd\n}\n"
}

// buildEFIBootImage writes a FAT32 image with the boot loader's files
// (efiLoaderFiles) and the kernel and initrd they boot.
func buildEFIBootImage(ctx context.Context, out, kernel, initrd string, loader []efiFile) error {
	var content int64
	srcs := []string{kernel, initrd}
	for _, l := range loader {
		if l.src != "" {
			srcs = append(srcs, l.src)
		}
	}
	for _, p := range srcs {
		st, err := os.Stat(p)
		if err != nil {
			return err
		}
		content += st.Size()
	}
	size := max(int64(minEFIBootImage), (content+content/16+efiBootSlack+(1<<20)-1)&^((1<<20)-1))
	f, err := os.OpenFile(out, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		return err
	}
	fs, err := fat32.Create(file.New(f, false), size, 0, 512, "EFIBOOT", true)
	if err != nil {
		return fmt.Errorf("create efiboot.img: %w", err)
	}
	for _, d := range []string{"/EFI", "/EFI/BOOT", "/EFI/debian", "/loader", "/loader/entries"} {
		if err := fs.Mkdir(d); err != nil {
			return fmt.Errorf("efiboot.img: mkdir %s: %w", d, err)
		}
	}
	files := append(loader, efiFile{src: kernel, dst: "/vmlinuz"}, efiFile{src: initrd, dst: "/initrd"})
	for _, fl := range files {
		if err := ctx.Err(); err != nil {
			return err
		}
		w, err := fs.OpenFile(fl.dst, os.O_CREATE|os.O_RDWR)
		if err != nil {
			return fmt.Errorf("efiboot.img: create %s: %w", fl.dst, err)
		}
		var r io.Reader = strings.NewReader(fl.content)
		if fl.src != "" {
			src, err := os.Open(fl.src)
			if err != nil {
				w.Close()
				return err
			}
			defer src.Close()
			r = src
		}
		if _, err := io.Copy(w, r); err != nil {
			w.Close()
			return fmt.Errorf("efiboot.img: write %s: %w", fl.dst, err)
		}
		if err := w.Close(); err != nil {
			return fmt.Errorf("efiboot.img: close %s: %w", fl.dst, err)
		}
	}
	return f.Close()
}

// placeFile puts src at dst, hard-linked when they share a filesystem
// (the ISO writer only reads it), copied otherwise.
func placeFile(src, dst string) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return err
	}
	if err := os.Link(src, dst); err == nil {
		return nil
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

func writeFile(dst, content string) error {
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return err
	}
	return os.WriteFile(dst, []byte(content), 0o600)
}

// AgentISOs keeps one agent ISO per node under Dir as <uuid>.iso, the
// layout the HTTP boot service serves under /iso/.
type AgentISOs struct {
	Dir string
}

// Path is where node's ISO lives.
func (c AgentISOs) Path(nodeUUID string) (string, error) {
	id, err := uuid.Parse(nodeUUID)
	if err != nil {
		return "", fmt.Errorf("agent ISO path: node UUID %q: %w", nodeUUID, err)
	}
	return filepath.Join(c.Dir, id.String()+".iso"), nil
}

// Build (re)builds the node's ISO; every deploy gets a fresh token, so an
// existing one is replaced.
func (c AgentISOs) Build(ctx context.Context, kernel, initrd string, params ISOParams) (string, error) {
	p, err := c.Path(params.NodeUUID)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(c.Dir, 0o700); err != nil {
		return "", fmt.Errorf("build agent ISO for node %s: %w", params.NodeUUID, err)
	}
	if err := BuildAgentISO(ctx, p, kernel, initrd, params); err != nil {
		return "", err
	}
	// The ISO holds the agent token: it is served only under a name with a
	// fresh random part (URLName), given to the BMC alone (docs/security.md).
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("build agent ISO for node %s: %w", params.NodeUUID, err)
	}
	if err := os.WriteFile(p+isoKeySuffix, []byte(hex.EncodeToString(b)), 0o600); err != nil {
		return "", fmt.Errorf("build agent ISO for node %s: %w", params.NodeUUID, err)
	}
	return p, nil
}

// isoKeySuffix names the file next to a node's ISO that holds the random
// part of its URL name.
const isoKeySuffix = ".key"

// URLName is the name the HTTP boot service serves node's ISO under,
// "<uuid>-<random>.iso": only whoever was given it (the BMC) can fetch the
// ISO, as many times as virtual media needs until the ISO is removed.
func (c AgentISOs) URLName(nodeUUID string) (string, error) {
	p, err := c.Path(nodeUUID)
	if err != nil {
		return "", err
	}
	key, err := os.ReadFile(p + isoKeySuffix)
	if err != nil {
		return "", fmt.Errorf("agent ISO of node %s: %w", nodeUUID, err)
	}
	return strings.TrimSuffix(filepath.Base(p), ".iso") + "-" + string(key) + ".iso", nil
}

// Remove deletes the node's ISO (CleanBoot); a missing one is not an error.
func (c AgentISOs) Remove(nodeUUID string) error {
	p, err := c.Path(nodeUUID)
	if err != nil {
		return err
	}
	for _, f := range []string{p, p + isoKeySuffix} {
		if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("remove agent ISO of node %s: %w", nodeUUID, err)
		}
	}
	return nil
}

// RemoveAgentISO deletes node's ISO from dir.
func RemoveAgentISO(dir, nodeUUID string) error { return AgentISOs{Dir: dir}.Remove(nodeUUID) }
