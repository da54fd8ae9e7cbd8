package agent

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"testing/iotest"

	"golang.org/x/sys/unix"
)

// memDisk is a disk in memory that can fail a write at one offset.
type memDisk struct {
	mu     sync.Mutex
	data   []byte
	failAt int64 // -1: never
	writes int
}

func newMemDisk(size int) *memDisk { return &memDisk{data: make([]byte, size), failAt: -1} }

func (d *memDisk) WriteAt(p []byte, off int64) (int, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.writes++
	if d.failAt >= 0 && off <= d.failAt && d.failAt < off+int64(len(p)) {
		return 0, errors.New("medium error")
	}
	if off+int64(len(p)) > int64(len(d.data)) {
		return 0, io.ErrShortWrite
	}
	return copy(d.data[off:], p), nil
}

func TestPipeToDevice(t *testing.T) {
	const chunk = 3 * pageSize
	img := testImage(4 << 20)
	for _, tc := range []struct {
		name  string
		size  int
		chunk int
		src   func(io.Reader) io.Reader
	}{
		{"empty", 0, chunk, nil},
		{"one byte", 1, chunk, nil},
		{"one chunk less a byte", chunk - 1, chunk, nil},
		{"one chunk", chunk, chunk, nil},
		{"many chunks and a tail", 100*chunk + 7, chunk, nil},
		{"unaligned chunk size", 100*chunk + 7, 5000, nil},
		{"default chunk size", len(img), DefaultChunkSize, nil},
		// Short reads: a download delivers whatever the socket has.
		{"one byte reads", 3*chunk + 5, chunk, iotest.OneByteReader},
		{"half reads", 10*chunk + 5, chunk, iotest.HalfReader},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := img[:tc.size]
			var src io.Reader = bytes.NewReader(want)
			if tc.src != nil {
				src = tc.src(src)
			}
			disk := newMemDisk(len(img))
			h := sha256.New()
			var last int64
			n, err := pipeToDevice(context.Background(), src, disk, int64(len(disk.data)), tc.chunk, h, func(w int64) {
				if w <= last {
					t.Errorf("progress went from %d to %d", last, w)
				}
				last = w
			})
			if err != nil {
				t.Fatal(err)
			}
			if n != int64(tc.size) || (tc.size > 0 && last != n) {
				t.Fatalf("wrote %d bytes, last progress %d, want %d", n, last, tc.size)
			}
			if !bytes.Equal(disk.data[:tc.size], want) {
				t.Fatal("disk content differs from the image")
			}
			if got := hex.EncodeToString(h.Sum(nil)); got != sha256hex(want) {
				t.Fatalf("hash of what was written %s, want %s", got, sha256hex(want))
			}
		})
	}
}

func TestPipeToDeviceFailures(t *testing.T) {
	const chunk = 4 * pageSize
	img := testImage(1 << 20)
	brokenAt := int64(10*chunk + 100)
	for _, tc := range []struct {
		name    string
		src     io.Reader
		disk    *memDisk
		devSize int64
		want    string
		// maxWritten bounds what may be on the disk after the failure.
		maxWritten int64
	}{
		{"disk smaller than the image", bytes.NewReader(img), newMemDisk(len(img)), int64(len(img) - 1),
			fmt.Sprintf("image is larger than the %d-byte disk", len(img)-1), int64(len(img) - 1)},
		{"broken download", io.MultiReader(bytes.NewReader(img[:brokenAt]), iotest.ErrReader(errors.New("connection reset"))), newMemDisk(len(img)), int64(len(img)),
			fmt.Sprintf("read at offset %d: connection reset", brokenAt), brokenAt},
		{"write error", bytes.NewReader(img), &memDisk{data: make([]byte, len(img)), failAt: 5*chunk + 3}, int64(len(img)),
			fmt.Sprintf("write at offset %d: medium error", 5*chunk), 5 * chunk},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, err := pipeToDevice(context.Background(), tc.src, tc.disk, tc.devSize, chunk, sha256.New(), func(int64) {})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("want error %q, got %v", tc.want, err)
			}
			if n > tc.maxWritten {
				t.Fatalf("reported %d bytes written, at most %d possible", n, tc.maxWritten)
			}
		})
	}
}

// cancellingReader cancels its context after after bytes and goes on
// delivering data, as a fast download would.
type cancellingReader struct {
	r      io.Reader
	after  int64
	read   int64
	cancel context.CancelFunc
}

func (c *cancellingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.read += int64(n)
	if c.read >= c.after {
		c.cancel()
	}
	return n, err
}

func TestPipeToDeviceCancelled(t *testing.T) {
	const chunk = pageSize
	img := testImage(4 << 20)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	disk := newMemDisk(len(img))
	src := &cancellingReader{r: bytes.NewReader(img), after: 3 * chunk, cancel: cancel}
	n, err := pipeToDevice(ctx, src, disk, int64(len(img)), chunk, sha256.New(), func(int64) {})
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("want context.Canceled, got %v (%d bytes written)", err, n)
	}
	// It stops within the buffers already in flight, not at the end.
	if limit := int64((3 + 1 + writeBuffers) * chunk); src.read > limit || n > limit {
		t.Fatalf("read %d and wrote %d bytes after cancelling at %d", src.read, n, 3*chunk)
	}
}

// TestStreamImageRawHash checks the checksum of a raw image hashed beside
// the write, over many small chunks, against an exact and a wrong value,
// and that a download cut short without retries fails.
func TestStreamImageRawHash(t *testing.T) {
	img := testImage(1<<20 + 123)
	srv := newImageServer(t, map[string][]byte{"disk.img": img})
	cfg := DownloadConfig{ChunkSize: 2 * pageSize, Retries: -1}.withDefaults()
	for _, tc := range []struct {
		name, sum, want string
		cut             int64
	}{
		{"right", sha256hex(img), "", 0},
		{"wrong", sha256hex(img[1:]), "image checksum mismatch", 0},
		{"cut short", sha256hex(img), "read at offset 300000: unexpected EOF (gave up after 0 retries)", 300000},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv.cutAfter = tc.cut
			srv.cuts.Store(0)
			disk := newMemDisk(2 << 20)
			ck := expectedChecksum{Algo: "sha256", Value: tc.sum, Source: "test"}
			res, err := streamImage(context.Background(), defaultDownloadClient(), srv.URL+"/disk.img", ck, disk, int64(len(disk.data)), cfg, nil)
			if tc.want != "" {
				if err == nil || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("want error %q, got %v", tc.want, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if res.Digest != tc.sum || res.Written != int64(len(img)) || res.Downloaded != int64(len(img)) || res.Format != "raw" {
				t.Fatalf("result %+v", res)
			}
			if !bytes.Equal(disk.data[:len(img)], img) {
				t.Fatal("disk content differs from the image")
			}
		})
	}
}

// TestWriteImageToBlockDevice writes an image through a loop device, the
// way the agent opens a real disk, so the O_DIRECT path with its unaligned
// tail runs, and checks that the descriptor is left without O_DIRECT for
// the partition table and config drive writes that follow.
func TestWriteImageToBlockDevice(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SKIP: attaching a loop device needs root")
	}
	if _, err := exec.LookPath("losetup"); err != nil {
		t.Skip("SKIP: losetup is not installed; the O_DIRECT path needs a block device")
	}
	if _, err := os.Stat("/dev/loop-control"); err != nil {
		t.Skip("SKIP: this machine has no loop devices (/dev/loop-control)")
	}
	backing := filepath.Join(t.TempDir(), "disk.img")
	if err := os.WriteFile(backing, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(backing, 16<<20); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("losetup", "--find", "--show", backing).CombinedOutput()
	if err != nil {
		t.Skipf("SKIP: losetup cannot attach a loop device here: %v %s", err, out)
	}
	loop := strings.TrimSpace(string(out))
	t.Cleanup(func() { _ = exec.Command("losetup", "--detach", loop).Run() })

	img := testImage(3<<20 + 1000) // an unaligned tail
	srv := newImageServer(t, map[string][]byte{"disk.img": img})
	dev, err := (&LinuxHardware{}).Open(BlockDevice{Name: loop})
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	if w := newDiskWriter(dev, DefaultChunkSize); !w.direct {
		t.Fatalf("the loop device %s was not opened for O_DIRECT", loop)
	} else {
		w.finish()
	}
	cfg := DownloadConfig{}.withDefaults()
	ck := expectedChecksum{Algo: "sha256", Value: sha256hex(img), Source: "test"}
	res, err := streamImage(context.Background(), defaultDownloadClient(), srv.URL+"/disk.img", ck, dev, dev.Size(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Written != int64(len(img)) {
		t.Fatalf("wrote %d bytes, want %d", res.Written, len(img))
	}
	if directFlag(t, dev) {
		t.Fatal("O_DIRECT is still set after the image write")
	}
	// A small unaligned write, as the partition table fix makes, works.
	if _, err := dev.WriteAt([]byte("ironflow"), 12345); err != nil {
		t.Fatalf("unaligned write after the image: %v", err)
	}
	if err := dev.Sync(); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(img))
	if _, err := dev.ReadAt(got, 0); err != nil {
		t.Fatal(err)
	}
	copy(img[12345:], "ironflow")
	if !bytes.Equal(got, img) {
		t.Fatal("the loop device's content differs from the image")
	}
}

// directFlag says whether dev's descriptor has O_DIRECT.
func directFlag(t *testing.T, dev Device) bool {
	flags, err := unix.FcntlInt(dev.(fdHolder).Fd(), unix.F_GETFL, 0)
	if err != nil {
		t.Fatal(err)
	}
	return flags&unix.O_DIRECT != 0
}

// TestDiskWriterBoundsWriteback writes more than writebackLag into a file
// "disk": writes go through the page cache (no O_DIRECT on a file), and no
// more than writebackLag is left unwaited for the final sync.
func TestDiskWriterBoundsWriteback(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "disk.img"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := newDiskWriter(f, DefaultChunkSize)
	if w.direct || !w.hints {
		t.Fatalf("a file disk: direct %v, writeback hints %v; want buffered with hints", w.direct, w.hints)
	}
	buf := alignedBuffer(DefaultChunkSize)
	h := sha256.New()
	const total = writebackLag + 5*DefaultChunkSize
	for off := int64(0); off < total; off += DefaultChunkSize {
		for i := range buf {
			buf[i] = byte(off>>20) ^ byte(i)
		}
		h.Write(buf)
		if err := w.writeAt(buf, off); err != nil {
			t.Fatal(err)
		}
		if w.pendingLen > writebackLag {
			t.Fatalf("%d bytes in flight at offset %d, want at most %d", w.pendingLen, off, writebackLag)
		}
	}
	w.finish()
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		t.Fatal(err)
	}
	back := sha256.New()
	if n, err := io.Copy(back, f); err != nil || n != total {
		t.Fatalf("read back %d bytes: %v", n, err)
	}
	if !bytes.Equal(back.Sum(nil), h.Sum(nil)) {
		t.Fatal("the file differs from what was written")
	}
}
