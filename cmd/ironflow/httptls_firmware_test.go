package main

import (
	"context"
	"crypto/tls"
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/ironflow/ironflow/internal/testkit/selfsigned"
)

// TestBootServiceTLSServesUEFIFirmware: the boot service's HTTPS (an RSA
// certificate) serves a client that offers only the RSA key exchange
// suites that EDK2 firmware without elliptic curves offers (besides DHE,
// which Go lacks), as Debian's OVMF does; another server's HTTPS (the API's)
// refuses that client.
func TestBootServiceTLSServesUEFIFirmware(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	cert, keyFile, pool := selfsigned.WriteRSA(t, "boot", "127.0.0.1")
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
