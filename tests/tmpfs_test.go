package tests

import (
	"context"
	"os"
	"os/exec"
	"testing"

	"github.com/ironflow/ironflow/agent"
)

// smallDisk mounts a tmpfs of size (mount's size=, e.g. "12m") on a new
// directory, for a test of a full disk, and unmounts it when the test
// ends; it skips, loudly, a test not run as root.
func smallDisk(t *testing.T, size string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("SKIPPED LOUDLY: a full disk needs a tmpfs mount, which needs root; run the tests as root")
	}
	dir, err := os.MkdirTemp("", "ironflow-small-disk-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size+",mode=0755", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Fatalf("mount a tmpfs: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", dir).Run() })
	return dir
}

// diskHead reads the first n bytes of a simulated machine's first disk
// (which keeps its first MiB of whatever was written).
func diskHead(t *testing.T, hw agent.Hardware, n int) []byte {
	t.Helper()
	bds, _ := hw.BlockDevices(context.Background())
	if len(bds) == 0 {
		t.Fatal("the simulated machine has no disk")
	}
	dev, err := hw.Open(bds[0])
	if err != nil {
		t.Fatal(err)
	}
	head := make([]byte, n)
	if _, err := dev.(interface {
		ReadAt([]byte, int64) (int, error)
	}).ReadAt(head, 0); err != nil {
		t.Fatal(err)
	}
	return head
}
