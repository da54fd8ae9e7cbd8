// Package grub installs GRUB 2's i386-pc boot code on a disk the way
// grub-bios-setup does, without GRUB's tools: ironflow's ramdisk carries
// boot.img and three core images made at ramdisk build time by grub-mkimage
// (agent/ramdisk), and the agent, a static binary, embeds them on the disk
// of a partition image deployed in BIOS boot mode, or on every holder disk
// of a software RAID root (CoreImageMD).
//
// What is written, as GRUB's util/setup.c (grub-bios-setup) writes it:
//
//   - sector 0: boot.img, keeping the disk's BIOS parameter block area
//     (bytes 0x03–0x59) and its disk signature and partition table
//     (0x1b8–0x1fd); the kernel-sector field (0x5c) names core.img's first
//     sector, the boot-drive byte (0x64) is 0xff (use the drive the BIOS
//     booted) and the drive-check jump (0x66) is replaced by two NOPs, the
//     workaround for BIOSes that pass a wrong drive number for hard disks
//     (include/grub/i386/pc/boot.h names these offsets);
//   - the embedding area: core.img, whose first sector (diskboot.img) ends
//     with the blocklist diskboot reads the rest by, patched to the sectors
//     where the rest lies; then Reed-Solomon parity over core.img's
//     compressed part in the sectors the area leaves, so that GRUB repairs
//     a core.img that something else partly overwrote (what grub-install
//     does unless given --no-rs-codes).
//
// The embedding area is the one grub-bios-setup chooses: on an MBR
// ("msdos") disk the sectors after sector 0 up to the first partition (the
// MBR gap; 2047 sectors when partitions start at 1 MiB); on a GPT disk the
// BIOS boot partition.
package grub

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// SectorSize is GRUB_DISK_SECTOR_SIZE: GRUB's BIOS boot code addresses
// 512-byte sectors.
const SectorSize = 512

// Offsets in boot.img (GRUB's include/grub/i386/pc/boot.h).
const (
	bootBPBStart       = 0x03  // GRUB_BOOT_MACHINE_BPB_START
	bootBPBEnd         = 0x5a  // GRUB_BOOT_MACHINE_BPB_END
	bootKernelSector   = 0x5c  // GRUB_BOOT_MACHINE_KERNEL_SECTOR, 8 bytes LE
	bootDrive          = 0x64  // GRUB_BOOT_MACHINE_BOOT_DRIVE
	bootDriveCheck     = 0x66  // GRUB_BOOT_MACHINE_DRIVE_CHECK, a 2-byte jmp
	bootWindowsNTMagic = 0x1b8 // GRUB_BOOT_MACHINE_WINDOWS_NT_MAGIC: disk signature
	bootPartEnd        = 0x1fe // GRUB_BOOT_MACHINE_PART_END
)

// Fields of core.img (GRUB's include/grub/i386/pc/boot.h and kernel.h,
// util/setup.c).
const (
	// blocklistSize is struct grub_boot_blocklist: start (8 bytes), len
	// (2), segment (2); the first one ends diskboot.img's sector and the
	// others precede it.
	blocklistSize = 12
	// kernelSeg is GRUB_BOOT_I386_PC_KERNEL_SEG, where diskboot loads
	// core.img; the blocklist's segments start one sector after it.
	kernelSeg = 0x800
	// rsRedundancy and noRSLength are GRUB_KERNEL_I386_PC_REED_SOLOMON_REDUNDANCY
	// and GRUB_KERNEL_I386_PC_NO_REED_SOLOMON_LENGTH, in core.img's second
	// sector (the decompressor's header).
	rsRedundancy = 0x10
	noRSLength   = 0x14
	// linkAddr is GRUB_KERNEL_I386_PC_LINK_ADDR: core.img and its parity
	// must fit below 0x78000 once loaded there.
	linkAddr = 0x9000
)

// Files of ironflow's ramdisk (agent/ramdisk makes the core images; boot.img
// is grub-pc-bin's).
const (
	BootImage = "boot.img"
	// CoreImageMSDOS and CoreImageGPT are core.img for a disk with an MBR
	// and with a GPT: they differ in their prefix only (Prefix).
	CoreImageMSDOS = "core-msdos.img"
	CoreImageGPT   = "core-gpt.img"
	// CoreImageMD is core.img for the holder disks of a software RAID
	// root (GPT, raid.create_configuration's layout): it reads the md
	// arrays itself and runs MDConfig (see there).
	CoreImageMD = "core-md.img"
	// ConfigPath is where GRUB reads its configuration, in the boot
	// partition (Prefix + "/grub.cfg").
	ConfigPath = "/grub/grub.cfg"
)

// BootPartition is the number of the partition holding ConfigPath, the
// kernel and the initramfs on each kind of disk: the first partition of an
// MBR, the second of a GPT (after the BIOS boot partition), the order of
// the agent's partition-image layout.
func BootPartition(label string) int {
	if label == "gpt" {
		return 2
	}
	return 1
}

// Prefix is the grub-mkimage prefix of a core image: the boot partition of
// the drive GRUB booted from (a device that begins with a comma is
// completed with the boot drive, as grub-install's own prefixes are), so
// that GRUB reads its configuration from the disk the BIOS booted whatever
// other disks the machine has.
func Prefix(label string) string {
	scheme := "msdos"
	if label == "gpt" {
		scheme = "gpt"
	}
	return fmt.Sprintf("(,%s%d)/grub", scheme, BootPartition(label))
}

// CoreImage is the file name of label's core image ("md": CoreImageMD).
func CoreImage(label string) string {
	switch label {
	case "gpt":
		return CoreImageGPT
	case "md":
		return CoreImageMD
	}
	return CoreImageMSDOS
}

// The software RAID core image (CoreImageMD). The image deployed onto an
// md array is a whole disk with its own partitions and boot files, which
// the BIOS cannot read through the array, and the holders carry nothing
// but the BIOS boot partition (partition 1) and their md members. So
// core.img, the same on every holder and made at ramdisk build time, has
// an embedded configuration (MDConfig) that reads the instance's
// grub.cfg, written by the agent at deploy time, as a blocklist: the
// MDConfigSectors sectors from sector MDConfigSector of the BIOS boot
// partition of the disk the BIOS booted (past core.img and its parity,
// which take at most maxSectors). That grub.cfg names the root array by
// its UUID (GRUB's mduuid/ devices) and hands over to the image's own
// bootloader configuration there.
const (
	MDConfigSector  = 2048
	MDConfigSectors = 16
	// mdPrefix is the BIOS boot partition of the boot drive, which sets
	// $root for MDConfig's blocklist.
	mdPrefix = "(,gpt1)/grub"
)

// MDConfig is CoreImageMD's embedded configuration (grub-mkimage
// --config), run by GRUB's rescue parser before normal mode: GRUB's
// console on the first serial port too, then the agent's grub.cfg.
var MDConfig = fmt.Sprintf("serial --unit=0 --speed=115200\n"+
	"terminal_input console serial\n"+
	"terminal_output console serial\n"+
	"configfile ($root)%d+%d\n", MDConfigSector, MDConfigSectors)

// MDModules are CoreImageMD's modules: Modules, GRUB's md RAID readers
// (metadata 1.x and 0.90), the root filesystems of common images, and the
// commands the agent's grub.cfg and images' own configurations use
// (configfile, test, search; linux16 for those that use it).
var MDModules = append(append([]string(nil), Modules...),
	"diskfilter", "mdraid1x", "mdraid09", "ext2", "xfs", "btrfs", "configfile", "test", "echo",
	"search", "search_fs_uuid", "search_fs_file", "search_label", "linux16", "gzio", "halt", "reboot")

// Modules are built into the core images, so that nothing but grub.cfg is
// read from the disk: the BIOS disk driver, both partition maps, FAT (the
// boot partition), normal mode (menus, grub.cfg), the Linux loader and the
// serial console (grub.cfg mirrors GRUB's console on the first serial
// port, where serial-over-LAN shows it). grub-mkimage adds their
// dependencies.
var Modules = []string{"biosdisk", "part_msdos", "part_gpt", "fat", "normal", "linux", "serial", "terminal"}

// Area is where core.img goes: Sectors sectors from sector Start.
type Area struct {
	Start   uint64
	Sectors uint64
}

// Disk is what Setup writes to.
type Disk interface {
	io.ReaderAt
	io.WriterAt
}

// maxSectors is how many sectors core.img and its parity may take:
// twice core.img (grub-bios-setup's maxsec), at most what fits below
// 0x78000 when loaded at linkAddr.
func maxSectors(coreSectors uint64) uint64 {
	return min(2*coreSectors, (0x78000-linkAddr)/SectorSize)
}

// Setup writes boot.img to sector 0 of disk and core.img, with its
// blocklist patched and Reed-Solomon parity added, into area, as
// grub-bios-setup does (see the package comment). area must hold no
// partition's data.
func Setup(disk Disk, bootImg, coreImg []byte, area Area) error {
	boot, core, err := Images(bootImg, coreImg, area, func(b []byte) error {
		_, err := disk.ReadAt(b, 0)
		return err
	})
	if err != nil {
		return err
	}
	if _, err := disk.WriteAt(core, int64(area.Start)*SectorSize); err != nil {
		return fmt.Errorf("write core.img: %w", err)
	}
	if _, err := disk.WriteAt(boot, 0); err != nil {
		return fmt.Errorf("write boot.img: %w", err)
	}
	return nil
}

// Images computes what Setup writes: sector 0 (boot.img merged with the
// disk's current sector 0, read by readSector0) and the embedding area's
// sectors (core.img patched, then its parity).
func Images(bootImg, coreImg []byte, area Area, readSector0 func([]byte) error) (boot, core []byte, err error) {
	if len(bootImg) != SectorSize {
		return nil, nil, fmt.Errorf("boot.img is %d bytes, not %d", len(bootImg), SectorSize)
	}
	if len(coreImg) < SectorSize {
		return nil, nil, fmt.Errorf("core.img is %d bytes: too small", len(coreImg))
	}
	if len(coreImg) > 0xffff*SectorSize {
		return nil, nil, fmt.Errorf("core.img is %d bytes: too large", len(coreImg))
	}
	if area.Start == 0 {
		return nil, nil, errors.New("the embedding area cannot start at sector 0")
	}
	coreSize := uint64(len(coreImg))
	coreSectors := (coreSize + SectorSize - 1) / SectorSize
	nsec := min(area.Sectors, maxSectors(coreSectors))
	if nsec < coreSectors {
		return nil, nil, fmt.Errorf("the embedding area (%d sectors) is too small for core.img (%d sectors)", area.Sectors, coreSectors)
	}
	if area.Start+nsec > 1<<32 {
		return nil, nil, errors.New("the embedding area is beyond what the boot code addresses")
	}

	old := make([]byte, SectorSize)
	if err := readSector0(old); err != nil {
		return nil, nil, fmt.Errorf("read sector 0: %w", err)
	}
	boot = append([]byte(nil), bootImg...)
	copy(boot[bootBPBStart:bootBPBEnd], old[bootBPBStart:bootBPBEnd])
	boot[bootDriveCheck], boot[bootDriveCheck+1] = 0x90, 0x90
	copy(boot[bootWindowsNTMagic:bootPartEnd], old[bootWindowsNTMagic:bootPartEnd])
	boot[bootDrive] = 0xff
	binary.LittleEndian.PutUint64(boot[bootKernelSector:], area.Start)

	core = make([]byte, nsec*SectorSize)
	copy(core, coreImg)
	if err := writeBlocklist(core, area.Start, nsec); err != nil {
		return nil, nil, err
	}
	noRS := uint64(binary.LittleEndian.Uint16(core[SectorSize+noRSLength:]))
	if noRS == 0xffff {
		return nil, nil, errors.New("core.img version mismatch: it has no Reed-Solomon header")
	}
	if SectorSize+noRS > coreSize {
		return nil, nil, fmt.Errorf("core.img's uncorrected part (%d bytes) is longer than core.img", noRS)
	}
	binary.LittleEndian.PutUint32(core[SectorSize+rsRedundancy:], uint32(nsec*SectorSize-coreSize))
	addRedundancy(core[SectorSize+noRS:], int(coreSize-SectorSize-noRS), int(nsec*SectorSize-coreSize))
	return boot, core, nil
}

// writeBlocklist clears diskboot's blocklist and fills it with the sectors
// of core.img after the first, start+1 to start+nsec-1, as setup.c's
// save_blocklists does: contiguous sectors make one entry, loaded at
// kernelSeg plus one sector; a zero entry ends the list.
func writeBlocklist(core []byte, start, nsec uint64) error {
	first := SectorSize - blocklistSize
	for off := first; binary.LittleEndian.Uint16(core[off+8:]) != 0; off -= blocklistSize {
		clear(core[off : off+blocklistSize])
		if off-blocklistSize <= 0 {
			return errors.New("core.img's blocklist has no terminator")
		}
	}
	off := first
	segment := uint16(kernelSeg + SectorSize>>4)
	for s := start + 1; s < start+nsec; s++ {
		prev := off + blocklistSize
		if off != first && binary.LittleEndian.Uint64(core[prev:])+uint64(binary.LittleEndian.Uint16(core[prev+8:])) == s {
			binary.LittleEndian.PutUint16(core[prev+8:], binary.LittleEndian.Uint16(core[prev+8:])+1)
		} else {
			binary.LittleEndian.PutUint64(core[off:], s)
			binary.LittleEndian.PutUint16(core[off+8:], 1)
			binary.LittleEndian.PutUint16(core[off+10:], segment)
			off -= blocklistSize
			if off <= 0 || binary.LittleEndian.Uint16(core[off+8:]) != 0 {
				return errors.New("the sectors of core.img are too fragmented")
			}
		}
		segment += SectorSize >> 4
	}
	if off == first {
		off -= blocklistSize
	}
	clear(core[off : off+blocklistSize])
	return nil
}

// DefaultDir is where Debian's grub-pc-bin puts boot.img and the i386-pc
// modules, and where ironflow's ramdisk carries boot.img and the core
// images.
const DefaultDir = "/usr/lib/grub/i386-pc"

// MkImageArgs are the grub-mkimage arguments that make label's core image
// at out from the modules in dir; for "md", config is a file holding
// MDConfig.
func MkImageArgs(dir, label, out string, config ...string) []string {
	if label == "md" {
		args := []string{"--format=i386-pc", "--directory=" + dir, "--prefix=" + mdPrefix, "--output=" + out}
		for _, c := range config {
			args = append(args, "--config="+c)
		}
		return append(args, MDModules...)
	}
	return append([]string{"--format=i386-pc", "--directory=" + dir, "--prefix=" + Prefix(label), "--output=" + out}, Modules...)
}

// SetupMD installs CoreImageMD on a holder disk whose BIOS boot partition
// is bios, and the agent's grub.cfg (cfg, at most MDConfigSectors
// sectors) in it at MDConfigSector, padded with newlines.
func SetupMD(disk Disk, bootImg, coreImg []byte, bios Area, cfg string) error {
	if bios.Sectors < MDConfigSector+MDConfigSectors {
		return fmt.Errorf("the BIOS boot partition (%d sectors) is too small for core.img and grub.cfg (%d sectors)", bios.Sectors, MDConfigSector+MDConfigSectors)
	}
	if len(cfg) > MDConfigSectors*SectorSize {
		return fmt.Errorf("grub.cfg is %d bytes, more than the %d its place holds", len(cfg), MDConfigSectors*SectorSize)
	}
	if err := Setup(disk, bootImg, coreImg, Area{Start: bios.Start, Sectors: MDConfigSector}); err != nil {
		return err
	}
	b := make([]byte, MDConfigSectors*SectorSize)
	for i := range b {
		b[i] = '\n'
	}
	copy(b, cfg)
	if _, err := disk.WriteAt(b, int64(bios.Start+MDConfigSector)*SectorSize); err != nil {
		return fmt.Errorf("write grub.cfg: %w", err)
	}
	return nil
}
