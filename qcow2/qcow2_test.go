package qcow2

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/klauspost/compress/flate"
)

func needQemuImg(t testing.TB) {
	t.Helper()
	if _, err := exec.LookPath("qemu-img"); err != nil {
		t.Skip("qemu-img not installed (scripts/install-deps.sh installs qemu-utils)")
	}
}

func qemuImg(t testing.TB, args ...string) {
	t.Helper()
	// Creating a LUKS-encrypted image times its key derivation by the
	// thread's CPU clock, and qemu-img gives up when a round measured 0 ms
	// ("Unable to get accurate CPU usage"), which a busy machine can cause:
	// that attempt is made again.
	for attempt := 1; ; attempt++ {
		out, err := exec.Command("qemu-img", args...).CombinedOutput()
		if err == nil {
			return
		}
		if attempt < 5 && strings.Contains(string(out), "Unable to get accurate CPU usage") {
			t.Logf("qemu-img %v, attempt %d: %s", args, attempt, out)
			continue
		}
		t.Fatalf("qemu-img %v: %v\n%s", args, err, out)
	}
}

// rawDisk writes a raw disk of size bytes with random data, text (which
// compresses), and holes, the shape of a real disk's contents.
func rawDisk(t testing.TB, dir string, size int64) string {
	t.Helper()
	p := filepath.Join(dir, "disk.raw")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	buf := make([]byte, 300<<10)
	for off := int64(0); off < size; off += 1 << 20 {
		switch (off >> 20) % 4 {
		case 0: // random, incompressible
			for i := range buf {
				buf[i] = byte(rng.Uint32())
			}
		case 1: // text
			for i := range buf {
				buf[i] = "ironflow qcow2 "[i%15]
			}
		default:
			continue // a hole
		}
		// Unaligned start: clusters partly data, partly zeros.
		if _, err := f.WriteAt(buf, off+4097); err != nil {
			t.Fatal(err)
		}
	}
	// The last byte, so that the disk's end is data.
	if _, err := f.WriteAt([]byte{0xaa}, size-1); err != nil {
		t.Fatal(err)
	}
	return p
}

// rawHash is the sha256 of qemu-img's own conversion of img.
func rawHash(t testing.TB, img string) [32]byte {
	t.Helper()
	out := filepath.Join(t.TempDir(), "ref.raw")
	qemuImg(t, "convert", "-O", "raw", img, out)
	return fileHash(t, out, -1)
}

func fileHash(t testing.TB, p string, n int64) [32]byte {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	var r io.Reader = f
	if n >= 0 {
		r = io.LimitReader(f, n)
	}
	if _, err := io.Copy(h, r); err != nil {
		t.Fatal(err)
	}
	return [32]byte(h.Sum(nil))
}

// convertFile converts img into a file prefilled with garbage (so that
// zeros must be written), or a fresh one with SkipZeros.
func convertFile(t testing.TB, img string, skipZeros bool) (string, Result) {
	t.Helper()
	in, err := os.Open(img)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	p := filepath.Join(t.TempDir(), "out.raw")
	out, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	if !skipZeros {
		junk := bytes.Repeat([]byte{0x5a}, 1<<20)
		for range 40 {
			if _, err := out.Write(junk); err != nil {
				t.Fatal(err)
			}
		}
	}
	h := sha256.New()
	res, err := Convert(io.TeeReader(bufio.NewReader(in), h), out, Config{SkipZeros: skipZeros})
	if err != nil {
		t.Fatalf("Convert %s: %v", filepath.Base(img), err)
	}
	if got, want := [32]byte(h.Sum(nil)), fileHash(t, img, -1); got != want {
		t.Fatalf("Convert read the file other than whole and in order: hash %x, file %x", got, want)
	}
	st, _ := in.Stat()
	if res.Read != st.Size() {
		t.Fatalf("Read = %d, file has %d bytes", res.Read, st.Size())
	}
	return p, res
}

func TestConvertMatchesQemuImg(t *testing.T) {
	needQemuImg(t)
	dir := t.TempDir()
	const size = 24<<20 + 12345*512 // not a multiple of a cluster
	raw := rawDisk(t, dir, size)
	cases := []struct {
		name string
		args []string
	}{
		{"64k", []string{"-o", "cluster_size=64k"}},
		{"2m", []string{"-o", "cluster_size=2M"}},
		{"512", []string{"-o", "cluster_size=512"}},
		{"v2", []string{"-o", "compat=0.10"}},
		{"zlib", []string{"-c", "-o", "cluster_size=64k"}},
		{"zlib-2m", []string{"-c", "-o", "cluster_size=2M"}},
		{"zstd", []string{"-c", "-o", "compression_type=zstd"}},
		{"zstd-4k", []string{"-c", "-o", "compression_type=zstd,cluster_size=4k"}},
		{"prealloc-metadata", []string{"-o", "preallocation=metadata"}},
		{"prealloc-full", []string{"-o", "preallocation=full,cluster_size=2M"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			img := filepath.Join(t.TempDir(), "disk.qcow2")
			qemuImg(t, append(append([]string{"convert", "-f", "raw", "-O", "qcow2"}, tc.args...), raw, img)...)
			want := rawHash(t, img)
			for _, skip := range []bool{true, false} {
				out, res := convertFile(t, img, skip)
				if skip {
					t.Logf("kept %d bytes for tables after their data", res.Kept)
				}
				if res.Header.VirtualSize != size {
					t.Fatalf("virtual size %d, want %d", res.Header.VirtualSize, size)
				}
				if got := fileHash(t, out, size); got != want {
					t.Fatalf("SkipZeros=%v: raw disk differs from qemu-img convert -O raw", skip)
				}
			}
		})
	}
}

// An image with internal snapshots whose active L2 tables were copied on
// write after the snapshot: those tables come after the data they map.
func TestConvertSnapshotImage(t *testing.T) {
	needQemuImg(t)
	dir := t.TempDir()
	raw := rawDisk(t, dir, 8<<20)
	img := filepath.Join(dir, "snap.qcow2")
	qemuImg(t, "convert", "-f", "raw", "-O", "qcow2", raw, img)
	qemuImg(t, "snapshot", "-c", "first", img)
	// Write into the active image after the snapshot: COW of L2 tables
	// and data clusters, appended at the end of the file.
	patch := filepath.Join(dir, "patch.raw")
	if err := os.WriteFile(patch, bytes.Repeat([]byte("after the snapshot "), 4000), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("qemu-io", "-c", "write -P 0x33 1M 64k", "-c", "write -z 4M 128k", img).CombinedOutput(); err != nil {
		t.Logf("qemu-io unavailable, snapshot without later writes: %v %s", err, out)
	}
	qemuImg(t, "snapshot", "-c", "second", img)
	want := rawHash(t, img)
	out, res := convertFile(t, img, false)
	t.Logf("kept %d bytes for tables after their data", res.Kept)
	if res.Header.Snapshots != 2 {
		t.Fatalf("snapshots = %d, want 2", res.Header.Snapshots)
	}
	if fileHash(t, out, 8<<20) != want {
		t.Fatal("raw disk differs from qemu-img convert -O raw")
	}
}

func TestConvertRefusesVirtualSizeAboveTheDisk(t *testing.T) {
	needQemuImg(t)
	img := filepath.Join(t.TempDir(), "big.qcow2")
	qemuImg(t, "create", "-f", "qcow2", img, "10G")
	f, _ := os.Open(img)
	defer f.Close()
	_, err := Convert(f, discard{}, Config{MaxSize: 1 << 30})
	if !errors.Is(err, ErrTooLarge) {
		t.Fatalf("err = %v, want ErrTooLarge", err)
	}
}

// A 10 GiB empty image converts with almost no memory and no writes when
// zeros are skipped.
func TestConvertEmptyImage(t *testing.T) {
	needQemuImg(t)
	img := filepath.Join(t.TempDir(), "empty.qcow2")
	qemuImg(t, "create", "-f", "qcow2", img, "10G")
	f, _ := os.Open(img)
	defer f.Close()
	res, err := Convert(f, discard{}, Config{SkipZeros: true})
	if err != nil {
		t.Fatal(err)
	}
	if res.DataBytes != 0 || res.ZeroBytes != 10<<30 {
		t.Fatalf("data %d zero %d", res.DataBytes, res.ZeroBytes)
	}
}

func TestConvertRefusesBackingFileEncryptionDataFileExtendedL2(t *testing.T) {
	needQemuImg(t)
	dir := t.TempDir()
	base := filepath.Join(dir, "base.qcow2")
	qemuImg(t, "create", "-f", "qcow2", base, "64M")
	cases := map[string][]string{
		"backing file":       {"create", "-f", "qcow2", "-F", "qcow2", "-b", base, filepath.Join(dir, "overlay.qcow2")},
		"external data file": {"create", "-f", "qcow2", "-o", "data_file=" + filepath.Join(dir, "data.raw"), filepath.Join(dir, "datafile.qcow2"), "64M"},
		"extended L2":        {"create", "-f", "qcow2", "-o", "extended_l2=on", filepath.Join(dir, "ext.qcow2"), "64M"},
		"encrypted":          {"create", "-f", "qcow2", "--object", "secret,id=sec0,data=123456", "-o", "encrypt.format=luks,encrypt.key-secret=sec0", filepath.Join(dir, "enc.qcow2"), "64M"},
	}
	for name, args := range cases {
		t.Run(name, func(t *testing.T) {
			qemuImg(t, args...)
			f, err := os.Open(args[len(args)-1])
			if err != nil {
				f, _ = os.Open(args[len(args)-2])
			}
			defer f.Close()
			_, err = Convert(f, discard{}, Config{})
			if !errors.Is(err, ErrUnsupported) {
				t.Fatalf("err = %v, want ErrUnsupported", err)
			}
			t.Log(err)
		})
	}
}

type discard struct{}

func (discard) WriteAt(p []byte, _ int64) (int, error) { return len(p), nil }

// hostile builds a minimal version 3 image of 64 KiB clusters: header,
// L1 at cluster 1, L2 at cluster 2, data from cluster 3; then edit edits it.
func hostile(vsize int64, edit func(img []byte)) []byte { return hostileBits(16, vsize, edit) }

// hostileBits is hostile with clusters of 1<<bits bytes.
func hostileBits(bits uint32, vsize int64, edit func(img []byte)) []byte {
	cs := uint64(1) << bits
	img := make([]byte, 8*cs)
	be := binary.BigEndian
	copy(img, Magic)
	be.PutUint32(img[4:], 3)
	be.PutUint32(img[20:], bits)
	be.PutUint64(img[24:], uint64(vsize))
	be.PutUint32(img[36:], 1)
	be.PutUint64(img[40:], cs)
	be.PutUint32(img[96:], 4)
	be.PutUint32(img[100:], 104)
	be.PutUint64(img[cs:], 2*cs|1<<63)
	be.PutUint64(img[2*cs:], 3*cs|1<<63)
	img[3*cs] = 0x42
	edit(img)
	return img
}

func TestConvertHostileImages(t *testing.T) {
	const cs = 64 << 10
	be := binary.BigEndian
	cases := map[string]struct {
		img  []byte
		want error
	}{
		"well formed": {hostile(cs, func([]byte) {}), nil},
		"L2 beyond the file": {hostile(cs, func(b []byte) {
			be.PutUint64(b[cs:], 1000*cs)
		}), ErrCorrupt},
		"data beyond the file": {hostile(cs, func(b []byte) {
			be.PutUint64(b[2*cs:], 1<<40)
		}), ErrCorrupt},
		"L1 points at the header": {hostile(cs, func(b []byte) {
			be.PutUint64(b[cs:], 0)
			be.PutUint64(b[cs:], 0|1<<63)
			be.PutUint64(b[40:], 0)
		}), ErrCorrupt},
		"L2 is the L1 (a loop)": {hostile(cs, func(b []byte) {
			be.PutUint64(b[cs:], cs)
		}), ErrCorrupt},
		"data is its own L2 (a loop)": {hostile(cs, func(b []byte) {
			be.PutUint64(b[2*cs:], 2*cs)
		}), ErrCorrupt},
		"two L1 entries, one L2": {hostile(2*cs*cs/8, func(b []byte) {
			be.PutUint32(b[36:], 2)
			be.PutUint64(b[cs+8:], 2*cs)
		}), ErrCorrupt},
		"huge virtual size": {hostile(1<<61, func([]byte) {}), ErrCorrupt},
		"huge L1": {hostile(1<<50, func(b []byte) {
			be.PutUint32(b[36:], 1<<31)
		}), ErrUnsupported},
		"compressed cluster inflating past the cluster": {hostile(cs, func(b []byte) {
			var z bytes.Buffer
			fw, _ := newDeflate(&z)
			fw.Write(make([]byte, 3*cs))
			fw.Close()
			copy(b[3*cs:], z.Bytes())
			sectors := uint64(z.Len()/512 + 1)
			be.PutUint64(b[2*cs:], 1<<62|sectors<<54|3*cs)
		}), ErrCorrupt},
		"compressed garbage": {hostile(cs, func(b []byte) {
			be.PutUint64(b[2*cs:], 1<<62|3<<54|3*cs+7)
		}), ErrCorrupt},
		"short file":                   {hostile(cs, func([]byte) {})[:cs+100], ErrCorrupt},
		"bad cluster bits":             {hostile(cs, func(b []byte) { be.PutUint32(b[20:], 40) }), ErrCorrupt},
		"unknown incompatible feature": {hostile(cs, func(b []byte) { be.PutUint64(b[72:], 1<<20) }), ErrUnsupported},
		"marked corrupt":               {hostile(cs, func(b []byte) { be.PutUint64(b[72:], 2) }), ErrUnsupported},
		"bad extension length": {hostile(cs, func(b []byte) {
			be.PutUint32(b[104:], 0x6803f857)
			be.PutUint32(b[108:], 1<<30)
		}), ErrCorrupt},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			var out sliceWriter
			_, err := Convert(bytes.NewReader(tc.img), &out, Config{})
			if tc.want == nil {
				if err != nil {
					t.Fatal(err)
				}
				if len(out.b) != cs || out.b[0] != 0x42 {
					t.Fatalf("wrote %d bytes", len(out.b))
				}
				return
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("err = %v, want %v", err, tc.want)
			}
			t.Log(err)
		})
	}
}

// An L2 table placed after the data it maps is read through the reorder
// buffer, and refused beyond its limit.
func TestConvertTableAfterItsData(t *testing.T) {
	const cs = 64 << 10
	be := binary.BigEndian
	img := hostile(cs, func(b []byte) {
		// L2 at cluster 5, data at cluster 3.
		be.PutUint64(b[cs:], 5*cs)
		copy(b[5*cs:], b[2*cs:2*cs+8])
		clear(b[2*cs : 2*cs+8])
	})
	var out sliceWriter
	if _, err := Convert(bytes.NewReader(img), &out, Config{}); err != nil {
		t.Fatal(err)
	}
	if out.b[0] != 0x42 {
		t.Fatal("data not found")
	}
	_, err := Convert(bytes.NewReader(img), &out, Config{ReorderLimit: cs})
	if !errors.Is(err, ErrReorderLimit) {
		t.Fatalf("err = %v, want ErrReorderLimit", err)
	}
}

// sliceWriter is a growable in-memory disk, bounded for the fuzzer.
type sliceWriter struct{ b []byte }

func (w *sliceWriter) WriteAt(p []byte, off int64) (int, error) {
	if off+int64(len(p)) > 64<<20 {
		return 0, errors.New("beyond the fuzz disk")
	}
	if n := off + int64(len(p)); n > int64(len(w.b)) {
		w.b = append(w.b, make([]byte, n-int64(len(w.b)))...)
	}
	copy(w.b[off:], p)
	return len(p), nil
}

func FuzzQcow2Convert(f *testing.F) {
	// Small seeds: the fuzzer minimizes each new input, which takes long
	// for large ones.
	f.Add(hostileBits(9, 4096, func([]byte) {}))
	f.Add(hostileBits(9, 512, func(b []byte) {
		var z bytes.Buffer
		fw, _ := newDeflate(&z)
		fw.Write(bytes.Repeat([]byte{7}, 512))
		fw.Close()
		copy(b[3*512:], z.Bytes())
		binary.BigEndian.PutUint64(b[2*512:], 1<<62|0<<55|3*512)
	}))
	f.Fuzz(func(t *testing.T, img []byte) {
		var vsize int64
		out := boundsWriter{t: t, size: &vsize}
		res, err := Convert(bytes.NewReader(img), out, Config{MaxSize: 8 << 20, ReorderLimit: 4 << 20, SkipZeros: true,
			Header: func(h Header) error { vsize = h.VirtualSize; return nil }})
		if err == nil && res.DataBytes+res.ZeroBytes != res.Header.VirtualSize {
			t.Fatalf("data %d + zeros %d bytes for a virtual size of %d", res.DataBytes, res.ZeroBytes, res.Header.VirtualSize)
		}
	})
}

func newDeflate(w io.Writer) (io.WriteCloser, error) {
	return flate.NewWriter(w, flate.BestCompression)
}

// Tables that reference more clusters ahead of the stream than the queue
// holds are refused before memory grows past the bound.
func TestConvertRefusesTooManyClustersAhead(t *testing.T) {
	const cs = 2 << 20
	const perL2 = cs / 8
	be := binary.BigEndian
	l2s := MaxPending/perL2 + 1
	img := make([]byte, (2+l2s)*cs)
	copy(img, Magic)
	be.PutUint32(img[4:], 3)
	be.PutUint32(img[20:], 21)
	be.PutUint64(img[24:], uint64(l2s*perL2*cs))
	be.PutUint32(img[36:], uint32(l2s))
	be.PutUint64(img[40:], cs)
	be.PutUint32(img[96:], 4)
	be.PutUint32(img[100:], 104)
	next := uint64(1 << 40) // data far beyond the file, each cluster distinct
	for i := range l2s {
		l2 := uint64(2+i) * cs
		be.PutUint64(img[cs+8*i:], l2)
		for j := range perL2 {
			be.PutUint64(img[int(l2)+8*j:], next)
			next += cs
		}
	}
	_, err := Convert(bytes.NewReader(img), discard{}, Config{})
	if !errors.Is(err, ErrReorderLimit) {
		t.Fatalf("err = %v, want ErrReorderLimit", err)
	}
	t.Log(err)
}

// boundsWriter fails the fuzz test on a write outside the virtual disk.
type boundsWriter struct {
	t    *testing.T
	size *int64
}

func (w boundsWriter) WriteAt(p []byte, off int64) (int, error) {
	if off < 0 || off+int64(len(p)) > *w.size {
		w.t.Fatalf("write of %d bytes at %d outside the %d-byte disk", len(p), off, *w.size)
	}
	return len(p), nil
}
