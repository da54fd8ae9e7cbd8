package agent

import (
	"bytes"
	"crypto/tls"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// newTLSImageServer serves files over HTTPS with a certificate of its own
// CA, which nothing trusts unless told; it returns the CA's PEM.
func newTLSImageServer(t *testing.T, files map[string][]byte) (*httptest.Server, string) {
	t.Helper()
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		data, ok := files[strings.TrimPrefix(r.URL.Path, "/")]
		if !ok {
			http.NotFound(w, r)
			return
		}
		http.ServeContent(w, r, "img", time.Unix(0, 0), bytes.NewReader(data))
	}))
	t.Cleanup(srv.Close)
	return srv, string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}))
}

func TestWriteImageVerifiesTheImageServer(t *testing.T) {
	img := testImage(3 << 20)
	sum := sha256hex(img)
	srv, caPEM := newTLSImageServer(t, map[string][]byte{"disk.img": img, "SHA256SUMS": []byte(sum + "  disk.img\n")})
	url := srv.URL + "/disk.img"
	cases := []struct {
		name    string
		args    map[string]any
		wantErr string
	}{
		{"system store: untrusted", map[string]any{"image_source": url, "image_checksum": sum}, "certificate is not trusted (set the node's driver_info/image_verify_ca"},
		{"checksum file, system store: untrusted", map[string]any{"image_source": url, "image_checksum": srv.URL + "/SHA256SUMS"}, "checksum file: download " + srv.URL + "/SHA256SUMS: the image server's certificate is not trusted"},
		{"true is the system store", map[string]any{"image_source": url, "image_checksum": sum, "image_verify_ca": true}, "image_verify_ca"},
		{"another CA", map[string]any{"image_source": url, "image_checksum": sum, "image_verify_ca": otherCAPEM(t)}, "certificate is not trusted"},
		{"the server's CA", map[string]any{"image_source": url, "image_checksum": sum, "image_verify_ca": caPEM}, ""},
		{"the server's CA, checksum file", map[string]any{"image_source": url, "image_checksum": srv.URL + "/SHA256SUMS", "image_verify_ca": caPEM}, ""},
		{"False skips verification", map[string]any{"image_source": url, "image_checksum": sum, "image_verify_ca": false}, ""},
		{"the word False too", map[string]any{"image_source": url, "image_checksum": sum, "image_verify_ca": "False"}, ""},
		{"neither boolean nor PEM", map[string]any{"image_source": url, "image_checksum": sum, "image_verify_ca": "/etc/ssl/ca.pem"}, "image_verify_ca is neither a boolean nor PEM certificates"},
		{"too large", map[string]any{"image_source": url, "image_checksum": sum, "image_verify_ca": caPEM + strings.Repeat("#", maxCABundle)}, "more than 1048576"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			hw := newFileHardware(t, 16<<20)
			// Retries that would take 9 s: a refusal must come at once.
			_, c := startAgent(t, newFakeAPI(t), hw, func(cfg *Config) { cfg.Download.Retries, cfg.Download.RetryDelay = 9, time.Second })
			start := time.Now()
			_, err := runWriteImage(t, c, tc.args, nil)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("want error %q, got %v", tc.wantErr, err)
				}
				// Not retried: a certificate does not become trusted.
				if d := time.Since(start); d > 3*time.Second {
					t.Fatalf("the refusal took %v", d)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(readDisk(t, hw, len(img)), img) {
				t.Fatal("disk content differs from the image")
			}
		})
	}
}

// otherCAPEM is a valid CA certificate that did not sign the test server's.
func otherCAPEM(t *testing.T) string {
	t.Helper()
	_, pemBytes, err := selfSignedCert("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	return string(pemBytes)
}

// TestWriteImageFetchesOverHTTP1 is the agent's image download on an
// image server that offers HTTP/2: the agent asks for HTTP/1.1, on which
// one long stream runs at the connection's rate.
func TestWriteImageFetchesOverHTTP1(t *testing.T) {
	img := testImage(1 << 20)
	var protos []string
	var mu sync.Mutex
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		protos = append(protos, r.Proto)
		mu.Unlock()
		http.ServeContent(w, r, "img", time.Unix(0, 0), bytes.NewReader(img))
	}))
	srv.EnableHTTP2 = true
	srv.TLS = &tls.Config{NextProtos: []string{"h2", "http/1.1"}}
	srv.StartTLS()
	t.Cleanup(srv.Close)
	// The server does speak HTTP/2 to a client that asks for it.
	if resp, err := srv.Client().Get(srv.URL + "/probe"); err != nil || resp.ProtoMajor != 2 {
		t.Fatalf("the test server does not offer HTTP/2: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	caPEM := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}))
	for name, verify := range map[string]any{"the server's CA": caPEM, "False": false} {
		t.Run(name, func(t *testing.T) {
			mu.Lock()
			protos = nil
			mu.Unlock()
			hw := newFileHardware(t, 4<<20)
			_, c := startAgent(t, newFakeAPI(t), hw, nil)
			if _, err := runWriteImage(t, c, map[string]any{"image_source": srv.URL + "/disk.img", "image_checksum": sha256hex(img), "image_verify_ca": verify}, nil); err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(protos) == 0 {
				t.Fatal("the image server got no request")
			}
			for _, p := range protos {
				if p != "HTTP/1.1" {
					t.Fatalf("the agent fetched the image over %s, want HTTP/1.1 (all: %v)", p, protos)
				}
			}
			if !bytes.Equal(readDisk(t, hw, len(img)), img) {
				t.Fatal("disk content differs from the image")
			}
		})
	}
}
