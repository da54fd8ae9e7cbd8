//go:build linux

package agent

import (
	"context"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/ironflow/ironflow/agent/client"
)

// efiHardware is file disks plus LinuxHardware's UEFI variables and pstore
// under a fake /sys (efivarfs and pstore as plain directories).
type efiHardware struct {
	*fileHardware
	*LinuxHardware
}

func (h efiHardware) BlockDevices(ctx context.Context) ([]BlockDevice, error) {
	return h.fileHardware.BlockDevices(ctx)
}
func (h efiHardware) Open(bd BlockDevice) (Device, error) { return h.fileHardware.Open(bd) }
func (h efiHardware) Power(ctx context.Context, a PowerAction) error {
	return h.fileHardware.Power(ctx, a)
}
func (h efiHardware) SyncAll() error { return nil }
func (h efiHardware) AddUEFIBootEntry(ctx context.Context, bd BlockDevice, p UEFIPartition, l string) error {
	return h.LinuxHardware.AddUEFIBootEntry(ctx, bd, p, l)
}
func (h efiHardware) Inventory(ctx context.Context) (client.Inventory, error) {
	return h.fileHardware.Inventory(ctx)
}

func TestCleanUEFINVRAM(t *testing.T) {
	sys := t.TempDir()
	vars := filepath.Join(sys, "firmware", "efi", "efivars")
	os.MkdirAll(vars, 0o755)
	lh := &LinuxHardware{SysRoot: sys}
	ctx := context.Background()
	part := UEFIPartition{Number: 1, StartLBA: 2048, SizeLBA: 1024, GPT: true, PartGUID: "0fc63daf-8483-4772-8e79-3d69d8477de4"}
	// Boot0000: the firmware's own entry; then two that deploys added.
	fw, _ := efiLoadOption("UEFI QEMU HARDDISK", part, `\EFI\BOOT\BOOTX64.EFI`)
	if err := writeEFIVar(filepath.Join(vars, "Boot0000-"+efiGlobalGUID), fw); err != nil {
		t.Fatal(err)
	}
	writeEFIVar(filepath.Join(vars, "BootOrder-"+efiGlobalGUID), []byte{0, 0})
	for _, loader := range []string{`\EFI\ubuntu\shimx64.efi`, `\EFI\centos\grubx64.efi`} {
		if err := lh.AddUEFIBootEntry(ctx, BlockDevice{Name: "/dev/vda"}, part, loader); err != nil {
			t.Fatal(err)
		}
	}
	entries, err := lh.UEFIBootEntries(ctx)
	if err != nil || len(entries) != 3 || entries[1].Description != "ironflow vda" ||
		!strings.Contains(entries[1].DevicePath, `File(\EFI\ubuntu\shimx64.efi)`) || !strings.HasPrefix(entries[1].DevicePath, "HD(1,GPT,0fc63daf-8483-4772-8e79-3d69d8477de4)") {
		t.Fatalf("entries %+v %v", entries, err)
	}
	api := newFakeAPI(t)
	_, c := startAgent(t, api, efiHardware{newFileHardware(t, 8<<20), lh}, nil)
	// Remove what matches a device path pattern only.
	res, err := runStep(t, c, "clean_uefi_nvram", map[string]any{"match_patterns": []any{`(?i)centos`}})
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := res["removed"].([]any); len(r) != 1 || r[0] != "Boot0002 ironflow vda" {
		t.Fatalf("removed %v", res)
	}
	order, _ := os.ReadFile(filepath.Join(vars, "BootOrder-"+efiGlobalGUID))
	if got := order[4:]; !reflect.DeepEqual(got, []byte{1, 0, 0, 0}) {
		t.Fatalf("BootOrder % x", got)
	}
	// The default patterns remove ironflow's entries, not the firmware's.
	if _, err := runStep(t, c, "clean_uefi_nvram", nil); err != nil {
		t.Fatal(err)
	}
	entries, _ = lh.UEFIBootEntries(ctx)
	if len(entries) != 1 || entries[0].Description != "UEFI QEMU HARDDISK" {
		t.Fatalf("left %+v", entries)
	}
	order, _ = os.ReadFile(filepath.Join(vars, "BootOrder-"+efiGlobalGUID))
	if binary.LittleEndian.Uint16(order[4:]) != 0 || len(order) != 6 {
		t.Fatalf("BootOrder % x", order)
	}
	if _, err := runStep(t, c, "clean_uefi_nvram", map[string]any{"match_patterns": "("}); err == nil || !strings.Contains(err.Error(), "match_patterns") {
		t.Fatalf("bad pattern: %v", err)
	}
	// A BIOS machine: nothing to clean, and it says so.
	bios := &LinuxHardware{SysRoot: t.TempDir()}
	_, c2 := startAgent(t, newFakeAPI(t), efiHardware{newFileHardware(t, 8<<20), bios}, nil)
	res, err = runStep(t, c2, "clean_uefi_nvram", nil)
	if err != nil || !strings.Contains(fmt.Sprint(res["message"]), "BIOS") {
		t.Fatalf("BIOS: %v %v", res, err)
	}
}

func TestErasePstore(t *testing.T) {
	sys := t.TempDir()
	dir := filepath.Join(sys, "fs", "pstore")
	os.MkdirAll(dir, 0o755)
	for _, n := range []string{"dmesg-efi-170000000001", "dmesg-efi-170000000002"} {
		os.WriteFile(filepath.Join(dir, n), []byte("Oops"), 0o600)
	}
	api := newFakeAPI(t)
	_, c := startAgent(t, api, efiHardware{newFileHardware(t, 8<<20), &LinuxHardware{SysRoot: sys}}, nil)
	res, err := runStep(t, c, "erase_pstore", nil)
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := res["removed"].([]any); len(r) != 2 {
		t.Fatalf("removed %v", res)
	}
	if left, _ := os.ReadDir(dir); len(left) != 0 {
		t.Fatalf("pstore still holds %d records", len(left))
	}
}
