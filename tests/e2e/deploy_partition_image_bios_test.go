package e2e

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ironflow/ironflow/embedded"
)

// TestDeployPartitionImageBIOS deploys a partition image on a SeaBIOS VM
// behind ipmi_sim, network-booted over PXE: the agent lays out an MBR
// (boot partition, swap, config drive, root), writes the root filesystem
// image into root, puts instance_info kernel/ramdisk and a grub.cfg on the
// boot partition and GRUB's boot.img and core.img in the MBR and its gap;
// the VM then boots that kernel from its disk through GRUB, with root's
// PARTUUID on the command line, and reads the config drive from its
// partition. The disk file is read afterwards: the partitions have the
// sizes asked, root holds the image, swap its signature, sector 0 GRUB's
// boot code with the table kept.
func TestDeployPartitionImageBIOS(t *testing.T) {
	RequireQEMU(t)
	lab := NewLab(t)
	s := startStack(t, lab)
	vmlinuz, modulesDir, err := ensureKernel()
	if err != nil {
		t.Fatal(err)
	}
	initrd, err := buildInitrd(Busybox, modulesDir, initScript)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	initrdPath := filepath.Join(dir, "initrd.img")
	// The root filesystem image: its content only has to arrive intact (the
	// test kernel runs its init from the initrd).
	root := make([]byte, 16<<20)
	r := rand.New(rand.NewPCG(15, 5))
	for i := range root {
		root[i] = byte(r.Uint32())
	}
	rootPath := filepath.Join(dir, "root.img")
	for p, b := range map[string][]byte{initrdPath: initrd, rootPath: root} {
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	rootSum, err := fileSHA256(rootPath)
	if err != nil {
		t.Fatal(err)
	}

	vm := lab.AddVM("node-pb", "52:54:00:e2:0f:11", FirmwareBIOS, filepath.Join(lab.Dir, "vm-node-pb", "disk.raw"))
	password := newBMCPassword()
	startIPMISim(t, s, agentVM(vm), password)
	begin := time.Now()
	uuid := createIPMINode(t, s, vm, "e2e-pb", password, "--deploy-interface", "direct", "--no-automated-clean")
	defer printNodeHistory(t, s, uuid)
	s.mustCLI(t, "node", "manage", uuid, "--wait", seconds(manageWait))
	s.mustCLI(t, "node", "provide", uuid, "--wait", seconds(provideWait))
	s.mustCLI(t, "node", "set", uuid,
		"--instance-info", "image_type=partition",
		"--instance-info", "image_source="+s.publishImage(t, rootPath, "root-fs-bios.img"),
		"--instance-info", "image_os_hash_algo=sha256",
		"--instance-info", "image_os_hash_value="+rootSum,
		"--instance-info", "kernel="+s.publishImage(t, vmlinuz, "instance-bios.vmlinuz"),
		"--instance-info", "ramdisk="+s.publishImage(t, initrdPath, "instance-bios.initrd"),
		"--instance-info", "kernel_append_params=console=ttyS0,115200",
		"--instance-info", "root_gb=1",
		"--instance-info", "swap_mb=64",
		"--instance-info", `capabilities={"boot_mode": "bios"}`)
	const pubKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIE2Epartitionbios e2e"
	s.deploy(t, uuid, vm, "e2e-pb", pubKey)
	printTimeline(t, s, uuid, "partition image deploy (BIOS)")
	waitBootedFromDisk(t, vm, "e2e-pb", pubKey)
	t.Logf("partition image (BIOS): booted the instance kernel from disk %.1fs after node create", time.Since(begin).Seconds())
	if f := s.nodeFields(t, uuid); f["provision_state"] != "active" {
		t.Errorf("node is %v, want active", f["provision_state"])
	}

	out, err := exec.Command("sfdisk", "--json", vm.Disk).Output()
	if err != nil {
		t.Fatalf("sfdisk --json %s: %v", vm.Disk, err)
	}
	var tbl struct {
		PartitionTable struct {
			Label      string `json:"label"`
			ID         string `json:"id"`
			Partitions []struct {
				Start int64  `json:"start"`
				Size  int64  `json:"size"`
				Type  string `json:"type"`
			} `json:"partitions"`
		} `json:"partitiontable"`
	}
	if err := json.Unmarshal(out, &tbl); err != nil {
		t.Fatal(err)
	}
	t.Logf("partition table: %s", out)
	want := []struct {
		typ  string
		size int64
	}{{"ea", 512 << 20}, {"82", 64 << 20}, {"83", 64 << 20}, {"83", 1 << 30}}
	got := tbl.PartitionTable.Partitions
	if tbl.PartitionTable.Label != "dos" || len(got) != len(want) {
		t.Fatalf("disk has a %q table with %d partitions, want dos (MBR) with %d", tbl.PartitionTable.Label, len(got), len(want))
	}
	for i, w := range want {
		if got[i].Type != w.typ || got[i].Size*512 != w.size {
			t.Errorf("partition %d is type %s of %d bytes, want %s of %d", i+1, got[i].Type, got[i].Size*512, w.typ, w.size)
		}
	}
	f, err := os.Open(vm.Disk)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b := make([]byte, len(root))
	f.ReadAt(b, got[3].Start*512)
	if !bytes.Equal(b, root) {
		t.Error("the root partition does not hold the root filesystem image")
	}
	sig := make([]byte, 10)
	f.ReadAt(sig, got[1].Start*512+4096-10)
	if string(sig) != "SWAPSPACE2" {
		t.Errorf("the swap partition has no swap signature: %q", sig)
	}
	// Sector 0 is GRUB's boot.img pointing at core.img in sector 1.
	mbr := make([]byte, 512)
	f.ReadAt(mbr, 0)
	bootImg, err := os.ReadFile("/usr/lib/grub/i386-pc/boot.img")
	if err != nil {
		t.Fatalf("GRUB's boot.img (grub-pc-bin, which make ramdisk needs): %v", err)
	}
	if !bytes.Equal(mbr[0x68:0x1b8], bootImg[0x68:0x1b8]) || binary.LittleEndian.Uint64(mbr[0x5c:]) != 1 {
		t.Error("sector 0 does not hold GRUB's boot.img loading core.img from sector 1")
	}
	// The kernel that booted from disk got GRUB's command line (GRUB's
	// linux command puts BOOT_IMAGE first): root's PARTUUID (disk
	// signature, partition 4) and kernel_append_params.
	cmdline := "Command line: BOOT_IMAGE=/vmlinuz root=PARTUUID=" + strings.TrimPrefix(tbl.PartitionTable.ID, "0x") + "-04 console=ttyS0,115200"
	if _, ok := findLine(vm.SerialLog, cmdline); !ok {
		t.Errorf("no %q on the console: the instance kernel was not booted by GRUB from disk; console:\n%s", cmdline, embedded.Tail(vm.SerialLog, 3000))
	}
	if _, ok := findLine(vm.SerialLog, "IRONFLOW-E2E config-drive=/dev/vda3"); !ok {
		t.Errorf("the instance did not read its config drive from partition 3; console:\n%s", embedded.Tail(vm.SerialLog, 3000))
	}
}
