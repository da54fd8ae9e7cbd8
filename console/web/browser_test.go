package web

import (
	"context"
	"net"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/input"
	"github.com/chromedp/chromedp"
)

// pageState waits (bounded) until the console page's body says state.
func pageState(t *testing.T, ctx context.Context, state string) {
	t.Helper()
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	err := waitFor(wctx, "page state "+state, func() (bool, error) {
		got, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.body ? document.body.dataset.state : ""`))
		return got == state, err
	})
	if err != nil {
		status, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.documentElement.outerHTML.slice(0, 2000)`))
		t.Fatalf("%v; page: %s", err, status)
	}
}

// xtermText is the terminal's buffer as the page's xterm.js holds it.
const xtermText = `(() => {
  const b = window.ironflowTerminal.buffer.active, lines = [];
  for (let i = 0; i < b.length; i++) lines.push(b.getLine(i).translateToString(true));
  return lines.join("\n");
})()`

// TestTerminalPageInChromium: the serial console page in a real browser
// shows what the node's serial port printed (escape sequences interpreted,
// UTF-8 decoded), sends what is typed, and says "disconnected" when the
// console's endpoint closes.
func TestTerminalPageInChromium(t *testing.T) {
	typed := make(chan string, 1)
	closeIt := make(chan struct{})
	addr := endpoint(t, func(c net.Conn) {
		defer c.Close()
		c.Write([]byte("\x1b[2J\x1b[HDebian GNU/Linux 12 node-7 ttyS0\r\n\r\n\x1b[1mnode-7 login:\x1b[0m caf\xc3\xa9 \u2713\r\n"))
		buf := make([]byte, 64)
		var got []byte
		for !strings.Contains(string(got), "\r") {
			n, err := c.Read(buf)
			if err != nil {
				return
			}
			got = append(got, buf[:n]...)
			c.Write(buf[:n]) // echo, as a getty does
		}
		typed <- string(got)
		c.Write([]byte("\nPassword: "))
		<-closeIt
	})
	ts, _ := newConsoleServer(t, addr, "", Options{})
	ctx := chromium(t)

	if _, err := chromedp.Run(ctx, chromedp.Navigate(ts.URL+"/console/terminal?token=serial-token")); err != nil {
		t.Fatal(err)
	}
	pageState(t, ctx, "connected")
	wctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var text string
	err := waitFor(wctx, "the serial text in xterm.js", func() (bool, error) {
		var err error
		text, err = chromedp.Run(ctx, chromedp.Evaluate[string](xtermText))
		return strings.Contains(text, "node-7 login: café ✓"), err
	})
	if err != nil {
		t.Fatalf("%v; terminal holds %q", err, text)
	}
	if strings.Contains(text, "[1m") || strings.Contains(text, "[2J") {
		t.Fatalf("escape sequences shown, not interpreted: %q", text)
	}

	// Keys typed into the page reach the serial port.
	// As a keyboard does: raw key down, char, key up. (chromedp's keyDown
	// carries its own text, which with the char event types each key twice.)
	rawDown := func(p *input.DispatchKeyEventParams) {
		if p.Type == input.DispatchKeyEventTypeKeyDown {
			p.Type = input.DispatchKeyEventTypeRawKeyDown
		}
	}
	if _, err := chromedp.Run(ctx, chromedp.KeyEvent("root\r", rawDown)); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-typed:
		if got != "root\r" {
			t.Fatalf("serial port received %q, want %q", got, "root\r")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("typed keys never reached the serial port")
	}
	err = waitFor(wctx, "the echo and the next prompt", func() (bool, error) {
		var err error
		text, err = chromedp.Run(ctx, chromedp.Evaluate[string](xtermText))
		return strings.Contains(text, "café ✓\nroot\nPassword:"), err
	})
	if err != nil {
		t.Fatalf("%v; terminal holds %q", err, text)
	}

	// Disabling the console closes the endpoint: the page says so.
	close(closeIt)
	pageState(t, ctx, "closed")
	status, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`document.getElementById("status").textContent`))
	if !strings.Contains(status, reasonEndpointClosed) {
		t.Fatalf("status after the endpoint closed: %q", status)
	}
}

// vncPageInChromium: the graphical console page, with Debian's noVNC,
// connects to the VM through the websocket bridge and draws the VM's
// screen: the canvas read back from the page is QEMU's screendump.
func vncPageInChromium(t *testing.T, vm *vbmcVM, ts *httptest.Server, q *qmp) {
	if _, err := os.Stat(filepath.Join(DefaultNoVNCDir, "core", "rfb.js")); err != nil {
		t.Skipf("SKIP: noVNC is not installed (Debian package novnc; scripts/install-deps.sh installs it): %v", err)
	}
	ctx := chromium(t)
	want := vm.stillScreen(t, q)

	if _, err := chromedp.Run(ctx, chromedp.Navigate(ts.URL+"/console/vnc?token=vnc-token")); err != nil {
		t.Fatal(err)
	}
	pageState(t, ctx, "connected")
	wctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	var got frame
	var diff int
	err := waitFor(wctx, "noVNC's canvas showing the VM's screen", func() (bool, error) {
		s, err := chromedp.Run(ctx, chromedp.Evaluate[string](canvasRGB))
		f, ok := parseCanvas(s)
		if !ok {
			return false, err
		}
		got = f
		diff, err = differing(got, want)
		return err == nil && diff == 0, err
	})
	if err != nil {
		t.Fatalf("%v: canvas %dx%d with %d inked pixels, %d differ from screendump (%dx%d, %d inked)", err, got.W, got.H, got.Inked(), diff, want.W, want.H, want.Inked())
	}
	if got.Inked() < 500 {
		t.Fatalf("canvas is blank: %d inked pixels", got.Inked())
	}
	t.Logf("canvas %dx%d, %d inked pixels, identical to screendump", got.W, got.H, got.Inked())
}
