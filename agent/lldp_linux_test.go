package agent_test

import (
	"context"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	nl "github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"

	"github.com/ironflow/ironflow/agent"
	"github.com/ironflow/ironflow/inspection/hooks"
	"github.com/ironflow/ironflow/internal/testkit/lldpswitch"
)

// TestListenLLDPFromLldpd: Debian's lldpd, the switch side of a veth pair
// in a network namespace of the test's own, announces itself; the agent's
// listener on the other end returns the frame, and Ironic's parse-lldp
// (inspection/hooks) reads the switch's chassis, port and system name from
// the TLVs the agent would put in its inventory.
func TestListenLLDPFromLldpd(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("SKIPPING: a network namespace and a packet socket need root (CI runs as root)")
	}
	// The lab switch's lldpd command line (internal/testkit/lldpswitch):
	// named ironflow-lab-switch, announcing every second on sw0.
	argv := lldpswitch.Command(t, "ironflow-lab-switch", "sw0")
	logPath := filepath.Join(t.TempDir(), "lldpd.log")
	var frame []byte
	var lldpd *exec.Cmd
	done := make(chan struct{})
	go func() {
		defer close(done)
		// The thread stays locked and ends with the goroutine: nothing
		// else runs in the namespace, and what it starts is inside it.
		runtime.LockOSThread()
		ns, err := netns.New()
		if err != nil {
			t.Errorf("new network namespace: %v", err)
			return
		}
		defer ns.Close()
		if err := nl.LinkAdd(&nl.Veth{LinkAttrs: nl.LinkAttrs{Name: "sw0"}, PeerName: "h0"}); err != nil {
			t.Errorf("ip link add sw0 type veth peer h0: %v", err)
			return
		}
		for _, name := range []string{"sw0", "h0", "lo"} {
			l, err := nl.LinkByName(name)
			if err == nil {
				err = nl.LinkSetUp(l)
			}
			if err != nil {
				t.Errorf("ip link set %s up: %v", name, err)
				return
			}
		}
		// The listener is open before the switch announces itself.
		l, err := agent.OpenLLDP("h0")
		if err != nil {
			t.Errorf("open the LLDP listener on h0: %v", err)
			return
		}
		defer l.Close()
		lldpd = exec.Command(argv[0], argv[1:]...)
		logf, err := os.Create(logPath)
		if err != nil {
			t.Error(err)
			return
		}
		defer logf.Close()
		lldpd.Stdout, lldpd.Stderr = logf, logf
		if err := lldpd.Start(); err != nil {
			t.Errorf("start lldpd: %v", err)
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		// The first frame may precede the configuration: wait for the
		// switch's name.
		for {
			if frame, err = l.Receive(ctx); err != nil {
				t.Errorf("listen for LLDP on h0: %v", err)
				return
			}
			if strings.Contains(string(frame), "ironflow-lab-switch") {
				return
			}
		}
	}()
	<-done
	if lldpd != nil && lldpd.Process != nil {
		_ = lldpd.Process.Kill()
		_ = lldpd.Wait()
	}
	if t.Failed() {
		b, _ := os.ReadFile(logPath)
		t.Logf("lldpd's log:\n%s", b)
		return
	}
	var tlvs []hooks.TLV
	for _, p := range agent.LLDPTLVs(frame) {
		b, err := hex.DecodeString(p[1].(string))
		if err != nil {
			t.Fatalf("TLV %v: %v", p, err)
		}
		tlvs = append(tlvs, hooks.TLV{Type: p[0].(int), Value: b})
	}
	parsed := hooks.ParseLLDP(tlvs)
	t.Logf("parsed_lldp: %v", parsed)
	if parsed["switch_system_name"] != "ironflow-lab-switch" {
		t.Errorf("switch_system_name %v; want the name lldpd was configured with", parsed["switch_system_name"])
	}
	if id, _ := parsed["switch_port_id"].(string); id == "" {
		t.Errorf("no switch_port_id in %v", parsed)
	}
	if id, _ := parsed["switch_chassis_id"].(string); !strings.Contains(id, ":") {
		t.Errorf("switch_chassis_id %v; want the switch's MAC", parsed["switch_chassis_id"])
	}
}
