package pxe

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func startHTTP(t *testing.T) (*httptest.Server, []byte) {
	t.Helper()
	dir := t.TempDir()
	images := filepath.Join(dir, "images")
	isos := filepath.Join(dir, "isos")
	os.MkdirAll(filepath.Join(images, "agent"), 0o755)
	os.MkdirAll(isos, 0o755)
	kernel := bytes.Repeat([]byte("0123456789"), 10000)
	os.WriteFile(filepath.Join(images, "agent", "vmlinuz"), kernel, 0o644)
	os.WriteFile(filepath.Join(dir, "secret"), []byte("secret"), 0o644)
	os.Symlink(filepath.Join(dir, "secret"), filepath.Join(images, "escape"))
	os.WriteFile(filepath.Join(isos, testNode+".iso"), []byte("iso"), 0o600)
	os.WriteFile(filepath.Join(isos, "7f1c2d3e-4b5a-4c7d-8e9f-0a1b2c3d4e5f.iso"), []byte("iso2"), 0o600)
	os.WriteFile(filepath.Join(isos, testNode+".iso.key"), []byte("k1"), 0o600)
	os.WriteFile(filepath.Join(isos, "7f1c2d3e-4b5a-4c7d-8e9f-0a1b2c3d4e5f.iso.key"), []byte("k2"), 0o600)
	b := testBackend(t)
	b.Delete("7f1c2d3e-4b5a-4c7d-8e9f-0a1b2c3d4e5f") // its ISO stays on disk, unserved
	h, err := NewHTTPHandler(HTTPConfig{ImagesDir: images, ISODir: isos}, b, nil)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv, kernel
}

func get(t *testing.T, url string, hdr ...string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func TestHTTPBootRoutes(t *testing.T) {
	srv, kernel := startHTTP(t)
	cases := []struct {
		name, path string
		hdr        []string
		status     int
		body       string // substring; "" skips
	}{
		{"node script", "/boot/" + testNode + "/boot.ipxe", nil, 200, "kernel --name kernel " + testHTTPURL + "/images/vmlinuz initrd=initrd console=ttyS0"},
		{"script of a node without boot config", "/boot/00000000-0000-4000-8000-000000000000/boot.ipxe", nil, 404, ""},
		{"script of a non-UUID", "/boot/..%2f..%2fetc/boot.ipxe", nil, 404, ""},
		{"image", "/images/agent/vmlinuz", nil, 200, string(kernel)},
		{"image range", "/images/agent/vmlinuz", []string{"Range", "bytes=10-19"}, 206, "0123456789"},
		{"ISO of a node with boot config, under its keyed name", "/iso/" + testNode + "-k1.iso", nil, 200, "iso"},
		// The ISO holds the agent token: its UUID alone does not fetch it.
		{"ISO without its key", "/iso/" + testNode + ".iso", nil, 404, ""},
		{"ISO with another key", "/iso/" + testNode + "-k2.iso", nil, 404, ""},
		{"ISO key file", "/iso/" + testNode + ".iso.key", nil, 404, ""},
		{"ISO of a node without boot config", "/iso/7f1c2d3e-4b5a-4c7d-8e9f-0a1b2c3d4e5f-k2.iso", nil, 404, ""},
		{"health", "/health", nil, 200, "ok"},
		{"directory is not listed", "/images/agent/", nil, 404, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			status, body := get(t, srv.URL+tc.path, tc.hdr...)
			if status != tc.status {
				t.Fatalf("status %d, want %d (%s)", status, tc.status, body)
			}
			if tc.body != "" && !strings.Contains(body, tc.body) {
				t.Errorf("body %q lacks %q", body, tc.body)
			}
		})
	}
}

func TestHTTPRefusesPathsOutsideRoots(t *testing.T) {
	srv, _ := startHTTP(t)
	for _, p := range []string{
		"/images/../secret", "/images/..%2fsecret", "/images/%2e%2e/secret", "/images/escape",
		"/images/agent/..%2f..%2fsecret", "/iso/..%2fsecret", "/iso/" + testNode + "%2f..%2f..%2fsecret.iso",
	} {
		// Raw request: the client must not clean the path first.
		req, _ := http.NewRequest("GET", srv.URL, nil)
		req.URL.Opaque = p
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == 200 || strings.Contains(string(b), "secret") {
			t.Errorf("%s: status %d body %q, want refusal", p, resp.StatusCode, b)
		}
	}
}
