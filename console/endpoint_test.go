package console

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
)

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	t.Cleanup(func() { c.Close() })
	return c
}

// TestEndpointOneSessionAtATime: the session bridges both ways to the
// source; a second connection reads the refusal and is closed while the
// first holds the console, and is served once it ended; Close ends the
// session (the client reads EOF) and the listener.
func TestEndpointOneSessionAtATime(t *testing.T) {
	m := &Manager{}
	eps, err := m.Start(Spec{Node: "n1", Serial: FakeSource{Node: "n1"}})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(eps.Serial, "127.0.0.1:") {
		t.Fatalf("serial endpoint %q is not on loopback", eps.Serial)
	}
	first := dial(t, eps.Serial)
	r := bufio.NewReader(first)
	if line, err := r.ReadString('\n'); err != nil || line != "ironflow fake console of node n1\r\n" {
		t.Fatalf("greeting %q, %v", line, err)
	}
	if _, err := io.WriteString(first, "ping\n"); err != nil {
		t.Fatal(err)
	}
	if line, err := r.ReadString('\n'); err != nil || line != "ping\n" {
		t.Fatalf("echo %q, %v", line, err)
	}

	second := dial(t, eps.Serial)
	got, err := io.ReadAll(second)
	if err != nil || string(got) != refusal {
		t.Fatalf("second connection read %q, %v; want the refusal and EOF", got, err)
	}

	first.Close()
	deadline := time.Now().Add(5 * time.Second)
	for {
		third := dial(t, eps.Serial)
		line, _ := bufio.NewReader(third).ReadString('\n')
		if line == "ironflow fake console of node n1\r\n" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the first session ended a new one reads %q", line)
		}
		time.Sleep(20 * time.Millisecond)
	}

	// The third session holds it now; Stop ends it.
	held := dial(t, eps.Serial)
	_, _ = io.ReadAll(held) // refused: the third still holds it
	m.Stop("n1")
	if m.Held("n1") {
		t.Error("the node's console is still held after Stop")
	}
	if _, err := net.DialTimeout("tcp", eps.Serial, time.Second); err == nil {
		t.Error("the listener still accepts after Stop")
	}
}

// TestStopClosesEverySessionBeforeItReturns: a session blocked reading
// reads EOF by the time Stop returns.
func TestStopClosesEverySessionBeforeItReturns(t *testing.T) {
	m := &Manager{}
	eps, err := m.Start(Spec{Node: "n1", Serial: FakeSource{Node: "n1"}})
	if err != nil {
		t.Fatal(err)
	}
	c := dial(t, eps.Serial)
	r := bufio.NewReader(c)
	if _, err := r.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	m.Stop("n1")
	_ = c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
	if _, err := r.ReadByte(); !errors.Is(err, io.EOF) {
		t.Fatalf("read after Stop: %v, want EOF at once", err)
	}
}

// TestManagerPortsAndRestart: ports come from the range, a node already
// held answers the same endpoints (an activity retried), a stopped node's
// port is taken again, and a full range is an error.
func TestManagerPortsAndRestart(t *testing.T) {
	base := twoFreePorts(t)
	pr, err := ParsePortRange(strings.Join([]string{itoa(base), itoa(base + 1)}, ":"))
	if err != nil {
		t.Fatal(err)
	}
	m := &Manager{Ports: pr}
	a, err := m.Start(Spec{Node: "a", Serial: FakeSource{Node: "a"}})
	if err != nil {
		t.Fatal(err)
	}
	again, _ := m.Start(Spec{Node: "a", Serial: FakeSource{Node: "a"}})
	if again != a {
		t.Errorf("a second Start of a held node answered %v, want %v", again, a)
	}
	b, err := m.Start(Spec{Node: "b", Serial: FakeSource{Node: "b"}})
	if err != nil || a.Serial == b.Serial {
		t.Fatalf("second node: %v, %v (first %v)", b, err, a)
	}
	if _, err := m.Start(Spec{Node: "c", Serial: FakeSource{Node: "c"}}); !errors.Is(err, ErrNoFreePort) {
		t.Errorf("a third node in a range of two: %v", err)
	}
	m.Stop("a")
	if c, err := m.Start(Spec{Node: "c", Serial: FakeSource{Node: "c"}}); err != nil || c.Serial != a.Serial {
		t.Errorf("after a stop: %v, %v; want %s", c, err, a.Serial)
	}
	m.StopAll()
	for _, bad := range []string{"1", "0:10", "10:5", "a:b", "1:70000"} {
		if _, err := ParsePortRange(bad); err == nil {
			t.Errorf("ParsePortRange(%q) accepted", bad)
		}
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// twoFreePorts is a port p of loopback such that p and p+1 are both free
// now: other tests of the machine take ports at any time, so a free port's
// neighbour is not free by chance.
func twoFreePorts(t *testing.T) int {
	t.Helper()
	for range 100 {
		a, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		p := a.Addr().(*net.TCPAddr).Port
		b, err := net.Listen("tcp", "127.0.0.1:"+itoa(p+1))
		a.Close()
		if err == nil {
			b.Close()
			return p
		}
	}
	t.Fatal("no two neighbouring free ports on 127.0.0.1 in 100 tries")
	return 0
}

// TestIPMISOLNeverPutsThePasswordOnTheCommandLine: ipmitool reads it from
// IPMI_PASSWORD (-E); the arguments are Ironic's lanplus ones.
func TestIPMISOLNeverPutsThePasswordOnTheCommandLine(t *testing.T) {
	s := IPMISOL{Address: "10.0.0.9", Port: 6230, Username: "admin", Password: "s3cret", CipherSuite: "17"}
	cmd := s.command(context.Background(), "sol", "activate")
	args := strings.Join(cmd.Args, " ")
	if strings.Contains(args, "s3cret") {
		t.Fatalf("the password is on the command line: %s", args)
	}
	if want := "ipmitool -I lanplus -H 10.0.0.9 -p 6230 -U admin -E -C 17 sol activate"; args != want {
		t.Errorf("command line %q, want %q", args, want)
	}
	found := false
	for _, e := range cmd.Env {
		found = found || e == "IPMI_PASSWORD=s3cret"
	}
	if !found {
		t.Error("IPMI_PASSWORD is not in ipmitool's environment")
	}
}

// TestSpecForReadsTheConsoleInterface: each console interface bridges to
// its stream; no-console and a missing address are refused.
func TestSpecForReadsTheConsoleInterface(t *testing.T) {
	info := map[string]any{"ipmi_address": "10.0.0.9", "ipmi_port": float64(6230), "ipmi_terminal_port": "9001", "console_vnc_address": "10.0.0.9:5900"}
	if s, err := SpecFor("ipmitool-socat", "n1", info); err != nil || s.SerialPort != 9001 || s.Serial.(IPMISOL).Port != 6230 {
		t.Errorf("ipmitool-socat: %+v, %v", s, err)
	}
	if s, err := SpecFor("redfish-graphical", "n1", info); err != nil || s.Graphical != (TCPSource{Address: "10.0.0.9:5900"}) || s.Serial != nil {
		t.Errorf("redfish-graphical: %+v, %v", s, err)
	}
	if _, err := SpecFor("no-console", "n1", info); err == nil {
		t.Error("no-console has a spec")
	}
	if _, err := SpecFor("ipmitool-shellinabox", "n1", map[string]any{}); err == nil || !strings.Contains(err.Error(), "ipmi_address") {
		t.Errorf("without ipmi_address: %v", err)
	}
}

// TestGraphicalEndpointRelaysVNC: redfish-graphical's endpoint relays the
// BMC's VNC server byte for byte (an RFB greeting here) and a second client
// is closed without a word, which a VNC client would misread.
func TestGraphicalEndpointRelaysVNC(t *testing.T) {
	vnc, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer vnc.Close()
	go func() {
		for {
			c, err := vnc.Accept()
			if err != nil {
				return
			}
			_, _ = io.WriteString(c, "RFB 003.008\n")
			_, _ = io.Copy(io.Discard, c)
			c.Close()
		}
	}()
	spec, err := SpecFor("redfish-graphical", "n1", map[string]any{"console_vnc_address": vnc.Addr().String()})
	if err != nil {
		t.Fatal(err)
	}
	m := &Manager{}
	defer m.StopAll()
	eps, err := m.Start(spec)
	if err != nil || eps.Serial != "" || eps.Graphical == "" {
		t.Fatalf("Start = %+v, %v", eps, err)
	}
	c := dial(t, eps.Graphical)
	buf := make([]byte, 12)
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "RFB 003.008\n" {
		t.Fatalf("through the relay: %q, %v", buf, err)
	}
	second := dial(t, eps.Graphical)
	if got, err := io.ReadAll(second); err != nil || len(got) != 0 {
		t.Errorf("a second VNC client read %q, %v; want nothing and EOF", got, err)
	}
}
