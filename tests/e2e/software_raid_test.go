package e2e

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestAgentSoftwareRAIDRootBootsFromEitherDiskOnVM: an OVMF VM with two
// virtio disks on raid_interface agent gets a software RAID-1 root volume
// in manual cleaning (raid.create_configuration in the agent's ramdisk,
// recorded as raid_config), the deploy writes the image onto the md array
// and moves the image's ESP onto an md mirror over an ESP on each holder
// disk, and the instance boots; then each disk alone boots the instance (a fresh VM with the
// other disk removed and fresh UEFI variables: the holder's own ESP and
// the removable-media loader are all there is).
func TestAgentSoftwareRAIDRootBootsFromEitherDiskOnVM(t *testing.T) {
	RequireQEMU(t)
	lab := NewLab(t)
	s := startStack(t, lab)
	_, sum, err := BuildTestImage(DefaultCacheDir())
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(lab.Dir, "vm-node-swraid")
	vm, second, bmc := twoDiskAgentVM(t, s, "node-swraid", "52:54:00:e2:5d:61", FirmwareUEFI, dir)
	uuid := createRedfishNode(t, s, bmc, vm.Name, vm.Firmware, vm.MAC,
		"--deploy-interface", "direct", "--boot-interface", "redfish-virtual-media", "--raid-interface", "agent", "--no-automated-clean")
	defer printNodeHistory(t, s, uuid)
	s.mustCLI(t, "node", "manage", uuid, "--wait", seconds(manageWait))

	begin := time.Now()
	n := createSoftwareRAIDRoot(t, s, uuid, vm)
	disks, _ := n.RAIDConfig["logical_disks"].([]any)
	if len(disks) != 1 || !strings.Contains(strings.Join(anyStrings(disks[0].(map[string]any)["physical_disks"]), " "), "/dev/vdb") {
		t.Fatalf("raid_config after create_configuration: %v", n.RAIDConfig)
	}
	t.Logf("software RAID-1 created in %.0fs: raid_config %v", time.Since(begin).Seconds(), n.RAIDConfig)

	s.mustCLI(t, "node", "provide", uuid, "--wait", seconds(provideWait))
	s.mustCLI(t, "node", "set", uuid,
		"--instance-info", "image_source="+s.imageURL("e2e-test.img"),
		"--instance-info", "image_os_hash_algo=sha256",
		"--instance-info", "image_os_hash_value="+sum)
	const pubKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIE2EswraidRoot e2e"
	s.deploy(t, uuid, vm, "e2e-swraid", pubKey)
	ctx, cancel := context.WithTimeout(context.Background(), DefaultBootTimeout)
	defer cancel()
	// The instance's init finds no config drive: it sits inside the md
	// array, which the test image's busybox init does not assemble.
	if _, err := WaitSerial(ctx, vm.SerialLog, "IRONFLOW-E2E done", nil); err != nil {
		t.Fatalf("the instance did not boot from the RAID-1 disks: %v\n%s", err, tailString(readFile(vm.SerialLog), 3000))
	}
	if _, ok := findLine(vm.SerialLog, "IRONFLOW-E2E booted-from-disk firmware=uefi"); !ok {
		t.Fatalf("no booted-from-disk marker:\n%s", tailString(readFile(vm.SerialLog), 3000))
	}
	t.Logf("deployed onto the md array; the instance booted %.0fs after the cleaning began", time.Since(begin).Seconds())
	// Off through the BMC: its QEMU lets go of the disk files.
	s.mustCLI(t, "node", "power", "off", uuid)
	waitNode(t, s, uuid, "power off", 2*time.Minute, func(n e2eNode) bool { return n.PowerState != nil && *n.PowerState == "power off" })

	// Both holders carry the same ESP at 1 MiB (the md mirror's members,
	// metadata 1.0: the FAT starts where the partition does).
	var heads [2][]byte
	for i, disk := range []string{vm.Disk, second} {
		f, err := os.Open(disk)
		if err != nil {
			t.Fatal(err)
		}
		heads[i] = make([]byte, 1<<20)
		_, err = f.ReadAt(heads[i], 1<<20)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
	if heads[0][510] != 0x55 || heads[0][511] != 0xaa || !bytes.Equal(heads[0], heads[1]) {
		t.Fatalf("the holders' ESPs at 1 MiB: boot signature %x %x, equal %v", heads[0][510], heads[0][511], bytes.Equal(heads[0], heads[1]))
	}

	// Each disk alone: the other one removed.
	for i, disk := range []string{second, vm.Disk} {
		alone := filepath.Join(lab.Dir, "vm-swraid-alone"+string(rune('a'+i)))
		if err := os.MkdirAll(alone, 0o755); err != nil {
			t.Fatal(err)
		}
		p := StartQEMU(t, QEMUConfig{Name: "swraid-alone", MemoryMB: AgentMemoryMB, Firmware: FirmwareUEFI, Disks: []string{disk}, Snapshot: true, Dir: alone})
		ctx, cancel := context.WithTimeout(context.Background(), DefaultBootTimeout)
		_, err := WaitSerial(ctx, p.SerialLog, "IRONFLOW-E2E booted-from-disk firmware=uefi", p.Exited())
		cancel()
		if err != nil {
			t.Fatalf("%s alone did not boot the instance: %v\n%s", filepath.Base(disk), err, tailString(readFile(p.SerialLog), 3000))
		}
		p.Stop()
		t.Logf("%s alone boots the instance", filepath.Base(disk))
	}
}

func anyStrings(v any) []string {
	list, _ := v.([]any)
	var out []string
	for _, e := range list {
		if s, ok := e.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// twoDiskAgentVM is an agent VM named name with a second 2 GiB virtio
// disk (dir/disk2.raw) beside its first, behind its own Redfish vbmc.
func twoDiskAgentVM(t *testing.T, s *stack, name, mac, firmware, dir string) (*LabVM, string, *vbmcServer) {
	t.Helper()
	vm := s.lab.AddVM(name, mac, firmware, filepath.Join(dir, "disk.raw"))
	second := filepath.Join(dir, "disk2.raw")
	for _, p := range []string{vm.Disk, second} {
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(p, 2<<30); err != nil {
			t.Fatal(err)
		}
	}
	def := agentVM(vm)
	def.DiskSize = ""
	id := name + "-disk2"
	def.QEMUExtra = []string{"-drive", "if=none,id=" + id + ",format=raw,file=" + second, "-device", "virtio-blk-pci,drive=" + id}
	return vm, second, startRedfishBMC(t, s, def)
}

// createSoftwareRAIDRoot sets a RAID-1 software root volume as the node's
// target_raid_config and runs raid.create_configuration in manual
// cleaning; it returns the node once it is manageable again.
func createSoftwareRAIDRoot(t *testing.T, s *stack, uuid string, vm *LabVM) e2eNode {
	t.Helper()
	target := map[string]any{"logical_disks": []any{map[string]any{"raid_level": "1", "size_gb": "MAX", "is_root_volume": true, "controller": "software"}}}
	if code, b := biosAPI(t, s, "PUT", "/v1/nodes/"+uuid+"/states/raid", "1.31", target); code != 204 {
		t.Fatalf("PUT states/raid: %d %s", code, b)
	}
	apiJSON(t, s, "PUT", "/v1/nodes/"+uuid+"/states/provision", map[string]any{
		"target": "clean", "clean_steps": []any{map[string]any{"interface": "raid", "step": "create_configuration"}},
	}, 202, nil)
	n := waitNode(t, s, uuid, "manageable after create_configuration", cleanWait, func(n e2eNode) bool {
		return n.ProvisionState == "manageable" || n.ProvisionState == "clean failed"
	})
	if n.ProvisionState != "manageable" {
		t.Fatalf("software RAID cleaning ended %s: %s\n%s", n.ProvisionState, deref(n.LastError), tailString(readFile(vm.SerialLog), 3000))
	}
	return n
}
