package console

import (
	"io"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ironflow/ironflow/internal/testkit/serialline"
)

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
	port := serialline.BMC(t, "SeaBIOS (version 1.16)\r\nBooting from ROM...\r\nironflow-agent: looking up the node\r\n")

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
