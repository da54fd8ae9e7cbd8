package pxe

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// ksHelperEnv tells the re-executed test binary which part of
// TestKickstartOnlyToTheNodesMACOnARealSegment to play: "serve <addr>
// <node>=<mac>..." or "fetch <url>".
const ksHelperEnv = "IRONFLOW_KS_NETNS_HELPER"

// A real segment, no lease (proxy DHCP): two network namespaces joined by a
// veth pair, the boot service in one, a client in the other. The client
// gets the kickstart of the node whose MAC is its own card's, and 404 for a
// node with another MAC: the boot host's neighbour table (read over
// rtnetlink) named the card that asked.
func TestKickstartOnlyToTheNodesMACOnARealSegment(t *testing.T) {
	kickstartOnRealSegment(t, "10.251.0.1", "10.251.0.2", 24)
}

// TestKickstartOnlyToTheNodesMACOnARealIPv6Segment is the same on an
// IPv6-only segment: the neighbour table's NDP entries name the card.
func TestKickstartOnlyToTheNodesMACOnARealIPv6Segment(t *testing.T) {
	kickstartOnRealSegment(t, "fd51::1", "fd51::2", 64)
}

func kickstartOnRealSegment(t *testing.T, srvIP, cliIP string, bits int) {
	if os.Geteuid() != 0 {
		t.Skip("SKIPPING NETWORK NAMESPACE TEST: needs root (ip netns, veth); run as root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("SKIPPING NETWORK NAMESPACE TEST: no ip command (apt-get install iproute2)")
	}
	id := os.Getpid() % 100000
	srv, cli := fmt.Sprintf("ifkss%d", id), fmt.Sprintf("ifksc%d", id)
	for _, ns := range []string{srv, cli} {
		exec.Command("ip", "netns", "del", ns).Run() // a leftover from a killed run
		run(t, "ip", "netns", "add", ns)
		t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
		run(t, "ip", "-n", ns, "link", "set", "lo", "up")
	}
	// Created in the server's namespace, the peer moved to the client's:
	// the host's own namespace is never touched.
	run(t, "ip", "-n", srv, "link", "add", "ks0", "type", "veth", "peer", "name", "ks1")
	run(t, "ip", "-n", srv, "link", "set", "ks1", "netns", cli)
	// nodad: IPv6 addresses usable at once, not after duplicate address
	// detection.
	for _, a := range []struct{ ns, ip, dev string }{{srv, srvIP, "ks0"}, {cli, cliIP, "ks1"}} {
		args := []string{"ip", "-n", a.ns, "addr", "add", fmt.Sprintf("%s/%d", a.ip, bits), "dev", a.dev}
		if strings.Contains(a.ip, ":") {
			args = append(args, "nodad")
		}
		run(t, args...)
	}
	hostPort := net.JoinHostPort(srvIP, "8099")
	run(t, "ip", "-n", srv, "link", "set", "ks0", "up")
	run(t, "ip", "-n", cli, "link", "set", "ks1", "up")
	mac, err := exec.Command("ip", "netns", "exec", cli, "cat", "/sys/class/net/ks1/address").Output()
	if err != nil {
		t.Fatal(err)
	}
	const own, other = "3d9c8f0e-1b2a-4c5d-8e7f-6a5b4c3d2e01", "3d9c8f0e-1b2a-4c5d-8e7f-6a5b4c3d2e02"
	server := exec.Command("ip", "netns", "exec", srv, os.Args[0], "-test.run=^TestKickstartNetnsHelper$", "-test.count=1")
	server.Env = append(os.Environ(), ksHelperEnv+"=serve "+hostPort+" "+own+"="+strings.TrimSpace(string(mac))+" "+other+"=52:54:00:66:66:66")
	stderr, _ := server.StderrPipe()
	if err := server.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { server.Process.Kill(); server.Wait() })
	ready, logs := make(chan struct{}), make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if strings.Contains(sc.Text(), "ks helper listening") {
				close(ready)
			}
			logs <- sc.Text()
		}
	}()
	select {
	case <-ready:
	case <-time.After(20 * time.Second):
		t.Fatal("the boot service in the namespace did not start")
	}
	fetch := func(node string) string {
		c := exec.Command("ip", "netns", "exec", cli, os.Args[0], "-test.run=^TestKickstartNetnsHelper$", "-test.count=1")
		c.Env = append(os.Environ(), ksHelperEnv+"=fetch http://"+hostPort+"/boot/"+node+"/ks.cfg")
		out, _ := c.CombinedOutput()
		for _, line := range strings.Split(string(out), "\n") {
			if s, ok := strings.CutPrefix(line, "ks helper status "); ok {
				return s
			}
		}
		t.Fatalf("the client in the namespace printed no status:\n%s", out)
		return ""
	}
	if got := fetch(own); got != "200 secret ks of "+own {
		t.Errorf("the node's own card: %q, want its kickstart", got)
	}
	if got := fetch(other); !strings.HasPrefix(got, "404") {
		t.Errorf("another node's kickstart: %q, want 404", got)
	}
	time.Sleep(200 * time.Millisecond)
	var all []string
	for len(logs) > 0 {
		all = append(all, <-logs)
	}
	if !strings.Contains(strings.Join(all, "\n"), "is not one of the node's ports") {
		t.Errorf("the refusal names no link-layer address:\n%s", strings.Join(all, "\n"))
	}
}

// TestKickstartNetnsHelper is the re-executed part of
// TestKickstartOnlyToTheNodesMACOnARealSegment; without its environment it
// does nothing.
func TestKickstartNetnsHelper(t *testing.T) {
	role := os.Getenv(ksHelperEnv)
	switch f := strings.Fields(role); {
	case len(f) >= 2 && f[0] == "serve":
		b := NewMemoryBackend()
		for _, nm := range f[2:] {
			node, mac, _ := strings.Cut(nm, "=")
			if err := b.Put(BootConfig{NodeUUID: node, MACs: []string{mac}, Method: MethodPXE, Kind: "anaconda", Kickstart: "secret ks of " + node}); err != nil {
				t.Fatal(err)
			}
		}
		h, err := NewHTTPHandler(HTTPConfig{}, b, testSlog(os.Stderr))
		if err != nil {
			t.Fatal(err)
		}
		l, err := net.Listen("tcp", f[1])
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintln(os.Stderr, "ks helper listening")
		t.Fatal(http.Serve(l, h))
	case len(f) == 2 && f[0] == "fetch":
		resp, err := http.Get(f[1])
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Printf("ks helper status %d %s\n", resp.StatusCode, strings.TrimSpace(string(body)))
	}
}
