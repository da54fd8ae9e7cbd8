package imagecache

import (
	"context"
	"crypto/rand"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// mountTmpfs mounts a tmpfs of size (mount's -o size=) on a new directory.
// It needs root; the test says so loudly where it cannot mount.
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("SKIPPED: a full disk needs a tmpfs mount, which needs root")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("SKIPPED: cannot mount a tmpfs here: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", dir).Run() })
	return dir
}

// TestCacheOnAFullDisk runs the cache on a 8 MiB tmpfs while
// --image-cache-size allows far more: an image that does not fit beside an
// unused one evicts it and is downloaded again; one that does not fit
// beside an image in use fails with ErrFull, saying the disk is full and
// leaving no part file; the image in use is still served, intact; once the
// disk grows the same image is cached.
func TestCacheOnAFullDisk(t *testing.T) {
	dir := mountTmpfs(t, "8m")
	ctx := context.Background()
	img := func(n int) []byte {
		b := make([]byte, n)
		_, _ = rand.Read(b)
		return b
	}
	o := newOrigin(t, map[string][]byte{"a": img(3 << 20), "b": img(5 << 20), "c": img(6 << 20)})
	c, err := Open(filepath.Join(dir, "cache"), 1<<30)
	if err != nil {
		t.Fatal(err)
	}
	ha, err := c.Acquire(ctx, o.source("a"))
	if err != nil {
		t.Fatal(err)
	}
	ha.Release()

	// b fits on the disk only without a: the disk, not the size, says so.
	hb, err := c.Acquire(ctx, o.source("b"))
	if err != nil {
		t.Fatalf("an image that fits once the unused one is evicted: %v", err)
	}
	defer hb.Release()
	if c.Has("test:a") {
		t.Error("the unused image is still cached on a full disk")
	}

	// c does not fit beside b, which a deploy uses.
	_, err = c.Acquire(ctx, o.source("c"))
	if !errors.Is(err, ErrFull) || !strings.Contains(err.Error(), "no space left") {
		t.Fatalf("an image that cannot fit beside one in use: %v; want ErrFull saying the disk is full", err)
	}
	parts, _ := filepath.Glob(filepath.Join(dir, "cache", "*.part"))
	if len(parts) > 0 {
		t.Errorf("part files left on the full disk: %v", parts)
	}
	if c.Has("test:c") {
		t.Error("the image that did not fit is cached")
	}
	// What is served afterwards is whole.
	hb2, err := c.Acquire(ctx, o.source("b"))
	if err != nil {
		t.Fatalf("the image in use after the failure: %v", err)
	}
	hb2.e.verMod = hb2.e.verMod.Add(-1) // hash it again from the disk
	if err := c.verify(hb2.e); err != nil {
		t.Errorf("the image in use after the failure: %v", err)
	}
	hb2.Release()

	// Space returns: the image is cached.
	if out, err := exec.Command("mount", "-o", "remount,size=32m", dir).CombinedOutput(); err != nil {
		t.Fatalf("grow the tmpfs: %v: %s", err, out)
	}
	hc, err := c.Acquire(ctx, o.source("c"))
	if err != nil {
		t.Fatalf("once the disk has room: %v", err)
	}
	hc.Release()
}
