package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/coder/websocket"

	"github.com/ironflow/ironflow/internal/testkit/rfb"
)

// labSerialTCP is where a lab VM's QEMU serves its serial line inside the
// lab's namespace, for the serial over LAN of its ipmi_sim (vbmc's
// serial_address).
const labSerialTCP = "127.0.0.1:9301"

// labConsole is a session on a node's console endpoint (ipmitool-socat),
// opened from inside the lab, whose text it keeps.
type labConsole struct {
	s    *stack
	node string
	conn net.Conn

	mu   sync.Mutex
	text strings.Builder
	eof  chan struct{}
}

// openConsole enables the node's console with the baremetal CLI, waits for
// console show to give its tcp:// URL and keeps a session on it, reading
// everything the machine prints from then on.
func openConsole(t *testing.T, s *stack, node string) *labConsole {
	t.Helper()
	s.mustCLI(t, "node", "console", "enable", node)
	var url string
	deadline := time.Now().Add(60 * time.Second)
	for {
		var shown struct {
			Enabled bool `json:"console_enabled"`
			Info    *struct {
				Type, URL string
			} `json:"console_info"`
		}
		_ = json.Unmarshal([]byte(s.mustCLI(t, "node", "console", "show", node, "-f", "json")), &shown)
		if shown.Enabled && shown.Info != nil && shown.Info.Type == "socat" {
			url = shown.Info.URL
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the console of %s was not enabled within a minute:\n%s", node, s.logTail())
		}
		time.Sleep(500 * time.Millisecond)
	}
	c, err := labDial(s.lab, strings.TrimPrefix(url, "tcp://"))
	if err != nil {
		t.Fatalf("connect to the console of %s at %s: %v", node, url, err)
	}
	lc := &labConsole{s: s, node: node, conn: c, eof: make(chan struct{})}
	t.Cleanup(func() { c.Close() })
	go func() {
		defer close(lc.eof)
		buf := make([]byte, 4096)
		for {
			n, err := c.Read(buf)
			lc.mu.Lock()
			lc.text.Write(buf[:n])
			lc.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	t.Logf("console of %s open at %s", node, url)
	return lc
}

// has reports whether the console has shown want.
func (lc *labConsole) has(want string) bool {
	lc.mu.Lock()
	defer lc.mu.Unlock()
	return strings.Contains(lc.text.String(), want)
}

// disable disables the console with the baremetal CLI and checks that the
// session read EOF before console show says disabled.
func (lc *labConsole) disable(t *testing.T) {
	t.Helper()
	lc.s.mustCLI(t, "node", "console", "disable", lc.node)
	deadline := time.Now().Add(60 * time.Second)
	for {
		var shown struct {
			Enabled bool `json:"console_enabled"`
		}
		_ = json.Unmarshal([]byte(lc.s.mustCLI(t, "node", "console", "show", lc.node, "-f", "json")), &shown)
		if !shown.Enabled {
			select {
			case <-lc.eof:
			default:
				t.Fatal("console show says disabled while the session on the console is still open")
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the console of %s was not disabled within a minute", lc.node)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// labVNCAddress is where a lab VM's QEMU serves its screen (vbmc's
// vnc_address), inside the lab's namespace; its Redfish Manager announces
// it, so the node needs no console key (docs/console.md).
const labVNCAddress = "127.0.0.1:5911"

// labAPIURL is the API's URL inside the lab (ironflow dev's or a split stack's).
const labAPIURL = "http://" + apiListen

// labWebsocket opens a websocket to url from inside the lab's namespace.
func labWebsocket(ctx context.Context, lab *Lab, url string) (*websocket.Conn, *http.Response, error) {
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, addr string) (net.Conn, error) {
		return labDial(lab, addr)
	}}}
	return websocket.Dial(ctx, url, &websocket.DialOptions{HTTPClient: hc})
}

// hostProxy forwards a loopback port of the host to addr inside the lab,
// for a browser that runs outside the namespace; it answers host:port.
func hostProxy(t *testing.T, lab *Lab, addr string) string {
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
				u, err := labDial(lab, addr)
				if err != nil {
					return
				}
				defer u.Close()
				go func() { _, _ = io.Copy(u, c); u.Close() }()
				_, _ = io.Copy(c, u)
			}()
		}
	}()
	return l.Addr().String()
}

// waitProvisionState polls the node until it is in state, failing on a
// failed state or after timeout.
func waitProvisionState(t *testing.T, s *stack, uuid, state string, timeout time.Duration, serialLog string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		out, err := s.runCLI(t, false, "node", "show", uuid, "-f", "value", "-c", "provision_state")
		if err != nil {
			t.Fatal(err)
		}
		got := strings.TrimSpace(out)
		if got == state {
			return
		}
		if strings.HasSuffix(got, "failed") || time.Now().After(deadline) {
			s.failStep(t, uuid, serialLog, fmt.Errorf("node %s is %q, waiting for %q", uuid, got, state))
		}
		time.Sleep(time.Second)
	}
}

// graphicalPage waits for console show to give the node's enabled
// graphical console's page URL (a new token each time).
func graphicalPage(t *testing.T, s *stack, uuid string) string {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		var shown struct {
			Enabled bool                        `json:"console_enabled"`
			Info    *struct{ Type, URL string } `json:"console_info"`
		}
		_ = json.Unmarshal([]byte(s.mustCLI(t, "node", "console", "show", uuid, "-f", "json")), &shown)
		if shown.Enabled && shown.Info != nil {
			if shown.Info.Type != "vnc" || !strings.HasPrefix(shown.Info.URL, labAPIURL+"/console/vnc?token=") {
				t.Fatalf("console_info %+v, want type vnc and the API's (%s) noVNC page", shown.Info, labAPIURL)
			}
			return shown.Info.URL
		}
		if time.Now().After(deadline) {
			t.Fatalf("the graphical console of %s was not enabled within a minute:\n%s", uuid, s.logTail())
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// vncWebsocket is the websocket URL of a noVNC page URL.
func vncWebsocket(page string) string {
	return "ws" + strings.TrimPrefix(strings.Replace(page, "/console/vnc?", "/console/vnc/ws?", 1), "http")
}

// deployWatchingTheScreen deploys the node as s.deploy does with its
// graphical console (redfish-graphical; the VNC address comes from the
// vbmc's Manager) enabled with the baremetal CLI once the deploy waits for
// its agent (wait call-back), as an operator who wants to watch the boot
// does: the deploy holds the node's lock, and the console changes beside
// it (docs/console.md). console show gives the API's noVNC page; while
// the deploy waits for its agent the page's websocket, opened through the API, shows the VM's
// framebuffer exactly as QEMU's screendump of the paused guest, and so
// does noVNC's canvas in headless Chromium; the deploy goes on to active;
// then disabling closes an open session before console show says
// disabled.
func deployWatchingTheScreen(t *testing.T, s *stack, bmc *vbmcServer, uuid string, vm *LabVM, hostname, pubKey string) {
	t.Helper()
	cd, err := json.Marshal(map[string]any{"meta_data": map[string]any{
		"hostname": hostname, "public_keys": map[string]string{"0": pubKey}}})
	if err != nil {
		t.Fatal(err)
	}
	// Chromium runs outside the lab: it reaches the API through a
	// loopback port forwarded into the namespace. It starts before the
	// machine boots (not to slow its boot down) and opens the page once
	// the test's own session has ended (a graphical console serves one
	// session at a time).
	browser := rfb.Chromium(t)
	if _, err := s.baremetal(t, "node", "deploy", uuid, "--config-drive", string(cd)); err != nil {
		s.failStep(t, uuid, vm.SerialLog, err)
	}
	waitProvisionState(t, s, uuid, "wait call-back", deployWait, vm.SerialLog)
	began := time.Now()
	// The deploy's workflow holds the node: the enable must be accepted
	// all the same (mustCLI fails on a 409), and recorded while the
	// deploy still waits.
	s.mustCLI(t, "node", "console", "enable", uuid)
	page := graphicalPage(t, s, uuid)
	if st := s.nodeFields(t, uuid)["provision_state"]; st != "wait call-back" {
		t.Logf("graphical console: enabled in wait call-back, recorded by %v", st)
	}
	apiURL := labAPIURL
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	proxied := "http://" + hostProxy(t, s.lab, strings.TrimPrefix(apiURL, "http://")) + strings.TrimPrefix(page, apiURL)
	q, err := rfb.DialQMP(filepath.Join(bmc.stateDir, vm.Name, "qmp.sock"))
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()
	dump := filepath.Join(s.lab.Dir, "screen.ppm")
	if err := rfb.WaitFor(ctx, "something on the VM's screen", func() (bool, error) {
		f, err := q.Screendump(dump)
		return err == nil && f.Inked() > 500, err
	}); err != nil {
		t.Fatal(err)
	}
	// Paused, the guest's screen holds still; the deploy waits a few
	// seconds longer.
	if _, err := q.Do("stop", nil); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	onScreen := stopped.Sub(began)
	running := false
	resume := func() {
		if !running {
			running = true
			if _, err := q.Do("cont", nil); err != nil {
				t.Errorf("resume the VM: %v", err)
			}
		}
	}
	defer resume()
	time.Sleep(300 * time.Millisecond)
	want, err := q.Screendump(dump)
	if err != nil {
		t.Fatal(err)
	}
	ws, _, err := labWebsocket(ctx, s.lab, vncWebsocket(page))
	if err != nil {
		t.Fatalf("the graphical console's websocket: %v\n%s", err, s.logTail())
	}
	got, name, err := rfb.ReadFrame(websocket.NetConn(ctx, ws, websocket.MessageBinary))
	if err != nil {
		t.Fatalf("RFB through the API: %v\n%s", err, s.logTail())
	}
	ws.Close(websocket.StatusNormalClosure, "")
	time.Sleep(500 * time.Millisecond) // the endpoint frees its one session
	if _, err := chromedp.Run(browser, chromedp.Navigate(proxied)); err != nil {
		t.Fatal(err)
	}
	var canvas rfb.Frame
	cctx, ccancel := context.WithTimeout(ctx, 60*time.Second)
	canvasErr := rfb.WaitFor(cctx, "noVNC's canvas showing the VM's screen", func() (bool, error) {
		s, err := chromedp.Run(browser, chromedp.Evaluate[string](rfb.CanvasRGB))
		f, ok := rfb.ParseCanvas(s)
		if !ok {
			return false, err
		}
		canvas = f
		n, err := rfb.Differing(canvas, want)
		return err == nil && n == 0, err
	})
	ccancel()
	resume()
	pausedFor := time.Since(stopped)
	// QEMU's monitor serves one client: the vbmc needs it for the rest of
	// the deploy (boot order, power).
	q.Close()
	if _, err := chromedp.Run(browser, chromedp.Navigate("about:blank")); err != nil {
		t.Fatal(err)
	}
	readIn := time.Since(began)
	if n, err := rfb.Differing(got, want); err != nil || n != 0 {
		t.Errorf("the framebuffer through the API (%dx%d, %q) differs from QEMU's screendump (%dx%d) in %d pixels: %v", got.W, got.H, name, want.W, want.H, n, err)
	} else {
		t.Logf("graphical console: %dx%d framebuffer of %q through the API, %d inked pixels, identical to screendump", got.W, got.H, name, got.Inked())
	}
	if canvasErr != nil {
		t.Errorf("noVNC in Chromium: %v (canvas %dx%d, %d inked; screendump %dx%d)", canvasErr, canvas.W, canvas.H, canvas.Inked(), want.W, want.H)
	} else if canvas.Inked() < 500 {
		t.Errorf("noVNC's canvas is blank: %d inked pixels", canvas.Inked())
	}

	t.Logf("graphical console: read and compared within %.1fs of the deploy's wait call-back (%.1fs until the screen showed something, the VM paused %.1fs)",
		readIn.Seconds(), onScreen.Seconds(), pausedFor.Seconds())
	waitProvisionState(t, s, uuid, "active", deployWait, vm.SerialLog)

	// Disabling closes an open session first.
	ws, _, err = labWebsocket(ctx, s.lab, vncWebsocket(graphicalPage(t, s, uuid)))
	if err != nil {
		t.Fatalf("the graphical console's websocket after the deploy: %v\n%s", err, s.logTail())
	}
	if _, b, err := ws.Read(ctx); err != nil || !strings.HasPrefix(string(b), "RFB 003.") {
		t.Fatalf("the graphical console after the deploy: %q, %v; want the VM's RFB greeting", b, err)
	}
	eof := make(chan struct{})
	go func() {
		defer close(eof)
		for {
			if _, _, err := ws.Read(ctx); err != nil {
				return
			}
		}
	}()
	s.mustCLI(t, "node", "console", "disable", uuid)
	deadline := time.Now().Add(60 * time.Second)
	for {
		var shown struct {
			Enabled bool `json:"console_enabled"`
		}
		_ = json.Unmarshal([]byte(s.mustCLI(t, "node", "console", "show", uuid, "-f", "json")), &shown)
		if !shown.Enabled {
			select {
			case <-eof:
			default:
				t.Fatal("console show says disabled while the graphical session is still open")
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the graphical console of %s was not disabled within a minute", uuid)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
