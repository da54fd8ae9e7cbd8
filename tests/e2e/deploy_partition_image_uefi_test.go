package e2e

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/ironflow/ironflow/embedded"
)

// TestDeployPartitionImageUEFI deploys a partition image on an OVMF VM over
// Redfish virtual media: the agent lays out a GPT (ESP, swap, config drive,
// root), writes the root filesystem image into root and installs
// systemd-boot on the ESP booting instance_info kernel/ramdisk; the VM then
// boots that kernel from its disk and reads the config drive from its
// partition. The disk file is read afterwards: the partitions have the sizes
// asked, root holds the image, swap its signature.
func TestDeployPartitionImageUEFI(t *testing.T) {
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
	r := rand.New(rand.NewPCG(15, 4))
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

	vm := lab.AddVM("node-p", "52:54:00:e2:0f:01", FirmwareUEFI, filepath.Join(lab.Dir, "vm-node-p", "disk.raw"))
	bmc := startRedfishBMC(t, s, agentVM(vm))
	begin := time.Now()
	uuid := createRedfishNode(t, s, bmc, vm.Name, vm.Firmware, vm.MAC,
		"--deploy-interface", "direct", "--boot-interface", "redfish-virtual-media", "--no-automated-clean")
	defer printNodeHistory(t, s, uuid)
	s.mustCLI(t, "node", "manage", uuid, "--wait", seconds(manageWait))
	s.mustCLI(t, "node", "provide", uuid, "--wait", seconds(provideWait))
	s.mustCLI(t, "node", "set", uuid,
		"--instance-info", "image_type=partition",
		"--instance-info", "image_source="+s.publishImage(t, rootPath, "root-fs.img"),
		"--instance-info", "image_os_hash_algo=sha256",
		"--instance-info", "image_os_hash_value="+rootSum,
		"--instance-info", "kernel="+s.publishImage(t, vmlinuz, "instance.vmlinuz"),
		"--instance-info", "ramdisk="+s.publishImage(t, initrdPath, "instance.initrd"),
		"--instance-info", "kernel_append_params=console=ttyS0,115200",
		"--instance-info", "root_gb=1",
		"--instance-info", "swap_mb=64",
		"--instance-info", `capabilities={"boot_mode": "uefi"}`)
	const pubKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIE2Epartition e2e"
	s.deploy(t, uuid, vm, "e2e-p", pubKey)
	printTimeline(t, s, uuid, "partition image deploy")
	waitBootedFromDisk(t, vm, "e2e-p", pubKey)
	t.Logf("partition image: booted the instance kernel from disk %.1fs after node create", time.Since(begin).Seconds())
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
			Partitions []struct {
				Start int64  `json:"start"`
				Size  int64  `json:"size"`
				Type  string `json:"type"`
				Name  string `json:"name"`
			} `json:"partitions"`
		} `json:"partitiontable"`
	}
	if err := json.Unmarshal(out, &tbl); err != nil {
		t.Fatal(err)
	}
	t.Logf("partition table: %s", out)
	want := []struct {
		name string
		size int64
	}{{"efi-system", 550 << 20}, {"swap1", 64 << 20}, {"config-2", 64 << 20}, {"root", 1 << 30}}
	got := tbl.PartitionTable.Partitions
	if tbl.PartitionTable.Label != "gpt" || len(got) != len(want) {
		t.Fatalf("disk has a %q table with %d partitions, want gpt with %d", tbl.PartitionTable.Label, len(got), len(want))
	}
	f, err := os.Open(vm.Disk)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for i, w := range want {
		if got[i].Name != w.name || got[i].Size*512 != w.size {
			t.Errorf("partition %d is %q of %d bytes, want %q of %d", i+1, got[i].Name, got[i].Size*512, w.name, w.size)
		}
	}
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
	if _, ok := findLine(vm.SerialLog, "IRONFLOW-E2E config-drive=/dev/vda3"); !ok {
		t.Errorf("the instance did not read its config drive from partition 3; console:\n%s", embedded.Tail(vm.SerialLog, 3000))
	}
}
