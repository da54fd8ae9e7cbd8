package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
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
	"strings"
	"testing"
	"time"
)

// writeCert writes a self-signed certificate for 127.0.0.1 and its key.
func writeCert(t *testing.T) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ironflow test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, IsCA: true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kd, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644)
	os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kd}), 0o600)
	c, _ := x509.ParseCertificate(der)
	pool = x509.NewCertPool()
	pool.AddCert(c)
	return certFile, keyFile, pool
}

// TestServeHTTPWithTLS: with a certificate and key the server speaks HTTPS
// only (a client that trusts the certificate is served, plain HTTP is
// not), and half a pair refuses to start rather than serve plain HTTP.
func TestServeHTTPWithTLS(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cert, key, pool := writeCert(t)
	limits := limitsOf(time.Second, time.Second, time.Second, 4<<10)
	limits.tls = httpTLS{cert: &cert, key: &key}
	if limits.tls.scheme() != "https" {
		t.Fatalf("scheme %q with a certificate", limits.tls.scheme())
	}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.WriteString(w, "ok") })
	addr, _, err := serveHTTP(ctx, "test", "127.0.0.1:0", h, limits, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	c := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}, Timeout: 5 * time.Second}
	r, err := c.Get("https://" + addr + "/")
	if err != nil {
		t.Fatalf("HTTPS request: %v", err)
	}
	b, _ := io.ReadAll(r.Body)
	r.Body.Close()
	if r.StatusCode != http.StatusOK || string(b) != "ok" || r.TLS == nil {
		t.Fatalf("HTTPS answer %d %q", r.StatusCode, b)
	}
	plain := &http.Client{Timeout: 5 * time.Second}
	if r, err := plain.Get("http://" + addr + "/"); err == nil {
		b, _ := io.ReadAll(r.Body)
		r.Body.Close()
		if string(b) == "ok" {
			t.Fatal("plain HTTP was served on the TLS port")
		}
	}
	if _, err := (&http.Client{Timeout: 5 * time.Second}).Get("https://" + addr + "/"); err == nil {
		t.Fatal("a client that does not trust the certificate was served")
	}

	empty := ""
	half := limitsOf(time.Second, time.Second, time.Second, 4<<10)
	half.tls = httpTLS{cert: &cert, key: &empty}
	if _, _, err := serveHTTP(ctx, "api", "127.0.0.1:0", h, half, slog.New(slog.DiscardHandler)); err == nil || !strings.Contains(err.Error(), "both a certificate and a key") {
		t.Fatalf("certificate without key: %v", err)
	}
}
