package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"golang.org/x/crypto/bcrypt"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/ironflow/ironflow/apiserver"
	"github.com/ironflow/ironflow/payload"
)

// testCodec is a codec under a fresh key.
func testCodec(t *testing.T) *payload.Codec {
	t.Helper()
	k, err := payload.LoadKeys(payload.GenerateKey(), "", "")
	if err != nil {
		t.Fatal(err)
	}
	c, err := payload.NewCodec(k)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestCodecServerRefusesToRunOpen: without authentication the codec server
// would decrypt every history for anyone, so noauth needs the explicit flag
// and a loopback address.
func TestCodecServerRefusesToRunOpen(t *testing.T) {
	key := payload.GenerateKey()
	for _, args := range [][]string{
		{"--auth-strategy", "noauth", "--payload-key", key},
		{"--auth-strategy", "noauth", "--insecure-no-auth", "--listen", "0.0.0.0:0", "--payload-key", key},
		{"--auth-strategy", "http_basic", "--payload-key", key},
		{"--insecure-no-auth", "--auth-strategy", "noauth"},
	} {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := runCodecServer(ctx, args); err == nil {
			t.Errorf("codec-server %v started", args)
		}
	}
	if _, err := codecAuth("noauth", "", apiserver.KeystoneConfig{}, "127.0.0.1:8234", true); err != nil {
		t.Errorf("loopback lab without auth: %v", err)
	}
}

// TestCodecServerDecodesForOperatorsOnly runs the codec server as
// `ironflow codec-server --auth-strategy http_basic` wires it: an
// unauthenticated decode is 401, an operator's returns the plaintext.
func TestCodecServerDecodesForOperatorsOnly(t *testing.T) {
	hash, _ := bcrypt.GenerateFromPassword([]byte("s3cret"), bcrypt.MinCost)
	htpasswd := filepath.Join(t.TempDir(), "htpasswd")
	if err := os.WriteFile(htpasswd, []byte("operator:"+string(hash)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	key := payload.GenerateKey()
	s := newSettings("codec-server")
	f := addCodecServerFlags(s, "listen")
	f.namespace = s.String("temporal-namespace", "default", "")
	f.payload = addPayloadKeyFlags(s)
	if err := s.parse([]string{"--listen", "127.0.0.1:0", "--payload-key", key}); err != nil {
		t.Fatal(err)
	}
	codec, err := f.payload.codec()
	if err != nil {
		t.Fatal(err)
	}
	auth, err := codecAuth("http_basic", htpasswd, apiserver.KeystoneConfig{}, *f.listen, false)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr, _, err := startCodecServer(ctx, f, codec, auth, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	enc, _ := payload.DataConverter(codec).ToPayloads("MARKER-codec-cmd-5e2a")
	body, _ := protojson.Marshal(enc)
	decode := func(user, pass string) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/decode", bytes.NewReader(body))
		req.Header.Set("X-Namespace", "default")
		if user != "" {
			req.SetBasicAuth(user, pass)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, text := decode("", ""); code != http.StatusUnauthorized || strings.Contains(text, "MARKER") {
		t.Errorf("unauthenticated decode: %d %s", code, text)
	}
	if code, _ := decode("operator", "wrong"); code != http.StatusUnauthorized {
		t.Errorf("wrong password: %d", code)
	}
	code, text := decode("operator", "s3cret")
	if code != http.StatusOK {
		t.Fatalf("operator's decode: %d %s", code, text)
	}
	dec := new(commonpb.Payloads)
	if err := protojson.Unmarshal([]byte(text), dec); err != nil {
		t.Fatal(err)
	}
	var got string
	if err := converter.GetDefaultDataConverter().FromPayload(dec.Payloads[0], &got); err != nil || got != "MARKER-codec-cmd-5e2a" {
		t.Errorf("decoded %q, %v", got, err)
	}
}
