package main

import (
	"crypto/tls"
	"fmt"
	"net/http"
	"time"

	"github.com/ironflow/ironflow/pxe"
)

// httpLimits bound one HTTP server's connections, so that a client that
// sends its request slowly, reads the answer slowly or keeps an idle
// connection open is closed instead of being held forever.
type httpLimits struct {
	read, write, idle *time.Duration
	maxHeader         *int
	tls               httpTLS // HTTPS when set
}

// addHTTPLimits registers --<prefix>-read-timeout, -write-timeout,
// -idle-timeout and -max-header-bytes.
func addHTTPLimits(s *settings, prefix string, read, write, idle time.Duration) httpLimits {
	return httpLimits{
		read:      s.Duration(prefix+"-read-timeout", read, prefix+" HTTP: longest time to read a request, body included (0: none)"),
		write:     s.Duration(prefix+"-write-timeout", write, prefix+" HTTP: longest time to write an answer (0: none)"),
		idle:      s.Duration(prefix+"-idle-timeout", idle, prefix+" HTTP: an idle keep-alive connection is closed after this"),
		maxHeader: s.Int(prefix+"-max-header-bytes", 64<<10, prefix+" HTTP: largest request header block"),
	}
}

// apply sets the limits on srv; nil fields (no flags) keep the server's.
func (l httpLimits) apply(srv *http.Server) {
	if l.read != nil {
		srv.ReadTimeout = *l.read
	}
	if l.write != nil {
		srv.WriteTimeout = *l.write
	}
	if l.idle != nil {
		srv.IdleTimeout = *l.idle
	}
	if l.maxHeader != nil {
		srv.MaxHeaderBytes = *l.maxHeader
	}
}

// httpTLS is a server's certificate and key (PEM files): set, the server
// speaks HTTPS only (Ironic's [api]enable_ssl_api with cert_file and
// key_file); unset, plain HTTP behind a TLS-terminating proxy or on a
// trusted network (docs/security.md).
type httpTLS struct {
	cert, key *string
	// firmware: UEFI firmware fetches loaders from this server over HTTPS
	// (the boot service), so it also offers the cipher suites EDK2 builds
	// without elliptic curves speak (pxe.FirmwareTLSCipherSuites).
	firmware bool
}

// addHTTPTLS registers --<prefix>tls-cert and --<prefix>tls-key.
func addHTTPTLS(s *settings, prefix, what string) httpTLS {
	return httpTLS{
		cert: s.String(prefix+"tls-cert", "", what+": PEM certificate (chain) to serve HTTPS with; needs the key too"),
		key:  s.String(prefix+"tls-key", "", what+": PEM private key of the TLS certificate"),
	}
}

// enabled reports whether HTTPS is configured.
func (t httpTLS) enabled() bool { return t.cert != nil && *t.cert != "" }

// scheme is the URL scheme the server answers on.
func (t httpTLS) scheme() string {
	if t.enabled() {
		return "https"
	}
	return "http"
}

// config loads the certificate; nil without TLS. Half a pair is an error,
// not a silent fallback to plain HTTP.
func (t httpTLS) config(name string) (*tls.Config, error) {
	cert, key := "", ""
	if t.cert != nil {
		cert = *t.cert
	}
	if t.key != nil {
		key = *t.key
	}
	switch {
	case cert == "" && key == "":
		return nil, nil
	case cert == "" || key == "":
		return nil, fmt.Errorf("%s: TLS needs both a certificate and a key (--tls-cert and --tls-key, or their --boot- forms)", name)
	}
	pair, err := tls.LoadX509KeyPair(cert, key)
	if err != nil {
		return nil, fmt.Errorf("%s: load TLS certificate %s and key %s: %w", name, cert, key, err)
	}
	cfg := &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
	if t.firmware {
		cfg.CipherSuites = pxe.FirmwareTLSCipherSuites()
	}
	return cfg, nil
}
