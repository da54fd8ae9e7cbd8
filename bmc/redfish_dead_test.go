package bmc

import (
	"bufio"
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// deadRedfish listens on loopback as a BMC gone bad: with dribble false it
// accepts connections and never answers; with dribble true it answers the
// headers of a document it then sends a byte at a time, never finishing.
func deadRedfish(t *testing.T, dribble bool) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	var (
		mu    sync.Mutex
		conns []net.Conn
	)
	t.Cleanup(func() {
		l.Close()
		close(done)
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			if !dribble {
				continue
			}
			go func() {
				if _, err := http.ReadRequest(bufio.NewReader(c)); err != nil {
					return
				}
				_, _ = c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 4096\r\n\r\n{"))
				for {
					select {
					case <-done:
						return
					case <-time.After(50 * time.Millisecond):
					}
					if _, err := c.Write([]byte(" ")); err != nil {
						return
					}
				}
			}()
		}
	}()
	return "http://" + l.Addr().String()
}

// TestRedfishDeadBMC: a BMC that never answers, or dribbles its answer,
// costs each call its redfish_timeout; the error is the BMC being
// unreachable (retryable), never a document it could not parse, and it
// names the BMC and the call.
func TestRedfishDeadBMC(t *testing.T) {
	for _, dribble := range []bool{false, true} {
		name := map[bool]string{false: "hangs", true: "dribbles"}[dribble]
		t.Run(name, func(t *testing.T) {
			addr := deadRedfish(t, dribble)
			d := newTestRedfish(t, map[string]any{"redfish_address": addr, "redfish_username": "u", "redfish_password": "p",
				"redfish_timeout": "300ms", "redfish_connection_attempts": 1})
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_, err := d.PowerState(ctx)
			if ctx.Err() != nil {
				t.Fatalf("PowerState against a BMC that %s outlived the test's own bound: %v", name, err)
			}
			if !errors.Is(err, ErrUnreachable) || !Retryable(err) {
				t.Fatalf("PowerState against a BMC that %s: %v; want ErrUnreachable, retryable", name, err)
			}
			msg := err.Error()
			if !strings.Contains(msg, addr) || !strings.Contains(msg, "power state") || !strings.Contains(msg, "within 300ms") {
				t.Fatalf("PowerState against a BMC that %s: %q names not the BMC, the call and the deadline", name, msg)
			}
		})
	}
}
