package tests

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ironflow/ironflow/embedded"
)

// The agent routes are open to the provisioning network and read their body
// before the token is checked, so their body limit bounds what a bad-token
// flood costs (docs/security.md, "Memory under a bad-token flood"). With
// maxHeartbeatBytes = 1 MiB, one request in flight holds at most: the body
// read by io.ReadAll (capacity < 2 × 1 MiB, with the previous buffer while
// it grows: < 3 MiB), the JSON decoder's copy of it (< 2 MiB) and the
// decoded strings (1 MiB): about 6 MiB. Eight in flight hold < 48 MiB, and
// with GOGC=100 the heap may reach twice its live size before a
// collection: < 96 MiB. Bodies over the limit that say so in Content-Length
// are refused before anything is read; chunked ones are read to 1 MiB + 1
// (< 3 MiB each). The bound the test enforces is that: 96 MiB of peak RSS
// growth.
const (
	floodParallel   = 8
	floodBodyBytes  = 60 << 20
	floodHeartbeat  = 1 << 20 // apiserver's maxHeartbeatBytes
	floodRSSBoundMB = 96
)

// TestBadTokenFloodKeepsRSSBounded starts a real `ironflow api` process on
// the lab's PostgreSQL and Temporal, and sends it, 8 at a time, 60 MB
// heartbeats with a bad token (with Content-Length, then chunked) and
// heartbeats just under the body limit with a bad token, three rounds each.
// Every one is refused (413, or 400 for the bad token) and the process's
// peak RSS (VmHWM) grows by less than the bound derived above.
func TestBadTokenFloodKeepsRSSBounded(t *testing.T) {
	api, url := spawnAPI(t, "ironflow-api-flood")
	pid := api.Pid()
	uuid := createNode(t, map[string]any{"name": "flood-node-0", "driver": "fake-hardware"}, "")

	send := func(size int64, chunked bool) (int, string, error) {
		prefix := `{"callback_url":"http://10.0.0.9:9999","agent_token":"not-the-token","agent_version":"10.0","padding":"`
		suffix := `"}`
		pad := size - int64(len(prefix)+len(suffix))
		body := io.MultiReader(strings.NewReader(prefix), io.LimitReader(repeatByte('a'), pad), strings.NewReader(suffix))
		req, _ := http.NewRequest("POST", url+"/v1/heartbeat/"+uuid, body)
		req.ContentLength = size
		if chunked {
			req.ContentLength = -1
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-OpenStack-Ironic-API-Version", "1.72")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b), nil
	}
	// Warm up: the process's pools, connections and code paths exist
	// before the baseline is taken.
	for range 3 {
		if code, _, err := send(floodHeartbeat-4096, false); err != nil || code != 400 {
			t.Fatalf("warm-up heartbeat: %d %v", code, err)
		}
	}
	resetPeakRSS(pid)
	before := procStatusKB(t, pid)
	t.Logf("before the flood: VmRSS %d KiB, VmHWM %d KiB", before["VmRSS"], before["VmHWM"])

	type kind struct {
		name    string
		size    int64
		chunked bool
		status  int
		text    string
	}
	kinds := []kind{
		{"60 MB with Content-Length", floodBodyBytes, false, 413, "larger than"},
		{"60 MB chunked", floodBodyBytes, true, 413, "larger than"},
		{"just under the limit", floodHeartbeat - 4096, false, 400, "Invalid or missing agent token"},
	}
	for round := range 3 {
		for _, k := range kinds {
			var wg sync.WaitGroup
			var answered atomic.Int32
			errs := make(chan error, floodParallel)
			for range floodParallel {
				wg.Add(1)
				go func() {
					defer wg.Done()
					code, body, err := send(k.size, k.chunked)
					if err != nil && k.status == 413 {
						// The server may close the connection once it has
						// answered, while the client still writes.
						return
					}
					if err != nil || code != k.status || !strings.Contains(body, k.text) {
						errs <- fmt.Errorf("round %d, %s: %d %q %v", round, k.name, code, body, err)
						return
					}
					answered.Add(1)
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
			// A refusal the client never saw proves nothing: most must
			// have been answered.
			if n := answered.Load(); n < floodParallel/2 {
				t.Errorf("round %d, %s: %d of %d requests answered with %d", round, k.name, n, floodParallel, k.status)
			}
		}
	}
	after := procStatusKB(t, pid)
	growth := (after["VmHWM"] - before["VmRSS"]) / 1024
	t.Logf("after the flood: VmRSS %d KiB, VmHWM %d KiB: peak growth %d MiB (bound %d MiB)", after["VmRSS"], after["VmHWM"], growth, floodRSSBoundMB)
	if growth >= floodRSSBoundMB {
		t.Fatalf("peak RSS grew by %d MiB under the bad-token flood, bound %d MiB", growth, floodRSSBoundMB)
	}
	// Still serving.
	if resp, err := http.Get(url + "/"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("the API does not answer after the flood: %v", err)
	}
}

// TestSlowAndIdleConnectionsAreClosedByTheAPIProcess: a real `ironflow api`
// with short --api-read-timeout and --api-idle-timeout closes 50 connections
// that send a body slowly and 50 idle keep-alive connections after those
// timeouts, and serves another client meanwhile.
func TestSlowAndIdleConnectionsAreClosedByTheAPIProcess(t *testing.T) {
	_, url := spawnAPI(t, "ironflow-api-timeouts", "--api-read-timeout", "1s", "--api-idle-timeout", "1s")
	addr := strings.TrimPrefix(url, "http://")
	var slow, idle []net.Conn
	for range 50 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		_, _ = io.WriteString(c, "POST /v1/heartbeat/x HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"a")
		slow = append(slow, c)
	}
	for range 50 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		_, _ = io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("keep-alive request: %v", err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		idle = append(idle, c)
	}
	start := time.Now()
	// Served while the 100 connections are held.
	if resp, err := http.Get(url + "/v1/nodes"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("another client is not served while slow and idle connections are held: %v", err)
	}
	for name, conns := range map[string][]net.Conn{"slow-body": slow, "idle": idle} {
		for i, c := range conns {
			if !connClosedWithin(c, 5*time.Second) {
				t.Fatalf("%s connection %d still open %s after it started, timeout 1s", name, i, time.Since(start))
			}
		}
	}
	if d := time.Since(start); d > 4*time.Second {
		t.Errorf("slow and idle connections closed after %s, timeouts 1s", d)
	}
	t.Logf("100 slow and idle connections closed %.1fs after they were open", time.Since(start).Seconds())
}

// spawnAPI starts one more `ironflow api` of the lab on its own port and
// returns it with its URL; it is killed when the test ends.
func spawnAPI(t *testing.T, name string, extra ...string) (*embedded.Process, string) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	listen := l.Addr().String()
	l.Close()
	p, err := lab.Spawn(name, append(lab.APIArgs(listen), extra...))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Kill() })
	url := "http://" + listen
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := lab.WaitHTTP(ctx, url+"/", p); err != nil {
		t.Fatal(err)
	}
	return p, url
}

type repeatByte byte

func (r repeatByte) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(r)
	}
	return len(p), nil
}

// procStatusKB reads the kB fields of /proc/<pid>/status.
func procStatusKB(t *testing.T, pid int) map[string]int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if f := strings.Fields(v); ok && len(f) == 2 && f[1] == "kB" {
			out[k], _ = strconv.ParseInt(f[0], 10, 64)
		}
	}
	if out["VmHWM"] == 0 {
		t.Fatalf("no VmHWM in /proc/%d/status", pid)
	}
	return out
}

// resetPeakRSS sets VmHWM back to the current RSS (Linux's clear_refs "5"),
// so that the peak measured is the flood's; if the kernel refuses, the
// growth is still measured from VmRSS before the flood, which overstates it.
func resetPeakRSS(pid int) {
	_ = os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0)
}

// connClosedWithin reports whether the server closes c within d.
func connClosedWithin(c net.Conn, d time.Duration) bool {
	_ = c.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, c)
	if err == nil {
		return true // EOF
	}
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		return false
	}
	return true // reset
}
