package main

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

func limitsOf(read, write, idle time.Duration, header int) httpLimits {
	return httpLimits{read: &read, write: &write, idle: &idle, maxHeader: &header}
}

// closedWithin reports whether the server closes conn within d.
func closedWithin(conn net.Conn, d time.Duration) bool {
	_ = conn.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, conn)
	var ne net.Error
	return err == nil || !(errors.As(err, &ne) && ne.Timeout())
}

// TestServeHTTPClosesSlowAndIdleConnections: a request whose body trickles
// in is cut at the read timeout, an idle keep-alive connection at the idle
// timeout, an oversized header block is 431, and other clients are served
// meanwhile.
func TestServeHTTPClosesSlowAndIdleConnections(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		_, _ = io.WriteString(w, "ok")
	})
	addr, _, err := serveHTTP(ctx, "test", "127.0.0.1:0", h, limitsOf(400*time.Millisecond, time.Second, 400*time.Millisecond, 4<<10), slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}

	var slow []net.Conn
	for i := 0; i < 50; i++ {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_, _ = io.WriteString(c, "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\nab")
		slow = append(slow, c)
	}
	// Served while 50 slow bodies are pending.
	if resp, err := http.Get("http://" + addr + "/"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("a normal client is not served: %v", err)
	}
	start := time.Now()
	for i, c := range slow {
		if !closedWithin(c, 3*time.Second) {
			t.Fatalf("slow connection %d still open after %s", i, time.Since(start))
		}
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("slow connections closed after %s, read timeout 400ms", d)
	}

	idle, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer idle.Close()
	_, _ = io.WriteString(idle, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(idle), nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("keep-alive request: %v", err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	if !closedWithin(idle, 3*time.Second) {
		t.Fatal("idle keep-alive connection still open after 3s, idle timeout 400ms")
	}

	req, _ := http.NewRequest("GET", "http://"+addr+"/", nil)
	req.Header.Set("X-Big", strings.Repeat("h", 16<<10))
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Errorf("16 KiB header with a 4 KiB limit: %v %v", resp, err)
	}
}
