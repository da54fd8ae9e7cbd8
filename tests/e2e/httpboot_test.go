package e2e

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ironflow/ironflow/embedded"
)

// TestDeployUEFIHTTPBootWithoutTFTP deploys an OVMF VM behind `ironflow
// vbmc serve` whose boot interface is http-ipxe, on a stack that runs no
// TFTP server (docs/bmcs-and-boot.md, "UEFI HTTP boot"): the VM's
// firmware network-boots over UEFI HTTP only (vbmc http_boot: no iPXE
// option ROM, OVMF's PXE boot options off), DHCP answers its "HTTPClient"
// request with the URL of snponly.efi on the boot service, iPXE gets the
// node's script, the agent boots over HTTP and writes the image; the VM
// then boots its disk and reads its config drive.
//
// Bad input first, on a second node of the same BMC whose cpu_arch has no
// loader configured: its deploy fails in the boot preparation with a
// last_error naming the architecture and the setting, and its machine is
// never powered on.
func TestDeployUEFIHTTPBootWithoutTFTP(t *testing.T) {
	RequireQEMU(t)
	begin := time.Now()
	lab := NewLab(t)
	// --tftp-listen= turns the boot service's TFTP off. The worker boots
	// an aarch64 agent too (make ramdisk-arm64), so that the aarch64 node
	// below fails on what it lacks here: a UEFI HTTP boot loader.
	s := startStack(t, lab, "--automated-clean=false", "--tftp-listen=", "--agent-architectures=x86_64,aarch64")
	_, sum, err := BuildTestImage(DefaultCacheDir())
	if err != nil {
		t.Fatal(err)
	}
	vm := lab.AddVM("node-http", "52:54:00:e2:16:01", FirmwareUEFI, filepath.Join(lab.Dir, "vm-node-http", "disk.raw"))
	arm := lab.AddVM("node-http-arm", "52:54:00:e2:16:02", FirmwareUEFI, filepath.Join(lab.Dir, "vm-node-http-arm", "disk.raw"))
	// A third boots the agent ISO by the URL its BMC gives its firmware
	// (redfish-https), beside the http-ipxe deploy.
	rf := lab.AddVM("node-rf-https", "52:54:00:e2:16:03", FirmwareUEFI, filepath.Join(lab.Dir, "vm-node-rf-https", "disk.raw"))
	def, armDef, rfDef := agentVM(vm), agentVM(arm), agentVM(rf)
	def.HTTPBoot, armDef.HTTPBoot, rfDef.HTTPBoot = true, true, true
	bmc := startRedfishBMC(t, s, def, armDef, rfDef)
	devLog := filepath.Join(lab.Dir, "ironflow-dev.log")

	enroll := func(v *LabVM, bootInterface string, extra ...string) string {
		t.Helper()
		uuid := createRedfishNode(t, s, bmc, v.Name, v.Firmware, v.MAC, append([]string{
			"--deploy-interface", "direct", "--boot-interface", bootInterface, "--no-automated-clean"}, extra...)...)
		s.availableWithTestImage(t, uuid, sum)
		return uuid
	}

	// Bad input: no loader for aarch64.
	armUUID := enroll(arm, "http-ipxe", "--property", "cpu_arch=aarch64")
	s.mustCLI(t, "node", "deploy", armUUID)
	deadline := time.Now().Add(manageWait)
	var f map[string]any
	for {
		f = s.nodeFields(t, armUUID)
		if le, _ := f["last_error"].(string); le != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the aarch64 node's deploy recorded no last_error: %s", s.nodeShow(t, armUUID))
		}
		time.Sleep(time.Second)
	}
	le, _ := f["last_error"].(string)
	for _, want := range []string{"architecture aarch64", "--ipxe-bootfile-name-by-arch"} {
		if !strings.Contains(le, want) {
			t.Errorf("aarch64 node: last_error %q lacks %q", le, want)
		}
	}
	if f["power_state"] != "power off" {
		t.Errorf("aarch64 node: power_state %v after the failed boot preparation, want power off", f["power_state"])
	}
	if line, ok := lineWithAll(bmc.proc.Log, "vm="+arm.Name, "powered on"); ok {
		t.Errorf("aarch64 node's machine was powered on: %s", line)
	}
	t.Logf("bad input: %v, last_error %q", f["provision_state"], le)

	// The deploys over UEFI HTTP boot: http-ipxe (waited for) and
	// redfish-https (started first).
	uuid, rfUUID := enroll(vm, "http-ipxe"), enroll(rf, "redfish-https")
	defer printNodeHistory(t, s, uuid)
	defer printNodeHistory(t, s, rfUUID)
	const rfPubKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIE2ErfHttps e2e"
	s.deployNoWait(t, rfUUID, "e2e-rf-https", rfPubKey)
	const pubKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIE2EhttpBoot e2e"
	s.deploy(t, uuid, vm, "e2e-http", pubKey)
	printTimeline(t, s, uuid, "deploy over UEFI HTTP boot")
	waitBootedFromDisk(t, vm, "e2e-http", pubKey)
	if f := s.nodeFields(t, uuid); f["provision_state"] != "active" {
		t.Errorf("node is %v, want active", f["provision_state"])
	}
	wantHTTPBooted(t, devLog, vm, uuid, "IPv4")
	// The BMC's log names power-ons as the bad-input check above reads it.
	if _, ok := lineWithAll(bmc.proc.Log, "vm="+vm.Name, "powered on"); !ok {
		t.Errorf("the BMC's log shows no power-on of %s:\n%s", vm.Name, embedded.Tail(bmc.proc.Log, 3000))
	}
	if _, ok := findLine(devLog, "tftp listening"); ok {
		t.Errorf("the stack ran a TFTP server")
	}
	t.Logf("UEFI HTTP boot deploy: active and booted from disk %.1fs after the test began", time.Since(begin).Seconds())

	// redfish-https: the BMC was given the agent ISO's URL (UefiHttp with
	// HttpBootUri), the firmware fetched the ISO itself and booted it;
	// nothing was inserted as virtual media.
	waitProvisionState(t, s, rfUUID, "active", deployWait, rf.SerialLog)
	printTimeline(t, s, rfUUID, "deploy over redfish-https")
	waitBootedFromDisk(t, rf, "e2e-rf-https", rfPubKey)
	line, ok := lineWithAll(bmc.proc.Log, "redfish boot override", "vm="+rf.Name, "target=UefiHttp", "http_boot_uri=http://")
	if !ok {
		t.Errorf("the BMC was never told to boot %s from a URL:\n%s", rf.Name, embedded.Tail(bmc.proc.Log, 3000))
	} else {
		t.Logf("bmc: %s", line)
	}
	if _, ok := lineWithAll(devLog, "http request", "method=GET", "path=/iso/"+rfUUID, "status=200"); !ok {
		t.Errorf("the boot service served %s's ISO to no one; tail:\n%s", rfUUID, embedded.Tail(devLog, 3000))
	}
	if line, ok := findLine(rf.SerialLog, "Start HTTP Boot over IPv4"); !ok {
		t.Errorf("%s's firmware did not HTTP-boot; console tail:\n%s", rf.Name, embedded.Tail(rf.SerialLog, 3000))
	} else {
		t.Logf("console: %s", strings.TrimSpace(line[strings.Index(line, "Start"):]))
	}
	if line, ok := lineWithAll(bmc.proc.Log, "redfish insert media", "vm="+rf.Name); ok {
		t.Errorf("virtual media was inserted into %s: %s", rf.Name, line)
	}
	t.Logf("redfish-https deploy: active and booted from disk %.1fs after the test began", time.Since(begin).Seconds())
}

// wantHTTPBooted checks that vm's firmware booted node uuid over UEFI HTTP
// boot on family ("IPv4" or "IPv6"): the stack's log (devLog) has the
// DHCP offer of the loader's URL to the VM's MAC, the firmware's GET of the
// loader and iPXE's of the node's script, and the VM's console the
// firmware's HTTP boot and no PXE.
func wantHTTPBooted(t *testing.T, devLog string, vm *LabVM, uuid, family string) {
	t.Helper()
	for _, want := range [][]string{
		{"boot file offered", "http_boot=true", "/loaders/snponly.efi", vm.MAC},
		{"http request", "method=GET", "path=/loaders/snponly.efi", "status=200"},
		{"http request", "path=/boot/" + uuid + "/boot.ipxe", "status=200"},
	} {
		if line, ok := lineWithAll(devLog, want...); !ok {
			t.Errorf("the stack's log has no line with %q; tail:\n%s", want, embedded.Tail(devLog, 3000))
		} else {
			t.Logf("stack: %s", line)
		}
	}
	if line, ok := findLine(vm.SerialLog, "Start HTTP Boot over "+family); !ok {
		t.Errorf("%s's firmware did not HTTP-boot over %s; console tail:\n%s", vm.Name, family, embedded.Tail(vm.SerialLog, 3000))
	} else {
		t.Logf("console: %s", strings.TrimSpace(line[strings.Index(line, "Start"):]))
	}
	if line, ok := findLine(vm.SerialLog, "Start PXE over"); ok {
		t.Errorf("%s's firmware tried PXE: %s", vm.Name, strings.TrimSpace(line))
	}
}
