package e2e

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ironflow/ironflow/embedded"
)

// rescueWait bounds a rescue or an unrescue: a power cycle and an agent
// boot under TCG.
const rescueWait = 10 * time.Minute

// rescueLab starts a lab and its stack, builds the test image and adds the
// VM name (mac, firmware) on a disk of its own; it returns the stack, the
// VM and the image's sha256 sum.
func rescueLab(t *testing.T, name, mac, firmware string) (*stack, *LabVM, string) {
	t.Helper()
	RequireQEMU(t)
	lab := NewLab(t)
	s := startStack(t, lab)
	_, sum, err := BuildTestImage(DefaultCacheDir())
	if err != nil {
		t.Fatal(err)
	}
	vm := lab.AddVM(name, mac, firmware, filepath.Join(lab.Dir, "vm-"+name, "disk.raw"))
	return s, vm, sum
}

// deployBooted takes the enrolled node uuid to active with the test image
// (sha256 sum) and waits until the VM booted it.
func deployBooted(t *testing.T, s *stack, uuid string, vm *LabVM, sum string) {
	t.Helper()
	s.availableWithTestImage(t, uuid, sum)
	pubKey := "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIE2Erescue " + vm.Name
	s.deploy(t, uuid, vm, vm.Name, pubKey)
	waitBootedFromDisk(t, vm, vm.Name, pubKey)
}

// rescueAndUnrescue rescues the deployed, booted node uuid with the
// baremetal CLI and checks the console, the disk and the logs, then
// unrescues it and waits for the disk to boot again.
func rescueAndUnrescue(t *testing.T, s *stack, uuid string, vm *LabVM) {
	t.Helper()
	var pw [8]byte
	before := diskDigest(t, vm.Disk)

	_, _ = rand.Read(pw[:])
	rescuePassword := "rescue-" + hex.EncodeToString(pw[:])
	begin := time.Now()
	if _, err := s.runCLI(t, false, "node", "rescue", uuid, "--rescue-password", rescuePassword, "--wait", seconds(rescueWait)); err != nil {
		t.Fatalf("rescue: %v\nnode: %s\n%s\nVM console tail:\n%s", strings.ReplaceAll(err.Error(), rescuePassword, "******"),
			s.nodeShow(t, uuid), s.logTail(), embedded.Tail(vm.SerialLog, 3000))
	}
	printTimeline(t, s, uuid, "rescue")
	t.Logf("rescue: node in rescue %.1fs after the verb", time.Since(begin).Seconds())
	if f := s.nodeFields(t, uuid); f["provision_state"] != "rescue" || f["power_state"] != "power on" {
		t.Fatalf("after rescue: %v / %v", f["provision_state"], f["power_state"])
	}
	ctx, cancel := context.WithTimeout(context.Background(), DefaultBootTimeout)
	defer cancel()
	line, err := WaitSerial(ctx, vm.SerialLog, "IRONFLOW-RESCUE user=rescue password=sha512-crypt agent=stopped", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("rescue: the agent on the console: %s", strings.TrimSpace(line))
	if after := diskDigest(t, vm.Disk); after != before {
		t.Fatal("rescue changed the deployed disk")
	}
	if h, err := workflowHistory(s, uuid); err != nil || strings.Contains(string(h), rescuePassword) {
		t.Fatalf("the RescueNode history holds the rescue password (or cannot be read: %v)", err)
	}

	begin = time.Now()
	if _, err := s.baremetal(t, "node", "unrescue", uuid, "--wait", seconds(rescueWait)); err != nil {
		t.Fatalf("unrescue: %v\nnode: %s\n%s\nVM console tail:\n%s", err, s.nodeShow(t, uuid), s.logTail(), embedded.Tail(vm.SerialLog, 3000))
	}
	printTimeline(t, s, uuid, "unrescue")
	if f := s.nodeFields(t, uuid); f["provision_state"] != "active" || f["power_state"] != "power on" {
		t.Fatalf("after unrescue: %v / %v", f["provision_state"], f["power_state"])
	}
	// The disk boots again: a second booted-from-disk marker.
	deadline := time.Now().Add(DefaultBootTimeout)
	for countLines(vm.SerialLog, "IRONFLOW-E2E booted-from-disk firmware="+vm.Firmware) < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("unrescue: the VM did not boot its disk again; console tail:\n%s", embedded.Tail(vm.SerialLog, 3000))
		}
		time.Sleep(serialPollInterval)
	}
	t.Logf("unrescue: the VM booted its disk again %.1fs after the verb", time.Since(begin).Seconds())
	if after := diskDigest(t, vm.Disk); after != before {
		t.Fatal("unrescue changed the deployed disk")
	}
	for _, p := range s.procs {
		if data, _ := os.ReadFile(p.Log); strings.Contains(string(data), rescuePassword) {
			t.Errorf("the rescue password is in the %s log", p.Name)
		}
	}
}

// diskDigest hashes what a deploy writes on a VM's disk: the test image at
// its start and the config drive at its end.
func diskDigest(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		t.Fatal(err)
	}
	const head, tail = 128 << 20, 64 << 20
	h := sha256.New()
	if _, err := io.Copy(h, io.NewSectionReader(f, 0, head)); err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(h, io.NewSectionReader(f, fi.Size()-tail, tail)); err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%x", h.Sum(nil))
}
