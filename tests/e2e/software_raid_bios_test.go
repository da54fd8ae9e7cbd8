package e2e

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestAgentSoftwareRAIDRootBIOSBootsFromEitherDiskOnVM: a SeaBIOS VM with
// two virtio disks on raid_interface agent gets a software RAID-1 root
// volume in manual cleaning (raid.create_configuration in BIOS mode: a
// BIOS boot partition before the RAID partition on each disk), the deploy
// writes a whole-disk image with its own GRUB configuration onto the md
// array and install_bootloader embeds GRUB's md-reading core image on
// every holder, and the instance boots; then each disk alone boots it.
func TestAgentSoftwareRAIDRootBIOSBootsFromEitherDiskOnVM(t *testing.T) {
	RequireQEMU(t)
	if _, err := exec.LookPath("mcopy"); err != nil {
		t.Skip("SKIP: mtools (mcopy) is needed to add a GRUB configuration to the test image")
	}
	lab := NewLab(t)
	s := startStack(t, lab)
	base, _, err := BuildTestImage(DefaultCacheDir())
	if err != nil {
		t.Fatal(err)
	}
	// The test image boots by syslinux; GRUB on the md array reads the
	// image's own GRUB configuration, which images installed with GRUB
	// have: /grub/grub.cfg on its FAT partition at 1 MiB.
	dir := filepath.Join(lab.Dir, "vm-node-mdbios")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	img := filepath.Join(dir, "grub-image.img")
	cfg := filepath.Join(dir, "grub.cfg")
	if err := os.WriteFile(img, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := copyInto(img, base, 0, 0); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cfg, []byte("set timeout=0\nmenuentry 'ironflow e2e test image' {\n\tlinux /vmlinuz console=ttyS0,115200 ironflow.e2e=image-grub-cfg\n\tinitrd /initrd.img\n}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, argv := range [][]string{{"mmd", "-i", img + "@@1M", "::/grub"}, {"mcopy", "-i", img + "@@1M", cfg, "::/grub/grub.cfg"}} {
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Env = append(os.Environ(), "MTOOLS_SKIP_CHECK=1")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("%s: %v: %s", strings.Join(argv, " "), err, out)
		}
	}
	sum, err := fileSHA256(img)
	if err != nil {
		t.Fatal(err)
	}
	imageURL := s.publishImage(t, img, "e2e-grub-test.img")

	vm, second, bmc := twoDiskAgentVM(t, s, "node-mdbios", "52:54:00:e2:5d:7b", FirmwareBIOS, dir)
	uuid := createRedfishNode(t, s, bmc, vm.Name, vm.Firmware, vm.MAC,
		"--deploy-interface", "direct", "--boot-interface", "ipxe", "--raid-interface", "agent", "--no-automated-clean")
	defer printNodeHistory(t, s, uuid)
	s.mustCLI(t, "node", "manage", uuid, "--wait", seconds(manageWait))

	begin := time.Now()
	n := createSoftwareRAIDRoot(t, s, uuid, vm)
	disks, _ := n.RAIDConfig["logical_disks"].([]any)
	if len(disks) != 1 || strings.Join(anyStrings(disks[0].(map[string]any)["physical_disks"]), " ") != "/dev/vda2 /dev/vdb2" {
		t.Fatalf("raid_config after create_configuration in BIOS mode (members after the BIOS boot partitions): %v", n.RAIDConfig)
	}
	t.Logf("software RAID-1 created in %.0fs: raid_config %v", time.Since(begin).Seconds(), n.RAIDConfig)

	s.mustCLI(t, "node", "provide", uuid, "--wait", seconds(provideWait))
	s.mustCLI(t, "node", "set", uuid,
		"--instance-info", "image_source="+imageURL,
		"--instance-info", "image_os_hash_algo=sha256",
		"--instance-info", "image_os_hash_value="+sum)
	const pubKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIE2EmdbiosRoot e2e"
	s.deploy(t, uuid, vm, "e2e-mdbios", pubKey)
	ctx, cancel := context.WithTimeout(context.Background(), DefaultBootTimeout)
	defer cancel()
	if _, err := WaitSerial(ctx, vm.SerialLog, "IRONFLOW-E2E done", nil); err != nil {
		t.Fatalf("the instance did not boot from the RAID-1 disks: %v\n%s", err, tailString(readFile(vm.SerialLog), 3000))
	}
	if _, ok := findLine(vm.SerialLog, "IRONFLOW-E2E booted-from-disk firmware=bios"); !ok {
		t.Fatalf("no booted-from-disk marker:\n%s", tailString(readFile(vm.SerialLog), 3000))
	}
	// The kernel's command line is the one of the image's grub.cfg (its
	// syslinux.cfg has none of the marker): GRUB read it inside the array.
	if _, ok := findLine(vm.SerialLog, "ironflow.e2e=image-grub-cfg"); !ok {
		t.Fatalf("the instance was not booted by the image's grub.cfg on the md array:\n%s", tailString(readFile(vm.SerialLog), 3000))
	}
	t.Logf("deployed onto the md array; the instance booted by GRUB %.0fs after the cleaning began", time.Since(begin).Seconds())
	s.mustCLI(t, "node", "power", "off", uuid)
	waitNode(t, s, uuid, "power off", 2*time.Minute, func(n e2eNode) bool { return n.PowerState != nil && *n.PowerState == "power off" })

	// Each disk alone: the other one removed.
	for i, disk := range []string{second, vm.Disk} {
		alone := filepath.Join(lab.Dir, "vm-mdbios-alone"+string(rune('a'+i)))
		if err := os.MkdirAll(alone, 0o755); err != nil {
			t.Fatal(err)
		}
		p := StartQEMU(t, QEMUConfig{Name: "mdbios-alone", MemoryMB: AgentMemoryMB, Firmware: FirmwareBIOS, Disks: []string{disk}, Snapshot: true, Dir: alone})
		ctx, cancel := context.WithTimeout(context.Background(), DefaultBootTimeout)
		_, err := WaitSerial(ctx, p.SerialLog, "IRONFLOW-E2E booted-from-disk firmware=bios", p.Exited())
		cancel()
		if _, ok := findLine(p.SerialLog, "ironflow.e2e=image-grub-cfg"); err == nil && !ok {
			err = errors.New("not booted by the image's grub.cfg")
		}
		if err != nil {
			t.Fatalf("%s alone did not boot the instance: %v\n%s", filepath.Base(disk), err, tailString(readFile(p.SerialLog), 3000))
		}
		p.Stop()
		t.Logf("%s alone boots the instance", filepath.Base(disk))
	}
}
