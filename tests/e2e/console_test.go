package e2e

import (
	"encoding/json"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
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
