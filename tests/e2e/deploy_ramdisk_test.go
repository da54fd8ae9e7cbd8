package e2e

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// ramdiskInstanceMarker is what the instance ramdisk prints on the console,
// followed by its kernel command line.
const ramdiskInstanceMarker = "IRONFLOW-RAMDISK-INSTANCE running"

// ramdiskInstanceInit is the /init of the instance ramdisk: it runs from RAM
// and touches no disk (it loads no disk driver at all).
const ramdiskInstanceInit = `#!/bin/sh
export PATH=/bin
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
exec </dev/console >/dev/console 2>&1
echo "` + ramdiskInstanceMarker + ` cmdline=$(cat /proc/cmdline)"
while :; do sleep 3600; done
`

// publishRamdiskInstance builds the instance ramdisk and publishes it with
// the Debian kernel on the stack's image server: the instance of a ramdisk
// deploy, as kernel and ramdisk URLs.
func publishRamdiskInstance(t *testing.T, lab *Lab, s *stack) (kernelURL, ramdiskURL string) {
	t.Helper()
	vmlinuz, _, err := ensureKernel()
	if err != nil {
		t.Fatal(err)
	}
	ramdisk := filepath.Join(lab.Dir, "ramdisk-instance.cpio")
	if err := buildRamdiskInstance(ramdisk); err != nil {
		t.Fatal(err)
	}
	return s.publishImage(t, vmlinuz, "instance.vmlinuz"), s.publishImage(t, ramdisk, "instance.cpio")
}

// buildRamdiskInstance writes the instance ramdisk: busybox and its /init,
// an uncompressed newc archive (the kernel takes it as is).
func buildRamdiskInstance(path string) error {
	bb, err := os.ReadFile(Busybox)
	if err != nil {
		return fmt.Errorf("read busybox (Debian busybox-static): %w", err)
	}
	entries := []newcEntry{
		{name: "bin", mode: modeDir | 0o755},
		{name: "dev", mode: modeDir | 0o755},
		{name: "dev/console", mode: modeChar | 0o600, rdevMajor: 5, rdevMinor: 1},
		{name: "proc", mode: modeDir | 0o755},
		{name: "sys", mode: modeDir | 0o755},
		{name: "bin/busybox", mode: modeReg | 0o755, data: bb},
		{name: "bin/sh", mode: modeSymlink | 0o777, symlinkValue: "busybox"},
		{name: "init", mode: modeReg | 0o755, data: []byte(ramdiskInstanceInit)},
	}
	return os.WriteFile(path, writeNewc(entries), 0o644)
}

// TestDeployRamdisk deploys a SeaBIOS VM behind ipmi_sim with deploy_interface
// ramdisk: the instance is the Debian kernel and a busybox ramdisk that the
// machine network-boots, with the node's ramdisk_kernel_arguments. Nothing
// is written to the disk; the boot configuration stays while the node is
// active and is gone after undeploy.
func TestDeployRamdisk(t *testing.T) {
	RequireQEMU(t)
	begin := time.Now()
	lab := NewLab(t)
	s := startStack(t, lab, "--automated-clean=false")
	kernelURL, ramdiskURL := publishRamdiskInstance(t, lab, s)

	vm := lab.AddVM("node-rd", "52:54:00:e2:0d:01", FirmwareBIOS, filepath.Join(lab.Dir, "vm-node-rd", "disk.raw"))
	password := newBMCPassword()
	startIPMISim(t, s, vmDefinition(vm, 1, DefaultMemoryMB, vmDiskSize), password)
	uuid := createIPMINode(t, s, vm, "e2e-ramdisk", password, "--deploy-interface", "ramdisk")
	defer printNodeHistory(t, s, uuid)
	s.mustCLI(t, "node", "manage", uuid, "--wait", seconds(manageWait))
	s.mustCLI(t, "node", "provide", uuid, "--wait", seconds(provideWait))

	// A word of this run on the command line proves the node's
	// ramdisk_kernel_arguments reached the instance's kernel.
	word := "ironflow.e2e=ramdisk-" + newBMCPassword()
	s.mustCLI(t, "node", "set", uuid,
		"--instance-info", "kernel="+kernelURL,
		"--instance-info", "ramdisk="+ramdiskURL,
		"--instance-info", "ramdisk_kernel_arguments=console=ttyS0,115200 no_timer_check "+word)
	deployStart := time.Now()
	if _, err := s.baremetal(t, "node", "deploy", uuid, "--wait", seconds(deployWait)); err != nil {
		s.failStep(t, uuid, vm.SerialLog, err)
	}
	printTimeline(t, s, uuid, "ramdisk deploy")
	t.Logf("ramdisk: node active %.1fs after deploy", time.Since(deployStart).Seconds())

	ctx, cancel := context.WithTimeout(context.Background(), DefaultBootTimeout)
	defer cancel()
	line, err := WaitSerial(ctx, vm.SerialLog, ramdiskInstanceMarker, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("ramdisk: the instance runs %.1fs after deploy: %s", time.Since(deployStart).Seconds(), line)
	if !strings.Contains(line, word) {
		t.Errorf("the instance's command line lacks the node's ramdisk_kernel_arguments %q: %s", word, line)
	}
	if f := s.nodeFields(t, uuid); f["provision_state"] != "active" || f["power_state"] != "power on" {
		t.Errorf("node is %v / %v, want active / power on", f["provision_state"], f["power_state"])
	}

	// Active: the machine keeps booting its ramdisk from the network, so
	// the boot service keeps its script.
	scriptURL := "http://" + bootListen + "/boot/" + uuid + "/boot.ipxe"
	code, body := labGet(t, lab, scriptURL)
	if code != http.StatusOK || !strings.Contains(string(body), kernelURL) || !strings.Contains(string(body), ramdiskURL) {
		t.Errorf("while active, %s answers %d:\n%s\nwant 200 with the instance's kernel %s and ramdisk %s", scriptURL, code, body, kernelURL, ramdiskURL)
	}

	undeployStart := time.Now()
	if _, err := s.baremetal(t, "node", "undeploy", uuid, "--wait", seconds(provideWait)); err != nil {
		s.failStep(t, uuid, vm.SerialLog, err)
	}
	t.Logf("ramdisk: node available %.1fs after undeploy", time.Since(undeployStart).Seconds())
	if f := s.nodeFields(t, uuid); f["provision_state"] != "available" || f["power_state"] != "power off" {
		t.Errorf("after undeploy the node is %v / %v, want available / power off", f["provision_state"], f["power_state"])
	}
	if code, body := labGet(t, lab, scriptURL); code != http.StatusNotFound {
		t.Errorf("after undeploy, %s answers %d, want 404:\n%s", scriptURL, code, body)
	}

	// The instance ran from RAM: the disk the VM had the whole time holds
	// nothing but zeros (the VM is off now, nothing is in flight).
	if _, err := os.Stat(vm.Disk); err != nil {
		t.Fatalf("the VM's disk: %v", err)
	}
	if off, err := firstNonZero(vm.Disk); err != nil {
		t.Fatal(err)
	} else if off >= 0 {
		t.Errorf("the VM's disk %s has data at byte %d: a ramdisk deploy must write nothing", vm.Disk, off)
	}
	t.Logf("ramdisk: scenario took %.1fs", time.Since(begin).Seconds())
}
