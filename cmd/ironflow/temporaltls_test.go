package main

import (
	"errors"
	"github.com/ironflow/ironflow/internal/testkit/selfsigned"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"go.temporal.io/sdk/client"
)

// TestTemporalTLSFlags: no flag leaves the connection plain (the dev
// server), half a certificate/key pair or an unreadable CA stops startup
// with a message naming the flag, a full pair is presented as the client
// certificate, and an API key rides on TLS.
func TestTemporalTLSFlags(t *testing.T) {
	cert, key, _ := selfsigned.Write(t, "ironflow test")
	notPEM := filepath.Join(t.TempDir(), "ca.pem")
	os.WriteFile(notPEM, []byte("not a certificate"), 0o644)
	parse := func(t *testing.T, args ...string) (client.Options, error) {
		s := newSettings("test")
		f := addTemporalTLSFlags(s)
		if err := s.parse(args); err != nil {
			t.Fatal(err)
		}
		var opts client.Options
		return opts, f.apply(&opts)
	}
	if opts, err := parse(t); err != nil || opts.ConnectionOptions.TLS != nil || opts.Credentials != nil {
		t.Fatalf("no flags: TLS %v credentials %v error %v; want a plain connection", opts.ConnectionOptions.TLS, opts.Credentials, err)
	}
	for _, args := range [][]string{{"--temporal-tls-cert", cert}, {"--temporal-tls-key", key}} {
		if _, err := parse(t, args...); err == nil || !strings.Contains(err.Error(), "go together") {
			t.Errorf("%v: error %v, want the pair refused", args, err)
		}
	}
	if _, err := parse(t, "--temporal-tls-ca", notPEM); err == nil || !strings.Contains(err.Error(), "--temporal-tls-ca") {
		t.Errorf("CA file without PEM: error %v", err)
	}
	if _, err := parse(t, "--temporal-tls-cert", key, "--temporal-tls-key", key); err == nil {
		t.Error("a key given as the certificate was accepted")
	}
	opts, err := parse(t, "--temporal-tls-cert", cert, "--temporal-tls-key", key, "--temporal-tls-ca", cert, "--temporal-tls-server-name", "temporal.example")
	if err != nil {
		t.Fatal(err)
	}
	cfg := opts.ConnectionOptions.TLS
	if cfg == nil || cfg.RootCAs == nil || cfg.ServerName != "temporal.example" || cfg.GetClientCertificate == nil {
		t.Fatalf("mTLS flags: TLS config %+v", cfg)
	}
	if c, err := cfg.GetClientCertificate(nil); err != nil || len(c.Certificate) == 0 {
		t.Fatalf("client certificate: %v %v", c, err)
	}
	opts, err = parse(t, "--temporal-api-key", "k")
	if err != nil || opts.Credentials == nil || opts.ConnectionOptions.TLS == nil {
		t.Fatalf("API key: credentials %v TLS %v error %v; want both", opts.Credentials, opts.ConnectionOptions.TLS, err)
	}
}

// TestTemporalDialAdvice: a failed dial ends with the likely cause for the
// TLS flags given, e.g. plain gRPC against a TLS frontend.
func TestTemporalDialAdvice(t *testing.T) {
	cert, ca, empty := "c.pem", "ca.pem", ""
	plain := temporalTLSFlags{}
	noCert := temporalTLSFlags{ca: &ca}
	mtls := temporalTLSFlags{cert: &cert, key: &cert, ca: &ca, serverName: &empty, apiKey: &empty}
	for _, c := range []struct {
		f    temporalTLSFlags
		err  string
		want string
	}{
		{plain, "error reading server preface: EOF", "give --temporal-tls-ca"},
		{plain, "connection refused", "is the Temporal server running?"},
		{noCert, "remote error: tls: certificate required", "requires a client certificate"},
		{noCert, "write: broken pipe", "requires a client certificate"},
		{mtls, "remote error: tls: unknown certificate authority", "must be signed by a CA the frontend trusts"},
		{mtls, "write: broken pipe", "must be signed by a CA the frontend trusts"},
		{mtls, "x509: certificate signed by unknown authority", "check --temporal-tls-ca"},
	} {
		if got := c.f.explain(errors.New(c.err)); !strings.Contains(got, c.want) {
			t.Errorf("%q: advice %q, want it to say %q", c.err, got, c.want)
		}
	}
}
