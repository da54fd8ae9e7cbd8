package agent

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// zeroServer serves an image of n zero bytes without holding it in memory.
func zeroServer(b *testing.B) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, err := strconv.ParseInt(strings.TrimPrefix(r.URL.Path, "/"), 10, 64)
		if err != nil {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Length", strconv.FormatInt(n, 10))
		buf := make([]byte, 1<<20)
		for n > 0 {
			k := min(n, int64(len(buf)))
			if _, err := w.Write(buf[:k]); err != nil {
				return
			}
			n -= k
		}
	}))
	b.Cleanup(srv.Close)
	return srv
}

var zeroSums sync.Map

func zeroSHA256(n int64) string {
	if v, ok := zeroSums.Load(n); ok {
		return v.(string)
	}
	h := sha256.New()
	buf := make([]byte, 1<<20)
	for left := n; left > 0; left -= int64(len(buf)) {
		h.Write(buf[:min(left, int64(len(buf)))])
	}
	s := hex.EncodeToString(h.Sum(nil))
	zeroSums.Store(n, s)
	return s
}

func vmRSS() int64 {
	b, _ := os.ReadFile("/proc/self/status")
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "VmRSS:" {
			kb, _ := strconv.ParseInt(f[1], 10, 64)
			return kb << 10
		}
	}
	return 0
}

func agentWrite(b *testing.B, url, sum, path string, size int64) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	cfg := DownloadConfig{}.withDefaults()
	if _, err := streamImage(context.Background(), defaultDownloadClient(), url, expectedChecksum{Algo: "sha256", Value: sum, Source: "bench"}, f, size*2, cfg, nil); err != nil {
		b.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		b.Fatal(err)
	}
}

func curlDD(b *testing.B, url, path string) {
	cmd := exec.Command("sh", "-c", `curl -sf "$1" | dd of="$2" bs=1M conv=notrunc,fsync status=none`, "sh", url, path)
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("curl | dd: %v %s", err, out)
	}
}

// BenchmarkWriteImage compares the agent's image write (download, sha256,
// write, fsync) with `curl | dd` (no checksum) into the same file, and
// reports the agent's peak RSS while writing a 2 GiB image.
func BenchmarkWriteImage(b *testing.B) {
	if _, err := exec.LookPath("curl"); err != nil {
		b.Skip("SKIP: curl is not installed; the comparison needs it")
	}
	srv := zeroServer(b)
	const size = 256 << 20
	url := fmt.Sprintf("%s/%d", srv.URL, size)
	sum := zeroSHA256(size)
	path := filepath.Join(b.TempDir(), "disk.img")
	var agentDur, curlDur time.Duration
	b.SetBytes(size)
	b.ResetTimer()
	for range b.N {
		os.Remove(path)
		t0 := time.Now()
		agentWrite(b, url, sum, path, size)
		agentDur += time.Since(t0)
		os.Remove(path)
		t0 = time.Now()
		curlDD(b, url, path)
		curlDur += time.Since(t0)
	}
	b.StopTimer()
	agentMBs := float64(size) * float64(b.N) / agentDur.Seconds() / (1 << 20)
	curlMBs := float64(size) * float64(b.N) / curlDur.Seconds() / (1 << 20)
	b.ReportMetric(agentMBs, "agent-MiB/s")
	b.ReportMetric(curlMBs, "curl|dd-MiB/s")
	b.ReportMetric(agentMBs/curlMBs, "agent/curl-ratio")

	// Peak RSS for a 2 GiB image: memory must stay bounded (a few chunks),
	// not grow with the image.
	const big = 2 << 30
	bigSum := zeroSHA256(big)
	os.Remove(path)
	base := vmRSS()
	var peak atomic.Int64
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			if r := vmRSS(); r > peak.Load() {
				peak.Store(r)
			}
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	t0 := time.Now()
	agentWrite(b, fmt.Sprintf("%s/%d", srv.URL, big), bigSum, path, big)
	d := time.Since(t0)
	close(stop)
	<-done
	os.Remove(path)
	b.ReportMetric(float64(peak.Load())/(1<<20), "peak-RSS-MiB(2GiB)")
	b.ReportMetric(float64(peak.Load()-base)/(1<<20), "RSS-growth-MiB(2GiB)")
	fmt.Printf("BenchmarkWriteImage: agent %.0f MiB/s, curl|dd %.0f MiB/s (ratio %.2f); 2 GiB image in %s, peak RSS %.1f MiB (+%.1f MiB over the %.1f MiB before; includes the test's HTTP server)\n",
		agentMBs, curlMBs, agentMBs/curlMBs, d.Round(time.Millisecond), float64(peak.Load())/(1<<20), float64(peak.Load()-base)/(1<<20), float64(base)/(1<<20))
}
