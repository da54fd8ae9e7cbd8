package imagecache

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ironflow/ironflow/hardware"
)

// tlsOrigin is an HTTPS image server with a certificate of its own CA;
// caFile is that CA's PEM bundle on disk, as an operator would give it.
func tlsOrigin(t *testing.T, img []byte) (url, caFile string, hits *atomic.Int64) {
	t.Helper()
	hits = new(atomic.Int64)
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Write(img)
	}))
	t.Cleanup(srv.Close)
	caFile = filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	return srv.URL + "/disk.img", caFile, hits
}

func trustedSource(t *testing.T, url string, img []byte, driverInfo map[string]any) Source {
	t.Helper()
	sum := sha256.Sum256(img)
	o, ok, err := Locate(context.Background(), nil, map[string]any{"image_source": url, "image_download_source": "http", "image_checksum": hex.EncodeToString(sum[:])})
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	tr, err := TrustOf(driverInfo)
	if err != nil {
		t.Fatal(err)
	}
	return o.TrustedSource(nil, nil, tr)
}

func TestTheOriginIsVerifiedAsImageVerifyCASays(t *testing.T) {
	img := randBytes(256 << 10)
	url, caFile, hits := tlsOrigin(t, img)
	ctx := context.Background()

	c, _ := Open(t.TempDir(), 0)
	_, err := c.Acquire(ctx, trustedSource(t, url, img, nil))
	if !errors.Is(err, ErrUntrusted) || !strings.Contains(err.Error(), "set driver_info/image_verify_ca to the path of its CA bundle on the conductor, or False") {
		t.Fatalf("untrusted origin: %v", err)
	}

	for name, info := range map[string]map[string]any{
		"CA bundle": {hardware.KeyImageVerifyCA: caFile},
		"False":     {hardware.KeyImageVerifyCA: "False"},
		"false":     {hardware.KeyImageVerifyCA: false},
	} {
		t.Run(name, func(t *testing.T) {
			c, _ := Open(t.TempDir(), 0)
			h, err := c.Acquire(ctx, trustedSource(t, url, img, info))
			if err != nil {
				t.Fatal(err)
			}
			defer h.Release()
			if b, _ := os.ReadFile(h.Path()); !bytes.Equal(b, img) {
				t.Fatal("cached bytes differ")
			}
		})
	}
	if hits.Load() != 3 {
		t.Fatalf("origin served %d downloads, want 3 (the untrusted attempt never got a request)", hits.Load())
	}
}

func TestAnUntrustedOriginIsRefusedToTheAgentWithTheFix(t *testing.T) {
	img := randBytes(64 << 10)
	url, _, _ := tlsOrigin(t, img)
	c, _ := Open(t.TempDir(), 0)
	s := &Server{Cache: c, Resolve: func(context.Context, string) (Source, error) { return trustedSource(t, url, img, nil), nil }}
	hs := httptest.NewServer(s)
	defer hs.Close()
	resp, err := http.Get(hs.URL + CachePath("6f2c7e1a-0d9b-4b8e-9a51-3c1d2e4f5a6b"))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	// A 4xx: the agent gives up at once and reports the reason.
	if resp.StatusCode != http.StatusUnprocessableEntity || !strings.Contains(string(body), "image_verify_ca") {
		t.Fatalf("HTTP %d %q", resp.StatusCode, body)
	}
}

func TestAFailureOnAnotherNodesTrustIsNotShared(t *testing.T) {
	img := randBytes(64 << 10)
	url, caFile, _ := tlsOrigin(t, img)
	c, _ := Open(t.TempDir(), 0)
	untrusted := trustedSource(t, url, img, nil)
	trusted := trustedSource(t, url, img, map[string]any{hardware.KeyImageVerifyCA: caFile})
	if untrusted.Key != trusted.Key {
		t.Fatal("the trust changed the cache key: the bytes are the same")
	}
	// The untrusted node's download is in flight when the trusted one
	// asks: it waits on it, sees it fail on a trust it does not share,
	// and fetches with its own.
	release := make(chan struct{})
	fetch := untrusted.Fetch
	untrusted.Fetch = func(ctx context.Context) (io.ReadCloser, error) {
		<-release
		return fetch(ctx)
	}
	errc := make(chan error, 1)
	go func() { _, err := c.Acquire(context.Background(), untrusted); errc <- err }()
	for {
		if _, inFlight := c.Progress(untrusted.Key); inFlight {
			break
		}
	}
	done := make(chan error, 1)
	go func() {
		h, err := c.Acquire(context.Background(), trusted)
		if err == nil {
			h.Release()
		}
		done <- err
	}()
	time.Sleep(100 * time.Millisecond) // the trusted request waits on the flight
	close(release)
	if err := <-errc; !errors.Is(err, ErrUntrusted) {
		t.Fatalf("untrusted node: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatalf("trusted node: %v", err)
	}
}

func TestTrustOf(t *testing.T) {
	dir := t.TempDir()
	notPEM := filepath.Join(dir, "x.txt")
	os.WriteFile(notPEM, []byte("hello"), 0o644)
	big := filepath.Join(dir, "big.pem")
	os.WriteFile(big, bytes.Repeat([]byte("#"), MaxCABundle+1), 0o644)
	for v, want := range map[any]string{
		"/nonexistent/ca.pem": "neither a boolean nor a readable CA bundle file on the conductor",
		notPEM:                "holds no PEM certificate",
		big:                   "larger than 1048576 bytes",
		42.0:                  "neither a boolean nor the path of a CA bundle file",
	} {
		if _, err := TrustOf(map[string]any{hardware.KeyImageVerifyCA: v}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%v: %v, want %q", v, err, want)
		}
	}
	if tr, err := TrustOf(map[string]any{hardware.KeyImageVerifyCA: "True"}); err != nil || tr.AgentArg() != nil {
		t.Errorf("True: %+v %v", tr, err)
	}
	if tr, err := TrustOf(map[string]any{hardware.KeyImageVerifyCA: "no"}); err != nil || tr.AgentArg() != false {
		t.Errorf("no: %+v %v", tr, err)
	}
}

// TestTheCacheFetchesOverHTTP1 is a download from an origin that offers
// HTTP/2, with each trust setting: the cache asks for HTTP/1.1, on which
// one long stream runs at the connection's rate (docs/oci-images.md,
// "Speed"), also after the process's default transport has spoken h2.
func TestTheCacheFetchesOverHTTP1(t *testing.T) {
	img := randBytes(256 << 10)
	var protos []string
	var mu sync.Mutex
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		protos = append(protos, r.Proto)
		mu.Unlock()
		w.Write(img)
	}))
	srv.EnableHTTP2 = true
	srv.TLS = &tls.Config{NextProtos: []string{"h2", "http/1.1"}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	if resp, err := srv.Client().Get(srv.URL + "/probe"); err != nil || resp.ProtoMajor != 2 {
		t.Fatalf("the test origin does not offer HTTP/2: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	// The process's default transport has run (its TLS settings now
	// offer h2); its certificate check fails here, which does not matter.
	if resp, err := http.Get(srv.URL + "/probe"); err == nil {
		resp.Body.Close()
	}
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, info := range map[string]map[string]any{
		"CA bundle": {hardware.KeyImageVerifyCA: caFile},
		"False":     {hardware.KeyImageVerifyCA: false},
	} {
		t.Run(name, func(t *testing.T) {
			mu.Lock()
			protos = nil
			mu.Unlock()
			c, _ := Open(t.TempDir(), 0)
			h, err := c.Acquire(context.Background(), trustedSource(t, srv.URL+"/disk.img", img, info))
			if err != nil {
				t.Fatal(err)
			}
			h.Release()
			mu.Lock()
			defer mu.Unlock()
			if len(protos) == 0 {
				t.Fatal("the origin got no request")
			}
			for _, p := range protos {
				if p != "HTTP/1.1" {
					t.Fatalf("the cache fetched over %s, want HTTP/1.1 (all: %v)", p, protos)
				}
			}
		})
	}
	// The system store's client, after the default transport has run.
	tr := Trust{}.Client().Transport.(*http.Transport)
	if tr.TLSClientConfig != nil && slices.Contains(tr.TLSClientConfig.NextProtos, "h2") {
		t.Fatalf("the cache's client with the system store offers %v in ALPN", tr.TLSClientConfig.NextProtos)
	}
}
