package tests

import (
	"context"
	"net/http"

	"encoding/json"
	"github.com/coder/websocket"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ironflow/ironflow/internal/testkit/serialline"
)

// consoleShown is `baremetal node console show -f json`.
type consoleShown struct {
	Enabled bool `json:"console_enabled"`
	Info    *struct {
		Type string `json:"type"`
		URL  string `json:"url"`
	} `json:"console_info"`
}

func showConsole(t *testing.T, node string) consoleShown {
	t.Helper()
	var c consoleShown
	out := mustCLI(t, "node", "console", "show", node, "-f", "json")
	if err := json.Unmarshal([]byte(out), &c); err != nil {
		t.Fatalf("console show %s: %v\n%s", node, err, out)
	}
	return c
}

// consoleURL waits until the node's console is enabled with an endpoint
// other than not (a new one after a restart) and answers its host:port.
func consoleURL(t *testing.T, node, not string) string {
	t.Helper()
	var addr string
	waitFor(t, "console of "+node+" enabled", 60*time.Second, func() bool {
		c := showConsole(t, node)
		if !c.Enabled || c.Info == nil || c.Info.Type != "socat" || !strings.HasPrefix(c.Info.URL, "tcp://") {
			return false
		}
		addr = strings.TrimPrefix(c.Info.URL, "tcp://")
		return addr != not
	})
	return addr
}

// consoleConn connects to a console endpoint and reads until want.
func consoleConn(t *testing.T, addr, want string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("connect to the console at %s: %v\nworker log:\n%s", addr, err, workerLog())
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(30 * time.Second))
	expect(t, c, want)
	return c
}

// expect reads c until want appears.
func expect(t *testing.T, c net.Conn, want string) {
	t.Helper()
	var got strings.Builder
	buf := make([]byte, 4096)
	for !strings.Contains(got.String(), want) {
		n, err := c.Read(buf)
		got.Write(buf[:n])
		if err != nil {
			t.Fatalf("console read %q, waiting for %q: %v\nworker log:\n%s", got.String(), want, err, workerLog())
		}
	}
}

// wsExpect reads the terminal's websocket until want appears.
func wsExpect(t *testing.T, ctx context.Context, ws *websocket.Conn, want string) {
	t.Helper()
	var got strings.Builder
	for !strings.Contains(got.String(), want) {
		_, b, err := ws.Read(ctx)
		if err != nil {
			t.Fatalf("websocket read %q, waiting for %q: %v", got.String(), want, err)
		}
		got.Write(b)
	}
}

// disableWebSeesCloseFirst disables the node's console with a browser's
// session open on it and checks, as disableSeesEOFFirst does for a TCP
// session, that the websocket is closed by the time `console show` says
// disabled.
func disableWebSeesCloseFirst(t *testing.T, ctx context.Context, node string, ws *websocket.Conn) {
	t.Helper()
	closed := make(chan struct{})
	go func() {
		defer close(closed)
		for {
			if _, _, err := ws.Read(ctx); err != nil {
				return
			}
		}
	}()
	mustCLI(t, "node", "console", "disable", node)
	waitFor(t, "web console of "+node+" disabled", 60*time.Second, func() bool {
		if showConsole(t, node).Enabled {
			return false
		}
		select {
		case <-closed:
		default:
			t.Fatalf("console show says %s's console disabled while the browser's session is still open", node)
		}
		return true
	})
}

// disableSeesEOFFirst disables the node's console with a session open on
// it and checks the order Ironic's users rely on: the session has read EOF
// by the time `console show` says disabled.
func disableSeesEOFFirst(t *testing.T, node string, c net.Conn) {
	t.Helper()
	_ = c.SetDeadline(time.Now().Add(60 * time.Second))
	eof := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, c)
		close(eof)
	}()
	mustCLI(t, "node", "console", "disable", node)
	waitFor(t, "console of "+node+" disabled", 60*time.Second, func() bool {
		if showConsole(t, node).Enabled {
			return false
		}
		select {
		case <-eof:
		default:
			t.Fatalf("console show says disabled while a session on the console is still open")
		}
		return true
	})
}

// TestConsoleThroughTheCLI: `baremetal node console enable/show/disable` on
// the real stack (API, worker, Temporal, PostgreSQL). A fake-hardware
// node's fake console: the endpoint of console show greets with the node
// and echoes, a second client is refused, a worker killed and started
// again brings the console back on a new endpoint (its history says so),
// and disabling closes the open session before console show says
// disabled. An IPMI node's ipmitool-socat console through OpenIPMI's
// ipmi_sim and Debian's ipmitool: the machine's serial text arrives, what
// is typed reaches the machine, and disabling ends the session first.
func TestConsoleThroughTheCLI(t *testing.T) {
	mustCLI(t, "node", "create", "--name", "con-fake", "--driver", "fake-hardware")
	defer mustCLI(t, "node", "delete", "con-fake")
	uuid := getNode(t, "con-fake").UUID
	if c := showConsole(t, "con-fake"); c.Enabled || c.Info != nil {
		t.Fatalf("a new node's console: %+v", c)
	}
	mustCLI(t, "node", "console", "enable", "con-fake")
	addr := consoleURL(t, "con-fake", "")
	if host, _, _ := net.SplitHostPort(addr); host != "127.0.0.1" {
		t.Errorf("the endpoint %s is not on loopback", addr)
	}
	first := consoleConn(t, addr, "ironflow fake console of node "+uuid)
	if _, err := io.WriteString(first, "typed by the operator\n"); err != nil {
		t.Fatal(err)
	}
	expect(t, first, "typed by the operator")
	second := consoleConn(t, addr, "in use by another session")
	if rest, err := io.ReadAll(second); err != nil || len(rest) != 0 {
		t.Errorf("the refused client read %q more, %v; want EOF", rest, err)
	}
	first.Close()

	// The worker dies with the console; the next one brings it back.
	lab.KillWorker()
	if err := lab.StartWorker(); err != nil {
		t.Fatal(err)
	}
	again := consoleURL(t, "con-fake", addr)
	c := consoleConn(t, again, "ironflow fake console of node "+uuid)
	if h := mustCLI(t, "node", "history", "list", "con-fake", "-f", "value", "-c", "Description of the event"); !strings.Contains(h, "Console restored on worker") {
		t.Errorf("history after the restart:\n%s", h)
	}
	disableSeesEOFFirst(t, "con-fake", c)
	if _, err := net.DialTimeout("tcp", again, time.Second); err == nil {
		t.Error("the endpoint still listens after disable")
	}

	// IPMI serial over LAN.
	for _, bin := range []string{"ipmi_sim", "ipmitool"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Fatalf("%s is missing: make test installs it (scripts/install-deps.sh)", bin)
		}
	}
	port := serialline.BMC(t, "ironflow-agent: looking up the node\r\n")
	mustCLI(t, "node", "create", "--name", "con-ipmi", "--driver", "ipmi", "--console-interface", "ipmitool-socat",
		"--driver-info", "ipmi_address=127.0.0.1", "--driver-info", "ipmi_port="+strconv.Itoa(port),
		"--driver-info", "ipmi_username=admin", "--driver-info", "ipmi_password=password")
	defer mustCLI(t, "node", "delete", "con-ipmi")
	mustCLI(t, "node", "console", "enable", "con-ipmi")
	sol := consoleConn(t, consoleURL(t, "con-ipmi", ""), "looking up the node")
	if _, err := io.WriteString(sol, "reboot\r"); err != nil {
		t.Fatal(err)
	}
	expect(t, sol, "REBOOT")
	disableSeesEOFFirst(t, "con-ipmi", sol)
	if b, _ := os.ReadFile(lab.WorkerLog()); strings.Contains(string(b), "ipmi_password=password") || strings.Contains(string(b), "-P password") {
		t.Error("the worker log holds the BMC password")
	}

	// The same serial over LAN as a web terminal (ipmitool-shellinabox):
	// console show gives the API's page with a token, the page's websocket
	// carries the machine's text both ways, a forged token is 401 and
	// written into the node's history, and disabling closes the browser's
	// session before console show says disabled.
	mustCLI(t, "node", "set", "con-ipmi", "--console-interface", "ipmitool-shellinabox")
	mustCLI(t, "node", "console", "enable", "con-ipmi")
	var page string
	waitFor(t, "web console of con-ipmi", 60*time.Second, func() bool {
		c := showConsole(t, "con-ipmi")
		if c.Enabled && c.Info != nil && c.Info.Type == "shellinabox" {
			page = c.Info.URL
		}
		return page != ""
	})
	if !strings.HasPrefix(page, lab.APIURL+"/console/terminal?token=") {
		t.Fatalf("console_info url %q is not the API's terminal page", page)
	}
	resp, err := http.Get(page)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "xterm") {
		t.Fatalf("terminal page: %d\n%s", resp.StatusCode, body)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	wsURL := "ws" + strings.TrimPrefix(strings.Replace(page, "/console/terminal?", "/console/terminal/ws?", 1), "http")
	ws, _, err := websocket.Dial(ctx, wsURL, nil)
	if err != nil {
		t.Fatalf("terminal websocket: %v\nworker log:\n%s", err, workerLog())
	}
	wsExpect(t, ctx, ws, "looking up the node")
	if err := ws.Write(ctx, websocket.MessageText, []byte("typed in the browser\r")); err != nil {
		t.Fatal(err)
	}
	wsExpect(t, ctx, ws, "TYPED IN THE BROWSER")

	forged := strings.Replace(wsURL, "token=", "token=x", 1)
	if _, resp, err := websocket.Dial(ctx, forged, nil); err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("a forged token: %v, %+v; want 401", err, resp)
	}
	if h := mustCLI(t, "node", "history", "list", "con-ipmi", "-f", "value", "-c", "Description of the event"); strings.Contains(h, "Console access (serial) refused") {
		// A forged token names no node: only a real token of this node,
		// revoked or expired, is written into its history (below).
		t.Errorf("a token naming no node was written into con-ipmi's history:\n%s", h)
	}

	disableWebSeesCloseFirst(t, ctx, "con-ipmi", ws)
	// The page's token died with the console: using it again is 401 and
	// goes into the node's history.
	if _, resp, err := websocket.Dial(ctx, wsURL, nil); err == nil || resp == nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("the revoked token: %v, %+v; want 401", err, resp)
	}
	if h := mustCLI(t, "node", "history", "list", "con-ipmi", "-f", "value", "-c", "Description of the event"); !strings.Contains(h, "Console access (serial) refused") {
		t.Errorf("the refused attempt with a revoked token is not in the history:\n%s", h)
	}
}
