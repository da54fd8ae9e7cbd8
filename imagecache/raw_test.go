package imagecache

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// qcow2Fixture is a compressed qcow2 image made by qemu-img from a raw disk
// of random data, text and holes, and the raw disk `qemu-img convert -O
// raw` makes of it.
type qcow2Fixture struct {
	qcow2, raw []byte
}

func newQcow2Fixture(t testing.TB, size int) qcow2Fixture {
	t.Helper()
	if _, err := exec.LookPath("qemu-img"); err != nil {
		t.Skip("qemu-img not installed (scripts/install-deps.sh installs qemu-utils): the force_raw_images tests convert images it makes")
	}
	dir := t.TempDir()
	disk := make([]byte, size)
	r := rand.New(rand.NewPCG(5, 6))
	for off := 0; off < size; off += 1 << 20 {
		switch (off >> 20) % 3 {
		case 0:
			for i := off; i < off+512<<10; i++ {
				disk[i] = byte(r.Uint32())
			}
		case 1:
			copy(disk[off:], bytes.Repeat([]byte("ironflow qcow2 to raw "), 20000))
		}
	}
	src := filepath.Join(dir, "disk.img")
	if err := os.WriteFile(src, disk, 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) {
		if out, err := exec.Command("qemu-img", args...).CombinedOutput(); err != nil {
			t.Fatalf("qemu-img %v: %v\n%s", args, err, out)
		}
	}
	q := filepath.Join(dir, "disk.qcow2")
	run("convert", "-c", "-f", "raw", "-O", "qcow2", src, q)
	ref := filepath.Join(dir, "ref.raw")
	run("convert", "-f", "qcow2", "-O", "raw", q, ref)
	var fx qcow2Fixture
	var err error
	if fx.qcow2, err = os.ReadFile(q); err != nil {
		t.Fatal(err)
	}
	if fx.raw, err = os.ReadFile(ref); err != nil {
		t.Fatal(err)
	}
	return fx
}

func sha256Hex(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

// memSource serves b as the origin, counting fetches.
func memSource(key, format string, b []byte, hash string, fetches *int64, mu *sync.Mutex) Source {
	return Source{Key: key, Algo: "sha256", Hash: hash, Size: int64(len(b)), DiskFormat: format,
		Fetch: func(context.Context) (io.ReadCloser, error) {
			mu.Lock()
			*fetches++
			mu.Unlock()
			return io.NopCloser(bytes.NewReader(b)), nil
		}}
}

func TestForceRawConvertsOnceAndServesTheRawDisk(t *testing.T) {
	fx := newQcow2Fixture(t, 12<<20)
	c, err := Open(t.TempDir(), 64<<20)
	if err != nil {
		t.Fatal(err)
	}
	c.ForceRaw = true
	var fetches int64
	var mu sync.Mutex
	src := memSource("test:q", "qcow2", fx.qcow2, sha256Hex(fx.qcow2), &fetches, &mu)

	// Ten deploys at once: one download, one conversion, the same entry.
	var wg sync.WaitGroup
	handles := make([]*Handle, 10)
	errs := make([]error, 10)
	for i := range handles {
		wg.Go(func() { handles[i], errs[i] = c.Acquire(context.Background(), src) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("acquire %d: %v", i, err)
		}
	}
	if fetches != 1 || c.Conversions.Load() != 1 {
		t.Fatalf("%d downloads and %d conversions for ten deploys, want one each", fetches, c.Conversions.Load())
	}
	h := handles[0]
	got, err := os.ReadFile(h.Path())
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, fx.raw) {
		t.Fatalf("the raw entry (%d bytes) differs from qemu-img convert -O raw (%d bytes)", len(got), len(fx.raw))
	}
	if algo, sum := h.Checksum(); algo != "sha256" || sum != sha256Hex(fx.raw) || h.Key() != "test:q#raw" {
		t.Fatalf("served %s %s %s", h.Key(), algo, sum)
	}
	// Only the raw entry is kept: the qcow2 one is removed once converted.
	if c.Has("test:q") || !c.Has("test:q#raw") || c.Used() != int64(len(fx.raw)) {
		t.Fatalf("after conversion: qcow2 kept %v, used %d, raw is %d bytes", c.Has("test:q"), c.Used(), len(fx.raw))
	}

	// In use, the raw entry is not evicted for another image; released,
	// it is.
	other := randBytes(60 << 20)
	osrc := memSource("test:other", "raw", other, sha256Hex(other), &fetches, &mu)
	if _, err := c.Acquire(context.Background(), osrc); !errors.Is(err, ErrFull) {
		t.Fatalf("another image while the raw one is in use: %v, want ErrFull", err)
	}
	for _, h := range handles {
		h.Release()
	}
	oh, err := c.Acquire(context.Background(), osrc)
	if err != nil {
		t.Fatalf("another image once the raw one is released: %v", err)
	}
	oh.Release()
	if c.Has("test:q#raw") {
		t.Fatal("the unused raw entry was not evicted")
	}

	// After a restart the raw entry is adopted, verified by its own
	// checksum, and served without a download or a conversion.
	h, err = c.Acquire(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}
	h.Release()
	c2, err := Open(c.dir, 64<<20)
	if err != nil {
		t.Fatal(err)
	}
	c2.ForceRaw = true
	before := fetches
	h, err = c2.Acquire(context.Background(), src)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Release()
	if got, _ := os.ReadFile(h.Path()); !bytes.Equal(got, fx.raw) || fetches != before || c2.Conversions.Load() != 0 {
		t.Fatalf("after a restart: %d more downloads, %d conversions", fetches-before, c2.Conversions.Load())
	}
}

func TestForceRawVerifiesTheOriginFirstAndRefusesWhatItCannotConvert(t *testing.T) {
	fx := newQcow2Fixture(t, 4<<20)
	var fetches int64
	var mu sync.Mutex
	open := func() *Cache {
		c, err := Open(t.TempDir(), 0)
		if err != nil {
			t.Fatal(err)
		}
		c.ForceRaw = true
		return c
	}

	c := open()
	_, err := c.Acquire(context.Background(), memSource("test:bad", "qcow2", fx.qcow2, sha256Hex([]byte("other")), &fetches, &mu))
	if !errors.Is(err, ErrChecksum) || c.Conversions.Load() != 0 {
		t.Fatalf("a qcow2 image that fails its checksum: %v, %d conversions", err, c.Conversions.Load())
	}

	raw := randBytes(1 << 20)
	c = open()
	if _, err := c.Acquire(context.Background(), memSource("test:liar", "qcow2", raw, sha256Hex(raw), &fetches, &mu)); !errors.Is(err, ErrFormat) {
		t.Fatalf("a raw image declared qcow2: %v, want ErrFormat", err)
	}

	// Not declared: a raw image is served as it came, under its own key
	// and checksum.
	c = open()
	h, err := c.Acquire(context.Background(), memSource("test:raw", "", raw, sha256Hex(raw), &fetches, &mu))
	if err != nil {
		t.Fatal(err)
	}
	if _, sum := h.Checksum(); h.Key() != "test:raw" || sum != sha256Hex(raw) || c.Conversions.Load() != 0 {
		t.Fatalf("an undeclared raw image: %s %s, %d conversions", h.Key(), sum, c.Conversions.Load())
	}
	h.Release()

	// Not declared, qcow2 inside: converted.
	h, err = c.Acquire(context.Background(), memSource("test:q", "", fx.qcow2, sha256Hex(fx.qcow2), &fetches, &mu))
	if err != nil {
		t.Fatal(err)
	}
	if h.Key() != "test:q#raw" {
		t.Fatalf("an undeclared qcow2 image served as %s", h.Key())
	}
	h.Release()

	// Declared raw: never converted, whatever its bytes (the agent
	// refuses the mismatch).
	c = open()
	h, err = c.Acquire(context.Background(), memSource("test:q", "raw", fx.qcow2, sha256Hex(fx.qcow2), &fetches, &mu))
	if err != nil || h.Key() != "test:q" || c.Conversions.Load() != 0 {
		t.Fatalf("a qcow2 image declared raw: %v", err)
	}
	h.Release()

	// A corrupt qcow2 image: refused with the converter's reason, and the
	// agent told so with a 4xx.
	bad := bytes.Clone(fx.qcow2)
	copy(bad[20:24], []byte{0, 0, 0, 40}) // cluster_bits 40
	c = open()
	s := &Server{Cache: c, Resolve: func(context.Context, string) (Source, error) {
		return memSource("test:corrupt", "qcow2", bad, sha256Hex(bad), &fetches, &mu), nil
	}}
	hs := httptest.NewServer(s)
	defer hs.Close()
	resp, err := http.Get(hs.URL + ChecksumPath("6f2c7e1a-0d9b-4b8e-9a51-3c1d2e4f5a6b"))
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(string(body), "corrupt qcow2 image") {
		t.Fatalf("a corrupt qcow2 image: HTTP %d %q", resp.StatusCode, body)
	}
}

func TestTheChecksumOfTheServedImage(t *testing.T) {
	fx := newQcow2Fixture(t, 4<<20)
	c, _ := Open(t.TempDir(), 0)
	c.ForceRaw = true
	var fetches int64
	var mu sync.Mutex
	s := &Server{Cache: c, Resolve: func(context.Context, string) (Source, error) {
		return memSource("test:q", "qcow2", fx.qcow2, sha256Hex(fx.qcow2), &fetches, &mu), nil
	}}
	hs := httptest.NewServer(s)
	defer hs.Close()
	const node = "6f2c7e1a-0d9b-4b8e-9a51-3c1d2e4f5a6b"
	get := func(path string) []byte {
		resp, err := http.Get(hs.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("GET %s: HTTP %d %s", path, resp.StatusCode, b)
		}
		return b
	}
	if got, want := string(get(ChecksumPath(node))), sha256Hex(fx.raw)+"  image\n"; got != want {
		t.Fatalf("checksum %q, want %q", got, want)
	}
	if img := get(CachePath(node)); !bytes.Equal(img, fx.raw) {
		t.Fatal("the image served is not the raw disk")
	}
	if fetches != 1 || c.Conversions.Load() != 1 {
		t.Fatalf("%d downloads, %d conversions", fetches, c.Conversions.Load())
	}
}

// BenchmarkForceRawConversion measures the cache's qcow2 → raw conversion
// (download from memory, checksum, conversion, sha256 of the raw entry)
// against what Ironic's conductor does for force_raw_images with the same
// file in the same run (sha256sum of the qcow2 file, qemu-img convert -O
// raw, sha256sum of the raw disk for the agent), in MB/s of the virtual
// disk.
func BenchmarkForceRawConversion(b *testing.B) {
	const size = 64 << 20
	fx := newQcow2Fixture(b, size)
	dir := b.TempDir()
	q := filepath.Join(dir, "disk.qcow2")
	if err := os.WriteFile(q, fx.qcow2, 0o644); err != nil {
		b.Fatal(err)
	}
	var fetches int64
	var mu sync.Mutex
	src := memSource("bench:q", "qcow2", fx.qcow2, sha256Hex(fx.qcow2), &fetches, &mu)
	var cache, qemu time.Duration
	for i := 0; b.Loop(); i++ {
		c, err := Open(filepath.Join(dir, fmt.Sprint("cache", i)), 0)
		if err != nil {
			b.Fatal(err)
		}
		c.ForceRaw = true
		start := time.Now()
		h, err := c.Acquire(context.Background(), src)
		if err != nil {
			b.Fatal(err)
		}
		cache += time.Since(start)
		h.Release()
		os.RemoveAll(c.dir)
		out := filepath.Join(dir, "out.raw")
		start = time.Now()
		for _, cmd := range [][]string{{"sha256sum", q}, {"qemu-img", "convert", "-f", "qcow2", "-O", "raw", q, out}, {"sha256sum", out}} {
			if msg, err := exec.Command(cmd[0], cmd[1:]...).CombinedOutput(); err != nil {
				b.Fatalf("%v: %v\n%s", cmd, err, msg)
			}
		}
		qemu += time.Since(start)
		os.Remove(out)
	}
	mbps := func(d time.Duration) float64 { return float64(b.N) * size / 1e6 / d.Seconds() }
	b.ReportMetric(mbps(cache), "cache-MB/s")
	b.ReportMetric(mbps(qemu), "sha256sum+qemu-img+sha256sum-MB/s")
	b.ReportMetric(mbps(cache)/mbps(qemu), "ratio")
}
