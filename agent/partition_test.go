package agent

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/diskfs/go-diskfs/filesystem/fat32"
	"github.com/diskfs/go-diskfs/partition/gpt"

	"github.com/ironflow/ironflow/agent/client"
	"github.com/ironflow/ironflow/configdrive"
)

// sfdiskTable is sfdisk --json's view of a disk, the independent parser of
// the tables the agent writes.
type sfdiskTable struct {
	PartitionTable struct {
		Label      string `json:"label"`
		Partitions []struct {
			Node  string `json:"node"`
			Start int64  `json:"start"`
			Size  int64  `json:"size"`
			Type  string `json:"type"`
			Name  string `json:"name"`
			UUID  string `json:"uuid"`
		} `json:"partitions"`
	} `json:"partitiontable"`
}

func sfdisk(t *testing.T, path string) sfdiskTable {
	t.Helper()
	if _, err := exec.LookPath("sfdisk"); err != nil {
		t.Skip("SKIP: sfdisk (util-linux) is not installed")
	}
	out, err := exec.Command("sfdisk", "--json", path).Output()
	if err != nil {
		t.Fatalf("sfdisk --json: %v", err)
	}
	var tbl sfdiskTable
	if err := json.Unmarshal(out, &tbl); err != nil {
		t.Fatalf("sfdisk --json: %v: %s", err, out)
	}
	return tbl
}

// blkidType is what blkid finds at a byte range of a file ("swap", "vfat").
func blkidType(t *testing.T, path string, off, size int64) string {
	t.Helper()
	out, _ := exec.Command("blkid", "--probe", "--offset", strconv.FormatInt(off, 10), "--size", strconv.FormatInt(size, 10), "-o", "value", "-s", "TYPE", path).Output()
	return strings.TrimSpace(string(out))
}

func TestWritePartitionImageLayout(t *testing.T) {
	if _, err := exec.LookPath("blkid"); err != nil {
		t.Skip("SKIP: blkid (util-linux) is not installed")
	}
	root := testImage(3 << 20)
	iso := append([]byte("CD001 config-2 "), bytes.Repeat([]byte{7}, 300<<10)...)
	const diskSize = 4 << 30
	for _, tc := range []struct {
		name      string
		bootMode  string
		label     string
		types     []string // sfdisk's partition types, in order
		roles     []string
		ephemeral bool
	}{
		{"uefi gpt", "uefi", "gpt", []string{"C12A7328-F81F-11D2-BA4B-00A0C93EC93B", "0FC63DAF-8483-4772-8E79-3D69D8477DE4", "0657FD6D-A4AB-43C4-84E5-0933C84B4F4F", "0FC63DAF-8483-4772-8E79-3D69D8477DE4", "0FC63DAF-8483-4772-8E79-3D69D8477DE4"},
			[]string{partNameESP, partNameEphemeral, partNameSwap, configdrive.Label, partNameRoot}, true},
		{"bios gpt", "bios", "gpt", []string{"21686148-6449-6E6F-744E-656564454649", "BC13C2FF-59E6-4262-A352-B275FD6F7172", "0657FD6D-A4AB-43C4-84E5-0933C84B4F4F", "0FC63DAF-8483-4772-8E79-3D69D8477DE4", "0FC63DAF-8483-4772-8E79-3D69D8477DE4"},
			[]string{partNameBIOSBoot, partNameBoot, partNameSwap, configdrive.Label, partNameRoot}, false},
		{"bios msdos", "bios", "", []string{"ea", "82", "83", "83"}, []string{partNameBoot, partNameSwap, configdrive.Label, partNameRoot}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := newImageServer(t, map[string][]byte{"root.img": root})
			hw := newFileHardware(t, diskSize)
			_, c := startAgent(t, newFakeAPI(t), hw, nil)
			inst := map[string]any{"image_type": "partition", "image_source": srv.URL + "/root.img", "image_checksum": sha256hex(root),
				"root_gb": 1, "swap_mb": "64", "configdrive": gzb64(iso), "capabilities": "boot_mode:" + tc.bootMode}
			if tc.label != "" {
				inst["capabilities"] = inst["capabilities"].(string) + ",disk_label:" + tc.label
			}
			if tc.ephemeral {
				inst["ephemeral_gb"], inst["ephemeral_format"] = 1, "vfat"
			}
			r, err := runWriteImage(t, c, nil, map[string]any{"instance_info": inst})
			if err != nil {
				t.Fatal(err)
			}
			var res struct {
				DeployResult struct {
					RootUUID string `json:"root uuid"`
				} `json:"deploy_result"`
			}
			if err := json.Unmarshal(r.CommandResult, &res); err != nil {
				t.Fatal(err)
			}
			tbl := sfdisk(t, hw.path(0))
			want := map[string]string{"gpt": "gpt", "": "dos"}[tc.label]
			if tbl.PartitionTable.Label != want {
				t.Fatalf("table %q, want %q", tbl.PartitionTable.Label, want)
			}
			got := tbl.PartitionTable.Partitions
			if len(got) != len(tc.types) {
				t.Fatalf("%d partitions, want %d: %+v", len(got), len(tc.types), got)
			}
			sizes := map[string]int64{partNameESP: efiSystemPartitionMB << 20, partNameBIOSBoot: 1 << 20, partNameBoot: 512 << 20, partNameEphemeral: 1 << 30,
				partNameSwap: 64 << 20, configdrive.Label: configDrivePartSize, partNameRoot: 1 << 30}
			at := map[string]int64{}
			for i, p := range got {
				if !strings.EqualFold(p.Type, tc.types[i]) {
					t.Errorf("partition %d type %s, want %s", i+1, p.Type, tc.types[i])
				}
				if p.Size*512 != sizes[tc.roles[i]] {
					t.Errorf("partition %d (%s) is %d bytes, want %d", i+1, tc.roles[i], p.Size*512, sizes[tc.roles[i]])
				}
				if p.Start*512%(1<<20) != 0 {
					t.Errorf("partition %d not aligned to 1 MiB", i+1)
				}
				at[tc.roles[i]] = p.Start * 512
			}
			if tc.label == "gpt" && !strings.EqualFold(got[len(got)-1].UUID, res.DeployResult.RootUUID) {
				t.Errorf("root partition GUID %s, result says %s", got[len(got)-1].UUID, res.DeployResult.RootUUID)
			}
			f, _ := os.Open(hw.path(0))
			defer f.Close()
			b := make([]byte, len(root))
			f.ReadAt(b, at[partNameRoot])
			if sha256hex(b) != sha256hex(root) {
				t.Error("the root partition does not hold the image")
			}
			b = make([]byte, len(iso))
			f.ReadAt(b, at[configdrive.Label])
			if !bytes.Equal(b, iso) {
				t.Error("the config drive partition does not hold the config drive")
			}
			if typ := blkidType(t, hw.path(0), at[partNameSwap], 64<<20); typ != "swap" {
				t.Errorf("blkid finds %q on the swap partition, want swap", typ)
			}
			if tc.bootMode == "uefi" {
				if typ := blkidType(t, hw.path(0), at[partNameESP], sizes[partNameESP]); typ != "vfat" {
					t.Errorf("blkid finds %q on the ESP, want vfat", typ)
				}
			} else if typ := blkidType(t, hw.path(0), at[partNameBoot], sizes[partNameBoot]); typ != "vfat" {
				t.Errorf("blkid finds %q on the boot partition, want vfat", typ)
			}
			if tc.ephemeral {
				if _, err := exec.LookPath("fsck.vfat"); err == nil {
					img := make([]byte, 1<<30)
					f.ReadAt(img, at[partNameEphemeral])
					p := t.TempDir() + "/eph.img"
					os.WriteFile(p, img, 0o600)
					if out, err := exec.Command("fsck.vfat", "-n", p).CombinedOutput(); err != nil {
						t.Errorf("fsck.vfat -n of the ephemeral partition: %v\n%s", err, out)
					}
				}
				if typ := blkidType(t, hw.path(0), at[partNameEphemeral], 1<<30); typ != "vfat" {
					t.Errorf("blkid finds %q on the ephemeral partition, want vfat", typ)
				}
			}
		})
	}
}

func TestSwapHeader(t *testing.T) {
	h, err := swapHeader(64<<20, [16]byte{1, 2, 3}, "swap1")
	if err != nil {
		t.Fatal(err)
	}
	if string(h[4096-10:]) != "SWAPSPACE2" || h[1024] != 1 || int(h[1028])|int(h[1029])<<8 != 64<<20/4096-1 || string(h[1052:1057]) != "swap1" {
		t.Fatalf("bad swap header")
	}
	if _, err := swapHeader(4096*9, [16]byte{}, ""); err == nil {
		t.Fatal("a 9-page swap area accepted")
	}
}

func TestPartitionImageRefusals(t *testing.T) {
	root := testImage(1 << 20)
	isoImg := make([]byte, 64<<10)
	copy(isoImg[32769:], "CD001")
	srv := newImageServer(t, map[string][]byte{"root.img": root, "cd.iso": isoImg})
	base := func() map[string]any {
		return map[string]any{"image_type": "partition", "image_source": srv.URL + "/root.img", "image_checksum": sha256hex(root),
			"root_gb": 1, "capabilities": map[string]any{"boot_mode": "bios"}}
	}
	for _, tc := range []struct {
		name string
		mod  func(m map[string]any)
		want string
	}{
		{"no root_gb", func(m map[string]any) { delete(m, "root_gb") }, "missing root_gb"},
		{"too big", func(m map[string]any) { m["root_gb"] = 3 }, "do not fit the 2048 MiB disk"},
		{"swap too big", func(m map[string]any) { m["swap_mb"] = 1500 }, "do not fit"},
		{"ext4", func(m map[string]any) { m["ephemeral_gb"], m["ephemeral_format"] = 1, "ext4" }, `ephemeral_format "ext4" is not supported`},
		{"iso disk_format", func(m map[string]any) { m["image_disk_format"] = "iso" }, "cannot be an ISO"},
		{"iso content", func(m map[string]any) {
			m["image_source"], m["image_checksum"] = srv.URL+"/cd.iso", sha256hex(isoImg)
		}, "is an ISO 9660 image"},
		{"mbr too many", func(m map[string]any) {
			m["capabilities"] = map[string]any{"boot_mode": "uefi", "disk_label": "msdos"}
			m["swap_mb"], m["ephemeral_mb"], m["configdrive"] = 64, 100, gzb64([]byte("x"))
		}, "four primary partitions"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hw := newFileHardware(t, 2<<30)
			_, c := startAgent(t, newFakeAPI(t), hw, nil)
			inst := base()
			tc.mod(inst)
			_, err := runWriteImage(t, c, nil, map[string]any{"instance_info": inst})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
		})
	}
}

// TestPreserveEphemeral rebuilds with preserve_ephemeral: the table and the
// ephemeral partition's files stay, root holds the new image.
func TestPreserveEphemeral(t *testing.T) {
	first, second := testImage(2<<20), bytes.Repeat([]byte("new root"), 256<<10)
	srv := newImageServer(t, map[string][]byte{"a.img": first, "b.img": second})
	hw := newFileHardware(t, 4<<30)
	_, c := startAgent(t, newFakeAPI(t), hw, nil)
	inst := map[string]any{"image_type": "partition", "image_source": srv.URL + "/a.img", "image_checksum": sha256hex(first),
		"root_gb": 1, "swap_mb": 32, "ephemeral_gb": 1, "capabilities": "boot_mode:uefi"}
	if _, err := runWriteImage(t, c, nil, map[string]any{"instance_info": inst}); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(hw.path(0), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dev := fileDevice{File: f, size: 4 << 30}
	before := readGPT(dev)
	var eph *gpt.Partition
	for _, p := range before.Partitions {
		if p.Name == partNameEphemeral {
			eph = p
		}
	}
	if eph == nil {
		t.Fatal("no ephemeral partition")
	}
	fs, err := fat32.Read(fatStorage{&diskFile{Device: dev}}, int64(eph.Size), int64(eph.Start)*512, 512)
	if err != nil {
		t.Fatal(err)
	}
	w, err := fs.OpenFile("/keep.txt", os.O_CREATE|os.O_RDWR)
	if err != nil {
		t.Fatal(err)
	}
	w.Write([]byte("user data"))
	w.Close()

	inst["image_source"], inst["image_checksum"], inst["preserve_ephemeral"] = srv.URL+"/b.img", sha256hex(second), true
	if _, err := runWriteImage(t, c, nil, map[string]any{"instance_info": inst}); err != nil {
		t.Fatal(err)
	}
	after := readGPT(dev)
	for i, p := range after.Partitions {
		if p.GUID != before.Partitions[i].GUID || p.Start != before.Partitions[i].Start {
			t.Fatalf("partition %d changed: %+v, was %+v", i+1, p, before.Partitions[i])
		}
	}
	fs, err = fat32.Read(fatStorage{&diskFile{Device: dev}}, int64(eph.Size), int64(eph.Start)*512, 512)
	if err != nil {
		t.Fatal(err)
	}
	r, err := fs.OpenFile("/keep.txt", os.O_RDONLY)
	if err != nil {
		t.Fatalf("the ephemeral partition lost its file: %v", err)
	}
	b := make([]byte, 9)
	r.Read(b)
	if string(b) != "user data" {
		t.Fatalf("ephemeral file holds %q", b)
	}
	rootPart := after.Partitions[len(after.Partitions)-1]
	b = make([]byte, len(second))
	f.ReadAt(b, int64(rootPart.Start)*512)
	if !bytes.Equal(b, second) {
		t.Fatal("root does not hold the new image")
	}

	// A layout that differs from the disk's cannot keep the ephemeral.
	inst["swap_mb"] = 64
	if _, err := runWriteImage(t, c, nil, map[string]any{"instance_info": inst}); err == nil || !strings.Contains(err.Error(), "cannot be kept") {
		t.Fatalf("changed layout with preserve_ephemeral: %v", err)
	}
}

// TestInstallBootloaderPartitionImage writes a UEFI partition image, then
// install_bootloader: the ESP holds systemd-boot at the removable-media
// path, the instance's kernel and ramdisk and a loader entry booting them
// from the root partition's PARTUUID.
func TestInstallBootloaderPartitionImage(t *testing.T) {
	root, kernel, initrd := testImage(1<<20), bytes.Repeat([]byte("kernel"), 100<<10), bytes.Repeat([]byte("initrd"), 300<<10)
	srv := newImageServer(t, map[string][]byte{"root.img": root, "vmlinuz": kernel, "initrd": initrd})
	sdboot := t.TempDir() + "/systemd-bootx64.efi"
	loader := append([]byte("MZ"), bytes.Repeat([]byte{0x90}, 90<<10)...)
	if err := os.WriteFile(sdboot, loader, 0o644); err != nil {
		t.Fatal(err)
	}
	api := newFakeAPI(t)
	api.instance = map[string]any{"image_type": "partition", "image_source": srv.URL + "/root.img", "image_checksum": sha256hex(root),
		"root_gb": 1, "swap_mb": 64, "capabilities": `{"boot_mode": "uefi"}`, "kernel": srv.URL + "/vmlinuz", "ramdisk": srv.URL + "/initrd",
		"kernel_append_params": "console=ttyS0 marker"}
	hw := newFileHardware(t, 2<<30)
	_, c := startAgent(t, api, hw, func(cfg *Config) { cfg.SystemdBoot = sdboot })
	if _, err := runWriteImage(t, c, nil, nil); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	r, err := c.InstallBootloader(ctx, client.InstallBootloaderParams{TargetBootMode: "uefi"})
	if err != nil {
		t.Fatal(err)
	}
	if r, err = c.WaitCommand(ctx, r.ID, 10*time.Millisecond, nil); err != nil {
		t.Fatal(err)
	}
	f, target, fs := openESP(t, hw.path(0), 2<<30)
	read := func(p string) []byte {
		t.Helper()
		f, err := fs.OpenFile(p, os.O_RDONLY)
		if err != nil {
			t.Fatalf("%s on the ESP: %v", p, err)
		}
		b, _ := io.ReadAll(f)
		return b
	}
	for p, want := range map[string][]byte{"/EFI/BOOT/BOOTX64.EFI": loader, "/EFI/systemd/systemd-bootx64.efi": loader, "/vmlinuz": kernel, "/initrd": initrd,
		"/loader/loader.conf": []byte("default ironflow.conf\ntimeout 0\n")} {
		if got := read(p); !bytes.Equal(got, want) {
			t.Errorf("%s on the ESP: %d bytes, want %d", p, len(got), len(want))
		}
	}
	entry := string(read("/loader/entries/ironflow.conf"))
	if want := "linux /vmlinuz\ninitrd /initrd\noptions root=PARTUUID=" + target.RootUUID + " console=ttyS0 marker\n"; !strings.Contains(entry, want) {
		t.Errorf("loader entry %q, want it to contain %q", entry, want)
	}

	// The FAT is sound for dosfstools too, not only for go-diskfs.
	if _, err := exec.LookPath("fsck.vfat"); err == nil {
		img := make([]byte, int64(target.ESP.SizeLBA)*512)
		f.ReadAt(img, int64(target.ESP.StartLBA)*512)
		p := t.TempDir() + "/esp.img"
		os.WriteFile(p, img, 0o600)
		if out, err := exec.Command("fsck.vfat", "-n", p).CombinedOutput(); err != nil {
			t.Errorf("fsck.vfat -n of the ESP: %v\n%s", err, out)
		}
	}

	// BIOS boot code on a disk laid out for UEFI: refused with the reason,
	// rather than an unbootable disk.
	r, err = c.InstallBootloader(ctx, client.InstallBootloaderParams{TargetBootMode: "bios"})
	if err == nil {
		_, err = c.WaitCommand(ctx, r.ID, 10*time.Millisecond, nil)
	}
	if err == nil || !strings.Contains(err.Error(), "the GPT has no boot partition") {
		t.Fatalf("BIOS install_bootloader of a partition image laid out for UEFI: %v", err)
	}
}

// TestInstallBootloaderImageOwnKernel: without instance_info kernel and
// ramdisk, the ESP gets the newest kernel and initrd of the image's ext4
// /boot.
func TestInstallBootloaderImageOwnKernel(t *testing.T) {
	if _, err := exec.LookPath("mkfs.ext4"); err != nil {
		t.Skip("SKIP: mkfs.ext4 (e2fsprogs) is needed to build an ext4 root")
	}
	dir := t.TempDir()
	tree := dir + "/tree"
	os.MkdirAll(tree+"/boot", 0o755)
	files := map[string][]byte{"vmlinuz-6.1.0-9": bytes.Repeat([]byte("old kernel"), 1000), "initrd.img-6.1.0-9": []byte("old initrd"),
		"vmlinuz-6.1.0-10": bytes.Repeat([]byte("new kernel"), 50000), "initrd.img-6.1.0-10": bytes.Repeat([]byte("new initrd"), 80000)}
	for n, b := range files {
		os.WriteFile(tree+"/boot/"+n, b, 0o644)
	}
	img := dir + "/root.img"
	if out, err := exec.Command("mkfs.ext4", "-q", "-F", "-d", tree, img, "32M").CombinedOutput(); err != nil {
		t.Fatalf("mkfs.ext4: %v %s", err, out)
	}
	root, _ := os.ReadFile(img)
	srv := newImageServer(t, map[string][]byte{"root.img": root})
	sdboot := dir + "/systemd-bootx64.efi"
	os.WriteFile(sdboot, []byte("MZ loader"), 0o644)
	api := newFakeAPI(t)
	api.instance = map[string]any{"image_type": "partition", "image_source": srv.URL + "/root.img", "image_checksum": sha256hex(root),
		"root_gb": 1, "capabilities": map[string]any{"boot_mode": "uefi"}}
	hw := newFileHardware(t, 2<<30)
	_, c := startAgent(t, api, hw, func(cfg *Config) { cfg.SystemdBoot = sdboot })
	if _, err := runWriteImage(t, c, nil, nil); err != nil {
		t.Fatal(err)
	}
	r, err := c.InstallBootloader(t.Context(), client.InstallBootloaderParams{TargetBootMode: "uefi"})
	if err == nil {
		r, err = c.WaitCommand(t.Context(), r.ID, 10*time.Millisecond, nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(r.CommandResult), "/boot/vmlinuz-6.1.0-10") {
		t.Errorf("result %s names no kernel of the image", r.CommandResult)
	}
	_, _, fs := openESP(t, hw.path(0), 2<<30)
	for p, want := range map[string][]byte{"/vmlinuz": files["vmlinuz-6.1.0-10"], "/initrd": files["initrd.img-6.1.0-10"]} {
		fh, err := fs.OpenFile(p, os.O_RDONLY)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(fh)
		if !bytes.Equal(got, want) {
			t.Errorf("%s on the ESP: %d bytes, want the image's newest (%d bytes)", p, len(got), len(want))
		}
	}
}

func TestVersionLess(t *testing.T) {
	for _, c := range [][2]string{{"6.1.0-9", "6.1.0-10"}, {"5.14.0-70.el9", "5.14.0-162.el9"}, {"6.1", "6.1.0"}, {"6.1.0-9-amd64", "6.10.0-1-amd64"}} {
		if !versionLess(c[0], c[1]) || versionLess(c[1], c[0]) {
			t.Errorf("%s < %s not seen", c[0], c[1])
		}
	}
}

// openESP opens a disk file written for a UEFI partition image and reads
// its ESP with go-diskfs.
func openESP(t *testing.T, path string, size int64) (*os.File, partitionBootTarget, *fat32.FileSystem) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	dev := fileDevice{File: f, size: size}
	target, err := findPartitionBootTarget(dev, "uefi")
	if err != nil {
		t.Fatal(err)
	}
	fs, err := fat32.Read(fatStorage{&diskFile{Device: dev}}, int64(target.ESP.SizeLBA)*512, int64(target.ESP.StartLBA)*512, 512)
	if err != nil {
		t.Fatal(err)
	}
	return f, target, fs
}
