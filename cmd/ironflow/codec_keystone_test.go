package main

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/ironflow/ironflow/apiserver"
	"github.com/ironflow/ironflow/internal/testkit/devstack"
	"github.com/ironflow/ironflow/payload"
)

// TestCodecServerKeystoneNeedsServiceUser: `ironflow dev --auth-strategy
// keystone` builds the codec server's authentication from the API's
// Keystone flags; without a service user it says what is missing rather
// than "unknown auth strategy".
func TestCodecServerKeystoneNeedsServiceUser(t *testing.T) {
	s := newSettings("dev")
	api := addAPIFlags(s)
	if err := s.parse([]string{"--auth-strategy", "keystone"}); err != nil {
		t.Fatal(err)
	}
	_, err := codecAuth(*api.auth, *api.htpasswd, api.keystone.config(), "127.0.0.1:8234", false)
	if err == nil || strings.Contains(err.Error(), "unknown auth strategy") || !strings.Contains(err.Error(), "password") {
		t.Fatalf("keystone without a service user: %v", err)
	}
}

// TestCodecServerDecodesForKeystoneSystemUsers runs the codec server as
// `ironflow dev --auth-strategy keystone` wires it, against Debian's real
// keystone: a system reader's token (X-Auth-Token or Bearer) decodes; no
// token, a bogus one, a project member's or a revoked one is 401.
func TestCodecServerDecodesForKeystoneSystemUsers(t *testing.T) {
	if !devstack.KeystoneAvailable() {
		t.Skip("SKIPPED LOUDLY: " + devstack.ErrNoKeystone.Error())
	}
	k, err := devstack.StartKeystone(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(k.Stop)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	proj, err := k.CreateProject("codec-proj")
	must(err)
	svc, err := k.CreateProject("service")
	must(err)
	reader, err := k.CreateUser("codec-sysreader", "pw-r")
	must(err)
	must(k.GrantSystemRole(reader, "reader"))
	member, err := k.CreateUser("codec-member", "pw-m")
	must(err)
	must(k.GrantProjectRole(member, proj, "member"))
	ironic, err := k.CreateUser("ironic", "ironic-pw")
	must(err)
	must(k.GrantProjectRole(ironic, svc, "admin"))
	must(k.GrantProjectRole(ironic, svc, "service"))
	readerTok, err := k.Token("codec-sysreader", "pw-r", devstack.Scope{System: true})
	must(err)
	memberTok, err := k.Token("codec-member", "pw-m", devstack.Scope{Project: "codec-proj"})
	must(err)
	revokedTok, err := k.Token("codec-sysreader", "pw-r", devstack.Scope{System: true})
	must(err)
	must(k.Revoke(revokedTok))

	s := newSettings("dev")
	api := addAPIFlags(s)
	f := addCodecServerFlags(s, "codec-listen")
	f.namespace, f.payload = api.namespace, api.payload
	must(s.parse([]string{"--auth-strategy", "keystone", "--codec-listen", "127.0.0.1:0", "--payload-key", payload.GenerateKey(),
		"--keystone-auth-url", k.URL, "--keystone-username", "ironic", "--keystone-password", "ironic-pw"}))
	codec, err := f.payload.codec()
	must(err)
	auth, err := codecAuth(*api.auth, *api.htpasswd, api.keystone.config(), *f.listen, false)
	must(err)
	if _, ok := auth.(*apiserver.KeystoneAuth); !ok {
		t.Fatalf("codec auth for keystone is %T", auth)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr, _, err := startCodecServer(ctx, f, codec, auth, slog.New(slog.DiscardHandler))
	must(err)

	enc, _ := payload.DataConverter(codec).ToPayloads("MARKER-codec-ks-71c4")
	body, _ := protojson.Marshal(enc)
	decode := func(header, value string) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/decode", bytes.NewReader(body))
		req.Header.Set("X-Namespace", *api.namespace)
		if header != "" {
			req.Header.Set(header, value)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for name, h := range map[string][2]string{
		"no token":       {"", ""},
		"bogus token":    {"X-Auth-Token", "gAAAAAnot-a-token"},
		"project member": {"X-Auth-Token", memberTok},
		"revoked token":  {"X-Auth-Token", revokedTok},
	} {
		if code, text := decode(h[0], h[1]); code != http.StatusUnauthorized || strings.Contains(text, "MARKER") {
			t.Errorf("%s: %d %s", name, code, text)
		}
	}
	for _, h := range [][2]string{{"X-Auth-Token", readerTok}, {"Authorization", "Bearer " + readerTok}} {
		code, text := decode(h[0], h[1])
		if code != http.StatusOK {
			t.Fatalf("system reader via %s: %d %s", h[0], code, text)
		}
		dec := new(commonpb.Payloads)
		must(protojson.Unmarshal([]byte(text), dec))
		var got string
		if err := converter.GetDefaultDataConverter().FromPayload(dec.Payloads[0], &got); err != nil || got != "MARKER-codec-ks-71c4" {
			t.Errorf("decoded %q, %v", got, err)
		}
	}
}
