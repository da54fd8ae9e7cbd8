package e2e

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ironflow/ironflow/embedded"
	"github.com/ironflow/ironflow/pxe"
	"github.com/ironflow/ironflow/tests/installer"
)

// anacondaErrorMessage is the %onerror heartbeat message of the scenario's
// own kickstart template, so last_error can be traced to the kickstart the
// installer ran.
const anacondaErrorMessage = "Error: the e2e installer could not install the image"

// TestDeployAnacondaKickstart deploys a SeaBIOS VM behind `ironflow vbmc serve`
// (Redfish, iPXE) with deploy_interface anaconda: the machine network-boots
// the Debian kernel with the test installer (tests/installer), which fetches
// the kickstart ironflow serves (inst.ks=), heartbeats from %pre, writes the
// e2e test image to the disk and heartbeats end from %post; ironflow then
// boots the machine from its disk, where the test image's init runs.
//
// Then the error path: the image 404s, the installer runs %onerror from a
// kickstart template (ks_template, fetched by ironflow from a URL), and the
// node ends in deploy failed with that heartbeat's message.
func TestDeployAnacondaKickstart(t *testing.T) {
	RequireQEMU(t)
	begin := time.Now()
	lab := NewLab(t)
	s := startStack(t, lab, "--automated-clean=false")
	vmlinuz, _, err := ensureKernel()
	if err != nil {
		t.Fatal(err)
	}
	_, sum, err := BuildTestImage(DefaultCacheDir())
	if err != nil {
		t.Fatal(err)
	}
	initrd := filepath.Join(lab.Dir, "installer.cpio")
	if err := installer.BuildInitramfs(initrd, installer.Options{KernelDir: KernelDir()}); err != nil {
		t.Fatal(err)
	}
	kernelURL := s.publishImage(t, vmlinuz, "installer.vmlinuz")
	initrdURL := s.publishImage(t, initrd, "installer.cpio")
	imageURL := s.imageURL("e2e-test.img") // newStack put the test image there

	vm := lab.AddVM("node-ks", "52:54:00:e2:0e:01", FirmwareBIOS, filepath.Join(lab.Dir, "vm-node-ks", "disk.raw"))
	bmc := startRedfishBMC(t, s, vmDefinition(vm, 1, AgentMemoryMB, vmDiskSize))
	uuid := createRedfishNode(t, s, bmc, vm.Name, vm.Firmware, vm.MAC,
		"--deploy-interface", "anaconda", "--boot-interface", "ipxe")
	defer printNodeHistory(t, s, uuid)
	s.mustCLI(t, "node", "manage", uuid, "--wait", seconds(manageWait))
	s.mustCLI(t, "node", "provide", uuid, "--wait", seconds(provideWait))
	s.mustCLI(t, "node", "set", uuid,
		"--instance-info", "kernel="+kernelURL,
		"--instance-info", "ramdisk="+initrdURL,
		"--instance-info", "image_source="+imageURL)

	// The config drive rides in the kickstart's %post (cloud-init's seed
	// directory), as with Ironic's anaconda interface.
	const pubKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIE2Eanaconda e2e"
	cd, err := json.Marshal(map[string]any{"meta_data": map[string]any{
		"hostname": "e2e-ks", "public_keys": map[string]string{"0": pubKey}}})
	if err != nil {
		t.Fatal(err)
	}
	deployStart := time.Now()
	if _, err := s.baremetal(t, "node", "deploy", uuid, "--config-drive", string(cd), "--wait", seconds(deployWait)); err != nil {
		s.failStep(t, uuid, vm.SerialLog, err)
	}
	printTimeline(t, s, uuid, "anaconda deploy")
	t.Logf("anaconda: node active %.1fs after deploy", time.Since(deployStart).Seconds())

	// The installer ran the kickstart through: its markers, in order, up
	// to the image written. Its last %post is ironflow's "end" callback,
	// which made the node active; ironflow reboots the machine on it, as
	// Ironic does, so the installer's own "done" after that %post may
	// never reach the console (it did not, once, with two VM tests at a
	// time).
	console, err := os.ReadFile(vm.SerialLog)
	if err != nil {
		t.Fatal(err)
	}
	at := 0
	for _, m := range []string{installer.MarkerStart, installer.MarkerNetwork, installer.MarkerKS, installer.MarkerPre,
		installer.MarkerImage} {
		i := strings.Index(string(console[at:]), m)
		if i < 0 {
			t.Fatalf("anaconda: no %q on the console after byte %d; console tail:\n%s", m, at, embedded.Tail(vm.SerialLog, 3000))
		}
		at += i + len(m)
	}
	if strings.Contains(string(console), installer.MarkerError) {
		t.Errorf("anaconda: the installer reported an error; console tail:\n%s", embedded.Tail(vm.SerialLog, 3000))
	}
	// The kickstart's inst.ks= came from the boot service; it held the
	// token and is gone with the boot configuration.
	ksURL := "http://" + bootListen + "/boot/" + uuid + "/ks.cfg"
	if code, _ := labGet(t, lab, ksURL); code != http.StatusNotFound {
		t.Errorf("anaconda: active node's kickstart %s answers %d, want 404 (boot configuration removed)", ksURL, code)
	}

	// ironflow booted the machine from its disk: the installed test image.
	ctx, cancel := context.WithTimeout(context.Background(), DefaultBootTimeout)
	defer cancel()
	line, err := WaitSerial(ctx, vm.SerialLog, "IRONFLOW-E2E booted-from-disk firmware=bios", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("anaconda: %s, %.1fs after deploy", line, time.Since(deployStart).Seconds())
	if got, err := prefixSHA256(vm.Disk, imageSize); err != nil {
		t.Fatal(err)
	} else if got != sum {
		t.Errorf("anaconda: the disk's first %d bytes hash to %s, want the test image's %s", imageSize, got, sum)
	}
	if f := s.nodeFields(t, uuid); f["provision_state"] != "active" || f["power_state"] != "power on" {
		t.Errorf("anaconda: node is %v / %v, want active / power on", f["provision_state"], f["power_state"])
	}

	// The error path, on the same machine.
	if _, err := s.baremetal(t, "node", "undeploy", uuid, "--wait", seconds(provideWait)); err != nil {
		s.failStep(t, uuid, vm.SerialLog, err)
	}
	if !strings.Contains(pxe.DefaultKickstartTemplate, anacondaDefaultErrorMessage) {
		t.Fatalf("the default kickstart template no longer has the %%onerror message %q", anacondaDefaultErrorMessage)
	}
	tmpl := filepath.Join(lab.Dir, "ks-error.tmpl")
	if err := os.WriteFile(tmpl, []byte(strings.Replace(pxe.DefaultKickstartTemplate, anacondaDefaultErrorMessage, anacondaErrorMessage, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	missing := s.imageURL("no-such-image.img")
	// Undeploy cleared instance_info, as Ironic's tear down does.
	s.mustCLI(t, "node", "set", uuid,
		"--instance-info", "kernel="+kernelURL,
		"--instance-info", "ramdisk="+initrdURL,
		"--instance-info", "image_source="+missing,
		"--instance-info", "ks_template="+s.publishImage(t, tmpl, "ks-error.tmpl"))
	mark, err := os.Stat(vm.SerialLog)
	if err != nil {
		t.Fatal(err)
	}
	failStart := time.Now()
	_, err = s.baremetal(t, "node", "deploy", uuid, "--wait", seconds(deployWait))
	printTimeline(t, s, uuid, "anaconda deploy with a missing image")
	if err == nil {
		t.Fatalf("anaconda: deploy of a missing image reached active\nnode: %s", s.nodeShow(t, uuid))
	}
	t.Logf("anaconda: deploy of a missing image ended %.1fs after it started: %v", time.Since(failStart).Seconds(), firstLine(err.Error()))
	f := s.nodeFields(t, uuid)
	lastError, _ := f["last_error"].(string)
	if f["provision_state"] != "deploy failed" || !strings.Contains(lastError, anacondaErrorMessage) {
		t.Errorf("anaconda: node is %v with last_error %q, want deploy failed with the kickstart's %%onerror message %q\n%s",
			f["provision_state"], lastError, anacondaErrorMessage, s.logTail())
	} else {
		t.Logf("anaconda: deploy failed, last_error: %s", lastError)
	}
	// The installer's own account of the failure on the console, after the
	// second deploy began.
	want := installer.MarkerError + " write " + missing
	if line, err := serialAfter(vm.SerialLog, mark.Size(), want); err != nil {
		t.Errorf("anaconda: %v; console tail:\n%s", err, embedded.Tail(vm.SerialLog, 3000))
	} else {
		t.Logf("anaconda: %s", line)
	}

	// The operator gives up on the failed deploy: undeploy takes the
	// installer's boot configuration (and the kickstart with its token)
	// away and the node is available again.
	if _, err := s.baremetal(t, "node", "undeploy", uuid, "--wait", seconds(provideWait)); err != nil {
		s.failStep(t, uuid, vm.SerialLog, err)
	}
	if f := s.nodeFields(t, uuid); f["provision_state"] != "available" || f["power_state"] != "power off" {
		t.Errorf("anaconda: after undeploy of the failed deploy the node is %v / %v, want available / power off", f["provision_state"], f["power_state"])
	}
	if code, _ := labGet(t, lab, ksURL); code != http.StatusNotFound {
		t.Errorf("anaconda: after undeploy %s answers %d, want 404", ksURL, code)
	}
	t.Logf("anaconda: scenario took %.1fs", time.Since(begin).Seconds())
}

// anacondaDefaultErrorMessage is the %onerror message of ironflow's default
// kickstart, which the scenario's template replaces.
const anacondaDefaultErrorMessage = "Error: Deploying using anaconda. Check console for more information."

// prefixSHA256 hashes the first n bytes of a file.
func prefixSHA256(path string, n int64) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.CopyN(h, f, n); err != nil {
		return "", fmt.Errorf("hash the first %d bytes of %s: %w", n, path, err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// serialAfter returns the first console line after byte off that
// contains substr.
func serialAfter(path string, off int64, substr string) (string, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	if off > int64(len(b)) {
		off = int64(len(b))
	}
	for _, l := range strings.Split(string(b[off:]), "\n") {
		if strings.Contains(l, substr) {
			return strings.TrimRight(l, "\r"), nil
		}
	}
	return "", fmt.Errorf("no %q on the console after byte %d", substr, off)
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}
