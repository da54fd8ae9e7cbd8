package activities

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ironflow/ironflow/store"
)

func TestWriteImageCarriesTheNodesImageTrust(t *testing.T) {
	ca := filepath.Join(t.TempDir(), "ca.pem")
	pemText := testCAPEM(t)
	if err := os.WriteFile(ca, []byte(pemText), 0o644); err != nil {
		t.Fatal(err)
	}
	direct := map[string]any{"image_source": "https://images.example/disk.img"}
	cached := map[string]any{"image_source": "https://images.example/disk.img", "image_download_source": "http"}
	for _, tc := range []struct {
		name string
		ii   map[string]any
		di   map[string]any
		want any // the image_verify_ca argument; nil: absent
		err  string
	}{
		{"system store", direct, nil, nil, ""},
		{"True", direct, map[string]any{"image_verify_ca": "True"}, nil, ""},
		{"False", direct, map[string]any{"image_verify_ca": "False"}, false, ""},
		{"CA bundle: its content", direct, map[string]any{"image_verify_ca": ca}, pemText, ""},
		{"cached: the cache verifies the origin", cached, map[string]any{"image_verify_ca": ca}, nil, ""},
		{"missing bundle", direct, map[string]any{"image_verify_ca": "/nonexistent.pem"}, nil, "image_verify_ca \"/nonexistent.pem\" is neither a boolean nor a readable CA bundle file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := &store.Node{UUID: "n1", InstanceInfo: tc.ii, DriverInfo: tc.di}
			args, err := withImageTrust(map[string]any{"x": 1}, n)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got, ok := args["image_verify_ca"]; got != tc.want || ok != (tc.want != nil) || args["x"] != 1 {
				t.Fatalf("args %v", args)
			}
		})
	}
}

// testCAPEM is a self-signed CA certificate made for the test.
func testCAPEM(t *testing.T) string {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "image CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
}
