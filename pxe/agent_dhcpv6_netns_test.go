//go:build linux

package pxe

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ironflow/ironflow/agent/boot"
)

// agentNetHelperEnv makes the re-executed test binary the agent's network
// bring-up (boot.BringUpNetwork) inside the client namespace.
const agentNetHelperEnv = "IRONFLOW_AGENT_NET_HELPER"

// TestAgentDHCPv6OnARealIPv6Segment: two network namespaces joined by a
// veth pair, no IPv4 anywhere. ironflow's DHCPv6 and router advertisements
// run in one (the pxe services, as `ironflow pxe` runs them); the agent's
// network bring-up, told an API URL with an IPv6 literal, runs in the
// other. The agent's card gets the node's reserved address from the pool,
// the on-link prefix from the advertisement, and reaches the server.
func TestAgentDHCPv6OnARealIPv6Segment(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SKIPPING NETWORK NAMESPACE TEST: needs root (ip netns, veth); run as root")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("SKIPPING NETWORK NAMESPACE TEST: no ip command (apt-get install iproute2)")
	}
	id := os.Getpid() % 100000
	srv, cli := fmt.Sprintf("ifd6s%d", id), fmt.Sprintf("ifd6c%d", id)
	for _, ns := range []string{srv, cli} {
		exec.Command("ip", "netns", "del", ns).Run() // a leftover from a killed run
		run(t, "ip", "netns", "add", ns)
		t.Cleanup(func() { exec.Command("ip", "netns", "del", ns).Run() })
		run(t, "ip", "-n", ns, "link", "set", "lo", "up")
	}
	run(t, "ip", "-n", srv, "link", "add", "d60", "type", "veth", "peer", "name", "d61")
	run(t, "ip", "-n", srv, "link", "set", "d61", "netns", cli)
	run(t, "ip", "-n", srv, "addr", "add", "fd52::1/64", "dev", "d60", "nodad")
	run(t, "ip", "-n", srv, "link", "set", "d60", "up")
	macOut, err := exec.Command("ip", "netns", "exec", cli, "cat", "/sys/class/net/d61/address").Output()
	if err != nil {
		t.Fatal(err)
	}
	mac := strings.TrimSpace(string(macOut))
	const node = "4d9c8f0e-1b2a-4c5d-8e7f-6a5b4c3d2e61"
	images := t.TempDir()
	if err := os.WriteFile(filepath.Join(images, "hello"), []byte("over IPv6"), 0o644); err != nil {
		t.Fatal(err)
	}
	hc := helperConfig{
		Config: Config{
			DHCPv6: &DHCPv6Config{Interface: "d60", Addr: netip.MustParseAddr("fd52::1"), HTTPBaseURL: "http://[fd52::1]:8080",
				Pools: []DHCPv6Pool{{Prefix: netip.MustParsePrefix("fd52::/64"), First: netip.MustParseAddr("fd52::a0"), Last: netip.MustParseAddr("fd52::af")}}},
			RA:   &RAConfig{Interface: "d60", Prefix: netip.MustParsePrefix("fd52::/64"), Interval: time.Second},
			HTTP: &HTTPConfig{Addr: "[fd52::1]:8080", ImagesDir: images},
		},
		BootConfigs: []BootConfig{{NodeUUID: node, MACs: []string{mac}, Method: MethodPXE, Kind: "agent"}},
	}
	l := &lab{ns: srv}
	l.start(t, hc)

	c := exec.Command("ip", "netns", "exec", cli, os.Args[0], "-test.run=^TestAgentNetHelper$", "-test.count=1", "-test.v")
	c.Env = append(os.Environ(), agentNetHelperEnv+"=http://[fd52::1]:6385 http://[fd52::1]:8080/images/hello")
	out, err := c.CombinedOutput()
	if err != nil {
		t.Fatalf("the agent's network bring-up failed: %v\n%s\nservice log:\n%s", err, out, l.serviceLog())
	}
	var got []boot.Interface
	for _, line := range strings.Split(string(out), "\n") {
		if s, ok := strings.CutPrefix(line, "agent net helper: "); ok {
			if err := json.Unmarshal([]byte(s), &got); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(got) != 1 || got[0].Name != "d61" || got[0].Addr6 == nil {
		t.Fatalf("configured %+v, want d61 with an IPv6 address\n%s", got, out)
	}
	a, _ := netip.AddrFromSlice(got[0].Addr6)
	if a.Less(netip.MustParseAddr("fd52::a0")) || netip.MustParseAddr("fd52::af").Less(a) {
		t.Errorf("the agent got %s, not an address of the pool", a)
	}
	if got[0].Addr.IP != nil {
		t.Errorf("the agent asked DHCPv4 for an IPv6 API URL: %+v", got[0])
	}
	if !logLine(l.serviceLog(), `"msg":"lease REPLY"`, `"mac":"`+mac+`"`, `"ip":"`+a.String()+`"`) {
		t.Errorf("ironflow's DHCPv6 logged no lease of %s to %s", a, mac)
	}
	// The prefix is on-link by the advertisement: the boot service answers
	// the agent's namespace over IPv6.
	if !strings.Contains(string(out), "agent net helper fetched: 200 over IPv6") {
		t.Errorf("the agent's namespace did not fetch from http://[fd52::1]:8080:\n%s\nroutes: %s", out, ipRoutes6(cli))
	}
	// From its leased address, not its link-local one: the bring-up
	// returned after duplicate address detection, so the address was a
	// usable source (the agent's callback URL is made of it).
	if !logLine(l.serviceLog(), `"msg":"http request"`, `"path":"/images/hello"`, `"peer":"[`+a.String()+`]:`) {
		t.Errorf("the fetch did not come from %s; service log:\n%s", a, l.serviceLog())
	}
}

func ipRoutes6(ns string) string {
	out, _ := exec.Command("ip", "-n", ns, "-6", "route").CombinedOutput()
	return string(out)
}

// TestAgentNetHelper is the re-executed part of
// TestAgentDHCPv6OnARealIPv6Segment; without its environment it does
// nothing.
func TestAgentNetHelper(t *testing.T) {
	api, fetch, _ := strings.Cut(os.Getenv(agentNetHelperEnv), " ")
	if api == "" {
		t.Skip("helper process for TestAgentDHCPv6OnARealIPv6Segment; runs only when started by it")
	}
	var mu sync.Mutex
	log := slog.New(slog.NewTextHandler(&lockedWriter{mu: &mu, w: os.Stdout}, nil))
	ifs, err := boot.BringUpNetwork(t.Context(), "", boot.FamiliesFor(api), log)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(ifs)
	fmt.Printf("agent net helper: %s\n", b)
	resp, err := http.Get(fetch)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	fmt.Printf("agent net helper fetched: %d %s\n", resp.StatusCode, body)
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *os.File
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
