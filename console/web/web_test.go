package web

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/ironflow/ironflow/internal/testkit/syncbuf"
)

// tokens is a Resolver over a fixed table, standing in for the console
// package's store-backed one; it records every Rejected call.
type tokens struct {
	mu       sync.Mutex
	targets  map[string]Target
	err      error // answered for every token when set
	rejected []rejection
}

type rejection struct {
	token, kind, remote string
	why                 error
}

func (r *tokens) Resolve(_ context.Context, token, kind string) (Target, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		return Target{}, r.err
	}
	t, ok := r.targets[token]
	if !ok || t.Kind != kind {
		return Target{}, ErrBadToken
	}
	return t, nil
}

func (r *tokens) Rejected(_ context.Context, token, kind, remote string, why error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.rejected = append(r.rejected, rejection{token, kind, remote, why})
}

func (r *tokens) rejections() []rejection {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]rejection(nil), r.rejected...)
}

// endpoint is a real TCP listener standing for a worker's console endpoint;
// each accepted connection is handed to serve.
func endpoint(t *testing.T, serve func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go serve(c)
		}
	}()
	return ln.Addr().String()
}

func echo(c net.Conn) { defer c.Close(); io.Copy(c, c) }

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// newConsoleServer serves Handler with one serial and one graphical token
// leading to the given addresses.
func newConsoleServer(t *testing.T, serialAddr, vncAddr string, o Options) (*httptest.Server, *tokens) {
	t.Helper()
	res := &tokens{targets: map[string]Target{
		"serial-token": {NodeUUID: "1be26c0b-03f2-4d2e-ae87-c02d7f33c123", Kind: KindSerial, Addr: serialAddr},
		"vnc-token":    {NodeUUID: "1be26c0b-03f2-4d2e-ae87-c02d7f33c123", Kind: KindGraphical, Addr: vncAddr},
	}}
	if o.Log == nil {
		o.Log = quietLog()
	}
	ts := httptest.NewServer(Handler(res, o))
	t.Cleanup(ts.Close)
	return ts, res
}

func wsURL(ts *httptest.Server, path string) string {
	return "ws" + strings.TrimPrefix(ts.URL, "http") + path
}

func dialWS(t *testing.T, url string) *websocket.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, _, err := websocket.Dial(ctx, url, nil)
	if err != nil {
		t.Fatalf("dial %s: %v", url, err)
	}
	t.Cleanup(func() { c.CloseNow() })
	return c
}

// readUntil reads binary messages until their concatenation holds want.
func readUntil(t *testing.T, c *websocket.Conn, want string) []byte {
	t.Helper()
	return readUntilWithin(t, c, want, 10*time.Second)
}

// readUntilWithin is readUntil with a deadline of its own, for a VM's
// firmware on a loaded host.
func readUntilWithin(t *testing.T, c *websocket.Conn, want string, d time.Duration) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	var got []byte
	for !bytes.Contains(got, []byte(want)) {
		typ, b, err := c.Read(ctx)
		if err != nil {
			t.Fatalf("read waiting for %q (have %q): %v", want, got, err)
		}
		if typ != websocket.MessageBinary {
			t.Fatalf("console message of type %v, want binary", typ)
		}
		got = append(got, b...)
	}
	return got
}

// ironicFault decodes Ironic's double-encoded error body.
func ironicFault(t *testing.T, body []byte) (faultcode, faultstring string) {
	t.Helper()
	var outer struct {
		ErrorMessage string `json:"error_message"`
	}
	if err := json.Unmarshal(body, &outer); err != nil {
		t.Fatalf("body %q is not Ironic's error JSON: %v", body, err)
	}
	var inner struct {
		Faultcode   string  `json:"faultcode"`
		Faultstring string  `json:"faultstring"`
		Debuginfo   *string `json:"debuginfo"`
	}
	if err := json.Unmarshal([]byte(outer.ErrorMessage), &inner); err != nil {
		t.Fatalf("error_message %q is not JSON: %v", outer.ErrorMessage, err)
	}
	return inner.Faultcode, inner.Faultstring
}

// TestSerialBridgeCarriesBytesBothWays: text typed in the browser reaches
// the endpoint as bytes, the endpoint's bytes come back as binary messages,
// unchanged (including bytes that are not UTF-8).
func TestSerialBridgeCarriesBytesBothWays(t *testing.T) {
	ts, res := newConsoleServer(t, endpoint(t, echo), "", Options{})
	c := dialWS(t, wsURL(ts, "/console/terminal/ws?token=serial-token"))
	ctx := context.Background()
	if err := c.Write(ctx, websocket.MessageText, []byte("root\r")); err != nil {
		t.Fatal(err)
	}
	readUntil(t, c, "root\r")
	raw := []byte{0x1b, '[', '2', 'J', 0xff, 0x00, 0xc3}
	if err := c.Write(ctx, websocket.MessageBinary, raw); err != nil {
		t.Fatal(err)
	}
	readUntil(t, c, string(raw))
	if r := res.rejections(); len(r) != 0 {
		t.Fatalf("good token rejected: %+v", r)
	}
}

// TestWebsocketClosesWhenTheEndpointCloses: a console disabled on the worker
// (its listener and connections closed) ends the browser's session with a
// normal close and the reason "console closed".
func TestWebsocketClosesWhenTheEndpointCloses(t *testing.T) {
	addr := endpoint(t, func(c net.Conn) {
		c.Write([]byte("login: "))
		time.Sleep(50 * time.Millisecond)
		c.Close()
	})
	ts, _ := newConsoleServer(t, addr, "", Options{})
	c := dialWS(t, wsURL(ts, "/console/terminal/ws?token=serial-token"))
	readUntil(t, c, "login: ")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, _, err := c.Read(ctx)
	var ce websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != websocket.StatusNormalClosure || ce.Reason != reasonEndpointClosed {
		t.Fatalf("after the endpoint closed: %v, want close 1000 %q", err, reasonEndpointClosed)
	}
}

// TestEndpointClosesWhenTheBrowserCloses: closing the page closes the TCP
// connection to the worker, freeing the console's one writer slot.
func TestEndpointClosesWhenTheBrowserCloses(t *testing.T) {
	closed := make(chan error, 1)
	addr := endpoint(t, func(c net.Conn) {
		defer c.Close()
		_, err := io.Copy(io.Discard, c)
		closed <- err
	})
	ts, _ := newConsoleServer(t, addr, "", Options{})
	c := dialWS(t, wsURL(ts, "/console/terminal/ws?token=serial-token"))
	c.Write(context.Background(), websocket.MessageText, []byte("x"))
	c.Close(websocket.StatusNormalClosure, "bye")
	select {
	case err := <-closed:
		if err != nil {
			t.Fatalf("endpoint saw %v, want EOF", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the endpoint's connection stayed open after the browser closed")
	}
}

// TestLimits: a message above MaxMessageBytes closes the session with 1009,
// and a session without traffic closes after IdleTimeout; both close the
// endpoint's connection.
func TestLimits(t *testing.T) {
	t.Run("message too big", func(t *testing.T) {
		got := make(chan int, 1)
		addr := endpoint(t, func(c net.Conn) {
			defer c.Close()
			n, _ := io.Copy(io.Discard, c)
			got <- int(n)
		})
		ts, _ := newConsoleServer(t, addr, "", Options{MaxMessageBytes: 1024})
		c := dialWS(t, wsURL(ts, "/console/terminal/ws?token=serial-token"))
		ctx := context.Background()
		c.Write(ctx, websocket.MessageBinary, bytes.Repeat([]byte("a"), 1024))
		c.Write(ctx, websocket.MessageBinary, bytes.Repeat([]byte("b"), 1025))
		_, _, err := c.Read(ctx)
		if websocket.CloseStatus(err) != websocket.StatusMessageTooBig {
			t.Fatalf("after an oversized message: %v, want close 1009", err)
		}
		select {
		case n := <-got:
			if n != 1024 {
				t.Fatalf("endpoint received %d bytes, want the 1024 of the message within the limit", n)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("endpoint connection stayed open")
		}
	})
	t.Run("idle", func(t *testing.T) {
		ts, _ := newConsoleServer(t, endpoint(t, echo), "", Options{IdleTimeout: 300 * time.Millisecond})
		c := dialWS(t, wsURL(ts, "/console/terminal/ws?token=serial-token"))
		ctx := context.Background()
		// Traffic keeps it open past one timeout...
		for range 4 {
			c.Write(ctx, websocket.MessageText, []byte("k"))
			readUntil(t, c, "k")
			time.Sleep(120 * time.Millisecond)
		}
		// ...silence closes it.
		start := time.Now()
		_, _, err := c.Read(ctx)
		var ce websocket.CloseError
		if !errors.As(err, &ce) || ce.Code != websocket.StatusPolicyViolation || ce.Reason != reasonIdle {
			t.Fatalf("idle session: %v, want close 1008 %q", err, reasonIdle)
		}
		if d := time.Since(start); d > 3*time.Second {
			t.Fatalf("idle close took %s", d)
		}
	})
}

// TestBadTokens: unknown, empty, expired (the Resolver's ErrBadToken) and
// wrong-kind tokens get Ironic's 401 on pages and websockets, and the
// Resolver hears of each refusal; nothing is dialled.
func TestBadTokens(t *testing.T) {
	dialled := make(chan struct{}, 10)
	addr := endpoint(t, func(c net.Conn) { dialled <- struct{}{}; c.Close() })
	ts, res := newConsoleServer(t, addr, addr, Options{})
	cases := []struct{ name, path, token, kind string }{
		{"unknown on terminal page", "/console/terminal?token=nope", "nope", KindSerial},
		{"none on terminal ws", "/console/terminal/ws", "", KindSerial},
		{"graphical token on serial ws", "/console/terminal/ws?token=vnc-token", "vnc-token", KindSerial},
		{"serial token on vnc page", "/console/vnc?token=serial-token", "serial-token", KindGraphical},
		{"unknown on vnc ws", "/console/vnc/ws?token=expired", "expired", KindGraphical},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			req, _ := http.NewRequest("GET", ts.URL+tc.path, nil)
			if strings.Contains(tc.path, "/ws") {
				req.Header.Set("Connection", "Upgrade")
				req.Header.Set("Upgrade", "websocket")
				req.Header.Set("Sec-WebSocket-Version", "13")
				req.Header.Set("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ==")
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("status %d, want 401 (%s)", resp.StatusCode, body)
			}
			if code, msg := ironicFault(t, body); code != "Client" || msg != "The console token is invalid or has expired." {
				t.Fatalf("fault %q %q", code, msg)
			}
			r := res.rejections()
			if len(r) != i+1 {
				t.Fatalf("%d rejections recorded, want %d", len(r), i+1)
			}
			last := r[i]
			if last.token != tc.token || last.kind != tc.kind || !errors.Is(last.why, ErrBadToken) || last.remote == "" {
				t.Fatalf("rejection %+v, want token %q kind %q ErrBadToken and the remote address", last, tc.token, tc.kind)
			}
		})
	}
	select {
	case <-dialled:
		t.Fatal("a bad token reached the endpoint")
	default:
	}
}

// TestResolverFailureIs503: a store that cannot answer is not the client's
// fault.
func TestResolverFailureIs503(t *testing.T) {
	ts, res := newConsoleServer(t, "", "", Options{})
	res.err = errors.New("connection refused")
	resp, err := http.Get(ts.URL + "/console/terminal?token=serial-token")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("status %d, want 503", resp.StatusCode)
	}
	if code, _ := ironicFault(t, body); code != "Server" {
		t.Fatalf("faultcode %q", code)
	}
	if strings.Contains(string(body), "refused") {
		t.Fatalf("the store's error leaked: %s", body)
	}
	if len(res.rejections()) != 0 {
		t.Fatal("a store failure was recorded as a refused token")
	}
}

// TestUnreachableEndpointIs503: the console was disabled between the token
// and the websocket.
func TestUnreachableEndpointIs503(t *testing.T) {
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	addr := ln.Addr().String()
	ln.Close()
	ts, _ := newConsoleServer(t, addr, "", Options{DialTimeout: 2 * time.Second})
	_, resp, err := websocket.Dial(context.Background(), wsURL(ts, "/console/terminal/ws?token=serial-token"), nil)
	if err == nil || resp == nil || resp.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("dial: %v %v, want 503", resp, err)
	}
}

// TestOrigins: a page of another site cannot open a console websocket even
// with a good token; the API's own origin and AllowedOrigins can.
func TestOrigins(t *testing.T) {
	addr := endpoint(t, echo)
	ts, res := newConsoleServer(t, addr, "", Options{AllowedOrigins: []string{"*.console.example"}})
	u := wsURL(ts, "/console/terminal/ws?token=serial-token")
	for _, tc := range []struct {
		origin string
		ok     bool
	}{
		{ts.URL, true},
		{"https://ops.console.example", true},
		{"https://evil.example", false},
		{"null", false},
	} {
		t.Run(tc.origin, func(t *testing.T) {
			h := http.Header{"Origin": {tc.origin}}
			c, resp, err := websocket.Dial(context.Background(), u, &websocket.DialOptions{HTTPHeader: h})
			if tc.ok {
				if err != nil {
					t.Fatalf("origin %s refused: %v", tc.origin, err)
				}
				c.Close(websocket.StatusNormalClosure, "")
				return
			}
			if err == nil || resp == nil || resp.StatusCode != http.StatusForbidden {
				t.Fatalf("origin %s: %v %v, want 403", tc.origin, resp, err)
			}
			r := res.rejections()
			if len(r) == 0 || !errors.Is(r[len(r)-1].why, errBadOrigin) {
				t.Fatalf("refused origin not recorded: %+v", r)
			}
		})
	}
}

// TestPagesAndAssets: the pages come with their token check and no-store,
// no-referrer headers; the vendored xterm.js is served, the pages and
// directories are not served as assets; the noVNC page says clearly when
// noVNC is not installed.
func TestPagesAndAssets(t *testing.T) {
	novnc := t.TempDir()
	ts, _ := newConsoleServer(t, "127.0.0.1:1", "127.0.0.1:1", Options{NoVNCDir: novnc})
	get := func(path string) (*http.Response, string) {
		resp, err := http.Get(ts.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, string(b)
	}
	resp, body := get("/console/terminal?token=serial-token")
	if resp.StatusCode != 200 || !strings.Contains(body, "assets/xterm/xterm.js") {
		t.Fatalf("terminal page: %d %q", resp.StatusCode, body)
	}
	for h, want := range map[string]string{"Cache-Control": "no-store", "Referrer-Policy": "no-referrer", "X-Content-Type-Options": "nosniff"} {
		if got := resp.Header.Get(h); got != want {
			t.Errorf("%s: %q, want %q", h, got, want)
		}
	}
	if csp := resp.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "frame-ancestors 'none'") {
		t.Errorf("CSP %q", csp)
	}
	resp, body = get("/console/vnc?token=vnc-token")
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(body, "novnc") || !strings.Contains(body, novnc) {
		t.Fatalf("vnc page without noVNC: %d %q", resp.StatusCode, body)
	}
	os.MkdirAll(filepath.Join(novnc, "core"), 0o755)
	os.WriteFile(filepath.Join(novnc, "core", "rfb.js"), []byte("export default class RFB {}"), 0o644)
	resp, body = get("/console/vnc?token=vnc-token")
	if resp.StatusCode != 200 || !strings.Contains(body, "assets/vnc.js") {
		t.Fatalf("vnc page: %d %q", resp.StatusCode, body)
	}
	if resp, body = get("/console/novnc/core/rfb.js"); resp.StatusCode != 200 || !strings.Contains(body, "class RFB") {
		t.Fatalf("noVNC file: %d %q", resp.StatusCode, body)
	}
	xterm, _ := assets.ReadFile("assets/xterm/xterm.js")
	if resp, body = get("/console/assets/xterm/xterm.js"); resp.StatusCode != 200 || body != string(xterm) || len(body) < 100000 {
		t.Fatalf("xterm.js: %d, %d bytes", resp.StatusCode, len(body))
	}
	if resp, body = get("/console/terminal/ws?token=serial-token"); resp.StatusCode != http.StatusBadRequest {
		t.Errorf("websocket path without an upgrade: %d %s, want 400", resp.StatusCode, body)
	}
	presp, err := http.Post(ts.URL+"/console/vnc?token=vnc-token", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	pbody, _ := io.ReadAll(presp.Body)
	presp.Body.Close()
	if code, msg := ironicFault(t, pbody); presp.StatusCode != http.StatusMethodNotAllowed || code != "Client" || msg != "The method POST is not allowed for this resource." {
		t.Errorf("POST to a page: %d %s", presp.StatusCode, pbody)
	}
	for _, p := range []string{"/console/assets/terminal.html", "/console/assets/xterm/", "/console/novnc/core/", "/console/nothing"} {
		if resp, body = get(p); resp.StatusCode != http.StatusNotFound {
			t.Errorf("%s: %d, want 404", p, resp.StatusCode)
		} else if code, _ := ironicFault(t, []byte(body)); code != "Client" {
			t.Errorf("%s: faultcode %q", p, code)
		}
	}
}

// TestNothingOfTheTrafficIsLogged: the session's log lines name the node
// and kind, never the token or a byte that crossed the bridge.
func TestNothingOfTheTrafficIsLogged(t *testing.T) {
	var logBuf syncbuf.Buffer
	log := slog.New(slog.NewTextHandler(&logBuf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ts, _ := newConsoleServer(t, endpoint(t, echo), "", Options{Log: log})
	c := dialWS(t, wsURL(ts, "/console/terminal/ws?token=serial-token"))
	c.Write(context.Background(), websocket.MessageText, []byte("s3cr3t-password"))
	readUntil(t, c, "s3cr3t-password")
	c.Close(websocket.StatusNormalClosure, "")
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(logBuf.String(), "console session closed") && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	out := logBuf.String()
	if !strings.Contains(out, "console session opened") || !strings.Contains(out, "1be26c0b-03f2-4d2e-ae87-c02d7f33c123") {
		t.Fatalf("log lacks the session lines: %s", out)
	}
	for _, secret := range []string{"s3cr3t", "serial-token"} {
		if strings.Contains(out, secret) {
			t.Fatalf("log holds %q: %s", secret, out)
		}
	}
}

// TestSessionOutlivesServerTimeouts: the API's http.Server has read and
// write timeouts of minutes, which must not cut a console session that
// lasts longer (they bound a request, and a session is not one).
func TestSessionOutlivesServerTimeouts(t *testing.T) {
	res := &tokens{targets: map[string]Target{"serial-token": {NodeUUID: "n", Kind: KindSerial, Addr: endpoint(t, echo)}}}
	ts := httptest.NewUnstartedServer(Handler(res, Options{Log: quietLog()}))
	ts.Config.ReadTimeout = 300 * time.Millisecond
	ts.Config.WriteTimeout = 300 * time.Millisecond
	ts.Start()
	t.Cleanup(ts.Close)
	c := dialWS(t, wsURL(ts, "/console/terminal/ws?token=serial-token"))
	for i := range 4 {
		time.Sleep(250 * time.Millisecond)
		msg := fmt.Sprintf("k%d", i)
		if err := c.Write(context.Background(), websocket.MessageText, []byte(msg)); err != nil {
			t.Fatalf("write after %d ms: %v", (i+1)*250, err)
		}
		readUntil(t, c, msg)
	}
}
