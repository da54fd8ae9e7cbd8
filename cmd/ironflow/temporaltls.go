package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/ironflow/ironflow/embedded"
)

// temporalTLSFlags are how an ironflow process authenticates to Temporal
// and verifies it: mTLS to a self-hosted cluster's frontend, or an API key
// for Temporal Cloud (docs/production.md, "mTLS to Temporal"). Every command
// that dials Temporal shares one block, as it shares --payload-key.
type temporalTLSFlags struct{ cert, key, ca, serverName, apiKey *string }

func addTemporalTLSFlags(s *settings) temporalTLSFlags {
	return temporalTLSFlags{
		cert:       s.String("temporal-tls-cert", "", "PEM client certificate ironflow presents to the Temporal frontend (mTLS); needs --temporal-tls-key"),
		key:        s.String("temporal-tls-key", "", "PEM private key of --temporal-tls-cert"),
		ca:         s.String("temporal-tls-ca", "", "PEM CA bundle that signs the Temporal frontend's certificate (default: the system roots); enables TLS"),
		serverName: s.String("temporal-tls-server-name", "", "name expected in the Temporal frontend's certificate (default: the host of --temporal-address)"),
		apiKey:     s.String("temporal-api-key", "", "Temporal Cloud API key, sent as a bearer token over TLS", "TEMPORAL_API_KEY"),
	}
}

func str(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// apply sets opts' transport security from the flags: nothing when none is
// given (the dev server speaks plain gRPC on loopback). It fails on half a
// certificate/key pair or unreadable files, so that a typo stops the
// process at startup rather than at its first call.
func (f temporalTLSFlags) apply(opts *client.Options) error {
	cert, key, ca, name, apiKey := str(f.cert), str(f.key), str(f.ca), str(f.serverName), str(f.apiKey)
	if (cert == "") != (key == "") {
		return errors.New("--temporal-tls-cert and --temporal-tls-key go together: give both (a client certificate and its key) or neither")
	}
	if cert == "" && ca == "" && name == "" && apiKey == "" {
		return nil
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: name}
	if ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return fmt.Errorf("--temporal-tls-ca: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return fmt.Errorf("--temporal-tls-ca %s: no PEM certificate in it", ca)
		}
		cfg.RootCAs = pool
	}
	if cert != "" {
		kp := &keyPair{certFile: cert, keyFile: key}
		if _, err := kp.get(nil); err != nil {
			return err
		}
		cfg.GetClientCertificate = kp.get
	}
	opts.ConnectionOptions.TLS = cfg
	if apiKey != "" {
		opts.Credentials = client.NewAPIKeyStaticCredentials(apiKey)
	}
	return nil
}

// keyPair is a client certificate read from its files again when they
// change: a rotated certificate is used at the next connection without a
// restart (short-lived certificates from an internal CA are the usual
// production setup).
type keyPair struct {
	certFile, keyFile string
	mu                sync.Mutex
	mod               time.Time
	cert              *tls.Certificate
}

func (k *keyPair) get(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	mod := k.mod
	for _, f := range []string{k.certFile, k.keyFile} {
		st, err := os.Stat(f)
		if err != nil {
			if k.cert != nil {
				return k.cert, nil // mid-rotation: keep the last good pair
			}
			return nil, fmt.Errorf("Temporal client certificate: %w", err)
		}
		if st.ModTime().After(mod) {
			mod = st.ModTime()
		}
	}
	if k.cert != nil && !mod.After(k.mod) {
		return k.cert, nil
	}
	c, err := tls.LoadX509KeyPair(k.certFile, k.keyFile)
	if err != nil {
		if k.cert != nil {
			return k.cert, nil
		}
		return nil, fmt.Errorf("Temporal client certificate %s with key %s: %w", k.certFile, k.keyFile, err)
	}
	k.cert, k.mod = &c, mod
	return k.cert, nil
}

// explain is the advice ending a failed dial's error: what the failure
// most likely means given the TLS flags.
func (f temporalTLSFlags) explain(err error) string {
	msg := err.Error()
	tlsOn := str(f.cert) != "" || str(f.ca) != "" || str(f.serverName) != "" || str(f.apiKey) != ""
	switch {
	case strings.Contains(msg, "certificate required"):
		return "the Temporal frontend requires a client certificate: give --temporal-tls-cert and --temporal-tls-key"
	case tlsOn && str(f.cert) == "" && closed(msg):
		// Under TLS 1.3 the client's handshake ends before the server's
		// verdict: the refusal shows as the connection closing.
		return "the Temporal frontend closed the TLS connection, as one that requires a client certificate does: give --temporal-tls-cert and --temporal-tls-key"
	case tlsOn && closed(msg):
		return "the Temporal frontend closed the TLS connection, as it does when it refuses ironflow's client certificate: --temporal-tls-cert must be signed by a CA the frontend trusts (its clientCaFiles)"
	case strings.Contains(msg, "unknown certificate authority") || strings.Contains(msg, "bad certificate"):
		return "the Temporal frontend refused ironflow's client certificate: --temporal-tls-cert must be signed by a CA the frontend trusts (its clientCaFiles)"
	case strings.Contains(msg, "x509:"):
		return "ironflow does not trust the Temporal frontend's certificate: check --temporal-tls-ca and --temporal-tls-server-name"
	case !tlsOn && (closed(msg) || strings.Contains(msg, "preface")):
		return "the Temporal frontend closed a plain connection, as one that requires TLS does: give --temporal-tls-ca (and --temporal-tls-cert/--temporal-tls-key for mTLS)"
	}
	return "is the Temporal server running? 'ironflow dev' starts one"
}

func closed(msg string) bool {
	return strings.Contains(msg, "EOF") || strings.Contains(msg, "broken pipe") || strings.Contains(msg, "connection reset")
}

// devTemporalCluster starts, for `ironflow dev --temporal cluster`, the
// Temporal server built from go.temporal.io/server on the embedded
// PostgreSQL (databases temporal and temporal_visibility) with mTLS, and
// points api (and the worker sharing its flags) at it with the client
// certificate generated under dataDir/temporal-cluster/tls. stop ends the
// cluster.
func devTemporalCluster(ctx context.Context, kind, services string, embeddedTemporal bool, pg *embedded.Postgres, dataDir string, port, uiPort int, codecURL string, api apiFlags, log *slog.Logger) (stop func(), uiURL string, err error) {
	if services != "all" && services != "split" {
		return nil, "", fmt.Errorf("--temporal-services %q: want all or split", services)
	}
	switch {
	case kind == "dev" && services == "split":
		return nil, "", errors.New("--temporal-services split needs --temporal cluster (the dev server is one process)")
	case kind == "dev":
		return func() {}, "", nil
	case kind != "cluster":
		return nil, "", fmt.Errorf("--temporal %q: want dev or cluster", kind)
	case !embeddedTemporal:
		return nil, "", errors.New("--temporal cluster starts an embedded cluster: drop --temporal-address/TEMPORAL_ADDRESS, or drop --temporal cluster to use that server")
	case pg == nil:
		return nil, "", errors.New("--temporal cluster keeps Temporal on the embedded PostgreSQL: unset DATABASE_URL")
	}
	if uiPort == 0 {
		uiPort = port + 1000
	}
	t, err := embedded.StartTemporalCluster(ctx, embedded.TemporalClusterConfig{
		Dir: filepath.Join(dataDir, "temporal-cluster"), Postgres: pg, Port: port,
		Namespace: *api.namespace, SearchAttributes: embedded.WorkflowSearchAttributes(),
		UIPort: uiPort, UICodecEndpoint: codecURL, SeparateServices: services == "split",
	}, log.With("component", "temporal"))
	if err != nil {
		return nil, "", err
	}
	c := t.Certs()
	*api.temporal = t.Address()
	*api.temporalTLS.cert, *api.temporalTLS.key, *api.temporalTLS.ca = c.ClientCertFile, c.ClientKey, c.CAFile
	log.Info("temporal cluster ready", "address", t.Address(), "ui", t.UIURL(), "log", t.LogFile(),
		"tls_ca", c.CAFile, "client_cert", c.ClientCertFile)
	return func() { _ = t.Stop() }, t.UIURL(), nil
}
