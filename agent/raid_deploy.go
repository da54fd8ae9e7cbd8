package agent

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/diskfs/go-diskfs/partition/gpt"
)

// Deploying onto software RAID, as IPA does once create_configuration
// built the arrays: the root device is the md array of the root logical
// disk of the node's raid_config (whatever the root device hints say), so
// write_image streams the image onto /dev/mdN; install_bootloader then
// makes every holder disk bootable on its own, so that the instance boots
// with any one disk gone. In UEFI mode that is IPA's
// prepare_boot_partitions_for_softraid: an EFI system partition on every
// holder, in the space create_configuration left before the RAID
// partitions (raidESPMiB), the ESPs mirrored by an md RAID-1 with
// metadata 1.0 holding the image's ESP, and a UEFI boot entry for each.

// softwareRAIDRoot is the root logical disk of the node's raid_config when
// it is a software RAID volume (what raidCreateConfiguration returned and
// the conductor recorded).
func softwareRAIDRoot(node map[string]any) (map[string]any, bool) {
	disks, _ := mapOf(node, "raid_config")["logical_disks"].([]any)
	for _, raw := range disks {
		ld, _ := raw.(map[string]any)
		if root, _ := ld["is_root_volume"].(bool); root && str(ld, "controller") == raidSoftwareController {
			return ld, true
		}
	}
	return nil, false
}

// raidMembers are the member partitions a logical disk of raid_config
// names (physical_disks, as raidCreateConfiguration records them).
func raidMembers(ld map[string]any) []string {
	list, _ := ld["physical_disks"].([]any)
	var out []string
	for _, m := range list {
		if s, ok := m.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// findRootArray is the md array among mds (array → members) that holds a
// member of the root volume; "" when none does.
func findRootArray(mds map[string][]string, members []string) string {
	names := make([]string, 0, len(mds))
	for md := range mds {
		names = append(names, md)
	}
	sort.Strings(names)
	for _, md := range names {
		for _, m := range mds[md] {
			if slices.Contains(members, m) {
				return md
			}
		}
	}
	return ""
}

// mdRootDevice assembles the node's arrays if the ramdisk has not (md
// arrays with version-1 superblocks are not started by the kernel) and
// returns the root volume's array.
func (a *Agent) mdRootDevice(ctx context.Context, root map[string]any) (BlockDevice, []string, error) {
	r, err := a.softwareRAID()
	if err != nil {
		return BlockDevice{}, nil, err
	}
	members := raidMembers(root)
	if len(members) == 0 {
		return BlockDevice{}, nil, errors.New("the software RAID root volume in raid_config names no physical_disks: run raid.create_configuration again")
	}
	mds, err := r.MDDevices()
	if err != nil {
		return BlockDevice{}, nil, err
	}
	md := findRootArray(mds, members)
	if md == "" {
		msg, aerr := r.Mdadm(ctx, "--assemble", "--scan")
		if mds, err = r.MDDevices(); err != nil {
			return BlockDevice{}, nil, err
		}
		if md = findRootArray(mds, members); md == "" {
			return BlockDevice{}, nil, fmt.Errorf("the software RAID root volume (members %s) is not assembled: mdadm --assemble --scan: %v: %s",
				strings.Join(members, " "), aerr, strings.TrimSpace(msg))
		}
	}
	var holders []string
	for _, m := range mds[md] {
		holders = append(holders, partitionDisk(m))
	}
	sort.Strings(holders)
	a.log.Info("software RAID root device", "node", a.NodeUUID(), "device", md, "members", mds[md])
	return BlockDevice{Name: md, Kind: "raid"}, holders, nil
}

// partitionDisk is the disk a partition device is on, partitionPath's
// inverse: /dev/vda2 → /dev/vda, /dev/nvme0n1p2 → /dev/nvme0n1.
func partitionDisk(part string) string {
	i := len(part)
	for i > 0 && part[i-1] >= '0' && part[i-1] <= '9' {
		i--
	}
	if i > 1 && part[i-1] == 'p' && part[i-2] >= '0' && part[i-2] <= '9' {
		i--
	}
	return part[:i]
}

// raidMemberOpener opens a holder disk while its partitions are md
// members: the exclusive open Hardware.Open does fails then.
type raidMemberOpener interface {
	OpenShared(bd BlockDevice) (Device, error)
}

// holderESP is the EFI system partition of a holder disk: the existing
// one, or a new one from 1 MiB to the first partition (the space
// create_configuration left, raidESPMiB), which must hold the image's ESP
// and the md superblock of the mirror at its end.
func holderESP(t *gpt.Table, espBytes int64) (*gpt.Partition, bool, error) {
	need := uint64((espBytes + mib + sectorSize - 1) / sectorSize)
	first := uint64(1<<63 - 1)
	next := 1
	for _, p := range t.Partitions {
		if p.Type == gpt.Unused {
			continue
		}
		if p.Type == gpt.EFISystemPartition && p.End-p.Start+1 >= need {
			return p, false, nil
		}
		first = min(first, p.Start)
		next = max(next, p.Index+1)
	}
	start := uint64(mib / sectorSize)
	if first == uint64(1<<63-1) || start+need > first {
		return nil, false, fmt.Errorf("the image's EFI system partition (%d MiB) does not fit before the RAID partition at sector %d (raid.create_configuration in UEFI mode leaves %d MiB)",
			espBytes/mib, first, raidESPMiB-1)
	}
	return &gpt.Partition{Index: next, Start: start, End: first - 1, Size: (first - start) * sectorSize,
		Type: gpt.EFISystemPartition, Name: "uefi-holder", GUID: newGUID()}, true, nil
}

// espMirror is what mirroring the holders' ESPs needs of the machine:
// the kernel told of a partition added to a disk in use.
type espMirror interface {
	AddPartition(disk string, n int, start, size int64) (string, error)
}

// espArray is the md array over the holders' ESP partitions among mds (a
// rebuild finds the one an earlier deploy made), "" when none.
func espArray(mds map[string][]string, parts []string) string {
	names := make([]string, 0, len(mds))
	for md := range mds {
		names = append(names, md)
	}
	sort.Strings(names)
	for _, md := range names {
		if len(mds[md]) > 0 && !slices.ContainsFunc(mds[md], func(m string) bool { return !slices.Contains(parts, m) }) {
			return md
		}
	}
	return ""
}

// nextFreeMD is IPA's get_next_free_raid_device: the first /dev/mdN not in
// use.
func nextFreeMD(mds map[string][]string) (string, error) {
	for i := 0; i < 128; i++ {
		if md := fmt.Sprintf("/dev/md%d", i); mds[md] == nil {
			return md, nil
		}
	}
	return "", errors.New("No free md (RAID) devices are left")
}

// installBootloaderOnRAID is install_bootloader for an image on a software
// RAID root volume: every holder gets the image's ESP and a boot entry
// (UEFI); in BIOS mode it refuses, since booting from each member needs
// GRUB with the md modules there, which ironflow's agent does not install.
func (a *Agent) installBootloaderOnRAID(ctx context.Context, root map[string]any, bootMode, loader string) (any, error) {
	if bootMode == "bios" || (bootMode == "" && !firmwareIsUEFI()) {
		return nil, errors.New("install bootloader: a software RAID root volume boots in UEFI mode only with ironflow's agent (an ESP on every holder disk); BIOS boot needs GRUB on every member, which it does not install: deploy with boot_mode uefi")
	}
	bd, holders, err := a.mdRootDevice(ctx, root)
	if err != nil {
		return nil, fmt.Errorf("install bootloader: %w", err)
	}
	md, err := a.cfg.Hardware.Open(bd)
	if err != nil {
		return nil, fmt.Errorf("install bootloader: open %s: %w", bd.Name, err)
	}
	esp, err := findESP(md)
	if err != nil {
		md.Close()
		return nil, fmt.Errorf("install bootloader: the image on %s: %w", bd.Name, err)
	}
	data := make([]byte, int64(esp.SizeLBA)*sectorSize)
	_, err = md.ReadAt(data, int64(esp.StartLBA)*sectorSize)
	md.Close()
	if err != nil {
		return nil, fmt.Errorf("install bootloader: read the EFI system partition of %s: %w", bd.Name, err)
	}
	opener, ok := a.cfg.Hardware.(raidMemberOpener)
	mirror, ok2 := a.cfg.Hardware.(espMirror)
	r, err := a.softwareRAID()
	if !ok || !ok2 || err != nil {
		return nil, errors.New("install bootloader: this machine cannot partition the holder disks of an md array")
	}
	var parts []string
	var esps []UEFIPartition
	for _, h := range holders {
		part, err := addHolderESP(opener, BlockDevice{Name: h}, int64(len(data)))
		if err != nil {
			return nil, fmt.Errorf("install bootloader: %s: %w", h, err)
		}
		dev, err := mirror.AddPartition(h, part.Number, int64(part.StartLBA)*sectorSize, int64(part.SizeLBA)*sectorSize)
		if err != nil {
			return nil, fmt.Errorf("install bootloader: %w", err)
		}
		parts, esps = append(parts, dev), append(esps, part)
	}
	// The holders' ESPs mirrored, as IPA's prepare_boot_partitions_for_softraid:
	// an md RAID-1 with the superblock at the end (metadata 1.0), so that
	// the firmware reads each member as a plain FAT.
	mds, err := r.MDDevices()
	if err != nil {
		return nil, fmt.Errorf("install bootloader: %w", err)
	}
	espMD := espArray(mds, parts)
	// A retried step finds the image's ESP wiped (no boot sector signature)
	// and the mirror holding it: nothing to copy again.
	relocated := len(data) < 512 || data[510] != 0x55 || data[511] != 0xaa
	if relocated && espMD == "" {
		return nil, fmt.Errorf("install bootloader: the EFI system partition of the image on %s has no FAT boot sector", bd.Name)
	}
	if espMD == "" {
		if espMD, err = nextFreeMD(mds); err != nil {
			return nil, fmt.Errorf("install bootloader: %w", err)
		}
		args := []string{"--create", espMD, "--force", "--run", "--metadata=1.0", "--level", "1", "--name", "esp", "--raid-devices", strconv.Itoa(len(parts))}
		if msg, err := r.Mdadm(ctx, append(args, parts...)...); err != nil {
			return nil, fmt.Errorf("install bootloader: Failed to create md device %s for the ESPs on %s: %w: %s", espMD, strings.Join(parts, " "), err, strings.TrimSpace(msg))
		}
	}
	if !relocated {
		if err := a.writeESPArray(BlockDevice{Name: espMD, Kind: "raid"}, data); err != nil {
			return nil, fmt.Errorf("install bootloader: %w", err)
		}
	}
	// IPA wipes the image's own ESP: the instance mounts the mirror's copy
	// (the same filesystem UUID).
	if md, err := a.cfg.Hardware.Open(bd); err == nil && !relocated {
		_, werr := md.WriteAt(make([]byte, 8*sectorSize), int64(esp.StartLBA)*sectorSize)
		if werr == nil {
			werr = md.Sync()
		}
		md.Close()
		if werr != nil {
			return nil, fmt.Errorf("install bootloader: wipe the image's EFI system partition on %s: %w", bd.Name, werr)
		}
	}
	var done []string
	// In reverse, so that the first holder's entry ends first in BootOrder.
	for i := len(holders) - 1; i >= 0; i-- {
		h := BlockDevice{Name: holders[i]}
		err := a.cfg.Hardware.AddUEFIBootEntry(ctx, h, esps[i], loader)
		if errors.Is(err, ErrNotUEFI) {
			return nil, fmt.Errorf("install bootloader: %w: a software RAID root volume boots in UEFI mode only", err)
		}
		if err != nil {
			return nil, fmt.Errorf("install bootloader: %s: %w", h.Name, err)
		}
		done = append([]string{fmt.Sprintf("%s partition %d", h.Name, esps[i].Number)}, done...)
	}
	a.log.Info("EFI system partition mirrored on every holder", "node", a.NodeUUID(), "root", bd.Name, "esp", espMD, "holders", done)
	return fmt.Sprintf("software RAID %s: EFI system partition on %s (RAID-1 over %s), UEFI boot entry added for %s on %s",
		bd.Name, espMD, strings.Join(parts, " "), loader, strings.Join(done, ", ")), nil
}

// writeESPArray writes the image's ESP onto the ESP mirror, clearing the
// MiB after it so that no stale FAT follows.
func (a *Agent) writeESPArray(bd BlockDevice, data []byte) error {
	dev, err := a.cfg.Hardware.Open(bd)
	if err != nil {
		return fmt.Errorf("open %s: %w", bd.Name, err)
	}
	defer dev.Close()
	if int64(len(data)) > dev.Size() {
		return fmt.Errorf("the image's EFI system partition (%d bytes) is larger than %s (%d bytes)", len(data), bd.Name, dev.Size())
	}
	if _, err := dev.WriteAt(data, 0); err != nil {
		return fmt.Errorf("write the EFI system partition onto %s: %w", bd.Name, err)
	}
	if rest := min(dev.Size()-int64(len(data)), mib); rest > 0 {
		if _, err := dev.WriteAt(make([]byte, rest), int64(len(data))); err != nil {
			return fmt.Errorf("clear %s after the EFI system partition: %w", bd.Name, err)
		}
	}
	return dev.Sync()
}

// addHolderESP gives the holder an EFI system partition for an ESP of
// espBytes, adding it to its GPT when it has none.
func addHolderESP(opener raidMemberOpener, h BlockDevice, espBytes int64) (UEFIPartition, error) {
	dev, err := opener.OpenShared(h)
	if err != nil {
		return UEFIPartition{}, err
	}
	defer dev.Close()
	t := readGPT(dev)
	if t == nil {
		return UEFIPartition{}, errors.New("no GPT: not a holder laid out by raid.create_configuration")
	}
	p, added, err := holderESP(t, espBytes)
	if err != nil {
		return UEFIPartition{}, err
	}
	if added {
		t.Partitions = append(t.Partitions, p)
		if err := t.Write(&diskFile{Device: dev}, dev.Size()/sectorSize*sectorSize); err != nil {
			return UEFIPartition{}, fmt.Errorf("add the EFI system partition to the GPT: %w", err)
		}
		if err := dev.Sync(); err != nil {
			return UEFIPartition{}, err
		}
	}
	return UEFIPartition{Number: p.Index, StartLBA: p.Start, SizeLBA: p.End - p.Start + 1, GPT: true, PartGUID: p.GUID}, nil
}
