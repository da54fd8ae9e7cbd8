package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/diskfs/go-diskfs/partition/gpt"
	"github.com/diskfs/go-diskfs/partition/mbr"

	"github.com/ironflow/ironflow/agent/grub"
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
// In BIOS mode it is GRUB on every holder (installBIOSBootloaderOnRAID).

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
// (UEFI), or GRUB's boot code reading the array (BIOS,
// installBIOSBootloaderOnRAID). Under secure boot the image's loader must
// be signed (agent/secureboot.go), checked before any holder is changed.
func (a *Agent) installBootloaderOnRAID(ctx context.Context, root map[string]any, bootMode, loader string, secureBoot bool) (any, error) {
	if bootMode == "bios" || (bootMode == "" && !firmwareIsUEFI()) {
		return a.installBIOSBootloaderOnRAID(ctx, root)
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
	// A retried step finds the image's ESP wiped (no boot sector signature)
	// and the mirror holding it: nothing to copy again.
	relocated := len(data) < 512 || data[510] != 0x55 || data[511] != 0xaa
	signed := ""
	if secureBoot && !relocated {
		msg, err := verifySecureBootLoader(bytes.NewReader(data), bd.Name, UEFIPartition{Number: esp.Number}, loader)
		if err != nil {
			return nil, err
		}
		signed = "; secure boot: " + msg
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
	if secureBoot && relocated {
		// The retry's loader is the mirror's copy.
		mirror, err := a.cfg.Hardware.Open(BlockDevice{Name: espMD, Kind: "raid"})
		if err != nil {
			return nil, fmt.Errorf("install bootloader: open %s: %w", espMD, err)
		}
		msg, err := verifySecureBootLoader(mirror, espMD, UEFIPartition{Number: esp.Number}, loader)
		mirror.Close()
		if err != nil {
			return nil, err
		}
		signed = "; secure boot: " + msg
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
		bd.Name, espMD, strings.Join(parts, " "), loader, strings.Join(done, ", ")) + signed, nil
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

// BIOS boot of a software RAID root, as IPA's _install_grub2 does it for
// softraid (grub-install on every holder disk, so that the BIOS boots any
// one of them): boot.img in each holder's MBR and GRUB's md-reading core
// image (agent/grub's CoreImageMD) in its BIOS boot partition, the one
// raid.create_configuration lays out in BIOS mode (partition 1, to
// raidBIOSBootMiB), with the instance's grub.cfg after core.img there.
// That grub.cfg finds the root array by its UUID and hands over to the
// image's own GRUB configuration on it (grub.cfg, what IPA's grub-mkconfig
// would make): the image's kernel is booted as the image configures it,
// and nothing of the image is changed. An image without a GRUB
// configuration does not boot this way (as IPA's, which runs the image's
// grub-install).

// imageGRUBConfigs are the GRUB configurations mdGRUBConfig looks for on
// each partition of the image, in order (Debian's and Ubuntu's, Fedora's
// and RHEL's, a separate /boot partition's).
var imageGRUBConfigs = []string{"/boot/grub/grub.cfg", "/boot/grub2/grub.cfg", "/grub/grub.cfg", "/grub2/grub.cfg"}

// mdGRUBConfig is the grub.cfg of a software RAID root: for each partition
// (GRUB names: "msdos1", "gpt2") of the image on array (a GRUB device:
// "mduuid/<hex>"), the first GRUB configuration found there is read with
// root set to that partition; a configuration that boots does not return.
func mdGRUBConfig(array string, parts []string) string {
	return "# Written by ironflow's agent: the instance on the software RAID root\n" +
		"# (" + array + "), booted by the image's own GRUB configuration.\n" +
		"for part in " + strings.Join(parts, " ") + "; do\n" +
		"\tfor cfg in " + strings.Join(imageGRUBConfigs, " ") + "; do\n" +
		"\t\tif [ -f (" + array + ",$part)$cfg ]; then set root=\"" + array + ",$part\"; configfile $cfg; fi\n" +
		"\tdone\n" +
		"done\n" +
		"echo \"ironflow: no bootable GRUB configuration (" + strings.Join(imageGRUBConfigs, ", ") + ") on the partitions of " + array + "\"\n"
}

// imagePartitionNames are GRUB's names of the partitions of the image at
// the start of dev: gptN or msdosN.
func imagePartitionNames(dev Device) ([]string, error) {
	var out []string
	if t := readGPT(dev); t != nil {
		for _, p := range t.Partitions {
			if p.Type != gpt.Unused && p.Type != gpt.BIOSBoot {
				out = append(out, "gpt"+strconv.Itoa(p.Index))
			}
		}
	} else if t := readMBR(dev); t != nil {
		for i, p := range t.Partitions {
			if p.Type != mbr.Empty && p.Size > 0 {
				out = append(out, "msdos"+strconv.Itoa(i+1))
			}
		}
	}
	if len(out) == 0 {
		return nil, errors.New("the image has no partitions to boot from")
	}
	return out, nil
}

// mdUUID is the array's UUID as GRUB names it (mduuid/<32 hex digits>):
// mdadm --detail --export's MD_UUID, the superblock's set_uuid bytes in
// order, without the colons.
func mdUUID(ctx context.Context, r softwareRAID, md string) (string, error) {
	msg, err := r.Mdadm(ctx, "--detail", "--export", md)
	if err != nil {
		return "", fmt.Errorf("mdadm --detail %s: %w: %s", md, err, strings.TrimSpace(msg))
	}
	for _, l := range strings.Split(msg, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(l), "MD_UUID="); ok {
			hex := strings.ToLower(strings.ReplaceAll(v, ":", ""))
			if len(hex) == 32 && strings.Trim(hex, "0123456789abcdef") == "" {
				return hex, nil
			}
		}
	}
	return "", fmt.Errorf("mdadm --detail --export %s names no MD_UUID", md)
}

// installBIOSBootloaderOnRAID installs GRUB on every holder of the root
// array (see above).
func (a *Agent) installBIOSBootloaderOnRAID(ctx context.Context, root map[string]any) (any, error) {
	bd, holders, err := a.mdRootDevice(ctx, root)
	if err != nil {
		return nil, fmt.Errorf("install bootloader: %w", err)
	}
	r, err := a.softwareRAID()
	if err != nil {
		return nil, fmt.Errorf("install bootloader: %w", err)
	}
	opener, ok := a.cfg.Hardware.(raidMemberOpener)
	if !ok {
		return nil, errors.New("install bootloader: this machine cannot open the holder disks of an md array")
	}
	for _, h := range holders {
		if _, err := holderBIOSBoot(opener, BlockDevice{Name: h}); err != nil {
			return nil, fmt.Errorf("install bootloader: %s: %w", h, err)
		}
	}
	uuid, err := mdUUID(ctx, r, bd.Name)
	if err != nil {
		return nil, fmt.Errorf("install bootloader: %w", err)
	}
	md, err := a.cfg.Hardware.Open(bd)
	if err != nil {
		return nil, fmt.Errorf("install bootloader: open %s: %w", bd.Name, err)
	}
	parts, err := imagePartitionNames(md)
	md.Close()
	if err != nil {
		return nil, fmt.Errorf("install bootloader: %s: %w", bd.Name, err)
	}
	bootImg, coreImg, err := a.grubFiles("md")
	if err != nil {
		return nil, fmt.Errorf("install bootloader: %w", err)
	}
	cfg := mdGRUBConfig("mduuid/"+uuid, parts)
	for _, h := range holders {
		if err := setupMDHolder(opener, BlockDevice{Name: h}, bootImg, coreImg, cfg); err != nil {
			return nil, fmt.Errorf("install bootloader: %s: %w", h, err)
		}
	}
	a.log.Info("GRUB installed on every holder", "node", a.NodeUUID(), "root", bd.Name, "holders", holders)
	return fmt.Sprintf("software RAID %s: GRUB installed on %s (boot.img in the MBR, core.img reading md arrays in the BIOS boot partition), booting the image's own bootloader configuration on mduuid/%s",
		bd.Name, strings.Join(holders, ", "), uuid), nil
}

// setupMDHolder embeds GRUB and the instance's grub.cfg on one holder.
func setupMDHolder(opener raidMemberOpener, h BlockDevice, bootImg, coreImg []byte, cfg string) error {
	dev, err := opener.OpenShared(h)
	if err != nil {
		return err
	}
	defer dev.Close()
	bios, err := biosBootArea(dev)
	if err != nil {
		return err
	}
	if err := grub.SetupMD(dev, bootImg, coreImg, bios, cfg); err != nil {
		return fmt.Errorf("install GRUB's boot code: %w", err)
	}
	return dev.Sync()
}

// holderBIOSBoot is the BIOS boot partition of a holder.
func holderBIOSBoot(opener raidMemberOpener, h BlockDevice) (grub.Area, error) {
	dev, err := opener.OpenShared(h)
	if err != nil {
		return grub.Area{}, err
	}
	defer dev.Close()
	return biosBootArea(dev)
}

// biosBootArea is partition 1 of a holder, the BIOS boot partition
// raid.create_configuration makes in BIOS boot mode (CoreImageMD's
// prefix names partition 1).
func biosBootArea(dev Device) (grub.Area, error) {
	t := readGPT(dev)
	if t == nil {
		return grub.Area{}, errors.New("no GPT: not a holder laid out by raid.create_configuration")
	}
	for _, p := range t.Partitions {
		if p.Type == gpt.BIOSBoot && p.Index == 1 {
			return grub.Area{Start: p.Start, Sectors: p.End - p.Start + 1}, nil
		}
	}
	return grub.Area{}, errors.New("no BIOS boot partition (partition 1) for GRUB: the RAID was created for UEFI boot; run raid.create_configuration in BIOS boot mode (boot_mode bios) before deploying in BIOS mode")
}
