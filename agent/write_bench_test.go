package agent

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"testing"
)

// writeBenchSize is the image the write benchmarks stream: big enough to
// leave the CPU caches and make the kernel write back, small enough for a
// shared machine.
const writeBenchSize = 512 << 20

// patternServer serves size bytes of one random MiB repeated, so the
// payload is incompressible but costs no memory, with Content-Length as
// an image server sends it.
func patternServer(b *testing.B, size int64) (url, sum string) {
	block := make([]byte, 1<<20)
	_, _ = rand.Read(block)
	h := sha256.New()
	for left := size; left > 0; left -= int64(len(block)) {
		h.Write(block[:min(left, int64(len(block)))])
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.FormatInt(size, 10))
		for left := size; left > 0; left -= int64(len(block)) {
			if _, err := w.Write(block[:min(left, int64(len(block)))]); err != nil {
				return
			}
		}
	}))
	b.Cleanup(srv.Close)
	return srv.URL + "/disk.raw", hex.EncodeToString(h.Sum(nil))
}

// benchTarget creates a sparse file "disk" twice the image's size.
func benchTarget(b *testing.B) *os.File {
	path := filepath.Join(b.TempDir(), "disk.img")
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		b.Fatal(err)
	}
	if err := f.Truncate(2 * writeBenchSize); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { f.Close() })
	return f
}

// BenchmarkStreamImage is the agent's whole image write over local HTTP
// (download, sha256 of the file as served, write, fsync) beside plain
// io.Copy of the same response into the same kind of file, with and
// without the same sha256: read agent/io.Copy+sha256 as the ratio that
// matters, agent/io.Copy as the ceiling of a copy that verifies nothing.
//
//	go test ./agent/ -run '^$' -bench StreamImage -benchtime 3x -count 3
func BenchmarkStreamImage(b *testing.B) {
	url, sum := patternServer(b, writeBenchSize)
	hc := defaultDownloadClient()
	cfg := DownloadConfig{}.withDefaults()
	ck := expectedChecksum{Algo: "sha256", Value: sum, Source: "bench"}

	b.Run("agent", func(b *testing.B) {
		f := benchTarget(b)
		b.SetBytes(writeBenchSize)
		for b.Loop() {
			res, err := streamImage(context.Background(), hc, url, ck, f, 2*writeBenchSize, cfg, nil)
			if err != nil {
				b.Fatal(err)
			}
			if res.Written != writeBenchSize {
				b.Fatalf("wrote %d bytes, want %d", res.Written, writeBenchSize)
			}
			if err := f.Sync(); err != nil {
				b.Fatal(err)
			}
		}
	})
	for _, hashed := range []bool{false, true} {
		name := "io.Copy"
		if hashed {
			name += "+sha256"
		}
		b.Run(name, func(b *testing.B) {
			f := benchTarget(b)
			b.SetBytes(writeBenchSize)
			for b.Loop() {
				resp, err := hc.Get(url)
				if err != nil {
					b.Fatal(err)
				}
				var dst io.Writer = io.NewOffsetWriter(f, 0)
				h := sha256.New()
				if hashed {
					dst = io.MultiWriter(dst, h)
				}
				n, err := io.Copy(dst, resp.Body)
				resp.Body.Close()
				if err != nil || n != writeBenchSize {
					b.Fatalf("copied %d bytes: %v", n, err)
				}
				if hashed && hex.EncodeToString(h.Sum(nil)) != sum {
					b.Fatal("checksum differs")
				}
				if err := f.Sync(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkPipeToDevice is the disk side alone: an in-memory image piped
// into a file and fsynced, beside io.Copy of the same bytes (no hash in
// either), so that the pipeline's own overhead shows as the ratio.
func BenchmarkPipeToDevice(b *testing.B) {
	block := make([]byte, 1<<20)
	_, _ = rand.Read(block)
	src := func() io.Reader { return &repeatReader{block: block, left: writeBenchSize} }
	b.Run("agent", func(b *testing.B) {
		f := benchTarget(b)
		b.SetBytes(writeBenchSize)
		for b.Loop() {
			n, err := pipeToDevice(context.Background(), src(), f, 2*writeBenchSize, DefaultChunkSize, nil, func(int64) {})
			if err != nil || n != writeBenchSize {
				b.Fatalf("piped %d bytes: %v", n, err)
			}
			if err := f.Sync(); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("io.Copy", func(b *testing.B) {
		f := benchTarget(b)
		b.SetBytes(writeBenchSize)
		for b.Loop() {
			n, err := io.Copy(io.NewOffsetWriter(f, 0), src())
			if err != nil || n != writeBenchSize {
				b.Fatalf("copied %d bytes: %v", n, err)
			}
			if err := f.Sync(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// repeatReader reads left bytes of block repeated.
type repeatReader struct {
	block []byte
	off   int
	left  int64
}

func (r *repeatReader) Read(p []byte) (int, error) {
	if r.left == 0 {
		return 0, io.EOF
	}
	p = p[:min(int64(len(p)), r.left)]
	n := 0
	for n < len(p) {
		c := copy(p[n:], r.block[r.off:])
		n += c
		r.off = (r.off + c) % len(r.block)
	}
	r.left -= int64(n)
	return n, nil
}
