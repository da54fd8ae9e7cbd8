package agent

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/diskfs/go-diskfs/filesystem/fat32"

	"github.com/ironflow/ironflow/agent/client"
	"github.com/ironflow/ironflow/agent/grub"
	"github.com/ironflow/ironflow/configdrive"
)

// grubImagesDir makes what the ramdisk carries for BIOS boot: boot.img
// and the core images, by grub-mkimage as agent/ramdisk makes them.
func grubImagesDir(t *testing.T) string {
	t.Helper()
	if _, err := os.Stat(filepath.Join(grub.DefaultDir, grub.BootImage)); err != nil {
		t.Skip("SKIP: GRUB's i386-pc images are not installed (Debian's grub-pc-bin; scripts/install-deps.sh installs it)")
	}
	if _, err := exec.LookPath("grub-mkimage"); err != nil {
		t.Skip("SKIP: grub-mkimage is not installed (Debian's grub-common)")
	}
	dir := t.TempDir()
	mdConfig := filepath.Join(dir, "md.cfg")
	if err := os.WriteFile(mdConfig, []byte(grub.MDConfig), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, label := range []string{"msdos", "gpt", "md"} {
		if out, err := exec.Command("grub-mkimage", grub.MkImageArgs(grub.DefaultDir, label, filepath.Join(dir, grub.CoreImage(label)), mdConfig)...).CombinedOutput(); err != nil {
			t.Fatalf("grub-mkimage: %v\n%s", err, out)
		}
	}
	b, err := os.ReadFile(filepath.Join(grub.DefaultDir, grub.BootImage))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, grub.BootImage), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestInstallBootloaderPartitionImageBIOS writes a BIOS partition image on
// an MBR and on a GPT disk, then install_bootloader: boot.img is in sector
// 0 with the partition table kept and the kernel sector naming the
// embedding area (the MBR gap, the BIOS boot partition), core.img is
// there with its blocklist, and the boot partition holds the kernel, the
// ramdisk and a grub.cfg booting them from root's PARTUUID.
func TestInstallBootloaderPartitionImageBIOS(t *testing.T) {
	dir := grubImagesDir(t)
	for _, tc := range []struct {
		label      string
		embedStart uint64
		rootNumber int
	}{{"msdos", 1, 4}, {"gpt", 2048, 5}} {
		t.Run(tc.label, func(t *testing.T) {
			root, kernel, initrd := testImage(1<<20), bytes.Repeat([]byte("kernel"), 100<<10), bytes.Repeat([]byte("initrd"), 300<<10)
			srv := newImageServer(t, map[string][]byte{"root.img": root, "vmlinuz": kernel, "initrd": initrd})
			api := newFakeAPI(t)
			api.instance = map[string]any{"image_type": "partition", "image_source": srv.URL + "/root.img", "image_checksum": sha256hex(root),
				"root_gb": 1, "swap_mb": 64, "configdrive": gzb64([]byte("CD001 config-2")), "capabilities": "boot_mode:bios,disk_label:" + tc.label,
				"kernel": srv.URL + "/vmlinuz", "ramdisk": srv.URL + "/initrd", "kernel_append_params": "console=ttyS0 it's"}
			hw := newFileHardware(t, 2<<30)
			_, c := startAgent(t, api, hw, func(cfg *Config) { cfg.GRUBDir = dir })
			if _, err := runWriteImage(t, c, nil, nil); err != nil {
				t.Fatal(err)
			}
			f, err := os.Open(hw.path(0))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			before := make([]byte, 512)
			f.ReadAt(before, 0)

			r, err := c.InstallBootloader(t.Context(), client.InstallBootloaderParams{TargetBootMode: "bios"})
			if err == nil {
				r, err = c.WaitCommand(t.Context(), r.ID, 10*time.Millisecond, nil)
			}
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(r.CommandResult), "GRUB installed") {
				t.Errorf("result %s", r.CommandResult)
			}

			// sfdisk still reads the same table; root's PARTUUID is what
			// blkid would give the kernel.
			out, err := exec.Command("sfdisk", "--json", hw.path(0)).Output()
			if err != nil {
				t.Fatalf("sfdisk --json: %v", err)
			}
			var tbl struct {
				PartitionTable struct {
					Label      string `json:"label"`
					ID         string `json:"id"`
					Partitions []struct {
						Start int64  `json:"start"`
						Size  int64  `json:"size"`
						UUID  string `json:"uuid"`
					} `json:"partitions"`
				} `json:"partitiontable"`
			}
			if err := json.Unmarshal(out, &tbl); err != nil {
				t.Fatal(err)
			}
			parts := tbl.PartitionTable.Partitions
			if len(parts) != tc.rootNumber {
				t.Fatalf("%d partitions after install_bootloader, want %d: %s", len(parts), tc.rootNumber, out)
			}
			partUUID := strings.ToLower(parts[tc.rootNumber-1].UUID)
			if tc.label == "msdos" {
				partUUID = strings.TrimPrefix(tbl.PartitionTable.ID, "0x") + "-04"
				if strings.HasPrefix(partUUID, "00000000") {
					t.Error("the MBR has no disk signature")
				}
			}

			mbr := make([]byte, 512)
			f.ReadAt(mbr, 0)
			bootImg, _ := os.ReadFile(filepath.Join(dir, grub.BootImage))
			if !bytes.Equal(mbr[0x1b8:0x1fe], before[0x1b8:0x1fe]) {
				t.Error("install_bootloader changed the disk signature or the partition table")
			}
			if !bytes.Equal(mbr[0x68:0x1b8], bootImg[0x68:0x1b8]) || mbr[0x1fe] != 0x55 || mbr[0x1ff] != 0xaa {
				t.Error("sector 0 does not hold boot.img's code")
			}
			if got := binary.LittleEndian.Uint64(mbr[0x5c:]); got != tc.embedStart {
				t.Errorf("boot.img's kernel sector is %d, want %d", got, tc.embedStart)
			}
			coreImg, _ := os.ReadFile(filepath.Join(dir, grub.CoreImage(tc.label)))
			core := make([]byte, len(coreImg))
			f.ReadAt(core, int64(tc.embedStart)*512)
			if !bytes.Equal(core[:0x1e8], coreImg[:0x1e8]) || !bytes.Equal(core[512+0x14:], coreImg[512+0x14:]) {
				t.Errorf("sector %d does not hold core.img", tc.embedStart)
			}
			if s := binary.LittleEndian.Uint64(core[0x1f4:]); s != tc.embedStart+1 {
				t.Errorf("core.img's blocklist starts at sector %d, want %d", s, tc.embedStart+1)
			}

			bootPart := parts[grub.BootPartition(tc.label)-1]
			fs, err := fat32.Read(fatStorage{&diskFile{Device: fileDevice{File: f, size: 2 << 30}}}, bootPart.Size*512, bootPart.Start*512, 512)
			if err != nil {
				t.Fatal(err)
			}
			read := func(p string) []byte {
				t.Helper()
				fh, err := fs.OpenFile(p, os.O_RDONLY)
				if err != nil {
					t.Fatalf("%s on the boot partition: %v", p, err)
				}
				b, _ := io.ReadAll(fh)
				return b
			}
			if !bytes.Equal(read("/vmlinuz"), kernel) || !bytes.Equal(read("/initrd"), initrd) {
				t.Error("the boot partition does not hold instance_info kernel and ramdisk")
			}
			cfg := string(read(grub.ConfigPath))
			if want := "\tlinux /vmlinuz root=PARTUUID=" + partUUID + ` console=ttyS0 'it'\''s'` + "\n\tinitrd /initrd\n"; !strings.Contains(cfg, want) {
				t.Errorf("grub.cfg\n%s\nwants %q", cfg, want)
			}
			if _, err := exec.LookPath("fsck.vfat"); err == nil {
				img := make([]byte, bootPart.Size*512)
				f.ReadAt(img, bootPart.Start*512)
				p := t.TempDir() + "/boot.img"
				os.WriteFile(p, img, 0o600)
				if out, err := exec.Command("fsck.vfat", "-n", p).CombinedOutput(); err != nil {
					t.Errorf("fsck.vfat -n of the boot partition: %v\n%s", err, out)
				}
			}
			// The config drive is where the instance looks for it.
			cd := make([]byte, 14)
			f.ReadAt(cd, parts[tc.rootNumber-2].Start*512)
			if string(cd) != "CD001 config-2" {
				t.Errorf("partition %d does not hold the config drive (%s)", tc.rootNumber-1, configdrive.Label)
			}
		})
	}
}

// TestInstallBootloaderBIOSWithoutGRUB: a ramdisk built without GRUB
// fails install_bootloader saying so, before anything is written.
func TestInstallBootloaderBIOSWithoutGRUB(t *testing.T) {
	root := testImage(1 << 20)
	srv := newImageServer(t, map[string][]byte{"root.img": root})
	api := newFakeAPI(t)
	api.instance = map[string]any{"image_type": "partition", "image_source": srv.URL + "/root.img", "image_checksum": sha256hex(root),
		"root_gb": 1, "capabilities": "boot_mode:bios"}
	hw := newFileHardware(t, 2<<30)
	_, c := startAgent(t, api, hw, func(cfg *Config) { cfg.GRUBDir = t.TempDir() })
	if _, err := runWriteImage(t, c, nil, nil); err != nil {
		t.Fatal(err)
	}
	// Sector 0, the MBR gap and the boot partition's FAT and root
	// directory lie in the first 8 MiB.
	head := func() []byte {
		f, err := os.Open(hw.path(0))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		b := make([]byte, 8<<20)
		if _, err := f.ReadAt(b, 0); err != nil {
			t.Fatal(err)
		}
		return b
	}
	before := head()
	r, err := c.InstallBootloader(t.Context(), client.InstallBootloaderParams{TargetBootMode: "bios"})
	if err == nil {
		_, err = c.WaitCommand(t.Context(), r.ID, 10*time.Millisecond, nil)
	}
	if err == nil || !strings.Contains(err.Error(), "the ramdisk carries no GRUB for BIOS boot") || !strings.Contains(err.Error(), "grub-pc-bin") {
		t.Fatalf("install_bootloader without GRUB: %v", err)
	}
	if !bytes.Equal(before, head()) {
		t.Error("the failed install_bootloader wrote to the disk")
	}
}

func TestGRUBConfigQuoting(t *testing.T) {
	cfg := grubConfig(`root=PARTUUID=0a0b0c0d-04 ro console=ttyS0,115200n8 a$b x;y it's`)
	if want := "\tlinux /vmlinuz root=PARTUUID=0a0b0c0d-04 ro console=ttyS0,115200n8 'a$b' 'x;y' 'it'\\''s'\n"; !strings.Contains(cfg, want) {
		t.Fatalf("grub.cfg\n%s\nwants %q", cfg, want)
	}
}

// TestPlanPartitionsBIOS: the BIOS layouts, partition by partition, and an
// MBR that the boot partition fills up.
func TestPlanPartitionsBIOS(t *testing.T) {
	for _, tc := range []struct {
		label string
		want  []plannedPartition
	}{
		{"msdos", []plannedPartition{{Role: partNameBoot, Number: 1, Start: 1 << 20, Size: 512 << 20}, {Role: partNameSwap, Number: 2, Start: 513 << 20, Size: 64 << 20},
			{Role: configdrive.Label, Number: 3, Start: 577 << 20, Size: 64 << 20}, {Role: partNameRoot, Number: 4, Start: 641 << 20, Size: 1 << 30}}},
		{"gpt", []plannedPartition{{Role: partNameBIOSBoot, Number: 1, Start: 1 << 20, Size: 1 << 20}, {Role: partNameBoot, Number: 2, Start: 2 << 20, Size: 512 << 20},
			{Role: partNameSwap, Number: 3, Start: 514 << 20, Size: 64 << 20}, {Role: configdrive.Label, Number: 4, Start: 578 << 20, Size: 64 << 20}, {Role: partNameRoot, Number: 5, Start: 642 << 20, Size: 1 << 30}}},
	} {
		got, err := planPartitions(partitionParams{RootMB: 1024, SwapMB: 64, BootMode: "bios", DiskLabel: tc.label}, 4<<30, 1000)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(tc.want) {
			t.Fatalf("%s: %+v, want %+v", tc.label, got, tc.want)
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("%s partition %d: %+v, want %+v", tc.label, i+1, got[i], tc.want[i])
			}
		}
		if n := grub.BootPartition(tc.label); got[n-1].Role != partNameBoot {
			t.Errorf("%s: GRUB's core image reads partition %d, the layout puts %s there", tc.label, n, got[n-1].Role)
		}
	}
	_, err := planPartitions(partitionParams{RootMB: 1024, SwapMB: 64, EphemeralMB: 100, BootMode: "bios", DiskLabel: "msdos"}, 4<<30, 1000)
	if err == nil || !strings.Contains(err.Error(), "four primary partitions") {
		t.Fatalf("BIOS MBR with boot, ephemeral, swap, config drive and root: %v", err)
	}
}

// TestInstallBootloaderBIOSImageOwnKernel: in BIOS mode too, without
// instance_info kernel and ramdisk, the boot partition gets the newest
// kernel and initrd of the image's ext4 /boot, and grub.cfg boots them.
func TestInstallBootloaderBIOSImageOwnKernel(t *testing.T) {
	if _, err := exec.LookPath("mkfs.ext4"); err != nil {
		t.Skip("SKIP: mkfs.ext4 (e2fsprogs) is needed to build an ext4 root")
	}
	dir := grubImagesDir(t)
	tmp := t.TempDir()
	os.MkdirAll(tmp+"/tree/boot", 0o755)
	files := map[string][]byte{"vmlinuz-6.1.0-9": []byte("old kernel"), "initrd.img-6.1.0-9": []byte("old initrd"),
		"vmlinuz-6.1.0-10": bytes.Repeat([]byte("new kernel"), 5000), "initrd.img-6.1.0-10": bytes.Repeat([]byte("new initrd"), 8000)}
	for n, b := range files {
		os.WriteFile(tmp+"/tree/boot/"+n, b, 0o644)
	}
	if out, err := exec.Command("mkfs.ext4", "-q", "-F", "-d", tmp+"/tree", tmp+"/root.img", "32M").CombinedOutput(); err != nil {
		t.Fatalf("mkfs.ext4: %v %s", err, out)
	}
	root, _ := os.ReadFile(tmp + "/root.img")
	srv := newImageServer(t, map[string][]byte{"root.img": root})
	api := newFakeAPI(t)
	api.instance = map[string]any{"image_type": "partition", "image_source": srv.URL + "/root.img", "image_checksum": sha256hex(root),
		"root_gb": 1, "capabilities": map[string]any{"boot_mode": "bios"}}
	hw := newFileHardware(t, 2<<30)
	_, c := startAgent(t, api, hw, func(cfg *Config) { cfg.GRUBDir = dir })
	if _, err := runWriteImage(t, c, nil, nil); err != nil {
		t.Fatal(err)
	}
	r, err := c.InstallBootloader(t.Context(), client.InstallBootloaderParams{TargetBootMode: "bios"})
	if err == nil {
		r, err = c.WaitCommand(t.Context(), r.ID, 10*time.Millisecond, nil)
	}
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(r.CommandResult), "/boot/vmlinuz-6.1.0-10") {
		t.Errorf("result %s names no kernel of the image", r.CommandResult)
	}
	f, err := os.Open(hw.path(0))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	target, err := findPartitionBootTarget(fileDevice{File: f, size: 2 << 30}, "bios")
	if err != nil {
		t.Fatal(err)
	}
	fs, err := fat32.Read(fatStorage{&diskFile{Device: fileDevice{File: f, size: 2 << 30}}}, target.Boot.Size, target.Boot.Start, 512)
	if err != nil {
		t.Fatal(err)
	}
	for p, want := range map[string][]byte{"/vmlinuz": files["vmlinuz-6.1.0-10"], "/initrd": files["initrd.img-6.1.0-10"]} {
		fh, err := fs.OpenFile(p, os.O_RDONLY)
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := io.ReadAll(fh); !bytes.Equal(got, want) {
			t.Errorf("%s on the boot partition: %d bytes, want the image's newest (%d bytes)", p, len(got), len(want))
		}
	}
	fh, err := fs.OpenFile(grub.ConfigPath, os.O_RDONLY)
	if err != nil {
		t.Fatal(err)
	}
	cfg, _ := io.ReadAll(fh)
	if want := "linux /vmlinuz root=PARTUUID=" + target.RootUUID + " ro console=tty0 console=ttyS0,115200n8\n"; !strings.Contains(string(cfg), want) {
		t.Errorf("grub.cfg\n%s\nwants %q (the default command line)", cfg, want)
	}
	if !strings.HasSuffix(target.RootUUID, "-02") {
		t.Errorf("root PARTUUID %s: root is partition 2 of the MBR", target.RootUUID)
	}
}
