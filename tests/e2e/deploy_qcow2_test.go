package e2e

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/ironflow/ironflow/embedded"
)

// TestDeployQcow2 deploys the test disk as a compressed qcow2 image
// (qemu-img convert -O qcow2 -c) on a SeaBIOS VM behind ipmi_sim: the agent
// converts it to the disk as it downloads, with the qcow2 file's sha256
// checked; the VM boots from disk, and the disk's first virtual-size bytes
// are qemu-img convert -O raw's of the same image. No config drive, so
// that nothing but the image is written to the disk.
func TestDeployQcow2(t *testing.T) {
	RequireQEMU(t)
	if _, err := exec.LookPath("qemu-img"); err != nil {
		t.Skip("qemu-img (Debian package qemu-utils) is needed")
	}
	lab := NewLab(t)
	s := startStack(t, lab)
	raw, _, err := BuildTestImage(DefaultCacheDir())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	img, ref := filepath.Join(dir, "e2e-test.qcow2"), filepath.Join(dir, "ref.raw")
	for _, args := range [][]string{
		{"convert", "-f", "raw", "-O", "qcow2", "-c", raw, img},
		{"convert", "-f", "qcow2", "-O", "raw", img, ref},
	} {
		if out, err := exec.Command("qemu-img", args...).CombinedOutput(); err != nil {
			t.Fatalf("qemu-img %v: %v\n%s", args, err, out)
		}
	}
	sum, err := fileSHA256(img)
	if err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(img); err == nil {
		t.Logf("qcow2 image: %d bytes for a %d-byte disk", st.Size(), imageSize)
	}
	url := s.publishImage(t, img, "e2e-test.qcow2")

	vm := lab.AddVM("node-q", "52:54:00:e2:10:01", FirmwareBIOS, filepath.Join(lab.Dir, "vm-node-q", "disk.raw"))
	password := newBMCPassword()
	startIPMISim(t, s, agentVM(vm), password)
	begin := time.Now()
	uuid := createIPMINode(t, s, vm, "e2e-q", password, "--deploy-interface", "direct", "--no-automated-clean")
	defer printNodeHistory(t, s, uuid)
	s.mustCLI(t, "node", "manage", uuid, "--wait", seconds(manageWait))
	s.mustCLI(t, "node", "provide", uuid, "--wait", seconds(provideWait))
	s.mustCLI(t, "node", "set", uuid,
		"--instance-info", "image_source="+url,
		"--instance-info", "image_disk_format=qcow2",
		"--instance-info", "image_os_hash_algo=sha256",
		"--instance-info", "image_os_hash_value="+sum)
	if _, err := s.baremetal(t, "node", "deploy", uuid, "--wait", seconds(deployWait)); err != nil {
		s.failStep(t, uuid, vm.SerialLog, err)
	}
	t.Logf("qcow2 deploy reached active %.1fs after node create", time.Since(begin).Seconds())

	ctx, cancel := context.WithTimeout(context.Background(), DefaultBootTimeout)
	defer cancel()
	if _, err := WaitSerial(ctx, vm.SerialLog, "IRONFLOW-E2E booted-from-disk firmware=bios", nil); err != nil {
		t.Fatalf("the VM did not boot the qcow2 image from its disk: %v\n%s", err, embedded.Tail(vm.SerialLog, 3000))
	}
	want, err := fileSHA256(ref)
	if err != nil {
		t.Fatal(err)
	}
	got, err := prefixSHA256(vm.Disk, imageSize)
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Fatalf("the disk's first %d bytes hash %s, qemu-img convert -O raw of the image %s", imageSize, got, want)
	}
	t.Logf("the disk equals qemu-img convert -O raw of the qcow2 image (sha256 %s)", want)
}
