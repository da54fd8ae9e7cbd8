package console

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ironflow/ironflow/embedded"
	"github.com/ironflow/ironflow/vbmc"
)

// serialLine is a machine's serial port on TCP, as QEMU's socket chardev
// serves it: it prints its boot text again and again, as a machine that
// keeps booting, and echoes what it reads back, upper-cased, so that a
// test sees both directions.
func serialLine(t *testing.T, bootText string) string {
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
			go func() {
				defer c.Close()
				go func() {
					for {
						if _, err := io.WriteString(c, bootText); err != nil {
							return
						}
						time.Sleep(300 * time.Millisecond)
					}
				}()
				r := bufio.NewReader(c)
				for {
					b, err := r.ReadByte()
					if err != nil {
						return
					}
					if b >= 'a' && b <= 'z' {
						b -= 'a' - 'A'
					}
					if _, err := c.Write([]byte{b}); err != nil {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().String()
}

// readUntil reads r until want appears (or the deadline of c passes).
func readUntil(t *testing.T, r io.Reader, want string) string {
	t.Helper()
	var got strings.Builder
	buf := make([]byte, 512)
	for !strings.Contains(got.String(), want) {
		n, err := r.Read(buf)
		got.Write(buf[:n])
		if err != nil {
			t.Fatalf("read %q so far, waiting for %q: %v", got.String(), want, err)
		}
	}
	return got.String()
}

// TestIPMISOLThroughIPMISim: the ipmitool-socat endpoint on real parts:
// OpenIPMI's ipmi_sim serves serial over LAN to a machine's serial line
// (its lan.conf sol "tcp:..." line, as for QEMU ports), Debian's ipmitool
// runs sol activate under a pty, and a client of the endpoint reads the
// machine's text and types to it; a second client is refused; Stop ends
// the session and ipmi_sim takes a new one afterwards (the SOL session was
// ended, not left behind).
func TestIPMISOLThroughIPMISim(t *testing.T) {
	for _, bin := range []string{"ipmi_sim", "ipmitool"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Skipf("SKIPPED LOUDLY: %s is missing (scripts/install-deps.sh installs it)", bin)
		}
	}
	dir := t.TempDir()
	line := serialLine(t, "SeaBIOS (version 1.16)\r\nBooting from ROM...\r\nironflow-agent: looking up the node\r\n")
	cfg := map[string]any{"state_dir": filepath.Join(dir, "state"), "username": "admin", "password": "password",
		"vms": []map[string]any{{"name": "sol0", "mac": "52:54:00:dd:00:09", "netdev": "none", "serial_tcp": line}}}
	b, _ := json.Marshal(cfg)
	path := filepath.Join(dir, "vms.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	vc, err := vbmc.LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	port, err := embedded.FreePort("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	stop, err := vbmc.StartIPMISim(context.Background(), vc, "sol0", "127.0.0.1:"+strconv.Itoa(port), "admin", "password", []string{"true"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stop() })

	spec, err := SpecFor("ipmitool-socat", "n1", map[string]any{"ipmi_address": "127.0.0.1", "ipmi_port": strconv.Itoa(port),
		"ipmi_username": "admin", "ipmi_password": "password"})
	if err != nil {
		t.Fatal(err)
	}
	m := &Manager{}
	t.Cleanup(m.StopAll)
	var eps Endpoints
	// ipmi_sim takes a moment to listen.
	deadline := time.Now().Add(20 * time.Second)
	for {
		if eps, err = m.Start(spec); err != nil {
			t.Fatal(err)
		}
		c, err := net.Dial("tcp", eps.Serial)
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetDeadline(time.Now().Add(15 * time.Second))
		got := ""
		buf := make([]byte, 4096)
		for !strings.Contains(got, "looking up the node") {
			n, err := c.Read(buf)
			got += string(buf[:n])
			if err != nil {
				break
			}
		}
		if strings.Contains(got, "looking up the node") {
			if _, err := io.WriteString(c, "hello bmc\r"); err != nil {
				t.Fatal(err)
			}
			readUntil(t, c, "HELLO BMC")
			second, err := net.Dial("tcp", eps.Serial)
			if err != nil {
				t.Fatal(err)
			}
			_ = second.SetDeadline(time.Now().Add(10 * time.Second))
			if refused, _ := io.ReadAll(second); string(refused) != refusal {
				t.Errorf("a second client read %q", refused)
			}
			second.Close()
			m.Stop("n1")
			_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
			if rest, err := io.ReadAll(c); err != nil {
				t.Errorf("after Stop the client read %q, %v; want EOF", rest, err)
			}
			c.Close()
			break
		}
		c.Close()
		m.Stop("n1")
		if time.Now().After(deadline) {
			t.Fatalf("no SOL text through ipmi_sim; read %q", got)
		}
		time.Sleep(500 * time.Millisecond)
	}

	// The BMC's SOL session was ended: a new console works at once.
	if eps, err = m.Start(spec); err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("tcp", eps.Serial)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(15 * time.Second))
	readUntil(t, c, "looking up the node")
}
