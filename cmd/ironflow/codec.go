package main

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/ironflow/ironflow/apiserver"
	"github.com/ironflow/ironflow/payload"
)

// defaultCodecListen is the codec server's address: loopback, next to the
// dev server's Web UI (8233).
const defaultCodecListen = "127.0.0.1:8234"

// payloadKeyFlags name the keys that encrypt every payload ironflow hands
// to Temporal (package payload; docs/security.md, "The payload codec").
type payloadKeyFlags struct{ value, file, previous *string }

func addPayloadKeyFlags(s *settings) payloadKeyFlags {
	return payloadKeyFlags{
		value:    s.String("payload-key", "", "key that encrypts every Temporal payload: 32 bytes as base64 or hex (openssl rand -base64 32); the same for every ironflow process that talks to Temporal"),
		file:     s.String("payload-key-file", "", "file holding the payload key on its first line and previous keys on the lines after it"),
		previous: s.String("payload-key-previous", "", "comma-separated previous payload keys, still decrypted until the histories they sealed leave Temporal's retention"),
	}
}

// set reports whether a current key was given.
func (f payloadKeyFlags) set() bool { return *f.value != "" || *f.file != "" }

func (f payloadKeyFlags) codec() (*payload.Codec, error) {
	k, err := payload.LoadKeys(*f.value, *f.file, *f.previous)
	if err != nil {
		return nil, err
	}
	return payload.NewCodec(k)
}

// devPayloadKey points ironflow dev at a payload key kept in its data
// directory, made on the first run: the workflows of a run survive into the
// next one, and their payloads must still open.
func devPayloadKey(f payloadKeyFlags, dataDir string) error {
	if f.set() {
		return nil
	}
	path := filepath.Join(dataDir, "payload.key")
	out, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	switch {
	case errors.Is(err, fs.ErrExist):
	case err != nil:
		return fmt.Errorf("create the dev payload key: %w", err)
	default:
		_, err = fmt.Fprintln(out, payload.GenerateKey())
		if cerr := out.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return fmt.Errorf("write the dev payload key: %w", err)
		}
	}
	*f.file = path
	return nil
}

// codecServerFlags are the codec server's settings.
type codecServerFlags struct {
	listen, namespace, auth, htpasswd, origins *string
	insecureNoAuth                             *bool
	payload                                    payloadKeyFlags
}

func addCodecServerFlags(s *settings, listenFlag string) codecServerFlags {
	return codecServerFlags{
		listen:  s.String(listenFlag, defaultCodecListen, "codec server listen address (the Temporal Web UI's codec endpoint)"),
		origins: s.String("codec-cors-origins", "http://127.0.0.1:8233,http://localhost:8233", "comma-separated origins of the Temporal Web UI the browser calls the codec server from"),
	}
}

// codecAuth is the codec server's authentication: the API's strategy and
// its htpasswd file or Keystone service user (keystone: a system-scoped
// token, apiserver.KeystoneAuth). Without authentication anyone who reaches
// the endpoint decrypts every history, so noauth needs --insecure-no-auth
// and a loopback listen address.
func codecAuth(strategy, htpasswd string, ks apiserver.KeystoneConfig, listen string, insecure bool) (payload.Authenticator, error) {
	switch strategy {
	case apiserver.AuthKeystone:
		a, err := apiserver.NewKeystoneAuth(ks)
		if err != nil {
			return nil, fmt.Errorf("codec server: %w", err)
		}
		return a, nil
	case apiserver.AuthHTTPBasic:
		a, err := apiserver.LoadBasicAuth(htpasswd)
		if err != nil {
			return nil, fmt.Errorf("codec server: %w", err)
		}
		return a, nil
	case apiserver.AuthNoAuth:
		if !insecure {
			return nil, errors.New("codec server: refusing to decrypt payloads for anyone: use --auth-strategy http_basic with --htpasswd-file, or --insecure-no-auth on a loopback address")
		}
		if !loopbackListen(listen) {
			return nil, fmt.Errorf("codec server: --insecure-no-auth only on a loopback address, not %s", listen)
		}
		return nil, nil
	default:
		return nil, fmt.Errorf("codec server: unknown auth strategy %q (want %q, %q or %q)", strategy, apiserver.AuthHTTPBasic, apiserver.AuthKeystone, apiserver.AuthNoAuth)
	}
}

// loopbackListen reports whether addr accepts connections from this
// machine only.
func loopbackListen(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// codecLimits bound the codec server's connections (fixed: it serves a
// few operators' browsers).
func codecLimits() httpLimits {
	read, write, idle, header := time.Minute, time.Minute, 2*time.Minute, 64<<10
	return httpLimits{read: &read, write: &write, idle: &idle, maxHeader: &header}
}

// startCodecServer serves the codec protocol on f's address.
func startCodecServer(ctx context.Context, f codecServerFlags, codec *payload.Codec, auth payload.Authenticator, log *slog.Logger) (string, <-chan error, error) {
	var origins []string
	for _, o := range strings.Split(*f.origins, ",") {
		if o = strings.TrimSpace(o); o != "" {
			origins = append(origins, strings.TrimSuffix(o, "/"))
		}
	}
	h := payload.Handler(codec, payload.ServerConfig{Auth: auth, Realm: "ironflow codec server", AllowedOrigins: origins, Namespace: *f.namespace})
	if auth == nil {
		log.Warn("codec server without authentication: anyone who reaches it decrypts every workflow history", "listen", *f.listen)
	}
	return serveHTTP(ctx, "codec server", *f.listen, h, codecLimits(), log.With("component", "codec"))
}

// codecServerSettings builds ironflow codec-server's flags.
func codecServerSettings() (*settings, codecServerFlags, keystoneFlags) {
	s := newSettings("codec-server")
	f := addCodecServerFlags(s, "listen")
	f.namespace = s.String("temporal-namespace", defaultNamespace, "the Temporal namespace whose payloads this server decodes", "TEMPORAL_NAMESPACE")
	f.auth = s.String("auth-strategy", apiserver.AuthHTTPBasic, "http_basic (an htpasswd file, as the API's), keystone (a system-scoped token in X-Auth-Token or Authorization: Bearer) or noauth (with --insecure-no-auth, loopback only)")
	ks := addKeystoneFlags(s)
	f.htpasswd = s.String("htpasswd-file", "", "bcrypt htpasswd file of the operators who may read decoded payloads")
	f.insecureNoAuth = s.Bool("insecure-no-auth", false, "serve without authentication: only on a loopback address, for a single-user lab")
	f.payload = addPayloadKeyFlags(s)
	return s, f, ks
}

// runCodecServer is `ironflow codec-server`: the endpoint the Temporal Web
// UI (and `temporal workflow show --codec-endpoint`) decrypts payloads
// through, for authenticated operators.
func runCodecServer(ctx context.Context, args []string) error {
	s, f, ks := codecServerSettings()
	if err := s.parse(args); err != nil {
		return err
	}
	codec, err := f.payload.codec()
	if err != nil {
		return err
	}
	auth, err := codecAuth(*f.auth, *f.htpasswd, ks.config(), *f.listen, *f.insecureNoAuth)
	if err != nil {
		return err
	}
	_, done, err := startCodecServer(ctx, f, codec, auth, logger())
	if err != nil {
		return err
	}
	return <-done
}
