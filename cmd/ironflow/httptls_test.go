package main

import (
	"context"
	"crypto/tls"
	"github.com/ironflow/ironflow/internal/testkit/selfsigned"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestServeHTTPWithTLS: with a certificate and key the server speaks HTTPS
// only (a client that trusts the certificate is served, plain HTTP is
// not), and half a pair refuses to start rather than serve plain HTTP.
func TestServeHTTPWithTLS(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cert, key, pool := selfsigned.Write(t, "ironflow test")
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
