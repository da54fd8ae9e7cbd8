package agent

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/diskfs/go-diskfs/filesystem/ext4"
	"github.com/diskfs/go-diskfs/filesystem/fat32"
	"github.com/diskfs/go-diskfs/partition/gpt"
	"github.com/diskfs/go-diskfs/partition/mbr"

	"github.com/ironflow/ironflow/agent/grub"
)

// The bootloader of a partition image.
//
// Ironic installs GRUB from the deployed image's chroot (IPA's
// image.install_bootloader runs grub-install and grub-mkconfig inside the
// root filesystem). ironflow's agent is one static binary without a
// chroot, the image's tools or its filesystem drivers, so it installs a
// bootloader that needs nothing from the image but its kernel, kept with
// the kernel and the initramfs on a FAT partition the agent writes with
// go-diskfs:
//
//   - UEFI: systemd-boot on the EFI system partition, \EFI\BOOT\BOOTX64.EFI
//     and \EFI\systemd\systemd-bootx64.efi (Debian's systemd-boot-efi,
//     carried by the ramdisk), with \loader\loader.conf and
//     \loader\entries\ironflow.conf, one entry (Boot Loader Specification,
//     type 1) booting \vmlinuz and \initrd;
//   - BIOS: GRUB 2 (Debian's grub-pc-bin, 2.06): boot.img in the MBR and a
//     core.img (made by grub-mkimage when the ramdisk is built, with every
//     module it needs built in) in the MBR gap before 1 MiB on an MBR disk
//     or in the BIOS boot partition on a GPT, patched as grub-bios-setup
//     does (agent/grub); core.img reads /grub/grub.cfg from the boot
//     partition of the disk it booted from (partition 1 of an MBR, 2 of a
//     GPT), which boots /vmlinuz and /initrd there.
//
// The kernel and initramfs are instance_info/kernel and instance_info/ramdisk,
// downloaded by the agent; without them, the image's own, copied from an
// ext4 root's /boot (go-diskfs reads ext4; XFS and btrfs roots need kernel
// and ramdisk given). The command line is root=PARTUUID=<root partition>
// (on an MBR, <disk signature>-<partition number>) plus
// instance_info/kernel_append_params, or defaultKernelAppend without them.
//
// The kernel is copied at deploy time: a kernel update inside the instance
// does not change what boots until the instance installs its own
// bootloader (or rewrites the boot partition's files).
const (
	// DefaultSystemdBoot is where Debian's systemd-boot-efi puts the binary,
	// and where the ramdisk carries it.
	DefaultSystemdBoot = "/usr/lib/systemd/boot/efi/systemd-bootx64.efi"
	// DefaultGRUBDir is where the ramdisk carries GRUB's boot.img and the
	// core images (agent/ramdisk).
	DefaultGRUBDir = grub.DefaultDir
	// partitionBootEntry is the loader entry's file name.
	partitionBootEntry = "ironflow.conf"
	// defaultKernelAppend is the command line without kernel_append_params:
	// the root, read-only until the init remounts it, and both consoles.
	defaultKernelAppend = "ro console=tty0 console=ttyS0,115200n8"
)

// partitionBootTarget is what the bootloader of a partition image points at.
type partitionBootTarget struct {
	Label string // "gpt" or "msdos"
	// Boot is the FAT partition with the kernel, the initramfs and the
	// bootloader's configuration: the ESP (UEFI) or the boot partition
	// (BIOS).
	Boot     plannedPartition
	ESP      UEFIPartition // UEFI
	Embed    grub.Area     // BIOS: where core.img goes
	RootUUID string        // PARTUUID of root
	Root     plannedPartition
}

// findPartitionBootTarget finds the boot partition, the root and, in BIOS
// mode, the embedding area of a disk laid out by write_image for a
// partition image.
func findPartitionBootTarget(dev Device, bootMode string) (partitionBootTarget, error) {
	var out partitionBootTarget
	bootName, bootType := "an EFI system partition", gpt.EFISystemPartition
	if bootMode == "bios" {
		bootName, bootType = "a boot partition (type Linux extended boot)", gpt.LinuxExtendedBoot
	}
	if t := readGPT(dev); t != nil {
		out.Label = "gpt"
		for _, p := range t.Partitions {
			pp := plannedPartition{Number: p.Index, Start: int64(p.Start) * sectorSize, Size: int64(p.End-p.Start+1) * sectorSize, GUID: p.GUID}
			switch {
			case p.Type == bootType:
				pp.Role, out.Boot = partNameBoot, pp
				out.ESP = UEFIPartition{Number: p.Index, StartLBA: p.Start, SizeLBA: p.End - p.Start + 1, GPT: true, PartGUID: p.GUID}
			case p.Type == gpt.BIOSBoot:
				out.Embed = grub.Area{Start: p.Start, Sectors: p.End - p.Start + 1}
			case p.Name == partNameRoot:
				pp.Role, out.Root = partNameRoot, pp
				out.RootUUID = strings.ToLower(p.GUID)
			}
		}
		if out.Boot.Number == 0 {
			return out, fmt.Errorf("the GPT has no %s", strings.TrimPrefix(bootName, "a "))
		}
		if out.RootUUID == "" {
			return out, fmt.Errorf("the GPT has no partition named %q", partNameRoot)
		}
		if bootMode == "bios" && out.Embed.Sectors == 0 {
			return out, errors.New("the GPT has no BIOS boot partition for GRUB's core.img")
		}
		return out, nil
	}
	if bootMode != "bios" {
		return out, errors.New("a UEFI partition image needs a GPT (disk_label gpt); the disk has none")
	}
	t := readMBR(dev)
	if t == nil {
		return out, errors.New("the disk has no partition table")
	}
	out.Label = "msdos"
	sig := make([]byte, 4)
	if _, err := dev.ReadAt(sig, 440); err != nil {
		return out, fmt.Errorf("read the MBR disk signature: %w", err)
	}
	first := uint64(1 << 32)
	for i, p := range t.Partitions {
		if p.Type == mbr.Empty || p.Size == 0 {
			continue
		}
		first = min(first, uint64(p.Start))
		pp := plannedPartition{Number: i + 1, Start: int64(p.Start) * sectorSize, Size: int64(p.Size) * sectorSize}
		switch {
		case p.Type == mbrExtendedBoot:
			pp.Role, out.Boot = partNameBoot, pp
		case p.Bootable:
			// write_image marks root active (the only partition it marks).
			pp.Role, out.Root = partNameRoot, pp
			out.RootUUID = fmt.Sprintf("%08x-%02x", binary.LittleEndian.Uint32(sig), i+1)
		}
	}
	if out.Boot.Number == 0 {
		return out, fmt.Errorf("the MBR has no boot partition (type %02x)", byte(mbrExtendedBoot))
	}
	if out.RootUUID == "" {
		return out, errors.New("the MBR has no active (root) partition")
	}
	// The MBR gap: after sector 0, before the first partition.
	out.Embed = grub.Area{Start: 1, Sectors: first - 1}
	return out, nil
}

// fatWriteFile writes one file of a FAT partition from r.
func fatWriteFile(fs *fat32.FileSystem, path string, r io.Reader) error {
	if i := strings.LastIndex(path, "/"); i > 0 {
		if err := fs.Mkdir(path[:i]); err != nil {
			return fmt.Errorf("mkdir %s on the boot partition: %w", path[:i], err)
		}
	}
	f, err := fs.OpenFile(path, os.O_CREATE|os.O_RDWR|os.O_TRUNC)
	if err != nil {
		return fmt.Errorf("create %s on the boot partition: %w", path, err)
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return fmt.Errorf("write %s on the boot partition: %w", path, err)
	}
	return f.Close()
}

// fetchTo streams an http(s) URL into a file of a FAT partition.
func (a *Agent) fetchTo(ctx context.Context, fs *fat32.FileSystem, path, u string) error {
	if !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "https://") {
		return fmt.Errorf("%s %s is not an http(s) URL", strings.TrimPrefix(path, "/"), redactURL(u))
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return fmt.Errorf("%s: %w", redactURL(u), err)
	}
	resp, err := a.cfg.DownloadClient.Do(req)
	if err != nil {
		return fmt.Errorf("download %s: %w", redactURL(u), unwrapURLError(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("download %s: HTTP %d", redactURL(u), resp.StatusCode)
	}
	return fatWriteFile(fs, path, resp.Body)
}

// grubFiles are the ramdisk's GRUB boot.img and the core image for label.
func (a *Agent) grubFiles(label string) (boot, core []byte, err error) {
	missing := func(err error) error {
		return fmt.Errorf("the ramdisk carries no GRUB for BIOS boot (it was built without Debian's grub-pc-bin): %w; rebuild it with grub-pc-bin installed (make ramdisk) or deploy in UEFI boot mode", err)
	}
	if boot, err = os.ReadFile(filepath.Join(a.cfg.GRUBDir, grub.BootImage)); err != nil {
		return nil, nil, missing(err)
	}
	if core, err = os.ReadFile(filepath.Join(a.cfg.GRUBDir, grub.CoreImage(label))); err != nil {
		return nil, nil, missing(err)
	}
	return boot, core, nil
}

// partitionKernelCmdline is the instance's command line: its root by
// PARTUUID, then kernel_append_params or defaultKernelAppend.
func partitionKernelCmdline(rootUUID string, inst map[string]any) string {
	if extra := str(inst, "kernel_append_params"); extra != "" {
		return "root=PARTUUID=" + rootUUID + " " + extra
	}
	return "root=PARTUUID=" + rootUUID + " " + defaultKernelAppend
}

// grubConfig is the grub.cfg booting /vmlinuz and /initrd of the boot
// partition (core.img's prefix is that partition) with cmdline. Each word
// of the command line is one argument of GRUB's linux command, quoted for
// GRUB's shell-like parser when it holds anything but plain characters.
// GRUB's console is mirrored on the first serial port, as cloud images
// configure it.
func grubConfig(cmdline string) string {
	var args []string
	for _, w := range strings.Fields(cmdline) {
		if strings.Trim(w, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789=,._:/+-@") != "" {
			w = "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
		}
		args = append(args, w)
	}
	return "# Written by ironflow's agent: the partition image's kernel and initramfs\n" +
		"# on this partition; core.img (in the MBR gap or the BIOS boot partition)\n" +
		"# reads this file.\n" +
		"serial --unit=0 --speed=115200\n" +
		"terminal_input console serial\n" +
		"terminal_output console serial\n" +
		"set timeout=0\n" +
		"set default=0\n" +
		"menuentry 'ironflow instance' {\n" +
		"\tlinux /vmlinuz " + strings.Join(args, " ") + "\n" +
		"\tinitrd /initrd\n" +
		"}\n"
}

// installPartitionBootloader is install_bootloader for a partition image:
// systemd-boot on the ESP (UEFI) or GRUB (BIOS) booting the instance's
// kernel and ramdisk (see the comment at the top of this file). What the
// bootloader needs is checked before anything is written.
func (a *Agent) installPartitionBootloader(ctx context.Context, bd BlockDevice, dev Device, inst map[string]any, bootMode string) (string, error) {
	kernel, ramdisk := str(inst, "kernel"), str(inst, "ramdisk")
	if (kernel == "") != (ramdisk == "") {
		return "", errors.New("instance_info has one of kernel and ramdisk: a partition image boots both, or the image's own")
	}
	target, err := findPartitionBootTarget(dev, bootMode)
	if err != nil {
		return "", err
	}
	var sdboot *os.File
	var grubBoot, grubCore []byte
	if bootMode == "bios" {
		if target.Boot.Number != grub.BootPartition(target.Label) {
			return "", fmt.Errorf("the boot partition is number %d, where GRUB's core image for %s disks reads partition %d", target.Boot.Number, target.Label, grub.BootPartition(target.Label))
		}
		if grubBoot, grubCore, err = a.grubFiles(target.Label); err != nil {
			return "", err
		}
		// Fail before writing: Setup checks the area against core.img.
		if _, _, err := grub.Images(grubBoot, grubCore, target.Embed, func(b []byte) error { _, err := dev.ReadAt(b, 0); return err }); err != nil {
			return "", fmt.Errorf("GRUB's core.img: %w", err)
		}
	} else {
		if sdboot, err = os.Open(a.cfg.SystemdBoot); err != nil {
			return "", fmt.Errorf("the ramdisk carries no systemd-boot (%s): %w", a.cfg.SystemdBoot, err)
		}
		defer sdboot.Close()
	}
	fs, err := fat32.Read(fatStorage{&diskFile{Device: dev}}, target.Boot.Size, target.Boot.Start, sectorSize)
	if err != nil {
		return "", fmt.Errorf("read the FAT of partition %d: %w", target.Boot.Number, err)
	}
	if kernel != "" {
		if err := a.fetchTo(ctx, fs, "/vmlinuz", kernel); err != nil {
			return "", err
		}
		if err := a.fetchTo(ctx, fs, "/initrd", ramdisk); err != nil {
			return "", err
		}
	} else {
		k, r, err := copyImageKernel(dev, target.Root, fs)
		if err != nil {
			return "", err
		}
		kernel = "the image's " + k + " (" + r + ")"
	}
	cmdline := partitionKernelCmdline(target.RootUUID, inst)
	if bootMode == "bios" {
		if err := fatWriteFile(fs, grub.ConfigPath, strings.NewReader(grubConfig(cmdline))); err != nil {
			return "", err
		}
		if err := fixFAT32(dev, target.Boot.Start); err != nil {
			return "", fmt.Errorf("the boot partition: %w", err)
		}
		if err := grub.Setup(dev, grubBoot, grubCore, target.Embed); err != nil {
			return "", fmt.Errorf("install GRUB's boot code: %w", err)
		}
		if err := dev.Sync(); err != nil {
			return "", fmt.Errorf("flush %s: %w", bd.Name, err)
		}
		where := "the MBR gap"
		if target.Label == "gpt" {
			where = "the BIOS boot partition"
		}
		return fmt.Sprintf("GRUB installed on %s (boot.img in the MBR, core.img in %s, grub.cfg on partition %d), booting %s with %q", bd.Name, where, target.Boot.Number, redactURL(kernel), cmdline), nil
	}
	esp := target.ESP
	if err := fatWriteFile(fs, "/EFI/systemd/systemd-bootx64.efi", sdboot); err != nil {
		return "", err
	}
	if _, err := sdboot.Seek(0, io.SeekStart); err != nil {
		return "", err
	}
	if err := fatWriteFile(fs, "/EFI/BOOT/BOOTX64.EFI", sdboot); err != nil {
		return "", err
	}
	entry := "title ironflow instance\nlinux /vmlinuz\ninitrd /initrd\noptions " + cmdline + "\n"
	if err := fatWriteFile(fs, "/loader/entries/"+partitionBootEntry, strings.NewReader(entry)); err != nil {
		return "", err
	}
	if err := fatWriteFile(fs, "/loader/loader.conf", strings.NewReader("default "+partitionBootEntry+"\ntimeout 0\n")); err != nil {
		return "", err
	}
	if err := fixFAT32(dev, target.Boot.Start); err != nil {
		return "", fmt.Errorf("the EFI system partition: %w", err)
	}
	if err := dev.Sync(); err != nil {
		return "", fmt.Errorf("flush %s: %w", bd.Name, err)
	}
	err = a.cfg.Hardware.AddUEFIBootEntry(ctx, bd, esp, DefaultUEFILoader)
	switch {
	case errors.Is(err, ErrNotUEFI):
		// No EFI variables to write: the firmware still boots the
		// removable-media path \EFI\BOOT\BOOTX64.EFI.
		return fmt.Sprintf("systemd-boot installed on %s partition %d, booting %s (no UEFI boot entry: the agent did not boot in UEFI mode)", bd.Name, esp.Number, redactURL(kernel)), nil
	case err != nil:
		return "", fmt.Errorf("add the UEFI boot entry: %w", err)
	}
	return fmt.Sprintf("systemd-boot installed on %s partition %d, booting %s with %q", bd.Name, esp.Number, redactURL(kernel), cmdline), nil
}

// installBootloaderOfPartitionImage opens the root device and installs the
// partition image's bootloader; the boot mode is install_bootloader's
// target_boot_mode, else the one write_image chose.
func (a *Agent) installBootloaderOfPartitionImage(ctx context.Context, node map[string]any, bootMode string, secureBoot bool) (any, error) {
	if bootMode == "" {
		p, err := resolvePartitionParams(node, nil)
		if err != nil {
			return nil, fmt.Errorf("install bootloader: %w", err)
		}
		bootMode = p.BootMode
	}
	bd, err := a.rootDevice(ctx, node)
	if err != nil {
		return nil, fmt.Errorf("install bootloader: %w", err)
	}
	dev, err := a.cfg.Hardware.Open(bd)
	if err != nil {
		return nil, fmt.Errorf("install bootloader: open %s: %w", bd.Name, err)
	}
	defer dev.Close()
	msg, err := a.installPartitionBootloader(ctx, bd, dev, mapOf(node, "instance_info"), bootMode)
	if err != nil {
		return nil, fmt.Errorf("install bootloader on %s: %w", bd.Name, err)
	}
	if secureBoot && bootMode == "uefi" {
		// The loader installed is the ramdisk's systemd-boot or GRUB: the
		// firmware starts it only if it is signed (agent/secureboot.go).
		esp, err := findESP(dev)
		if err != nil {
			return nil, fmt.Errorf("install bootloader on %s: %w", bd.Name, err)
		}
		signed, err := verifySecureBootLoader(dev, bd.Name, esp, DefaultUEFILoader)
		if err != nil {
			return nil, err
		}
		msg += "; secure boot: " + signed
	}
	return msg, nil
}

// fixFAT32 repairs two things go-diskfs's FAT32 writer leaves that
// dosfstools' fsck.fat reports (Microsoft's FAT specification, "FAT32
// FSInfo sector structure" and "the dot and dotdot entries"): the ".." of
// a directory in the root must name cluster 0, not the root's cluster, and
// FSInfo's free cluster count is left "unknown". Firmware ignores both;
// fixing them keeps the ESP clean for the instance's own fsck.
func fixFAT32(dev Device, start int64) error {
	bs := make([]byte, 512)
	if _, err := dev.ReadAt(bs, start); err != nil {
		return fmt.Errorf("read the FAT32 boot sector: %w", err)
	}
	le16 := func(b []byte) int64 { return int64(binary.LittleEndian.Uint16(b)) }
	le32 := func(b []byte) int64 { return int64(binary.LittleEndian.Uint32(b)) }
	bps, spc, reserved, nfats := le16(bs[11:]), int64(bs[13]), le16(bs[14:]), int64(bs[16])
	fatSize, rootCluster, fsInfo, total := le32(bs[36:]), le32(bs[44:]), le16(bs[48:]), le32(bs[32:])
	if bps != sectorSize || spc == 0 || nfats == 0 || fatSize == 0 {
		return errors.New("not a FAT32 boot sector")
	}
	clusterBytes := spc * bps
	dataStart := start + (reserved+nfats*fatSize)*bps
	clusterAt := func(c int64) int64 { return dataStart + (c-2)*clusterBytes }
	root := make([]byte, clusterBytes)
	if _, err := dev.ReadAt(root, clusterAt(rootCluster)); err != nil {
		return fmt.Errorf("read the root directory: %w", err)
	}
	for off := 0; off+32 <= len(root); off += 32 {
		e := root[off : off+32]
		if e[0] == 0 {
			break
		}
		if e[0] == 0xe5 || e[11] == 0x0f || e[11]&0x10 == 0 || e[0] == '.' {
			continue
		}
		c := le16(e[20:])<<16 | le16(e[26:])
		dot := make([]byte, 64)
		if _, err := dev.ReadAt(dot, clusterAt(c)); err != nil {
			return fmt.Errorf("read a directory: %w", err)
		}
		if string(dot[32:34]) == ".." {
			binary.LittleEndian.PutUint16(dot[32+20:], 0)
			binary.LittleEndian.PutUint16(dot[32+26:], 0)
			if _, err := dev.WriteAt(dot[32:64], clusterAt(c)+32); err != nil {
				return fmt.Errorf("write a directory's ..: %w", err)
			}
		}
	}
	clusters := (total-reserved-nfats*fatSize)/spc + 2
	fat := make([]byte, clusters*4)
	if _, err := dev.ReadAt(fat, start+reserved*bps); err != nil {
		return fmt.Errorf("read the FAT: %w", err)
	}
	free, next := int64(0), int64(-1)
	for c := int64(2); c < clusters; c++ {
		if binary.LittleEndian.Uint32(fat[c*4:])&0x0fffffff == 0 {
			free++
			if next < 0 {
				next = c
			}
		}
	}
	info := make([]byte, 8)
	binary.LittleEndian.PutUint32(info, uint32(free))
	binary.LittleEndian.PutUint32(info[4:], uint32(max(next, 2)))
	if _, err := dev.WriteAt(info, start+fsInfo*bps+488); err != nil {
		return fmt.Errorf("write FSInfo: %w", err)
	}
	return nil
}

// copyImageKernel copies the image's own kernel and initramfs from an ext4
// root (go-diskfs reads ext4) onto the ESP: /boot/vmlinuz and
// /boot/initrd.img when the image has them (Debian's links), else the
// highest /boot/vmlinuz-<version> with its /boot/initrd.img-<version>
// (Debian, Ubuntu) or /boot/initramfs-<version>.img (Fedora, RHEL).
func copyImageKernel(dev Device, root plannedPartition, esp *fat32.FileSystem) (kernel, initrd string, err error) {
	rfs, err := ext4.Read(fatStorage{&diskFile{Device: dev}}, root.Size, root.Start, sectorSize)
	if err != nil {
		return "", "", fmt.Errorf("no instance_info kernel and ramdisk, and the root filesystem is not ext4, where the agent could read the image's own kernel: %w", err)
	}
	open := func(p string) (io.ReadCloser, error) {
		f, err := rfs.OpenFile(p, os.O_RDONLY)
		if err != nil {
			return nil, err
		}
		return f, nil
	}
	var pairs [][2]string
	pairs = append(pairs, [2]string{"/boot/vmlinuz", "/boot/initrd.img"}, [2]string{"/vmlinuz", "/initrd.img"})
	// go-diskfs's ext4 ReadDir takes io/fs paths (no leading slash).
	if entries, err := rfs.ReadDir("boot"); err == nil {
		var versions []string
		for _, e := range entries {
			if v, ok := strings.CutPrefix(e.Name(), "vmlinuz-"); ok && !e.IsDir() {
				versions = append(versions, v)
			}
		}
		sort.Slice(versions, func(i, j int) bool { return versionLess(versions[j], versions[i]) })
		for _, v := range versions {
			pairs = append(pairs, [2]string{"/boot/vmlinuz-" + v, "/boot/initrd.img-" + v}, [2]string{"/boot/vmlinuz-" + v, "/boot/initramfs-" + v + ".img"})
		}
	}
	for _, p := range pairs {
		k, err := open(p[0])
		if err != nil {
			continue
		}
		r, err := open(p[1])
		if err != nil {
			k.Close()
			continue
		}
		err = fatWriteFile(esp, "/vmlinuz", k)
		if err == nil {
			err = fatWriteFile(esp, "/initrd", r)
		}
		k.Close()
		r.Close()
		if err != nil {
			return "", "", err
		}
		return p[0], p[1], nil
	}
	return "", "", errors.New("no instance_info kernel and ramdisk, and the image's root filesystem has no /boot/vmlinuz-<version> with its initrd.img or initramfs")
}

// versionLess orders kernel versions by their numbers: 6.1.0-9 < 6.1.0-10.
func versionLess(a, b string) bool {
	for a != "" && b != "" {
		na, ra := leadingNumber(a)
		nb, rb := leadingNumber(b)
		switch {
		case na >= 0 && nb >= 0 && na != nb:
			return na < nb
		case na < 0 || nb < 0:
			if a[0] != b[0] {
				return a[0] < b[0]
			}
			ra, rb = a[1:], b[1:]
		}
		a, b = ra, rb
	}
	return len(a) < len(b)
}

// leadingNumber splits the decimal number at the start of s (-1 if none).
func leadingNumber(s string) (int, string) {
	i := 0
	for i < len(s) && s[i] >= '0' && s[i] <= '9' {
		i++
	}
	if i == 0 {
		return -1, s
	}
	n, err := strconv.Atoi(s[:i])
	if err != nil {
		return -1, s
	}
	return n, s[i:]
}
