package web

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/coder/websocket"

	"github.com/ironflow/ironflow/vbmc"
)

// vbmcVM is one `ironflow vbmc` VM with both consoles, powered on through
// its Redfish service: no disk and no network, so that the firmware's
// screens (SeaBIOS, then iPXE) are what it shows.
type vbmcVM struct {
	vncAddr, serialAddr string
	qmpSocket           string
	dir                 string
}

// startVbmcVM powers the VM on and finds its consoles the way a user does,
// in the Redfish Manager's Oem.Ironflow block.
func startVbmcVM(t *testing.T) *vbmcVM {
	t.Helper()
	if _, err := exec.LookPath(vbmc.DefaultQEMUBinary); err != nil {
		t.Skipf("SKIP: %s is not installed (Debian package qemu-system-x86): %v", vbmc.DefaultQEMUBinary, err)
	}
	// Short: QMP socket paths are limited to 108 bytes.
	dir, err := os.MkdirTemp("", "cw")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	raw := map[string]any{
		"state_dir": filepath.Join(dir, "state"),
		"password":  "password",
		"vms": []any{map[string]any{
			"name": "vm0", "mac": "52:54:00:00:00:42", "memory_mb": 128, "netdev": "none",
			"vnc_address":    "127.0.0.1:" + fmt.Sprint(freeVNCPort(t)),
			"serial_address": freeAddr(t),
		}},
	}
	b, _ := json.Marshal(raw)
	cfgPath := filepath.Join(dir, "vbmc.json")
	os.WriteFile(cfgPath, b, 0o644)
	cfg, err := vbmc.LoadConfig(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := vbmc.NewServer(cfg, quietLog())
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	redfish := func(method, path, body string) []byte {
		req, _ := http.NewRequest(method, ts.URL+path, strings.NewReader(body))
		req.SetBasicAuth("admin", "password")
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		if resp.StatusCode >= 300 {
			t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, out)
		}
		return out
	}
	t.Cleanup(func() {
		redfish("POST", "/redfish/v1/Systems/vm0/Actions/ComputerSystem.Reset", `{"ResetType":"ForceOff"}`)
		ts.Close()
		srv.Close()
	})
	redfish("POST", "/redfish/v1/Systems/vm0/Actions/ComputerSystem.Reset", `{"ResetType":"On"}`)
	var mgr struct {
		GraphicalConsole struct{ ServiceEnabled bool }
		Oem              struct {
			Ironflow struct{ VNCAddress, SerialAddress string }
		}
	}
	if err := json.Unmarshal(redfish("GET", "/redfish/v1/Managers/vm0", ""), &mgr); err != nil {
		t.Fatal(err)
	}
	if !mgr.GraphicalConsole.ServiceEnabled || mgr.Oem.Ironflow.VNCAddress == "" || mgr.Oem.Ironflow.SerialAddress == "" {
		t.Fatalf("manager does not announce the consoles: %+v", mgr)
	}
	return &vbmcVM{
		vncAddr:    mgr.Oem.Ironflow.VNCAddress,
		serialAddr: mgr.Oem.Ironflow.SerialAddress,
		// vbmc keeps the monitor at state_dir/NAME/qmp.sock (vbmc/machine.go).
		qmpSocket: filepath.Join(cfg.StateDir, "vm0", "qmp.sock"),
		dir:       dir,
	}
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// freeVNCPort finds a free port at or above 5900 (QEMU's -vnc takes a
// display number).
func freeVNCPort(t *testing.T) int {
	t.Helper()
	start := 5900 + 100 + os.Getpid()%2000
	for p := start; p < start+200; p++ {
		if ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p)); err == nil {
			ln.Close()
			return p
		}
	}
	t.Fatal("no free VNC port")
	return 0
}

// stillScreen waits until the firmware has drawn something, then pauses the
// guest (the VGA text cursor blinks on the guest's clock, so a paused
// guest's screen holds still) and returns QEMU's own screendump; the guest
// runs again at cleanup.
func (vm *vbmcVM) stillScreen(t *testing.T, q *qmp) frame {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	dump := filepath.Join(vm.dir, "screen.ppm")
	var f frame
	err := waitFor(ctx, "firmware text on the screen", func() (bool, error) {
		var err error
		f, err = q.Screendump(dump)
		return err == nil && f.Inked() > 500, err
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := q.Do("stop", nil); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { q.Do("cont", nil) })
	time.Sleep(300 * time.Millisecond) // the last display refresh before the pause
	if f, err = q.Screendump(dump); err != nil {
		t.Fatal(err)
	}
	return f
}

// TestConsolesOfAVbmcVM: a vbmc VM's graphical console read through the
// websocket bridge with an RFB client is QEMU's own screendump, pixel for
// pixel, and so is noVNC's canvas in Chromium; its serial console through
// the bridge carries the firmware's output after a reset. One VM serves the
// three.
func TestConsolesOfAVbmcVM(t *testing.T) {
	vm := startVbmcVM(t)
	ts, _ := newConsoleServer(t, vm.serialAddr, vm.vncAddr, Options{})
	q, err := dialQMP(vm.qmpSocket)
	if err != nil {
		t.Fatal(err)
	}
	defer q.Close()

	t.Run("serial", func(t *testing.T) {
		logPath := filepath.Join(vm.dir, "state", "vm0", "console.log")
		banners := func(n int) func() (bool, error) {
			return func() (bool, error) {
				log, err := os.ReadFile(logPath)
				return bytes.Count(log, []byte("SeaBIOS")) >= n, err
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
		defer cancel()
		// Output while no one is connected goes to the console log only...
		if err := waitFor(ctx, "the first boot's banner in the console log", banners(1)); err != nil {
			t.Fatal(err)
		}
		c := dialWS(t, wsURL(ts, "/console/terminal/ws?token=serial-token"))
		// ...so reset: the firmware prints its banner again, to us.
		if _, err := q.Do("system_reset", nil); err != nil {
			t.Fatal(err)
		}
		readUntilWithin(t, c, "SeaBIOS", 120*time.Second)
		c.Close(websocket.StatusNormalClosure, "")
		// With a client the log still gets everything.
		if err := waitFor(ctx, "the second boot's banner in the console log", banners(2)); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("graphical", func(t *testing.T) {
		want := vm.stillScreen(t, q)
		c := dialWS(t, wsURL(ts, "/console/vnc/ws?token=vnc-token"))
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		got, name, err := rfbFrame(websocket.NetConn(ctx, c, websocket.MessageBinary))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(name, "vm0") {
			t.Errorf("desktop name %q, want the VM's name", name)
		}
		n, err := differing(got, want)
		if err != nil {
			t.Fatal(err)
		}
		if n != 0 || got.Inked() < 500 {
			t.Fatalf("RFB frame %dx%d through the proxy: %d pixels differ from screendump, %d inked", got.W, got.H, n, got.Inked())
		}
		t.Logf("%dx%d frame, %d inked pixels, identical to screendump", got.W, got.H, got.Inked())
	})

	t.Run("noVNC page in chromium", func(t *testing.T) { vncPageInChromium(t, vm, ts, q) })

	// The terminal page in a real browser on the booting VM: after a
	// reset, xterm.js holds the firmware's serial text as the page shows it.
	t.Run("terminal page in chromium", func(t *testing.T) {
		if _, err := q.Do("cont", nil); err != nil { // the graphical subtests paused it
			t.Fatal(err)
		}
		ctx := chromium(t)
		if _, err := chromedp.Run(ctx, chromedp.Navigate(ts.URL+"/console/terminal?token=serial-token")); err != nil {
			t.Fatal(err)
		}
		pageState(t, ctx, "connected")
		if _, err := q.Do("system_reset", nil); err != nil {
			t.Fatal(err)
		}
		wctx, cancel := context.WithTimeout(ctx, 120*time.Second)
		defer cancel()
		var text string
		err := waitFor(wctx, "the VM's boot text in xterm.js", func() (bool, error) {
			var err error
			text, err = chromedp.Run(ctx, chromedp.Evaluate[string](xtermText))
			return strings.Contains(text, "SeaBIOS"), err
		})
		if err != nil {
			t.Fatalf("%v; terminal holds %q", err, text)
		}
		t.Logf("xterm.js holds the VM's boot text: %q", firstLineWith(text, "SeaBIOS"))
	})
}

// firstLineWith is the first line of text that holds s.
func firstLineWith(text, s string) string {
	for _, l := range strings.Split(text, "\n") {
		if strings.Contains(l, s) {
			return l
		}
	}
	return ""
}
