package tests

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"github.com/ironflow/ironflow/internal/testkit/selfsigned"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// consoleTokenTTL is the token lifetime of the TLS API of
// TestConsoleTokensOverTLS: short, so that the test sees one expire.
const consoleTokenTTL = 4 * time.Second

// fakeVNC is a TCP server standing in for a BMC's VNC service: each
// connection reads the RFB banner and the name of the machine, then what
// it is sent, echoed. It tells which machine a session reached.
func fakeVNC(t *testing.T, machine string) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				if _, err := io.WriteString(c, "RFB 003.008\n"+machine+"\n"); err != nil {
					return
				}
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	return l.Addr().String()
}

// TestConsoleTokensOverTLS: an API that serves TLS (one more `ironflow
// api` of the lab, its tokens valid for a few seconds) gives graphical
// console URLs on https, serves the page over TLS and the websocket as
// wss:, and not in clear; a page token opens its own node's console and no
// other (two redfish-graphical nodes, each relayed by the lab's worker to
// a VNC stand-in that names its machine); a token past its lifetime is
// 401 on the page and the websocket, and the attempt is in the history of
// the node it was issued for.
func TestConsoleTokensOverTLS(t *testing.T) {
	cert, key, pool := selfsigned.Write(t, "ironflow console test")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	listen := l.Addr().String()
	l.Close()
	p, err := lab.Spawn("ironflow-api-tls", append(lab.APIArgs(listen), "--tls-cert", cert, "--tls-key", key,
		"--console-token-ttl", consoleTokenTTL.String()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Kill)
	base := "https://" + listen
	tlsConf := &tls.Config{RootCAs: pool}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: tlsConf}, Timeout: 30 * time.Second}
	waitFor(t, "the TLS API", 60*time.Second, func() bool {
		resp, err := hc.Get(base + "/")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})

	// Two machines, each with its own VNC service.
	for _, m := range []string{"con-tls-a", "con-tls-b"} {
		mustCLI(t, "node", "create", "--name", m, "--driver", "redfish", "--console-interface", "redfish-graphical",
			"--driver-info", "console_vnc_address="+fakeVNC(t, "machine "+m))
		defer mustCLI(t, "node", "delete", m)
		mustCLI(t, "node", "console", "enable", m)
	}
	// page asks the TLS API for the node's console URL (a new token).
	page := func(node string) string {
		t.Helper()
		var got struct {
			Enabled bool `json:"console_enabled"`
			Info    *struct {
				Type string `json:"type"`
				URL  string `json:"url"`
			} `json:"console_info"`
		}
		var url string
		waitFor(t, "graphical console of "+node, 60*time.Second, func() bool {
			req, _ := http.NewRequest("GET", base+"/v1/nodes/"+node+"/states/console", nil)
			req.Header.Set("X-OpenStack-Ironic-API-Version", "1.78")
			resp, err := hc.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
				t.Fatal(err)
			}
			if got.Enabled && got.Info != nil {
				url = got.Info.URL
			}
			return url != ""
		})
		if got.Info.Type != "vnc" || !strings.HasPrefix(url, base+"/console/vnc?token=") {
			t.Fatalf("console_info of %s: %+v; want the TLS API's /console/vnc page", node, got.Info)
		}
		return url
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// session opens the page's websocket over wss: and answers what the
	// machine said first.
	wss := func(url string) string {
		return "wss" + strings.TrimPrefix(strings.Replace(url, "/console/vnc?", "/console/vnc/ws?", 1), "https")
	}
	session := func(url string) (*websocket.Conn, *http.Response, error) {
		return websocket.Dial(ctx, wss(url), &websocket.DialOptions{HTTPClient: hc})
	}
	greeting := func(ws *websocket.Conn) string {
		t.Helper()
		var got strings.Builder
		for strings.Count(got.String(), "\n") < 2 {
			_, b, err := ws.Read(ctx)
			if err != nil {
				t.Fatalf("websocket read %q: %v\nworker log:\n%s", got.String(), err, workerLog())
			}
			got.Write(b)
		}
		return got.String()
	}

	pageA, pageB := page("con-tls-a"), page("con-tls-b")
	issued := time.Now()
	resp, err := hc.Get(pageA)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "ironflow graphical console") {
		t.Fatalf("the graphical page over TLS: %d\n%.500s", resp.StatusCode, body)
	}
	// Not in clear: the TLS port answers plain HTTP with no page.
	if resp, err := http.Get("http://" + listen + strings.TrimPrefix(pageA, base)); err == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK || strings.Contains(string(b), "ironflow graphical console") {
			t.Fatalf("the TLS API served the page over plain HTTP: %d %.200s", resp.StatusCode, b)
		}
	}

	// Each token opens its own node's console.
	for _, c := range []struct{ url, machine, other string }{
		{pageA, "machine con-tls-a", "machine con-tls-b"},
		{pageB, "machine con-tls-b", "machine con-tls-a"},
	} {
		ws, _, err := session(c.url)
		if err != nil {
			t.Fatalf("wss session: %v\nworker log:\n%s", err, workerLog())
		}
		if g := greeting(ws); !strings.Contains(g, c.machine) || strings.Contains(g, c.other) {
			t.Fatalf("a token of %s reached %q", c.machine, g)
		}
		if err := ws.Write(ctx, websocket.MessageBinary, []byte("key\n")); err != nil {
			t.Fatal(err)
		}
		if _, b, err := ws.Read(ctx); err != nil || !strings.Contains(string(b), "key") {
			t.Fatalf("echo through wss: %q, %v", b, err)
		}
		ws.Close(websocket.StatusNormalClosure, "")
	}

	// Past its lifetime the token opens nothing, and the attempt is
	// written into the history of the node it named.
	time.Sleep(time.Until(issued.Add(consoleTokenTTL + time.Second)))
	if resp, err := hc.Get(pageA); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("the expired token's page: %v, %+v; want 401", err, resp)
	} else {
		resp.Body.Close()
	}
	if _, resp, err := session(pageA); err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("the expired token's websocket: %v, %+v; want 401", err, resp)
	}
	h := mustCLI(t, "node", "history", "list", "con-tls-a", "-f", "value", "-c", "Description of the event")
	if !strings.Contains(h, "Console access (graphical) refused") {
		t.Errorf("the refused attempts with an expired token are not in con-tls-a's history:\n%s", h)
	}
	if strings.Contains(h, strings.SplitN(pageA, "token=", 2)[1]) {
		t.Errorf("the history holds the token:\n%s", h)
	}
	if hb := mustCLI(t, "node", "history", "list", "con-tls-b", "-f", "value", "-c", "Description of the event"); strings.Contains(hb, "refused") {
		t.Errorf("con-tls-a's expired token was written into con-tls-b's history:\n%s", hb)
	}
	// A fresh token of the same node works again: the expiry is the
	// token's, not the console's.
	ws, _, err := session(page("con-tls-a"))
	if err != nil {
		t.Fatalf("a new token after the old one expired: %v", err)
	}
	if g := greeting(ws); !strings.Contains(g, "machine con-tls-a") {
		t.Fatalf("the new token reached %q", g)
	}
	ws.Close(websocket.StatusNormalClosure, "")
	for _, m := range []string{"con-tls-a", "con-tls-b"} {
		mustCLI(t, "node", "console", "disable", m)
		waitFor(t, "console of "+m+" disabled", 60*time.Second, func() bool { return !showConsole(t, m).Enabled })
	}
}
