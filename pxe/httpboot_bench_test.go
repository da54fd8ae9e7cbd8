package pxe

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkLoaderDelivery fetches the same UEFI loader (Debian's
// snponly.efi when installed, else 170 KiB of the same size) over the
// boot service's TFTP, as a PXE ROM does (blksize 1468, the largest an
// Ethernet frame carries), and over its HTTP /loaders/, as UEFI HTTP boot
// does, on loopback in the same run, fetchesPerOp times each per
// iteration after one warm-up fetch each (make bench runs one iteration).
// It reports each and the ratio http/tftp: below 1, HTTP delivers faster.
func BenchmarkLoaderDelivery(b *testing.B) {
	const fetchesPerOp = 10
	dir := b.TempDir()
	loader, err := os.ReadFile(filepath.Join(DefaultLoadersDir, DefaultHTTPIPXELoader))
	if err != nil {
		loader = bytes.Repeat([]byte("efi-loader"), 17380)
	}
	if err := os.WriteFile(filepath.Join(dir, DefaultHTTPIPXELoader), loader, 0o644); err != nil {
		b.Fatal(err)
	}
	tsrv, err := NewTFTPServer(TFTPConfig{Root: dir}, nil)
	if err != nil {
		b.Fatal(err)
	}
	conn, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { tsrv.Serve(ctx, conn); close(done) }()
	defer func() { cancel(); <-done; tsrv.Close() }()
	h, err := NewHTTPHandler(HTTPConfig{LoadersDir: dir}, NewMemoryBackend(), nil)
	if err != nil {
		b.Fatal(err)
	}
	hsrv := httptest.NewServer(h)
	defer hsrv.Close()
	url := hsrv.URL + LoaderPath(DefaultHTTPIPXELoader)

	fetch := func() (tftpTook, httpTook time.Duration) {
		start := time.Now()
		got, err := tftpGet(conn.LocalAddr().String(), DefaultHTTPIPXELoader, 1468)
		tftpTook = time.Since(start)
		if err != nil || !bytes.Equal(got, loader) {
			b.Fatalf("TFTP: %d bytes, %v", len(got), err)
		}
		start = time.Now()
		resp, err := http.Get(url)
		if err != nil {
			b.Fatal(err)
		}
		n, err := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		httpTook = time.Since(start)
		if err != nil || n != int64(len(loader)) || resp.StatusCode != http.StatusOK {
			b.Fatalf("HTTP: status %d, %d bytes, %v", resp.StatusCode, n, err)
		}
		return tftpTook, httpTook
	}
	fetch() // warm-up: first sockets, page cache
	var viaTFTP, viaHTTP time.Duration
	b.SetBytes(int64(2 * fetchesPerOp * len(loader)))
	b.ResetTimer()
	for range b.N * fetchesPerOp {
		t, h := fetch()
		viaTFTP += t
		viaHTTP += h
	}
	b.StopTimer()
	n := float64(b.N * fetchesPerOp)
	b.ReportMetric(float64(viaTFTP.Microseconds())/n, "tftp-µs/fetch")
	b.ReportMetric(float64(viaHTTP.Microseconds())/n, "http-µs/fetch")
	b.ReportMetric(float64(viaHTTP)/float64(viaTFTP), "http/tftp")
}
