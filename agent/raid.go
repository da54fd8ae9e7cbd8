package agent

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/diskfs/go-diskfs/partition/gpt"

	"github.com/ironflow/ironflow/agent/client"
	"github.com/ironflow/ironflow/hardware"
	"github.com/ironflow/ironflow/provision"
)

// Software RAID, as IPA's GenericHardwareManager does it
// (ironic-python-agent's hardware.py create_configuration and
// raid_utils.py): every logical disk of the node's target_raid_config
// (controller "software") becomes a Linux md array over one partition per
// holder disk. The holder disks get a fresh GPT whose first MiBs are left to
// the boot loader: a BIOS boot partition in BIOS boot mode (GRUB's core
// image goes there on every member), free space for the EFI system
// partition the bootloader installation makes in UEFI mode.

// raidSoftwareController is the only controller the agent's RAID steps
// configure (Ironic's software RAID documentation).
const raidSoftwareController = "software"

const (
	// raidBIOSBootMiB: IPA's calculate_raid_start leaves 8 MiB at the start
	// of a GPT disk in BIOS mode, the BIOS boot partition's place.
	raidBIOSBootMiB = 8
	// raidESPMiB: in UEFI mode the RAID partitions start at 129 MiB,
	// leaving room for an EFI system partition on every holder.
	raidESPMiB = 129
)

// raidSteps are the agent's raid interface steps, priority 0 as IPA
// declares them; advertised only to a node whose raid_interface is
// "agent" (Ironic's agent RAID interface takes only those; any other raid
// interface runs its own create_configuration).
func raidSteps() []client.Step { return clientSteps(provision.RAIDSteps()) }

// raidDeploySteps are the agent's raid deploy steps: IPA's
// apply_configuration (priority 0: it runs when a deploy template or the
// user's deploy_steps name it), with Ironic's
// RAID_APPLY_CONFIGURATION_ARGSINFO.
func raidDeploySteps() []client.Step { return clientSteps(provision.RAIDDeploySteps()) }

// raidApplyConfiguration is the deploy step raid.apply_configuration, IPA's
// apply_configuration: the raid_config argument is built as
// create_configuration builds target_raid_config, the existing arrays
// deleted first unless delete_existing is false. The result is the
// raid_config the conductor records, which the following write_image
// deploys onto.
func (a *Agent) raidApplyConfiguration(ctx context.Context, cmd *command, args, node map[string]any) (any, error) {
	cfg, ok := args["raid_config"].(map[string]any)
	if !ok {
		return nil, errors.New("raid.apply_configuration needs the argument raid_config, a RAID configuration with logical_disks")
	}
	sa := newStepArgs(args, nil)
	deleteExisting := sa.boolean("delete_existing", "", true)
	if sa.err != nil {
		return nil, sa.err
	}
	with := make(map[string]any, len(node)+1)
	for k, v := range node {
		with[k] = v
	}
	with["target_raid_config"] = cfg
	return a.raidCreateConfiguration(ctx, cmd, map[string]any{"delete_existing": deleteExisting}, with)
}

// agentRAID reports whether the node the conductor sent uses a raid
// interface whose steps the agent runs (raid agent).
func agentRAID(node map[string]any) bool {
	return hardware.StepsOf(hardware.KindRAID, hardware.Interface(str(node, "raid_interface"))) == hardware.StepsInBand
}

// raidVolume is one logical disk of target_raid_config.
type raidVolume struct {
	Name       string
	Level      string
	SizeGiB    int64 // 0: MAX
	Root       bool
	Disks      []map[string]any // physical_disks: root device hints
	Controller string
}

// raidLayout is the plan create_configuration carries out.
type raidLayout struct {
	Holders []BlockDevice
	// BootMode decides the space before the RAID partitions.
	BootMode string
	Volumes  []raidVolume
	// Partitions[h][v] is holder h's partition of volume v.
	Partitions [][]plannedPartition
}

// raidLevels are the md levels IPA's software RAID accepts, with the
// smallest number of members each needs.
var raidLevels = map[string]int{"0": 2, "1": 2, "1+0": 4, "5": 3, "6": 4}

// parseRAIDConfig reads target_raid_config's logical disks for software
// RAID, refusing what IPA refuses.
func parseRAIDConfig(cfg map[string]any) ([]raidVolume, error) {
	list, _ := cfg["logical_disks"].([]any)
	if len(list) == 0 {
		return nil, errors.New("No target_raid_config with logical_disks on the node: set it with PUT /v1/nodes/{node}/states/raid")
	}
	// Ironic's software RAID documentation: one or two arrays, the first
	// (the deployment device) a RAID-1 so that one disk's failure leaves
	// the node bootable.
	if len(list) > 2 {
		return nil, errors.New("Software RAID configuration allows a maximum of two logical disks")
	}
	var out []raidVolume
	for i, e := range list {
		ld, ok := e.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("logical disk %d is not an object", i)
		}
		v := raidVolume{Name: str(ld, "volume_name"), Controller: str(ld, "controller")}
		if v.Controller != raidSoftwareController {
			return nil, errors.New("Software RAID configuration requires all logical disks to have 'controller'='software'")
		}
		switch l := ld["raid_level"].(type) {
		case string:
			v.Level = l
		case float64:
			v.Level = strconv.FormatFloat(l, 'f', -1, 64)
		}
		if _, ok := raidLevels[v.Level]; !ok {
			return nil, fmt.Errorf("Software RAID configuration does not support raid_level %q: use one of 0, 1, 1+0, 5, 6", v.Level)
		}
		if i == 0 && v.Level != "1" {
			return nil, errors.New("Software RAID configuration requires RAID-1 for the first logical disk")
		}
		switch s := ld["size_gb"].(type) {
		case string:
			if s != "MAX" {
				return nil, fmt.Errorf("logical disk %d: size_gb %q is neither a number nor MAX", i, s)
			}
		case float64:
			if s <= 0 || s != float64(int64(s)) {
				return nil, fmt.Errorf("logical disk %d: size_gb %v is not a positive integer", i, s)
			}
			v.SizeGiB = int64(s)
		default:
			return nil, fmt.Errorf("logical disk %d has no size_gb", i)
		}
		if v.SizeGiB == 0 && i != len(list)-1 {
			// A MAX volume takes the rest of each holder: nothing can follow it.
			return nil, errors.New("Only the last logical disk can have size_gb 'MAX'")
		}
		v.Root, _ = ld["is_root_volume"].(bool)
		if pd, ok := ld["physical_disks"].([]any); ok {
			for _, h := range pd {
				m, ok := h.(map[string]any)
				if !ok {
					return nil, fmt.Errorf("logical disk %d: physical_disks for software RAID are root device hints (objects), not %v", i, h)
				}
				v.Disks = append(v.Disks, m)
			}
		}
		out = append(out, v)
	}
	return out, nil
}

// planSoftwareRAID picks the holder disks (every disk the agent may erase,
// or those physical_disks' hints name) and lays the partitions out.
func planSoftwareRAID(vols []raidVolume, disks []BlockDevice, bootMode string) (raidLayout, error) {
	l := raidLayout{BootMode: bootMode, Volumes: vols}
	holders := disks
	if len(vols[0].Disks) > 0 {
		holders = nil
		for _, hint := range vols[0].Disks {
			var found bool
			for _, d := range disks {
				ok, err := matchHints(d, hint)
				if err != nil {
					return l, fmt.Errorf("physical_disks: %w", err)
				}
				if ok && !containsDisk(holders, d.Name) {
					holders, found = append(holders, d), true
					break
				}
			}
			if !found {
				return l, fmt.Errorf("physical_disks: no disk matches %v", hint)
			}
		}
	}
	for _, v := range vols {
		if n := raidLevels[v.Level]; len(holders) < n {
			return l, fmt.Errorf("Software RAID level %s needs at least %d disks, the node has %d", v.Level, n, len(holders))
		}
	}
	l.Holders = holders
	start := int64(1)
	switch {
	case bootMode == "uefi":
		start = raidESPMiB
	default:
		start = raidBIOSBootMiB
	}
	for _, d := range holders {
		// The usable end: before the backup GPT.
		end := (d.Size - 33*sectorSize) / mib * mib
		off := start * mib
		var parts []plannedPartition
		if bootMode != "uefi" {
			parts = append(parts, plannedPartition{Role: partNameBIOSBoot, Number: 1, Start: mib, Size: (raidBIOSBootMiB - 1) * mib})
		}
		for i, v := range vols {
			size := v.SizeGiB << 30
			if v.SizeGiB == 0 {
				size = end - off
			}
			if size <= 0 || off+size > end {
				return l, fmt.Errorf("logical disk %d (%d GiB) does not fit on %s (%d MiB)", i, v.SizeGiB, d.Name, d.Size/mib)
			}
			parts = append(parts, plannedPartition{Role: fmt.Sprintf("raid%d", i), Number: len(parts) + 1, Start: off, Size: size})
			off += size
		}
		l.Partitions = append(l.Partitions, parts)
	}
	return l, nil
}

// raidBootMode is the boot mode the holders are laid out for: the
// instance's (instance_info, then properties capabilities), else the one
// the ramdisk runs in, as IPA's get_boot_mode.
func raidBootMode(node map[string]any) string {
	for _, m := range []map[string]any{mapOf(node, "instance_info"), mapOf(node, "properties")} {
		if bm := strings.ToLower(capability(m, "boot_mode")); bm == "uefi" || bm == "bios" {
			return bm
		}
	}
	if firmwareIsUEFI() {
		return "uefi"
	}
	return "bios"
}

func containsDisk(ds []BlockDevice, name string) bool {
	for _, d := range ds {
		if d.Name == name {
			return true
		}
	}
	return false
}

// writeRAIDPartitionTable writes one holder's GPT.
func writeRAIDPartitionTable(dev Device, parts []plannedPartition) error {
	t := &gpt.Table{LogicalSectorSize: sectorSize, PhysicalSectorSize: sectorSize, ProtectiveMBR: true}
	for _, pp := range parts {
		typ := gpt.LinuxRAID
		if pp.Role == partNameBIOSBoot {
			typ = gpt.BIOSBoot
		}
		start := uint64(pp.Start / sectorSize)
		t.Partitions = append(t.Partitions, &gpt.Partition{Index: pp.Number, Start: start, End: start + uint64(pp.Size/sectorSize) - 1,
			Size: uint64(pp.Size), Type: typ, Name: pp.Role, GUID: newGUID()})
	}
	if err := t.Write(&diskFile{Device: dev}, dev.Size()/sectorSize*sectorSize); err != nil {
		return fmt.Errorf("write the GPT: %w", err)
	}
	return nil
}

// partitionPath names partition n of a disk as the kernel does: a "p"
// between a name ending in a digit and the number (loop0p1, nvme0n1p1).
func partitionPath(disk string, n int) string {
	if last := disk[len(disk)-1]; last >= '0' && last <= '9' {
		return disk + "p" + strconv.Itoa(n)
	}
	return disk + strconv.Itoa(n)
}

// mdadmCreateArgs are IPA's mdadm --create arguments for one array.
func mdadmCreateArgs(md string, v raidVolume, members []string) []string {
	level := v.Level
	if level == "1+0" {
		level = "10"
	}
	args := []string{"--create", md, "--force", "--run", "--metadata=1", "--level", level}
	if v.Name != "" {
		args = append(args, "--name", v.Name)
	}
	args = append(args, "--raid-devices", strconv.Itoa(len(members)))
	return append(args, members...)
}

// softwareRAID is what the RAID steps need of the machine besides its
// disks: mdadm and the kernel's view of partitions.
type softwareRAID interface {
	// RereadPartitions makes the kernel see a disk's new partition table.
	RereadPartitions(disk string) error
	// PartitionDevice is the device of partition n (1-based) of disk, once
	// the kernel shows it.
	PartitionDevice(disk string, n int) (string, error)
	// Mdadm runs mdadm with args, returning its combined output.
	Mdadm(ctx context.Context, args ...string) (string, error)
	// MDDevices lists the md arrays (/dev/mdN) and their member devices.
	MDDevices() (map[string][]string, error)
}

func (a *Agent) softwareRAID() (softwareRAID, error) {
	r, ok := a.cfg.Hardware.(softwareRAID)
	if !ok {
		return nil, errors.New("software RAID is not supported on this machine (no mdadm)")
	}
	return r, nil
}

// raidCreateConfiguration is the clean step raid.create_configuration:
// the result is the raid_config Ironic records on the node.
func (a *Agent) raidCreateConfiguration(ctx context.Context, _ *command, args, node map[string]any) (any, error) {
	r, err := a.softwareRAID()
	if err != nil {
		return nil, err
	}
	vols, err := parseRAIDConfig(mapOf(node, "target_raid_config"))
	if err != nil {
		return nil, err
	}
	sa := newStepArgs(args, nil)
	createRoot := sa.boolean("create_root_volume", "", true)
	createNonRoot := sa.boolean("create_nonroot_volumes", "", true)
	deleteExisting := sa.boolean("delete_existing", "", false)
	if sa.err != nil {
		return nil, sa.err
	}
	var keep []raidVolume
	for _, v := range vols {
		if (v.Root && createRoot) || (!v.Root && createNonRoot) {
			keep = append(keep, v)
		}
	}
	if len(keep) == 0 {
		return map[string]any{"logical_disks": []any{}}, nil
	}
	if deleteExisting {
		if _, err := a.raidDeleteConfiguration(ctx, nil, nil, node); err != nil {
			return nil, err
		}
	}
	disks, err := a.eraseTargets(ctx)
	if err != nil {
		return nil, err
	}
	bootMode := raidBootMode(node)
	l, err := planSoftwareRAID(keep, disks, bootMode)
	if err != nil {
		return nil, err
	}
	for h, d := range l.Holders {
		dev, err := a.cfg.Hardware.Open(d)
		if err != nil {
			return nil, fmt.Errorf("open %s: %w", d.Name, err)
		}
		err = eraseMetadata(dev)
		if err == nil {
			err = writeRAIDPartitionTable(dev, l.Partitions[h])
		}
		if err == nil {
			err = dev.Sync()
		}
		dev.Close()
		if err != nil {
			return nil, fmt.Errorf("partition %s: %w", d.Name, err)
		}
		if err := r.RereadPartitions(d.Name); err != nil {
			return nil, fmt.Errorf("re-read the partitions of %s: %w", d.Name, err)
		}
	}
	var out []any
	for i, v := range keep {
		md := fmt.Sprintf("/dev/md%d", i)
		var members []string
		for h, d := range l.Holders {
			part, err := r.PartitionDevice(d.Name, l.Partitions[h][len(l.Partitions[h])-len(keep)+i].Number)
			if err != nil {
				return nil, err
			}
			members = append(members, part)
		}
		if msg, err := r.Mdadm(ctx, mdadmCreateArgs(md, v, members)...); err != nil {
			return nil, fmt.Errorf("Failed to create md device %s on %s: %w: %s", md, strings.Join(members, " "), err, strings.TrimSpace(msg))
		}
		ld := map[string]any{"controller": raidSoftwareController, "raid_level": v.Level, "size_gb": "MAX", "volume_name": v.Name,
			"is_root_volume": v.Root, "physical_disks": members}
		if v.SizeGiB > 0 {
			ld["size_gb"] = v.SizeGiB
		}
		out = append(out, ld)
	}
	a.log.Info("created software RAID", "node", a.NodeUUID(), "arrays", len(out))
	return map[string]any{"logical_disks": out}, nil
}

// raidDeleteConfiguration is raid.delete_configuration: every md array is
// stopped and its members' superblocks zeroed, and the holders' partition
// tables erased, as IPA's delete_configuration does.
func (a *Agent) raidDeleteConfiguration(ctx context.Context, _ *command, _, _ map[string]any) (any, error) {
	r, err := a.softwareRAID()
	if err != nil {
		return nil, err
	}
	mds, err := r.MDDevices()
	if err != nil {
		return nil, err
	}
	var holders []string
	for md, members := range mds {
		if msg, err := r.Mdadm(ctx, "--stop", md); err != nil {
			return nil, fmt.Errorf("Failed to stop %s: %w: %s", md, err, strings.TrimSpace(msg))
		}
		for _, m := range members {
			if msg, err := r.Mdadm(ctx, "--zero-superblock", m); err != nil {
				return nil, fmt.Errorf("Failed to remove the superblock from %s: %w: %s", m, err, strings.TrimSpace(msg))
			}
		}
	}
	disks, err := a.eraseTargets(ctx)
	if err != nil {
		return nil, err
	}
	for _, d := range disks {
		t := readGPTOf(a, d)
		if !t {
			continue
		}
		dev, err := a.cfg.Hardware.Open(d)
		if err != nil {
			return nil, fmt.Errorf("open %s: %w", d.Name, err)
		}
		err = eraseMetadata(dev)
		dev.Close()
		if err != nil {
			return nil, fmt.Errorf("erase %s: %w", d.Name, err)
		}
		holders = append(holders, d.Name)
		_ = r.RereadPartitions(d.Name)
	}
	a.log.Info("deleted software RAID", "node", a.NodeUUID(), "arrays", len(mds), "holders", holders)
	return map[string]any{"logical_disks": []any{}}, nil
}

// readGPTOf reports whether disk d holds a GPT with a Linux RAID partition.
func readGPTOf(a *Agent, d BlockDevice) bool {
	dev, err := a.cfg.Hardware.Open(d)
	if err != nil {
		return false
	}
	defer dev.Close()
	t := readGPT(dev)
	if t == nil {
		return false
	}
	for _, p := range t.Partitions {
		if strings.EqualFold(string(p.Type), string(gpt.LinuxRAID)) {
			return true
		}
	}
	return false
}
