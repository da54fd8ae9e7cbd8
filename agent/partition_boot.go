package agent

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"sort"
	"strconv"
	"strings"

	"github.com/diskfs/go-diskfs/filesystem/ext4"
	"github.com/diskfs/go-diskfs/filesystem/fat32"
	"github.com/diskfs/go-diskfs/partition/gpt"
)

// The bootloader of a partition image.
//
// Ironic installs GRUB from the deployed image's chroot (IPA's
// image.install_bootloader runs grub-install and grub-mkconfig inside the
// root filesystem). ironflow's agent is one static binary without GRUB, a
// chroot or the image's filesystem drivers, so it installs systemd-boot
// instead, which needs nothing but files on the FAT EFI system partition:
//
//   - \EFI\BOOT\BOOTX64.EFI and \EFI\systemd\systemd-bootx64.efi: systemd-boot
//     (Debian's systemd-boot-efi, carried by the ramdisk);
//   - \vmlinuz and \initrd: instance_info/kernel and instance_info/ramdisk,
//     downloaded by the agent; without them, the image's own, copied from
//     an ext4 root's /boot (go-diskfs reads ext4; XFS and btrfs roots need
//     kernel and ramdisk given);
//   - \loader\loader.conf and \loader\entries\ironflow.conf: one entry (Boot
//     Loader Specification, type 1) booting them with
//     root=PARTUUID=<root partition> plus instance_info/kernel_append_params.
//
// The kernel is copied at deploy time: a kernel update inside the instance
// does not change what boots until the instance installs its own
// bootloader (or writes the ESP's files). BIOS boot (extlinux or GRUB in the
// MBR gap) is not installed: the deploy fails in install_bootloader rather
// than leave a machine that cannot boot.
const (
	// DefaultSystemdBoot is where Debian's systemd-boot-efi puts the binary,
	// and where the ramdisk carries it.
	DefaultSystemdBoot = "/usr/lib/systemd/boot/efi/systemd-bootx64.efi"
	// partitionBootEntry is the loader entry's file name.
	partitionBootEntry = "ironflow.conf"
	// defaultKernelAppend is the command line without kernel_append_params:
	// the root, read-only until the init remounts it, and both consoles.
	defaultKernelAppend = "ro console=tty0 console=ttyS0,115200n8"
)

// partitionBootTarget is what the bootloader of a partition image points at.
type partitionBootTarget struct {
	ESP      UEFIPartition
	RootUUID string // PARTUUID of root
	Root     plannedPartition
}

// findPartitionBootTarget finds the ESP and the root of a disk laid out by
// write_image for a partition image.
func findPartitionBootTarget(dev Device) (partitionBootTarget, error) {
	t := readGPT(dev)
	if t == nil {
		return partitionBootTarget{}, errors.New("a UEFI partition image needs a GPT (disk_label gpt); the disk has none")
	}
	var out partitionBootTarget
	for _, p := range t.Partitions {
		switch {
		case p.Type == gpt.EFISystemPartition:
			out.ESP = UEFIPartition{Number: p.Index, StartLBA: p.Start, SizeLBA: p.End - p.Start + 1, GPT: true, PartGUID: p.GUID}
		case p.Name == partNameRoot:
			out.RootUUID = strings.ToLower(p.GUID)
			out.Root = plannedPartition{Role: partNameRoot, Number: p.Index, Start: int64(p.Start) * sectorSize, Size: int64(p.End-p.Start+1) * sectorSize, GUID: p.GUID}
		}
	}
	if out.ESP.Number == 0 {
		return out, errors.New("the GPT has no EFI system partition")
	}
	if out.RootUUID == "" {
		return out, fmt.Errorf("the GPT has no partition named %q", partNameRoot)
	}
	return out, nil
}

// fatWriteFile writes one file of the ESP from r.
func fatWriteFile(fs *fat32.FileSystem, path string, r io.Reader) error {
	if i := strings.LastIndex(path, "/"); i > 0 {
		if err := fs.Mkdir(path[:i]); err != nil {
			return fmt.Errorf("mkdir %s on the ESP: %w", path[:i], err)
		}
	}
	f, err := fs.OpenFile(path, os.O_CREATE|os.O_RDWR|os.O_TRUNC)
	if err != nil {
		return fmt.Errorf("create %s on the ESP: %w", path, err)
	}
	if _, err := io.Copy(f, r); err != nil {
		f.Close()
		return fmt.Errorf("write %s on the ESP: %w", path, err)
	}
	return f.Close()
}

// fetchTo streams an http(s) URL into a file of the ESP.
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

// installPartitionBootloader is install_bootloader for a partition image:
// systemd-boot on the ESP with an entry for the instance's kernel and
// ramdisk (see the comment at the top of this file).
func (a *Agent) installPartitionBootloader(ctx context.Context, bd BlockDevice, dev Device, inst map[string]any, bootMode string) (string, error) {
	if bootMode == "bios" {
		return "", errors.New("partition images boot in UEFI mode only: ironflow's agent installs systemd-boot on the EFI system partition and no BIOS bootloader; deploy in UEFI boot mode or use a whole-disk image")
	}
	kernel, ramdisk := str(inst, "kernel"), str(inst, "ramdisk")
	if (kernel == "") != (ramdisk == "") {
		return "", errors.New("instance_info has one of kernel and ramdisk: a partition image boots both, or the image's own")
	}
	boot, err := os.Open(a.cfg.SystemdBoot)
	if err != nil {
		return "", fmt.Errorf("the ramdisk carries no systemd-boot (%s): %w", a.cfg.SystemdBoot, err)
	}
	defer boot.Close()
	target, err := findPartitionBootTarget(dev)
	if err != nil {
		return "", err
	}
	esp := target.ESP
	fs, err := fat32.Read(fatStorage{&diskFile{Device: dev}}, int64(esp.SizeLBA)*sectorSize, int64(esp.StartLBA)*sectorSize, sectorSize)
	if err != nil {
		return "", fmt.Errorf("read the FAT of the EFI system partition: %w", err)
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
	if err := fatWriteFile(fs, "/EFI/systemd/systemd-bootx64.efi", boot); err != nil {
		return "", err
	}
	if _, err := boot.Seek(0, io.SeekStart); err != nil {
		return "", err
	}
	if err := fatWriteFile(fs, "/EFI/BOOT/BOOTX64.EFI", boot); err != nil {
		return "", err
	}
	cmdline := "root=PARTUUID=" + target.RootUUID + " " + defaultKernelAppend
	if extra := str(inst, "kernel_append_params"); extra != "" {
		cmdline = "root=PARTUUID=" + target.RootUUID + " " + extra
	}
	entry := "title ironflow instance\nlinux /vmlinuz\ninitrd /initrd\noptions " + cmdline + "\n"
	if err := fatWriteFile(fs, "/loader/entries/"+partitionBootEntry, strings.NewReader(entry)); err != nil {
		return "", err
	}
	if err := fatWriteFile(fs, "/loader/loader.conf", strings.NewReader("default "+partitionBootEntry+"\ntimeout 0\n")); err != nil {
		return "", err
	}
	if err := fixFAT32(dev, int64(esp.StartLBA)*sectorSize); err != nil {
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
func (a *Agent) installBootloaderOfPartitionImage(ctx context.Context, node map[string]any, bootMode string) (any, error) {
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
