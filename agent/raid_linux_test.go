//go:build linux

package agent

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/ironflow/ironflow/agent/client"
)

// mdHardware is the machine's mdadm and kernel with loop devices as its
// disks.
type mdHardware struct {
	*fileHardware
	*LinuxHardware
	disks   []BlockDevice
	backing map[string]string // disk → its image file
	parts   []string          // partition loop devices made
}

// PartitionDevice: the test machine's kernel may lack GPT support, so a
// partition is a loop device over the disk's image at the partition's
// extent, read from the GPT the step wrote.
func (h *mdHardware) PartitionDevice(disk string, n int) (string, error) {
	dev, err := h.LinuxHardware.Open(BlockDevice{Name: disk})
	if err != nil {
		return "", err
	}
	tbl := readGPT(dev)
	dev.Close()
	if tbl == nil {
		return "", fmt.Errorf("no GPT on %s", disk)
	}
	for _, p := range tbl.Partitions {
		if p.Index == n {
			out, err := exec.Command("losetup", "--find", "--show", "-o", fmt.Sprint(p.Start*sectorSize),
				"--sizelimit", fmt.Sprint((p.End-p.Start+1)*sectorSize), h.backing[disk]).CombinedOutput()
			if err != nil {
				return "", fmt.Errorf("losetup: %w: %s", err, out)
			}
			part := strings.TrimSpace(string(out))
			h.parts = append(h.parts, part)
			return part, nil
		}
	}
	return "", fmt.Errorf("no partition %d on %s", n, disk)
}

func (h *mdHardware) BlockDevices(context.Context) ([]BlockDevice, error) { return h.disks, nil }
func (h *mdHardware) Open(bd BlockDevice) (Device, error)                 { return h.LinuxHardware.Open(bd) }
func (h *mdHardware) Inventory(ctx context.Context) (client.Inventory, error) {
	return h.fileHardware.Inventory(ctx)
}
func (h *mdHardware) Power(ctx context.Context, a PowerAction) error {
	return h.fileHardware.Power(ctx, a)
}
func (h *mdHardware) SyncAll() error { return nil }
func (h *mdHardware) AddUEFIBootEntry(context.Context, BlockDevice, UEFIPartition, string) error {
	return ErrNotUEFI
}

// newPartLoopDevice is a loop device over a new image file, as a disk,
// whose partition table the kernel re-reads (losetup -P).
func newPartLoopDevice(t *testing.T, size int64) (dev, img string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("SKIPPED LOUDLY: loop devices and md arrays need root (CI runs as root)")
	}
	if _, err := exec.LookPath("mdadm"); err != nil {
		t.Skip("SKIPPED LOUDLY: no mdadm (scripts/install-deps.sh installs it)")
	}
	if _, err := os.Stat("/proc/mdstat"); err != nil {
		if exec.Command("modprobe", "md_mod").Run() != nil {
			t.Skip("SKIPPED LOUDLY: this kernel has no md driver (no /proc/mdstat, modprobe md_mod failed); agent/ramdisk's QEMU test runs the RAID steps under the ramdisk's kernel")
		}
	}
	img = t.TempDir() + "/disk.img"
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, size); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("losetup", "--find", "--show", "-P", img).Output()
	if err != nil {
		t.Skipf("SKIPPED LOUDLY: losetup failed (no loop device support here): %v", err)
	}
	dev = strings.TrimSpace(string(out))
	t.Cleanup(func() { exec.Command("losetup", "-d", dev).Run() })
	return dev, img
}

func runRAIDStep(t *testing.T, c *client.Client, step string, node map[string]any) (map[string]any, error) {
	t.Helper()
	ctx := context.Background()
	r, err := c.ExecuteCleanStep(ctx, client.Step{Step: step, Interface: "raid"}, node, nil)
	if err == nil {
		r, err = c.WaitCommand(ctx, r.ID, 50*time.Millisecond, nil)
	}
	if err != nil {
		return nil, err
	}
	var body struct {
		Result map[string]any `json:"clean_result"`
	}
	if err := json.Unmarshal(r.CommandResult, &body); err != nil {
		t.Fatal(err)
	}
	return body.Result, nil
}

// TestSoftwareRAIDOnLoopDevices: raid.create_configuration makes a RAID-1
// md array over a partition of each of two disks (after a BIOS boot
// partition), data written to the array is on both members, and
// raid.delete_configuration stops it and leaves the disks without
// partitions or md superblocks.
func TestSoftwareRAIDOnLoopDevices(t *testing.T) {
	const size = 64 << 20
	a, aImg := newPartLoopDevice(t, size)
	b, bImg := newPartLoopDevice(t, size)
	hw := &mdHardware{fileHardware: newFileHardware(t), LinuxHardware: &LinuxHardware{},
		disks:   []BlockDevice{{Name: a, Size: size, Kind: "disk"}, {Name: b, Size: size, Kind: "disk"}},
		backing: map[string]string{a: aImg, b: bImg}}
	t.Cleanup(func() {
		exec.Command("mdadm", "--stop", "/dev/md0").Run()
		for _, p := range hw.parts {
			exec.Command("losetup", "-d", p).Run()
		}
	})
	api := newFakeAPI(t)
	_, c := startAgent(t, api, hw, nil)
	node := map[string]any{"uuid": "5b1d4c2e-93a0-4f7e-8d61-2c0f7a9e3b15", "raid_interface": "agent",
		"target_raid_config": map[string]any{"logical_disks": []any{
			map[string]any{"controller": "software", "raid_level": "1", "size_gb": "MAX", "is_root_volume": true}}}}
	// An array left from an earlier test run would hold md0.
	if _, err := os.Stat("/dev/md0"); err == nil {
		t.Skip("SKIPPED LOUDLY: /dev/md0 exists on this machine; the test would take it over")
	}
	res, err := runRAIDStep(t, c, "create_configuration", node)
	if err != nil {
		t.Fatal(err)
	}
	lds, _ := res["logical_disks"].([]any)
	if len(lds) != 1 {
		t.Fatalf("result %v", res)
	}
	ld := lds[0].(map[string]any)
	members, _ := ld["physical_disks"].([]any)
	if ld["raid_level"] != "1" || ld["controller"] != "software" || len(members) != 2 || members[0] != hw.parts[0] || members[1] != hw.parts[1] {
		t.Fatalf("raid_config %v", ld)
	}
	detail, err := exec.Command("mdadm", "--detail", "/dev/md0").CombinedOutput()
	if err != nil || !strings.Contains(string(detail), "Raid Level : raid1") || !strings.Contains(string(detail), "Raid Devices : 2") {
		t.Fatalf("mdadm --detail: %v\n%s", err, detail)
	}
	// Written through the array, found on each member (metadata 1.2 puts
	// the data after the superblock, at the member's data offset).
	mark := bytes.Repeat([]byte("ironflow-raid1!"), 100)
	md, err := os.OpenFile("/dev/md0", os.O_RDWR|os.O_SYNC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := md.WriteAt(mark, 0); err != nil {
		t.Fatal(err)
	}
	md.Close()
	for _, m := range members {
		raw, err := os.ReadFile(m.(string))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(raw, mark) {
			t.Errorf("member %s does not hold the data written to md0", m)
		}
	}
	// The BIOS boot partition is there for GRUB on each disk.
	dev, _ := hw.Open(BlockDevice{Name: a, Size: size})
	tbl := readGPT(dev)
	dev.Close()
	if tbl == nil || len(tbl.Partitions) < 2 || !strings.EqualFold(string(tbl.Partitions[0].Type), "21686148-6449-6E6F-744E-656564454649") {
		t.Fatalf("GPT of %s: %+v", a, tbl)
	}

	if _, err := runRAIDStep(t, c, "delete_configuration", node); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat("/sys/block/md0/md"); err == nil {
		t.Fatal("md0 still running after delete_configuration")
	}
	for _, d := range []string{a, b} {
		dev, _ := hw.Open(BlockDevice{Name: d, Size: size})
		tbl := readGPT(dev)
		dev.Close()
		if tbl != nil {
			t.Errorf("%s still has a GPT after delete_configuration", d)
		}
	}
	for _, p := range hw.parts {
		if out, err := exec.Command("mdadm", "--examine", p).CombinedOutput(); err == nil {
			t.Errorf("member %s still has an md superblock: %s", p, out)
		}
	}
}
