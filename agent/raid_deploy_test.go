package agent

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/diskfs/go-diskfs/partition/gpt"
	"github.com/diskfs/go-diskfs/partition/mbr"

	"github.com/ironflow/ironflow/agent/client"
	"github.com/ironflow/ironflow/agent/grub"
)

// raidDeployHardware is file disks vda and vdb laid out by
// create_configuration, and the md array over their second partitions as a
// third file (/dev/md127), assembled by "mdadm --assemble --scan".
type raidDeployHardware struct {
	*fileHardware
	assembled bool
	created   map[string][]string // arrays mdadm --create made
	mdadm     []string
	entries   []string // UEFI boot entries added: disk, partition, start
	// rootMembers are md127's members once assembled (default: the
	// first partitions of vda and vdb, the UEFI layout's).
	rootMembers []string
}

func (h *raidDeployHardware) RereadPartitions(string) error { return nil }
func (h *raidDeployHardware) PartitionDevice(disk string, n int) (string, error) {
	return partitionPath(disk, n), nil
}
func (h *raidDeployHardware) Mdadm(_ context.Context, args ...string) (string, error) {
	h.mdadm = append(h.mdadm, strings.Join(args, " "))
	if strings.Join(args, " ") == "--assemble --scan" {
		h.assembled = true
	}
	if args[0] == "--detail" {
		return "MD_LEVEL=raid1\nMD_DEVICES=2\nMD_METADATA=1.2\nMD_UUID=0f1e2d3c:4b5a6978:8796a5b4:c3d2e1f0\nMD_NAME=any:0\n", nil
	}
	if args[0] == "--create" {
		if h.created == nil {
			h.created = map[string][]string{}
		}
		n, _ := strconv.Atoi(args[len(args)-3])
		h.created[args[1]] = args[len(args)-n:]
	}
	return "", nil
}
func (h *raidDeployHardware) AddPartition(disk string, n int, _, _ int64) (string, error) {
	return partitionPath(disk, n), nil
}
func (h *raidDeployHardware) MDDevices() (map[string][]string, error) {
	out := map[string][]string{}
	for md, m := range h.created {
		out[md] = m
	}
	if h.assembled {
		out["/dev/md126"] = []string{"/dev/vdc1"}
		out["/dev/md127"] = []string{"/dev/vdb1", "/dev/vda1"}
		if h.rootMembers != nil {
			out["/dev/md127"] = h.rootMembers
		}
	}
	return out, nil
}
func (h *raidDeployHardware) OpenShared(bd BlockDevice) (Device, error) { return h.Open(bd) }

// Open sizes the device from its file, as the kernel does (the md arrays
// are not among the listed disks).
func (h *raidDeployHardware) Open(bd BlockDevice) (Device, error) {
	st, err := os.Stat(h.paths[bd.Name])
	if err != nil {
		return nil, err
	}
	bd.Size = st.Size()
	return h.fileHardware.Open(bd)
}
func (h *raidDeployHardware) AddUEFIBootEntry(_ context.Context, bd BlockDevice, p UEFIPartition, loader string) error {
	h.entries = append(h.entries, fmt.Sprintf("%s %d %d %v %s", bd.Name, p.Number, p.StartLBA, p.GPT, loader))
	return nil
}

// softwareRAIDRootFixture is an agent on two holder disks laid out for a
// UEFI software RAID root, the array (/dev/md127) holding an image whose
// MBR has esp at 1 MiB; /dev/md0 is free for the ESP mirror.
func softwareRAIDRootFixture(t *testing.T, esp []byte) (*Agent, *fileHardware, *raidDeployHardware, map[string]any) {
	t.Helper()
	const holderSize, mdSize = 256 << 20, 96 << 20
	fh := newFileHardware(t, holderSize, holderSize, mdSize, 127<<20)
	fh.paths["/dev/md127"] = fh.paths["/dev/vdc"]
	fh.paths["/dev/md0"] = fh.paths["/dev/vdd"]
	fh.disks = fh.disks[:2]
	hw := &raidDeployHardware{fileHardware: fh}
	l, err := planSoftwareRAID([]raidVolume{{Level: "1", Root: true}}, fh.disks, "uefi")
	if err != nil {
		t.Fatal(err)
	}
	for h, d := range l.Holders {
		dev, _ := fh.Open(d)
		if err := writeRAIDPartitionTable(dev, l.Partitions[h]); err != nil {
			t.Fatal(err)
		}
		dev.Close()
	}
	md, _ := fh.Open(BlockDevice{Name: "/dev/md127"})
	tbl := &mbr.Table{LogicalSectorSize: 512, PhysicalSectorSize: 512, Partitions: []*mbr.Partition{{Type: mbr.EFISystem, Start: 2048, Size: uint32(len(esp) / 512)}}}
	if err := tbl.Write(&diskFile{Device: md}, mdSize); err != nil {
		t.Fatal(err)
	}
	if _, err := md.WriteAt(esp, 1<<20); err != nil {
		t.Fatal(err)
	}
	md.Close()

	a, _ := startAgent(t, newFakeAPI(t), hw, nil)
	node := map[string]any{"raid_config": map[string]any{"logical_disks": []any{map[string]any{
		"controller": "software", "raid_level": "1", "size_gb": "MAX", "is_root_volume": true, "physical_disks": []any{"/dev/vda1", "/dev/vdb1"}}}}}
	bd, err := a.rootDevice(context.Background(), node)
	if err != nil || bd.Name != "/dev/md127" || strings.Join(hw.mdadm, ";") != "--assemble --scan" {
		t.Fatalf("root device %+v %v, mdadm %v", bd, err, hw.mdadm)
	}
	root, _ := softwareRAIDRoot(node)
	return a, fh, hw, root
}

// Under secure boot the image's loader on a software RAID root is checked
// before any holder disk is changed: an unsigned one is refused, naming
// the file; shim with a signed GRUB passes.
func TestDeployOntoSoftwareRAIDRootUnderSecureBoot(t *testing.T) {
	a, _, hw, root := softwareRAIDRootFixture(t, secureBootESP(t, map[string]string{"/EFI/BOOT/BOOTX64.EFI": testFB}))
	_, err := a.installBootloaderOnRAID(context.Background(), root, "uefi", DefaultUEFILoader, true)
	if err == nil || !strings.Contains(err.Error(), `boot loader \EFI\BOOT\BOOTX64.EFI on /dev/md127`) || !strings.Contains(err.Error(), "is not signed") {
		t.Fatalf("unsigned loader on the RAID root: %v", err)
	}
	if got := strings.Join(hw.mdadm, ";"); got != "--assemble --scan" || len(hw.entries) != 0 {
		t.Fatalf("refused, yet mdadm %q and boot entries %v", got, hw.entries)
	}

	a, _, hw, root = softwareRAIDRootFixture(t, secureBootESP(t, map[string]string{"/EFI/BOOT/BOOTX64.EFI": testShim, "/EFI/BOOT/grubx64.efi": testGrub}))
	msg, err := a.installBootloaderOnRAID(context.Background(), root, "uefi", DefaultUEFILoader, true)
	if err != nil || !strings.Contains(fmt.Sprint(msg), "; secure boot: ") || len(hw.entries) != 2 {
		t.Fatalf("signed shim and GRUB on the RAID root: %v %v, entries %v", msg, err, hw.entries)
	}
}

// TestDeployOntoSoftwareRAIDRoot: with a software RAID root volume in
// raid_config, the root device is its md array (assembled when it is not
// running), and install_bootloader in UEFI mode adds an ESP from 1 MiB to
// the RAID partition on every holder (the gap create_configuration
// left), mirrors them with an md RAID-1 of metadata 1.0, writes the
// image's ESP (found inside the root array) onto it and wipes the image's
// own, with a boot entry for each holder, the first first in BootOrder.
// In BIOS mode on holders laid out for UEFI it refuses clearly; run again,
// it reuses what it made.
func TestDeployOntoSoftwareRAIDRoot(t *testing.T) {
	esp := bytes.Repeat([]byte("ESP!"), (8<<20)/4)
	esp[510], esp[511] = 0x55, 0xaa // a FAT boot sector's signature
	a, fh, hw, root := softwareRAIDRootFixture(t, esp)
	ctx := context.Background()
	if _, err := a.installBootloaderOnRAID(ctx, root, "bios", DefaultUEFILoader, false); err == nil || !strings.Contains(err.Error(), "the RAID was created for UEFI boot") {
		t.Fatalf("BIOS: %v", err)
	}
	msg, err := a.installBootloaderOnRAID(ctx, root, "uefi", DefaultUEFILoader, false)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{`/dev/vdb 2 2048 true \EFI\BOOT\BOOTX64.EFI`, `/dev/vda 2 2048 true \EFI\BOOT\BOOTX64.EFI`}
	if strings.Join(hw.entries, ";") != strings.Join(want, ";") {
		t.Fatalf("boot entries %v, want %v (%v)", hw.entries, want, msg)
	}
	wantMdadm := "--assemble --scan;--create /dev/md0 --force --run --metadata=1.0 --level 1 --name esp --raid-devices 2 /dev/vda2 /dev/vdb2"
	if got := strings.Join(hw.mdadm, ";"); got != wantMdadm {
		t.Fatalf("mdadm %s, want %s", got, wantMdadm)
	}
	for _, d := range fh.disks {
		dev, _ := fh.Open(d)
		g := readGPT(dev)
		dev.Close()
		var espPart, raidPart *gpt.Partition
		for _, p := range g.Partitions {
			switch p.Type {
			case gpt.EFISystemPartition:
				espPart = p
			case gpt.LinuxRAID:
				raidPart = p
			}
		}
		if espPart == nil || espPart.Index != 2 || espPart.Start != 2048 || raidPart == nil || espPart.End != raidPart.Start-1 || raidPart.Start != raidESPMiB*2048 {
			t.Fatalf("%s: GPT %+v", d.Name, g.Partitions)
		}
	}
	mirror, _ := fh.Open(BlockDevice{Name: "/dev/md0"})
	got := make([]byte, len(esp))
	_, _ = mirror.ReadAt(got, 0)
	mirror.Close()
	if !bytes.Equal(got, esp) {
		t.Fatal("the ESP mirror does not hold the image's ESP")
	}
	md, _ := fh.Open(BlockDevice{Name: "/dev/md127"})
	head := make([]byte, 4096)
	_, _ = md.ReadAt(head, 1<<20)
	md.Close()
	if !bytes.Equal(head, make([]byte, 4096)) {
		t.Fatal("the image's own ESP was not wiped")
	}
	// Again (a retried step): the ESPs and their mirror are reused, the
	// wiped image ESP not copied over the mirror.
	hw.entries = nil
	if _, err := a.installBootloaderOnRAID(ctx, root, "uefi", DefaultUEFILoader, false); err != nil || len(hw.entries) != 2 {
		t.Fatalf("again: %v %v", err, hw.entries)
	}
	if got := strings.Join(hw.mdadm, ";"); got != wantMdadm {
		t.Fatalf("mdadm again: %s", got)
	}
	mirror, _ = fh.Open(BlockDevice{Name: "/dev/md0"})
	_, _ = mirror.ReadAt(got, 0)
	mirror.Close()
	if !bytes.Equal(got, esp) {
		t.Fatal("the retry overwrote the ESP mirror")
	}
}

// TestDeployOntoSoftwareRAIDRootBIOS: in BIOS mode, on holders laid out
// by create_configuration for BIOS boot, install_bootloader puts boot.img
// in every holder's MBR pointing at the md core image in its BIOS boot
// partition, and after it the grub.cfg that reads the image's own GRUB
// configuration on the root array, named by its UUID; the image on the
// array is left as written.
func TestDeployOntoSoftwareRAIDRootBIOS(t *testing.T) {
	dir := grubImagesDir(t)
	const holderSize, mdSize = 256 << 20, 96 << 20
	fh := newFileHardware(t, holderSize, holderSize, mdSize)
	fh.paths["/dev/md127"] = fh.paths["/dev/vdc"]
	fh.disks = fh.disks[:2]
	hw := &raidDeployHardware{fileHardware: fh, rootMembers: []string{"/dev/vdb2", "/dev/vda2"}}
	l, err := planSoftwareRAID([]raidVolume{{Level: "1", Root: true}}, fh.disks, "bios")
	if err != nil {
		t.Fatal(err)
	}
	for h, d := range l.Holders {
		dev, _ := fh.Open(d)
		if err := writeRAIDPartitionTable(dev, l.Partitions[h]); err != nil {
			t.Fatal(err)
		}
		dev.Close()
	}
	md, _ := fh.Open(BlockDevice{Name: "/dev/md127"})
	tbl := &mbr.Table{LogicalSectorSize: 512, PhysicalSectorSize: 512, Partitions: []*mbr.Partition{
		{Type: mbr.Linux, Start: 2048, Size: 16384}, {Type: mbr.Linux, Start: 18432, Size: 16384}}}
	if err := tbl.Write(&diskFile{Device: md}, mdSize); err != nil {
		t.Fatal(err)
	}
	before := make([]byte, mdSize)
	_, _ = md.ReadAt(before, 0)
	md.Close()

	a, _ := startAgent(t, newFakeAPI(t), hw, func(cfg *Config) { cfg.GRUBDir = dir })
	ctx := context.Background()
	node := map[string]any{"raid_config": map[string]any{"logical_disks": []any{map[string]any{
		"controller": "software", "raid_level": "1", "size_gb": "MAX", "is_root_volume": true, "physical_disks": []any{"/dev/vda2", "/dev/vdb2"}}}}}
	root, _ := softwareRAIDRoot(node)
	msg, err := a.installBootloaderOnRAID(ctx, root, "bios", DefaultUEFILoader, false)
	if err != nil {
		t.Fatal(err)
	}
	const uuid = "0f1e2d3c4b5a69788796a5b4c3d2e1f0"
	if !strings.Contains(fmt.Sprint(msg), "/dev/vda, /dev/vdb") || !strings.Contains(fmt.Sprint(msg), "mduuid/"+uuid) {
		t.Fatalf("result %v", msg)
	}
	if got := strings.Join(hw.mdadm, ";"); got != "--assemble --scan;--detail --export /dev/md127" {
		t.Fatalf("mdadm %s", got)
	}
	core, _ := os.ReadFile(filepath.Join(dir, grub.CoreImageMD))
	for _, d := range fh.disks {
		dev, _ := fh.Open(d)
		sector0 := make([]byte, 512)
		area := make([]byte, (grub.MDConfigSector+grub.MDConfigSectors)*512)
		_, _ = dev.ReadAt(sector0, 0)
		_, _ = dev.ReadAt(area, 2048*512)
		g := readGPT(dev)
		dev.Close()
		if binary.LittleEndian.Uint64(sector0[0x5c:]) != 2048 || sector0[510] != 0x55 || sector0[511] != 0xaa {
			t.Errorf("%s: sector 0 does not load core.img from sector 2048 (the BIOS boot partition)", d.Name)
		}
		if g == nil || len(g.Partitions) < 2 {
			t.Fatalf("%s: the GPT was lost", d.Name)
		}
		if !bytes.Equal(area[1024:len(core)], core[1024:]) { // sectors 0 and 1 are patched (blocklist, parity size)
			t.Errorf("%s: the BIOS boot partition does not hold the md core image", d.Name)
		}
		cfg := string(bytes.TrimRight(area[grub.MDConfigSector*512:], "\n"))
		for _, want := range []string{"for part in msdos1 msdos2; do", "if [ -f (mduuid/" + uuid + ",$part)$cfg ]; then set root=\"mduuid/" + uuid + ",$part\"; configfile $cfg; fi", "/boot/grub/grub.cfg"} {
			if !strings.Contains(cfg, want) {
				t.Errorf("%s: grub.cfg lacks %q:\n%s", d.Name, want, cfg)
			}
		}
	}
	md, _ = fh.Open(BlockDevice{Name: "/dev/md127"})
	after := make([]byte, mdSize)
	_, _ = md.ReadAt(after, 0)
	md.Close()
	if !bytes.Equal(before, after) {
		t.Error("install_bootloader changed the image on the root array")
	}
}

func TestPartitionDiskAndRootArray(t *testing.T) {
	for part, want := range map[string]string{"/dev/vda2": "/dev/vda", "/dev/nvme0n1p2": "/dev/nvme0n1", "/dev/loop3p1": "/dev/loop3", "/dev/sdb10": "/dev/sdb"} {
		if got := partitionDisk(part); got != want {
			t.Errorf("partitionDisk(%s) = %s, want %s", part, got, want)
		}
	}
	mds := map[string][]string{"/dev/md0": {"/dev/sda3", "/dev/sdb3"}, "/dev/md127": {"/dev/sdb2"}}
	if got := findRootArray(mds, []string{"/dev/sda2", "/dev/sdb2"}); got != "/dev/md127" {
		t.Errorf("a degraded root array: %q", got)
	}
	if got := findRootArray(mds, []string{"/dev/sdc2"}); got != "" {
		t.Errorf("no root array: %q", got)
	}
	if _, ok := softwareRAIDRoot(map[string]any{"raid_config": map[string]any{"logical_disks": []any{map[string]any{"controller": "RAID.1", "is_root_volume": true}}}}); ok {
		t.Error("a hardware RAID root volume taken as software RAID")
	}
}

// TestApplyConfigurationDeployStep: raid.apply_configuration is a deploy
// step of a node on raid_interface agent only; it builds its raid_config
// argument (not target_raid_config) and answers with the raid_config to
// record; without raid_config it fails clearly.
func TestApplyConfigurationDeployStep(t *testing.T) {
	fh := newFileHardware(t, 256<<20, 256<<20)
	hw := &raidDeployHardware{fileHardware: fh}
	_, c := startAgent(t, newFakeAPI(t), hw, nil)
	ctx := context.Background()
	node := map[string]any{"uuid": "n", "raid_interface": "agent", "properties": map[string]any{"capabilities": "boot_mode:uefi"},
		"target_raid_config": map[string]any{"logical_disks": []any{map[string]any{"controller": "software", "raid_level": "1", "size_gb": 1, "volume_name": "not-this"}}}}
	list, err := c.GetDeploySteps(ctx, node, nil)
	if err != nil {
		t.Fatal(err)
	}
	var offered bool
	for _, s := range list.Steps {
		offered = offered || s.Interface == "raid" && s.Step == "apply_configuration" && s.Priority == 0
	}
	if !offered {
		t.Fatalf("deploy steps of a raid_interface agent node: %+v", list.Steps)
	}
	run := func(node map[string]any, args map[string]any) (client.CommandResult, error) {
		r, err := c.ExecuteDeployStep(ctx, client.Step{Interface: "raid", Step: "apply_configuration", Args: args}, node, nil)
		if err == nil && !r.Done() {
			r, err = c.WaitCommand(ctx, r.ID, 10*time.Millisecond, nil)
		}
		if err == nil {
			err = r.Err()
		}
		return r, err
	}
	cfg := map[string]any{"logical_disks": []any{map[string]any{"controller": "software", "raid_level": "1", "size_gb": "MAX", "is_root_volume": true, "volume_name": "root"}}}
	r, err := run(node, map[string]any{"raid_config": cfg, "delete_existing": false})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(r.CommandResult), `"deploy_result":{"logical_disks":[{`) || !strings.Contains(string(r.CommandResult), `"physical_disks":["/dev/vda1","/dev/vdb1"]`) ||
		!strings.Contains(string(r.CommandResult), `"volume_name":"root"`) {
		t.Fatalf("result %s", r.CommandResult)
	}
	if got := strings.Join(hw.mdadm, ";"); got != "--create /dev/md0 --force --run --metadata=1 --level 1 --name root --raid-devices 2 /dev/vda1 /dev/vdb1" {
		t.Fatalf("mdadm %s", got)
	}
	if _, err := run(node, map[string]any{}); err == nil || !strings.Contains(err.Error(), "needs the argument raid_config") {
		t.Fatalf("without raid_config: %v", err)
	}
	node["raid_interface"] = "redfish"
	if _, err := run(node, map[string]any{"raid_config": cfg}); err == nil || !strings.Contains(err.Error(), "Could not find method: apply_configuration") {
		t.Fatalf("on raid_interface redfish: %v", err)
	}
}
