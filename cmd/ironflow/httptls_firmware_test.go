package main

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestBootServiceTLSServesUEFIFirmware: the boot service's HTTPS (an RSA
// certificate) serves a client that offers only the RSA key exchange
// suites that EDK2 firmware without elliptic curves offers (besides DHE,
// which Go lacks), as Debian's OVMF does; another server's HTTPS (the API's)
// refuses that client.
func TestBootServiceTLSServesUEFIFirmware(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "boot"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment | x509.KeyUsageCertSign}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cert, keyFile := filepath.Join(dir, "c.pem"), filepath.Join(dir, "k.pem")
	os.WriteFile(cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), 0o600)
	parsed, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(parsed)
	firmware := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
		RootCAs: pool, MaxVersion: tls.VersionTLS12,
		CipherSuites: []uint16{tls.TLS_RSA_WITH_AES_128_GCM_SHA256, tls.TLS_RSA_WITH_AES_256_GCM_SHA384}}}}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "loader") })
	for _, c := range []struct {
		name     string
		firmware bool
	}{{"boot service", true}, {"api", false}} {
		limits := limitsOf(time.Second, time.Second, time.Second, 4<<10)
		limits.tls = httpTLS{cert: &cert, key: &keyFile, firmware: c.firmware}
		addr, _, err := serveHTTP(ctx, c.name, "127.0.0.1:0", h, limits, slog.New(slog.DiscardHandler))
		if err != nil {
			t.Fatal(err)
		}
		r, err := firmware.Get("https://" + addr + "/")
		if !c.firmware {
			if err == nil {
				r.Body.Close()
				t.Errorf("%s: served a client offering RSA key exchange only", c.name)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		b, _ := io.ReadAll(r.Body)
		r.Body.Close()
		if string(b) != "loader" || r.TLS.CipherSuite != tls.TLS_RSA_WITH_AES_128_GCM_SHA256 && r.TLS.CipherSuite != tls.TLS_RSA_WITH_AES_256_GCM_SHA384 {
			t.Errorf("%s: %q over %s", c.name, b, tls.CipherSuiteName(r.TLS.CipherSuite))
		}
	}
}
