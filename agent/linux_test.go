//go:build linux

package agent

import (
	"bytes"
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"testing"
	"unicode/utf16"
)

// fakeSys lays out a /sys tree the way the kernel does: /sys/block/<name>
// are symlinks into /sys/devices/..., and SCSI disks' "device" links to the
// directory named after their HCTL.
func fakeSys(t *testing.T) string {
	root := t.TempDir()
	type dev struct {
		name, devPath, scsiDev string
		files, devFiles        map[string]string
	}
	write := func(dir string, files map[string]string) {
		for f, v := range files {
			p := filepath.Join(dir, f)
			os.MkdirAll(filepath.Dir(p), 0o755)
			os.WriteFile(p, []byte(v+"\n"), 0o644)
		}
	}
	for _, d := range []dev{
		{name: "vda", devPath: "devices/pci0000:00/0000:00:04.0/virtio1/block/vda", files: map[string]string{"size": "41943040", "serial": "VIRT-1", "queue/rotational": "1", "removable": "0", "ro": "0"}},
		{name: "sda", devPath: "devices/pci0000:00/0000:00:05.0/virtio2/host0/target0:0:1/0:0:1:0/block/sda", scsiDev: "devices/pci0000:00/0000:00:05.0/virtio2/host0/target0:0:1/0:0:1:0",
			files: map[string]string{"size": "209715200", "queue/rotational": "0"}, devFiles: map[string]string{"model": "QEMU HARDDISK", "vendor": "QEMU", "wwid": "naa.5000c500a1b2c3d4", "type": "0"}},
		{name: "sr0", devPath: "devices/pci0000:00/0000:00:01.1/ata2/host1/target1:0:0/1:0:0:0/block/sr0", scsiDev: "devices/pci0000:00/0000:00:01.1/ata2/host1/target1:0:0/1:0:0:0",
			files: map[string]string{"size": "2097152"}, devFiles: map[string]string{"type": "5"}},
		{name: "loop0", devPath: "devices/virtual/block/loop0", files: map[string]string{"size": "1000"}},
		{name: "nvme0n1", devPath: "devices/pci0000:00/0000:00:06.0/nvme/nvme0/nvme0n1", files: map[string]string{"size": "20971520", "wwid": "eui.0025388b71b0a1c2", "serial": "NVME1"}},
	} {
		dir := filepath.Join(root, d.devPath)
		os.MkdirAll(dir, 0o755)
		write(dir, d.files)
		if d.scsiDev != "" {
			write(filepath.Join(root, d.scsiDev), d.devFiles)
			os.Symlink(filepath.Join(root, d.scsiDev), filepath.Join(dir, "device"))
		}
		os.MkdirAll(filepath.Join(root, "block"), 0o755)
		os.Symlink(filepath.Join("..", d.devPath), filepath.Join(root, "block", d.name))
	}
	return root
}

func TestLinuxBlockDevicesAndHints(t *testing.T) {
	hw := &LinuxHardware{SysRoot: fakeSys(t), DevRoot: "/dev"}
	devs, err := hw.BlockDevices(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	by := map[string]BlockDevice{}
	for _, d := range devs {
		by[d.Name] = d
	}
	vda, sda, sr0, nvme := by["/dev/vda"], by["/dev/sda"], by["/dev/sr0"], by["/dev/nvme0n1"]
	if vda.Size != 20*gib || vda.Serial != "VIRT-1" || !vda.Rotational || vda.ByPath != "/dev/disk/by-path/pci-0000:00:04.0" || vda.Kind != "disk" {
		t.Fatalf("vda %+v", vda)
	}
	if sda.Size != 100*gib || sda.WWN != "0x5000c500a1b2c3d4" || sda.HCTL != "0:0:1:0" || sda.Model != "QEMU HARDDISK" || sda.ByPath != "/dev/disk/by-path/pci-0000:00:05.0-scsi-0:0:1:0" {
		t.Fatalf("sda %+v", sda)
	}
	if sr0.Kind != "cdrom" || by["/dev/loop0"].Kind != "loop" {
		t.Fatalf("sr0 %+v loop0 %+v", sr0, by["/dev/loop0"])
	}
	if nvme.ByPath != "/dev/disk/by-path/pci-0000:00:06.0-nvme-1" || nvme.WWN != "0x0025388b71b0a1c2" {
		t.Fatalf("nvme %+v", nvme)
	}
	for _, tc := range []struct {
		hints map[string]any
		want  string
	}{
		{nil, "/dev/nvme0n1"}, // smallest disk of at least 4 GiB; never the CD
		{map[string]any{"wwn": "0x5000c500a1b2c3d4"}, "/dev/sda"},
		{map[string]any{"by_path": "/dev/disk/by-path/pci-0000:00:04.0"}, "/dev/vda"},
		{map[string]any{"hctl": "0:0:1:0"}, "/dev/sda"},
		{map[string]any{"serial": "NVME1"}, "/dev/nvme0n1"},
		{map[string]any{"rotational": true}, "/dev/vda"},
	} {
		d, err := chooseRootDevice(devs, tc.hints, DefaultMinRootDiskSize)
		if err != nil || d.Name != tc.want {
			t.Errorf("hints %v: got %s %v, want %s", tc.hints, d.Name, err, tc.want)
		}
	}
}

func TestEFILoadOption(t *testing.T) {
	part := UEFIPartition{Number: 1, StartLBA: 2048, SizeLBA: 6144, GPT: true, PartGUID: "12345678-9ABC-DEF0-1122-334455667788"}
	b, err := efiLoadOption("ironflow vda", part, DefaultUEFILoader)
	if err != nil {
		t.Fatal(err)
	}
	if binary.LittleEndian.Uint32(b) != 1 {
		t.Fatal("load option not active")
	}
	dpLen := int(binary.LittleEndian.Uint16(b[4:]))
	desc := utf16z("ironflow vda")
	if !bytes.Equal(b[6:6+len(desc)], desc) {
		t.Fatal("description")
	}
	dp := b[6+len(desc):]
	if len(dp) != dpLen {
		t.Fatalf("device path length %d, header says %d", len(dp), dpLen)
	}
	if dp[0] != 4 || dp[1] != 1 || binary.LittleEndian.Uint32(dp[4:]) != 1 || binary.LittleEndian.Uint64(dp[8:]) != 2048 || binary.LittleEndian.Uint64(dp[16:]) != 6144 {
		t.Fatalf("hard drive node % x", dp[:42])
	}
	// EFI stores a GUID's first three fields little-endian.
	if !bytes.Equal(dp[24:40], []byte{0x78, 0x56, 0x34, 0x12, 0xbc, 0x9a, 0xf0, 0xde, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88}) || dp[40] != 2 || dp[41] != 2 {
		t.Fatalf("GPT signature % x", dp[24:42])
	}
	fp := dp[42:]
	if fp[0] != 4 || fp[1] != 4 {
		t.Fatal("file path node")
	}
	n := int(binary.LittleEndian.Uint16(fp[2:]))
	var u []uint16
	for i := 4; i+1 < n-2; i += 2 {
		u = append(u, binary.LittleEndian.Uint16(fp[i:]))
	}
	if string(utf16.Decode(u)) != DefaultUEFILoader {
		t.Fatalf("loader path %q", string(utf16.Decode(u)))
	}
	if !bytes.Equal(fp[n:], []byte{0x7f, 0xff, 0x04, 0x00}) {
		t.Fatal("end node")
	}
}
