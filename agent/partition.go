package agent

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/diskfs/go-diskfs/backend"
	"github.com/diskfs/go-diskfs/filesystem/fat32"
	"github.com/diskfs/go-diskfs/partition/gpt"
	"github.com/diskfs/go-diskfs/partition/mbr"

	"github.com/ironflow/ironflow/agent/client"
	"github.com/ironflow/ironflow/configdrive"
)

// Partition images (instance_info/image_type=partition): the image is a
// root filesystem, and the agent makes the partition table around it, as
// Ironic's partition-image deploy does (ironic-lib's disk_utils.work_on_disk
// and make_partitions, IPA's partition_utils).
//
// The layout, in Ironic's order, each partition aligned to 1 MiB:
//
//  1. an EFI system partition (UEFI boot mode), efiSystemPartitionMB, FAT32;
//     in BIOS boot mode, on a GPT a BIOS boot partition (1 MiB, where GRUB's
//     core.img goes; on an MBR core.img goes in the gap before 1 MiB), then
//     a boot partition, bootPartitionMB, FAT32, for the kernel, initramfs
//     and grub.cfg (partition_boot.go);
//  2. ephemeral (ephemeral_mb / ephemeral_gb), if asked;
//  3. swap (swap_mb), if asked;
//  4. the config drive (configdrive given), 64 MiB or the drive's size;
//  5. root (root_mb / root_gb), last, so that cloud-init's growpart can grow
//     it to the end of the disk.
//
// Ephemeral comes before root so that a rebuild with preserve_ephemeral
// rewrites root without moving it: the table is then left as it is.
const (
	// efiSystemPartitionMB is ironic-lib's efi_system_partition_size.
	efiSystemPartitionMB = 550
	// biosBootPartitionMB is ironic-lib's bios_boot_partition_size.
	biosBootPartitionMB = 1
	// bootPartitionMB is the BIOS boot mode's FAT partition: room for a
	// kernel and a distribution's initramfs (60–100 MiB) several times.
	bootPartitionMB = 512
	mib             = 1 << 20
	// Partition names on a GPT (labels on an MBR's filesystems).
	partNameESP       = "efi-system"
	partNameBIOSBoot  = "bios-boot"
	partNameBoot      = "boot"
	partNameEphemeral = "ephemeral0"
	partNameSwap      = "swap1"
	partNameRoot      = "root"
)

// partitionParams are the instance_info keys of a partition image.
type partitionParams struct {
	RootMB            int64
	SwapMB            int64
	EphemeralMB       int64
	EphemeralFormat   string
	PreserveEphemeral bool
	BootMode          string // "uefi" or "bios"
	DiskLabel         string // "gpt" or "msdos"
}

// num reads a size that JSON gives as a number or a string ("10").
func num(m map[string]any, key string) (int64, bool, error) {
	switch v := m[key].(type) {
	case nil:
		return 0, false, nil
	case float64:
		return int64(v), true, nil
	case int:
		return int64(v), true, nil
	case int64:
		return v, true, nil
	case string:
		if v == "" {
			return 0, false, nil
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return 0, false, fmt.Errorf("%s: %q is not an integer", key, v)
		}
		return n, true, nil
	}
	return 0, false, fmt.Errorf("%s: %v is not an integer", key, m[key])
}

func flag(m map[string]any, key string) bool {
	switch v := m[key].(type) {
	case bool:
		return v
	case string:
		b, _ := strconv.ParseBool(v)
		return b
	}
	return false
}

// capability reads key from instance_info/capabilities: a dict, a JSON
// object in a string, or Ironic's "k1:v1,k2:v2" string.
func capability(inst map[string]any, key string) string {
	switch c := inst["capabilities"].(type) {
	case map[string]any:
		return str(c, key)
	case string:
		// Nova sends a JSON object in a string.
		var m map[string]any
		if json.Unmarshal([]byte(c), &m) == nil {
			return str(m, key)
		}
		for _, kv := range strings.Split(c, ",") {
			if k, v, ok := strings.Cut(kv, ":"); ok && strings.TrimSpace(k) == key {
				return strings.TrimSpace(v)
			}
		}
	}
	return ""
}

// firmwareIsUEFI tells the boot mode the ramdisk runs in, which is the
// instance's when nothing says otherwise (IPA does the same).
var firmwareIsUEFI = func() bool {
	_, err := os.Stat("/sys/firmware/efi")
	return err == nil
}

// isPartitionImage tells whether the deploy writes a partition image.
func isPartitionImage(node, args map[string]any) bool {
	for _, m := range []map[string]any{args, mapOf(args, "image_info"), mapOf(node, "instance_info")} {
		if t := str(m, "image_type"); t != "" {
			return t == "partition"
		}
	}
	return false
}

// resolvePartitionParams reads, in order of precedence, the step args,
// IPA's image_info (root_mb, swap_mb, ephemeral_mb, ephemeral_format,
// preserve_ephemeral, boot_mode, disk_label) and instance_info (root_gb,
// swap_mb, ephemeral_gb, ephemeral_format, preserve_ephemeral,
// capabilities boot_mode and disk_label, deploy_boot_mode).
func resolvePartitionParams(node, args map[string]any) (partitionParams, error) {
	var p partitionParams
	inst := mapOf(node, "instance_info")
	var haveRoot, haveSwap, haveEph, haveFmt, havePreserve bool
	for _, m := range []map[string]any{args, mapOf(args, "image_info"), inst} {
		if m == nil {
			continue
		}
		for _, s := range []struct {
			have *bool
			dst  *int64
			mb   string
			gb   string
		}{{&haveRoot, &p.RootMB, "root_mb", "root_gb"}, {&haveSwap, &p.SwapMB, "swap_mb", ""}, {&haveEph, &p.EphemeralMB, "ephemeral_mb", "ephemeral_gb"}} {
			if *s.have {
				continue
			}
			v, ok, err := num(m, s.mb)
			if err != nil {
				return p, err
			}
			if !ok && s.gb != "" {
				if v, ok, err = num(m, s.gb); err != nil {
					return p, err
				}
				v *= 1024
			}
			if ok {
				if v < 0 {
					return p, fmt.Errorf("%s must not be negative", s.mb)
				}
				*s.dst, *s.have = v, true
			}
		}
		if !haveFmt {
			if p.EphemeralFormat = str(m, "ephemeral_format"); p.EphemeralFormat != "" {
				haveFmt = true
			}
		}
		if _, ok := m["preserve_ephemeral"]; ok && !havePreserve {
			p.PreserveEphemeral, havePreserve = flag(m, "preserve_ephemeral"), true
		}
		if p.BootMode == "" {
			p.BootMode = strings.ToLower(str(m, "boot_mode", "deploy_boot_mode"))
		}
		if p.DiskLabel == "" {
			p.DiskLabel = strings.ToLower(str(m, "disk_label"))
		}
	}
	if p.BootMode == "" {
		p.BootMode = strings.ToLower(capability(inst, "boot_mode"))
	}
	if p.DiskLabel == "" {
		p.DiskLabel = strings.ToLower(capability(inst, "disk_label"))
	}
	if !haveRoot || p.RootMB == 0 {
		// Ironic's deploy_utils refuses a partition image without root_gb
		// at validation: "Missing are: ['root_gb']".
		return p, errors.New("partition image: instance_info is missing root_gb (the root partition's size in GiB)")
	}
	if p.BootMode == "" {
		p.BootMode = "bios"
		if firmwareIsUEFI() {
			p.BootMode = "uefi"
		}
	}
	if p.BootMode != "uefi" && p.BootMode != "bios" {
		return p, fmt.Errorf("partition image: boot_mode %q is not uefi or bios", p.BootMode)
	}
	if p.DiskLabel == "" {
		// Ironic's get_disk_label: GPT for UEFI, msdos otherwise.
		p.DiskLabel = "msdos"
		if p.BootMode == "uefi" {
			p.DiskLabel = "gpt"
		}
	}
	if p.DiskLabel != "gpt" && p.DiskLabel != "msdos" {
		return p, fmt.Errorf("partition image: disk_label %q is not gpt or msdos", p.DiskLabel)
	}
	if p.EphemeralMB > 0 {
		p.EphemeralFormat = strings.ToLower(p.EphemeralFormat)
		switch p.EphemeralFormat {
		case "":
			// Ironic defaults to ext4 (default_ephemeral_format); the agent
			// is a static binary without mkfs.ext4, so its default is vfat.
			p.EphemeralFormat = "vfat"
		case "vfat", "fat32":
			p.EphemeralFormat = "vfat"
		default:
			return p, fmt.Errorf("partition image: ephemeral_format %q is not supported: ironflow's agent formats the ephemeral partition as vfat only (it carries no mkfs for other filesystems)", p.EphemeralFormat)
		}
	}
	return p, nil
}

// plannedPartition is one partition of a partition image's layout.
type plannedPartition struct {
	Role   string // partName*, or configdrive.Label
	Number int
	Start  int64 // bytes
	Size   int64 // bytes
	GUID   string
}

// planPartitions lays the partitions out on a disk of diskSize bytes, as
// make_partitions does; configDriveBytes is 0 without a config drive.
func planPartitions(p partitionParams, diskSize, configDriveBytes int64) ([]plannedPartition, error) {
	type want struct {
		role string
		mb   int64
	}
	var ws []want
	if p.BootMode == "uefi" {
		ws = append(ws, want{partNameESP, efiSystemPartitionMB})
	} else {
		if p.DiskLabel == "gpt" {
			ws = append(ws, want{partNameBIOSBoot, biosBootPartitionMB})
		}
		ws = append(ws, want{partNameBoot, bootPartitionMB})
	}
	if p.EphemeralMB > 0 {
		ws = append(ws, want{partNameEphemeral, p.EphemeralMB})
	}
	if p.SwapMB > 0 {
		ws = append(ws, want{partNameSwap, p.SwapMB})
	}
	if configDriveBytes > 0 {
		ws = append(ws, want{configdrive.Label, max(configDrivePartSize, (configDriveBytes+mib-1)/mib*mib) / mib})
	}
	ws = append(ws, want{partNameRoot, p.RootMB})
	if p.DiskLabel == "msdos" && len(ws) > 4 {
		return nil, fmt.Errorf("partition image: an MBR holds four primary partitions and this layout needs %d; use disk_label gpt", len(ws))
	}
	// Usable space: from 1 MiB to before the backup GPT (33 sectors) or,
	// on an MBR, the 2 TiB it can address.
	end := diskSize / mib * mib
	if p.DiskLabel == "gpt" {
		end = (diskSize - 33*sectorSize) / mib * mib
	} else {
		end = min(end, int64(1<<32-1)*sectorSize/mib*mib)
	}
	var out []plannedPartition
	off := int64(mib)
	total := int64(0)
	for i, w := range ws {
		size := w.mb * mib
		out = append(out, plannedPartition{Role: w.role, Number: i + 1, Start: off, Size: size})
		off += size
		total += w.mb
	}
	if off > end {
		return nil, fmt.Errorf("partition image: the partitions asked (%d MiB: root %d, swap %d, ephemeral %d and the boot and config drive partitions) do not fit the %d MiB disk", total, p.RootMB, p.SwapMB, p.EphemeralMB, diskSize/mib)
	}
	return out, nil
}

func roleOf(parts []plannedPartition, role string) *plannedPartition {
	for i := range parts {
		if parts[i].Role == role {
			return &parts[i]
		}
	}
	return nil
}

// writePartitionTable writes the layout as a GPT or an MBR.
func writePartitionTable(dev Device, p partitionParams, parts []plannedPartition) error {
	size := dev.Size() / sectorSize * sectorSize
	if p.DiskLabel == "gpt" {
		t := &gpt.Table{LogicalSectorSize: sectorSize, PhysicalSectorSize: sectorSize, ProtectiveMBR: true}
		for i := range parts {
			pp := &parts[i]
			typ := gpt.LinuxFilesystem
			switch pp.Role {
			case partNameESP:
				typ = gpt.EFISystemPartition
			case partNameBIOSBoot:
				typ = gpt.BIOSBoot
			case partNameBoot:
				// The Boot Loader Specification's XBOOTLDR partition.
				typ = gpt.LinuxExtendedBoot
			case partNameSwap:
				typ = gpt.LinuxSwap
			}
			pp.GUID = newGUID()
			start := uint64(pp.Start / sectorSize)
			t.Partitions = append(t.Partitions, &gpt.Partition{Index: pp.Number, Start: start, End: start + uint64(pp.Size/sectorSize) - 1,
				Size: uint64(pp.Size), Type: typ, Name: pp.Role, GUID: pp.GUID})
		}
		if err := t.Write(&diskFile{Device: dev}, size); err != nil {
			return fmt.Errorf("write the GPT: %w", err)
		}
		return nil
	}
	t := &mbr.Table{LogicalSectorSize: sectorSize, PhysicalSectorSize: sectorSize}
	for _, pp := range parts {
		typ := mbr.Linux
		switch pp.Role {
		case partNameESP:
			typ = mbr.EFISystem
		case partNameSwap:
			typ = mbr.LinuxSwap
		case partNameBoot:
			typ = mbrExtendedBoot
		}
		t.Partitions = append(t.Partitions, &mbr.Partition{Index: pp.Number, Type: typ, Bootable: pp.Role == partNameRoot,
			Start: uint32(pp.Start / sectorSize), Size: uint32(pp.Size / sectorSize)})
	}
	// go-diskfs writes the table only: sector 0's boot code area is
	// cleared (GRUB's boot.img replaces it in BIOS boot mode) and gets a
	// new disk signature, which names the partitions (root=PARTUUID=
	// <signature>-<number>).
	head := make([]byte, 446)
	for binary.LittleEndian.Uint32(head[440:]) == 0 {
		_, _ = rand.Read(head[440:444])
	}
	if _, err := dev.WriteAt(head, 0); err != nil {
		return fmt.Errorf("write the MBR: %w", err)
	}
	if err := t.Write(&diskFile{Device: dev}, size); err != nil {
		return fmt.Errorf("write the MBR: %w", err)
	}
	return nil
}

// mbrExtendedBoot is the MBR type of the Boot Loader Specification's
// XBOOTLDR partition (0xea).
const mbrExtendedBoot mbr.Type = 0xea

// existingLayout reads the partitions of the disk's table for a rebuild
// with preserve_ephemeral, matched to the roles the plan gives them.
func existingLayout(dev Device, p partitionParams, plan []plannedPartition) ([]plannedPartition, error) {
	type found struct{ start, size int64 }
	var got []found
	var guids []string
	if t := readGPT(dev); t != nil && p.DiskLabel == "gpt" {
		for _, q := range t.Partitions {
			if q.Type == gpt.Unused {
				continue
			}
			got = append(got, found{int64(q.Start) * sectorSize, int64(q.End-q.Start+1) * sectorSize})
			guids = append(guids, q.GUID)
		}
	} else if t := readMBR(dev); t != nil && p.DiskLabel == "msdos" {
		for _, q := range t.Partitions {
			if q.Type == mbr.Empty || q.Size == 0 {
				continue
			}
			got = append(got, found{int64(q.Start) * sectorSize, int64(q.Size) * sectorSize})
			guids = append(guids, "")
		}
	} else {
		return nil, fmt.Errorf("preserve_ephemeral: the disk has no %s partition table to keep", p.DiskLabel)
	}
	if len(got) != len(plan) {
		return nil, fmt.Errorf("preserve_ephemeral: the disk has %d partitions where the layout asked has %d; the ephemeral partition cannot be kept", len(got), len(plan))
	}
	out := make([]plannedPartition, len(plan))
	for i, pp := range plan {
		if pp.Role != partNameRoot && (got[i].start != pp.Start || got[i].size != pp.Size) {
			return nil, fmt.Errorf("preserve_ephemeral: partition %d (%s) is at %d+%d bytes on the disk where the layout asked puts it at %d+%d; the ephemeral partition cannot be kept", pp.Number, pp.Role, got[i].start, got[i].size, pp.Start, pp.Size)
		}
		out[i] = plannedPartition{Role: pp.Role, Number: pp.Number, Start: got[i].start, Size: got[i].size, GUID: guids[i]}
	}
	return out, nil
}

// newGUID is a random (version 4) GUID in go-diskfs's text form.
func newGUID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%X-%X-%X-%X-%X", b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// partitionWriter is an io.WriterAt confined to one partition, so that the
// whole-disk image pipeline (download, checksum, decompression, and any
// decoder plugged into it) writes a filesystem image into root.
type partitionWriter struct {
	dev         io.WriterAt
	start, size int64
}

func (w partitionWriter) WriteAt(p []byte, off int64) (int, error) {
	if off < 0 || off+int64(len(p)) > w.size {
		return 0, fmt.Errorf("write of %d bytes at %d goes past the end of the %d-byte partition", len(p), off, w.size)
	}
	return w.dev.WriteAt(p, w.start+off)
}

// Linux swap area, version 1 (the kernel's include/linux/swap.h, union
// swap_header; util-linux mkswap writes the same): the page holds at
// byte 1024 version=1, last_page, nr_badpages=0, a UUID and a 16-byte
// label, and ends with the magic "SWAPSPACE2".
const swapPageSize = 4096

func swapHeader(size int64, uuid [16]byte, label string) ([]byte, error) {
	pages := size / swapPageSize
	if pages < 10 {
		return nil, fmt.Errorf("a swap partition needs at least 10 pages, this one has %d", pages)
	}
	h := make([]byte, swapPageSize)
	binary.LittleEndian.PutUint32(h[1024:], 1)
	binary.LittleEndian.PutUint32(h[1028:], uint32(min(pages-1, 1<<32-1)))
	copy(h[1036:1052], uuid[:])
	copy(h[1052:1068], label)
	copy(h[swapPageSize-10:], "SWAPSPACE2")
	return h, nil
}

// fatStorage adapts a Device to go-diskfs's backend.Storage for fat32.Create.
type fatStorage struct{ *diskFile }

func (s fatStorage) Sys() (*os.File, error)                  { return nil, errors.New("not an OS file") }
func (s fatStorage) Writable() (backend.WritableFile, error) { return s.diskFile, nil }
func (s fatStorage) Path() string                            { return "" }

// makeFAT32 formats a partition as FAT32 with a volume label.
func makeFAT32(dev Device, pp plannedPartition, label string) (*fat32.FileSystem, error) {
	fs, err := fat32.Create(fatStorage{&diskFile{Device: dev}}, pp.Size, pp.Start, sectorSize, label, false)
	if err != nil {
		return nil, fmt.Errorf("format partition %d (%s) as FAT32: %w", pp.Number, pp.Role, err)
	}
	if err := fixFAT32(dev, pp.Start); err != nil {
		return nil, fmt.Errorf("format partition %d (%s) as FAT32: %w", pp.Number, pp.Role, err)
	}
	return fs, nil
}

// zeroStart clears the first MiB of a partition, so that no old
// filesystem signature remains where a new one is not written.
func zeroStart(dev Device, pp plannedPartition) error {
	if _, err := dev.WriteAt(make([]byte, min(pp.Size, mib)), pp.Start); err != nil {
		return fmt.Errorf("clear partition %d (%s): %w", pp.Number, pp.Role, err)
	}
	return nil
}

// isoMagic is the ISO 9660 primary volume descriptor's "CD001" at byte
// 32769; a filesystem image that carries it is an ISO, not a root.
func isISO(dev io.ReaderAt, start int64) bool {
	b := make([]byte, 5)
	if _, err := dev.ReadAt(b, start+32769); err != nil {
		return false
	}
	return bytes.Equal(b, []byte("CD001"))
}

// preparePartitions makes (or, with preserve_ephemeral, reads) the layout
// of a partition image and formats everything but root and the config
// drive. It returns the partitions.
func preparePartitions(dev Device, p partitionParams, configDriveBytes int64) ([]plannedPartition, error) {
	plan, err := planPartitions(p, dev.Size(), configDriveBytes)
	if err != nil {
		return nil, err
	}
	if p.PreserveEphemeral && p.EphemeralMB > 0 {
		// Ironic's work_on_disk: make_partitions(commit=False), the table
		// and the ephemeral partition are left alone.
		return existingLayout(dev, p, plan)
	}
	for _, pp := range plan {
		if err := zeroStart(dev, pp); err != nil {
			return nil, err
		}
	}
	if err := writePartitionTable(dev, p, plan); err != nil {
		return nil, err
	}
	if esp := roleOf(plan, partNameESP); esp != nil {
		if _, err := makeFAT32(dev, *esp, "EFI"); err != nil {
			return nil, err
		}
	}
	if boot := roleOf(plan, partNameBoot); boot != nil {
		if _, err := makeFAT32(dev, *boot, "BOOT"); err != nil {
			return nil, err
		}
	}
	if eph := roleOf(plan, partNameEphemeral); eph != nil {
		if _, err := makeFAT32(dev, *eph, partNameEphemeral); err != nil {
			return nil, err
		}
	}
	return plan, nil
}

// finishPartitions writes the swap signature and the config drive, after
// root is written.
func finishPartitions(dev Device, parts []plannedPartition, configDrive []byte) error {
	if sw := roleOf(parts, partNameSwap); sw != nil {
		var uuid [16]byte
		_, _ = rand.Read(uuid[:])
		uuid[6] = uuid[6]&0x0f | 0x40
		uuid[8] = uuid[8]&0x3f | 0x80
		h, err := swapHeader(sw.Size, uuid, partNameSwap)
		if err != nil {
			return err
		}
		if _, err := dev.WriteAt(h, sw.Start); err != nil {
			return fmt.Errorf("write the swap signature: %w", err)
		}
	}
	if cd := roleOf(parts, configdrive.Label); cd != nil && configDrive != nil {
		if err := zeroStart(dev, *cd); err != nil {
			return err
		}
		if _, err := dev.WriteAt(configDrive, cd.Start); err != nil {
			return fmt.Errorf("write the config drive: %w", err)
		}
	}
	return nil
}

// partitionResult is what write_image reports of a partition image: IPA's
// keys ("root uuid", "efi system partition uuid") and the partitions.
func partitionResult(p partitionParams, parts []plannedPartition) map[string]any {
	out := map[string]any{"disk_label": p.DiskLabel, "boot_mode": p.BootMode}
	list := make([]map[string]any, 0, len(parts))
	for _, pp := range parts {
		list = append(list, map[string]any{"role": pp.Role, "number": pp.Number, "start": pp.Start, "size": pp.Size, "guid": pp.GUID})
		switch pp.Role {
		case partNameRoot:
			out["root uuid"] = pp.GUID
		case partNameESP:
			out["efi system partition uuid"] = pp.GUID
		case partNameSwap:
			out["swap partition number"] = pp.Number
		case partNameEphemeral:
			out["ephemeral partition number"] = pp.Number
		case configdrive.Label:
			out["configdrive_partition"] = pp.Number
		}
	}
	out["partitions"] = list
	return out
}

// writePartitionImageTo lays out dev, streams the filesystem image into
// root with the checksum verified (streamImage, the whole-disk pipeline,
// writing through a partitionWriter), and finishes swap and config drive.
func (a *Agent) writePartitionImageTo(ctx context.Context, dev Device, p partitionParams, img imageParams, ck expectedChecksum, configDrive []byte, progress progressFunc) (map[string]any, streamResult, error) {
	parts, err := preparePartitions(dev, p, int64(len(configDrive)))
	if err != nil {
		return nil, streamResult{}, err
	}
	root := roleOf(parts, partNameRoot)
	res, err := streamImage(ctx, a.downloadClient(img), img.URL, ck, partitionWriter{dev: dev, start: root.Start, size: root.Size}, root.Size, a.cfg.Download, progress)
	// The stream refuses an ISO by its first bytes (errISO); a partition
	// image says what it should have been instead.
	if errors.Is(err, errISO) || (err == nil && isISO(dev, root.Start)) {
		return nil, res, fmt.Errorf("image %s is an ISO 9660 image, not a root filesystem: a partition image is a filesystem image", redactURL(img.URL))
	}
	if err != nil {
		return nil, res, err
	}
	if err := finishPartitions(dev, parts, configDrive); err != nil {
		return nil, res, err
	}
	return partitionResult(p, parts), res, nil
}

// writePartitionImage is write_image for a partition image. On failure
// root's start is cleared (not the disk's ends: with preserve_ephemeral
// the table must survive), so that nothing half-written boots.
func (a *Agent) writePartitionImage(ctx context.Context, cmd *command, p partitionParams, img imageParams, ck expectedChecksum, bd BlockDevice, dev Device, log *slog.Logger) (any, error) {
	var cd []byte
	if img.ConfigDrive != "" {
		var err error
		if cd, err = loadConfigDrive(ctx, a.downloadClient(img), img.ConfigDrive); err != nil {
			return nil, fmt.Errorf("write_image: %w", err)
		}
	}
	log.Info("writing partition image", "image", redactURL(img.URL), "checksum_algo", ck.Algo, "disk_label", p.DiskLabel, "boot_mode", p.BootMode,
		"root_mb", p.RootMB, "swap_mb", p.SwapMB, "ephemeral_mb", p.EphemeralMB, "preserve_ephemeral", p.PreserveEphemeral)
	start := time.Now()
	var lastPublish time.Time
	out, res, err := a.writePartitionImageTo(ctx, dev, p, img, ck, cd, func(written, downloaded, total int64) {
		if now := time.Now(); now.Sub(lastPublish) > 100*time.Millisecond || (total > 0 && downloaded == total) {
			lastPublish = now
			cmd.SetResult(map[string]any{"progress": client.Progress{BytesWritten: written, BytesDownloaded: downloaded, TotalBytes: max(total, 0), Stage: "writing image"}})
		}
	})
	if err != nil {
		if res.Written > 0 || errors.Is(err, ErrChecksumMismatch) {
			if plan, perr := planPartitions(p, dev.Size(), int64(len(cd))); perr == nil {
				if werr := zeroStart(dev, *roleOf(plan, partNameRoot)); werr != nil {
					log.Error("clearing the root partition after a failed image write failed", "err", werr)
				}
			}
		}
		return nil, fmt.Errorf("write_image: %w", err)
	}
	if err := dev.Sync(); err != nil {
		return nil, fmt.Errorf("write_image: flush %s: %w", bd.Name, err)
	}
	log.Info("partition image written", "bytes", res.Written, "format", res.Format, "seconds", time.Since(start).Seconds())
	out["root_device"], out["bytes_written"], out["bytes_downloaded"] = bd.Name, res.Written, res.Downloaded
	out["image_format"], out["checksum_algo"], out["checksum"] = res.Format, ck.Algo, res.Digest
	out["image_type"], out["partition_table"] = "partition", map[string]string{"gpt": "gpt", "msdos": "mbr"}[p.DiskLabel]
	out["progress"] = client.Progress{BytesWritten: res.Written, BytesDownloaded: res.Downloaded, TotalBytes: res.Downloaded, Stage: "done"}
	return out, nil
}
