package activities

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ironflow/ironflow/agent/client"
)

func TestAgentConnsReuseOneClientPerAgentAndTrust(t *testing.T) {
	var p agentConns
	a, err := p.get("https://10.0.0.5:9999", "tok", "", true, client.WithInsecureTLS())
	if err != nil {
		t.Fatal(err)
	}
	again, _ := p.get("https://10.0.0.5:9999", "tok", "", true, client.WithInsecureTLS())
	if a != again {
		t.Fatalf("the same agent got a second HTTP client: its connection is not reused")
	}
	other, _ := p.get("https://10.0.0.6:9999", "tok", "", true, client.WithInsecureTLS())
	if other == a {
		t.Fatalf("two agents share an HTTP client")
	}
	// Another CA for the same URL (a rebooted agent with a new
	// certificate) must not reuse the old trust.
	if _, err := p.get("https://10.0.0.5:9999", "tok", "not a certificate", false, client.WithCAPEM([]byte("not a certificate"))); err == nil {
		t.Fatalf("a CA without a PEM certificate was accepted")
	}
	// Idle entries go.
	for _, c := range p.m {
		c.used = time.Now().Add(-2 * agentConnIdle)
	}
	p.lastSweep = time.Time{}
	fresh, _ := p.get("https://10.0.0.7:9999", "tok", "", true, client.WithInsecureTLS())
	if len(p.m) != 1 || p.m["https://10.0.0.7:9999\x00"+emptySum+"\x00insecure"].hc != fresh {
		t.Fatalf("after the sweep the cache holds %d clients, want only the fresh one", len(p.m))
	}
}

// emptySum is the hex sha256 of "".
const emptySum = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

// fakeAgent is one boot of an agent: an HTTP server that answers
// get_deploy_steps for its token. Once the machine reboots, a request on
// one of its connections is answered with a TCP reset, as the next boot's
// kernel answers packets of a connection it never had.
type fakeAgent struct {
	srv      *http.Server
	l        net.Listener
	token    string
	accepted atomic.Int32 // connections accepted
	rebooted atomic.Bool
	stale    atomic.Int32 // requests that arrived after the reboot
}

func startFakeAgent(t *testing.T, addr, token string) (*fakeAgent, string) {
	t.Helper()
	var l net.Listener
	var err error
	// The previous boot's listener just closed: the port is free again, but
	// allow the kernel a moment.
	for i := 0; i < 50; i++ {
		if l, err = net.Listen("tcp", addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		t.Fatal(err)
	}
	a := &fakeAgent{token: token, l: l}
	a.srv = &http.Server{
		ConnState: func(_ net.Conn, s http.ConnState) {
			if s == http.StateNew {
				a.accepted.Add(1)
			}
		},
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if a.rebooted.Load() {
				a.stale.Add(1)
				conn, _, err := w.(http.Hijacker).Hijack()
				if err == nil {
					conn.(*net.TCPConn).SetLinger(0) // close with RST
					conn.Close()
				}
				return
			}
			if r.URL.Query().Get("agent_token") != a.token {
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
			io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"id":"1","command_name":"get_deploy_steps","command_status":"SUCCEEDED","command_error":null,`+
				`"command_result":{"deploy_steps":{"GenericHardwareManager":[{"step":"write_image","priority":80,"interface":"deploy"}]},"hardware_manager_version":{}}}`)
		}),
	}
	go a.srv.Serve(l)
	t.Cleanup(func() { a.srv.Close() })
	return a, "http://" + l.Addr().String()
}

// reboot takes the machine down without a word on its connections (no FIN:
// the kernel that held them is gone) and frees its address for the next
// boot.
func (a *fakeAgent) reboot(t *testing.T) {
	t.Helper()
	a.rebooted.Store(true)
	// Stop accepting; the connections already open stay as they are.
	if err := a.l.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestAgentConnsDialTheRebootedAgentAfresh: a machine reboots into a new
// agent at the same address with a new token; the first call to it succeeds
// at once, on a new connection, instead of dying on the previous agent's
// pooled one.
func TestAgentConnsDialTheRebootedAgentAfresh(t *testing.T) {
	var p agentConns
	ctx := context.Background()
	call := func(url, token string) error {
		hc, err := p.get(url, token, "", false)
		if err != nil {
			t.Fatal(err)
		}
		c, err := client.New(url, token, client.WithHTTPClient(hc))
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_, err = c.GetDeploySteps(ctx, nil, nil)
		return err
	}

	first, url := startFakeAgent(t, "127.0.0.1:0", "token-of-the-deploy")
	for range 2 {
		if err := call(url, first.token); err != nil {
			t.Fatalf("call to the first agent: %v", err)
		}
	}
	if n := first.accepted.Load(); n != 1 {
		t.Fatalf("the first agent accepted %d connections for two calls, want 1 (kept alive)", n)
	}

	first.reboot(t)
	second, url2 := startFakeAgent(t, strings.TrimPrefix(url, "http://"), "token-of-the-undeploy")
	if url2 != url {
		t.Fatalf("the agent came back at %s, want %s", url2, url)
	}
	if err := call(url, second.token); err != nil {
		t.Fatalf("first call after the reboot failed (a pooled connection of the previous agent was reused?): %v", err)
	}
	if n := first.stale.Load(); n != 0 {
		t.Fatalf("%d requests went to the previous agent's connections", n)
	}
	if n := second.accepted.Load(); n != 1 {
		t.Fatalf("the rebooted agent accepted %d connections, want 1", n)
	}
}
