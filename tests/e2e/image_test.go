package e2e

import (
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ironflow/ironflow/embedded"
)

func TestBuildTestImageLayout(t *testing.T) {
	path, sum, err := BuildTestImage(DefaultCacheDir())
	if err != nil {
		t.Fatal(err)
	}
	got, err := fileSHA256(path)
	if err != nil {
		t.Fatal(err)
	}
	if got != sum {
		t.Fatalf("image %s: sha256 %s, builder said %s", path, got, sum)
	}
	again, sum2, err := BuildTestImage(DefaultCacheDir())
	if err != nil || again != path || sum2 != sum {
		t.Fatalf("second build: %s %s %v, want the cached %s %s", again, sum2, err, path, sum)
	}
	disk, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(disk) != imageSize {
		t.Fatalf("image is %d bytes, want %d", len(disk), imageSize)
	}
	mbr, _ := os.ReadFile(SyslinuxMBR)
	if string(disk[:440]) != string(mbr[:440]) {
		t.Error("the first 440 bytes are not syslinux's mbr.bin")
	}
	if disk[510] != 0x55 || disk[511] != 0xaa {
		t.Error("no MBR signature")
	}
	p := disk[446:462]
	if p[0] != 0x80 || p[4] != 0xef {
		t.Errorf("partition 1: boot flag %#x type %#x, want 0x80 and 0xef", p[0], p[4])
	}
	if start := binary.LittleEndian.Uint32(p[8:]); start != partOffset/512 {
		t.Errorf("partition 1 starts at sector %d, want %d", start, partOffset/512)
	}
	// FAT16 boot sector of the partition, with syslinux's boot code in it.
	fat := disk[partOffset : partOffset+512]
	if string(fat[54:59]) != "FAT16" {
		t.Errorf("partition 1 file system type %q, want FAT16", fat[54:62])
	}
	if !strings.Contains(string(fat), "SYSLINUX") {
		t.Error("partition 1's boot sector has no syslinux boot code")
	}
}

// TestTestImageBootsFromDisk boots the test image straight from its disk,
// under both firmwares, with and without a config drive, and reads the
// markers its init prints.
func TestTestImageBootsFromDisk(t *testing.T) {
	RequireQEMU(t)
	img, _, err := BuildTestImage(DefaultCacheDir())
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name        string
		firmware    string
		configDrive bool
		want        []string
	}{
		{"bios-config-drive", FirmwareBIOS, true, []string{
			"IRONFLOW-E2E booted-from-disk firmware=bios",
			"IRONFLOW-E2E hostname=e2e-direct key=ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIE2E e2e",
		}},
		{"uefi-config-drive", FirmwareUEFI, true, []string{
			"IRONFLOW-E2E booted-from-disk firmware=uefi",
			"IRONFLOW-E2E hostname=e2e-direct key=ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIE2E e2e",
		}},
		{"bios-no-config-drive", FirmwareBIOS, false, []string{
			"IRONFLOW-E2E booted-from-disk firmware=bios",
			"IRONFLOW-E2E no-config-drive",
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			disks := []string{img}
			if tc.configDrive {
				cd := filepath.Join(dir, "config-drive.iso")
				err := BuildConfigDrive(cd, map[string]any{
					"uuid":        "0b7b6a52-3f5c-4d7e-9c11-2a64a1f0e2e0",
					"hostname":    "e2e-direct",
					"public_keys": map[string]string{"0": "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIE2E e2e"},
				})
				if err != nil {
					t.Fatal(err)
				}
				disks = append(disks, cd)
			}
			vm := StartQEMU(t, QEMUConfig{Name: "direct-" + tc.name, Firmware: tc.firmware, Disks: disks, Dir: dir, Snapshot: true})
			ctx, cancel := context.WithTimeout(context.Background(), DefaultBootTimeout)
			defer cancel()
			if _, err := WaitSerial(ctx, vm.SerialLog, "IRONFLOW-E2E done", vm.Exited()); err != nil {
				t.Fatal(err)
			}
			for _, w := range tc.want {
				if _, ok := findLine(vm.SerialLog, w); !ok {
					t.Errorf("serial console lacks %q; tail:\n%s", w, embedded.Tail(vm.SerialLog, 1500))
				}
			}
		})
	}
}
