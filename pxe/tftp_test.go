package pxe

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/pin/tftp/v3"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ironflow/ironflow/metrics"
)

// startTFTP serves a root holding a loader, a subdirectory file, a symlink
// inside the root and one leaving it, beside a secret outside the root.
func startTFTP(t *testing.T) (addr string, loader []byte) {
	t.Helper()
	dir := t.TempDir()
	root := filepath.Join(dir, "root")
	os.MkdirAll(filepath.Join(root, "sub"), 0o755)
	loader = bytes.Repeat([]byte("ipxe"), 5000) // several blocks
	os.WriteFile(filepath.Join(root, "undionly.kpxe"), loader, 0o644)
	os.WriteFile(filepath.Join(root, "sub", "file"), []byte("sub"), 0o644)
	os.WriteFile(filepath.Join(dir, "secret"), []byte("secret"), 0o644)
	os.Symlink("undionly.kpxe", filepath.Join(root, "alias"))
	os.Symlink(filepath.Join(dir, "secret"), filepath.Join(root, "escape"))
	os.Symlink("../secret", filepath.Join(root, "escape-rel"))
	srv, err := NewTFTPServer(TFTPConfig{Root: root}, nil)
	if err != nil {
		t.Fatal(err)
	}
	conn, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { srv.Serve(ctx, conn); close(done) }()
	t.Cleanup(func() { cancel(); <-done; srv.Close() })
	return conn.LocalAddr().String(), loader
}

func tftpGet(addr, name string, blksize int) ([]byte, error) {
	c, err := tftp.NewClient(addr)
	if err != nil {
		return nil, err
	}
	c.SetRetries(1)
	if blksize > 0 {
		c.SetBlockSize(blksize)
	}
	wt, err := c.Receive(name, "octet")
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	_, err = wt.WriteTo(&b)
	return b.Bytes(), err
}

func TestTFTPServesFilesUnderRoot(t *testing.T) {
	addr, loader := startTFTP(t)
	okBefore := testutil.ToFloat64(metrics.TFTPTransfers.WithLabelValues("ok"))
	bytesBefore := testutil.ToFloat64(metrics.TFTPSentBytes)
	for _, tc := range []struct {
		name    string
		blksize int
		want    []byte
	}{
		{"undionly.kpxe", 0, loader},
		{"undionly.kpxe", 1468, loader},
		{"sub/file", 0, []byte("sub")},
		{"alias", 0, loader},
	} {
		got, err := tftpGet(addr, tc.name, tc.blksize)
		if err != nil {
			t.Errorf("get %s: %v", tc.name, err)
			continue
		}
		if !bytes.Equal(got, tc.want) {
			t.Errorf("get %s: %d bytes, want %d", tc.name, len(got), len(tc.want))
		}
	}
	// docs/metrics.md: ironflow_tftp_transfers_total, ironflow_tftp_sent_bytes_total.
	// The server ends a transfer when the last block's ACK arrives, just
	// after the client returned.
	waitCount(t, "tftp transfers ok", func() float64 { return testutil.ToFloat64(metrics.TFTPTransfers.WithLabelValues("ok")) - okBefore }, 4)
	waitCount(t, "tftp bytes sent", func() float64 { return testutil.ToFloat64(metrics.TFTPSentBytes) - bytesBefore }, float64(3*len(loader)+3))
}

// waitCount waits up to 5 s for get to return want.
func waitCount(t *testing.T, what string, get func() float64, want float64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for get() != want {
		if time.Now().After(deadline) {
			t.Errorf("%s: %v, want %v", what, get(), want)
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestTFTPRefusesPathsOutsideRoot(t *testing.T) {
	addr, _ := startTFTP(t)
	okBefore := testutil.ToFloat64(metrics.TFTPTransfers.WithLabelValues("ok"))
	defer func() {
		if n := testutil.ToFloat64(metrics.TFTPTransfers.WithLabelValues("ok")) - okBefore; n != 0 {
			t.Errorf("refused transfers counted ok: %v", n)
		}
	}()
	for _, name := range []string{"../secret", "sub/../../secret", "/etc/passwd", "escape", "escape-rel", "sub", "missing", `..\secret`} {
		got, err := tftpGet(addr, name, 0)
		if err == nil {
			t.Errorf("get %q: served %q, want refusal", name, got)
		}
	}
}

func TestTFTPRefusesWrites(t *testing.T) {
	addr, _ := startTFTP(t)
	c, err := tftp.NewClient(addr)
	if err != nil {
		t.Fatal(err)
	}
	c.SetRetries(1)
	rf, err := c.Send("upload", "octet")
	if err == nil {
		_, err = rf.ReadFrom(bytes.NewReader([]byte("x")))
	}
	if err == nil {
		t.Fatal("write request accepted")
	}
}

func TestTFTPConcurrentTransfers(t *testing.T) {
	addr, loader := startTFTP(t)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := tftpGet(addr, "undionly.kpxe", 512)
			if err == nil && !bytes.Equal(got, loader) {
				err = os.ErrInvalid
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
}
