package imagecache

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkServing compares the cache's serving path (resolve, acquire with
// its integrity check, http.ServeContent) with http.FileServer over the same
// file, in the same run: `make bench` prints both rates (MB/s).
func BenchmarkServing(b *testing.B) {
	const size = 256 << 20
	dir := b.TempDir()
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(i * 7)
	}
	sum := sha256.Sum256(data)
	src := Source{Key: "bench", Algo: "sha256", Hash: hex.EncodeToString(sum[:]), Size: size,
		Fetch: func(context.Context) (io.ReadCloser, error) {
			f, err := os.Open(filepath.Join(dir, "files", "disk.raw"))
			return f, err
		}}
	os.MkdirAll(filepath.Join(dir, "files"), 0o755)
	if err := os.WriteFile(filepath.Join(dir, "files", "disk.raw"), data, 0o644); err != nil {
		b.Fatal(err)
	}
	c, err := Open(filepath.Join(dir, "cache"), 0)
	if err != nil {
		b.Fatal(err)
	}
	h, err := c.Acquire(context.Background(), src) // fill it once
	if err != nil {
		b.Fatal(err)
	}
	h.Release()
	s := &Server{Cache: c, Resolve: func(context.Context, string) (Source, error) { return src, nil }}
	cacheSrv := httptest.NewServer(s)
	defer cacheSrv.Close()
	fileSrv := httptest.NewServer(http.FileServer(http.Dir(filepath.Join(dir, "files"))))
	defer fileSrv.Close()
	fetch := func(url string) time.Duration {
		start := time.Now()
		resp, err := http.Get(url)
		if err != nil {
			b.Fatal(err)
		}
		n, _ := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if n != size {
			b.Fatalf("%s: %d bytes", url, n)
		}
		return time.Since(start)
	}
	// Interleaved rounds, so that the load of a shared machine falls on
	// both alike.
	const rounds = 4
	var inCache, inFileServer time.Duration
	for b.Loop() {
		for range rounds {
			inCache += fetch(cacheSrv.URL + "/cache/0b3e9a4c-7c4b-4f3e-8b53-2d0b6b0a9a11/image")
			inFileServer += fetch(fileSrv.URL + "/disk.raw")
		}
	}
	mbps := func(d time.Duration) float64 { return float64(size) * rounds * float64(b.N) / d.Seconds() / 1e6 }
	b.ReportMetric(mbps(inCache), "cache-MB/s")
	b.ReportMetric(mbps(inFileServer), "fileserver-MB/s")
	b.ReportMetric(mbps(inCache)/mbps(inFileServer), "cache/fileserver")
	b.ReportMetric(0, "ns/op")
}
