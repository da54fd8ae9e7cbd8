package tests

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ironflow/ironflow/bmc"
	"github.com/ironflow/ironflow/store"
)

// deadBMC is a TCP server on loopback that plays a BMC gone bad: hang
// accepts connections and never answers; dribble reads the request and
// answers its headers, then one byte of body a second, never finishing.
type deadBMC struct {
	l       net.Listener
	dribble bool
	mu      sync.Mutex
	conns   []net.Conn
}

func startDeadBMC(t *testing.T, dribble bool) *deadBMC {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &deadBMC{l: l, dribble: dribble}
	go b.serve()
	t.Cleanup(b.close)
	return b
}

func (b *deadBMC) url() string { return "http://" + b.l.Addr().String() }

func (b *deadBMC) close() {
	b.l.Close()
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, c := range b.conns {
		c.Close()
	}
}

func (b *deadBMC) serve() {
	for {
		c, err := b.l.Accept()
		if err != nil {
			return
		}
		b.mu.Lock()
		b.conns = append(b.conns, c)
		b.mu.Unlock()
		if !b.dribble {
			continue // accepted, never answered
		}
		go func() {
			r := bufio.NewReader(c)
			if _, err := http.ReadRequest(r); err != nil {
				return
			}
			if _, err := c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100000\r\n\r\n{")); err != nil {
				return
			}
			for {
				time.Sleep(time.Second)
				if _, err := c.Write([]byte(" ")); err != nil {
					return
				}
			}
		}()
	}
}

// TestBMCThatHangs gives the lab's worker two redfish nodes whose BMCs
// accept TCP and then never answer, or answer a byte a second: every call
// to them ends at its deadline (redfish_timeout), the power sync reads the
// other nodes of the conductor group meanwhile and puts the dead ones in
// maintenance with a reason that names the BMC and the call, and a power
// verb on such a node fails with a last_error that names them too.
func TestBMCThatHangs(t *testing.T) {
	ctx := context.Background()
	st, err := store.Open(ctx, lab.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	hang, dribble := startDeadBMC(t, false), startDeadBMC(t, true)
	redfishNode := func(name, address string) *store.Node {
		n := &store.Node{Name: &name, Driver: "redfish", ProvisionState: "available", PowerState: psPtr("power off"),
			DriverInfo: map[string]any{"redfish_address": address, "redfish_username": "admin", "redfish_password": "password",
				"redfish_system_id": "/redfish/v1/Systems/1", "redfish_timeout": "2s", "redfish_connection_attempts": 1}}
		if err := st.CreateNode(ctx, n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	hung, dribbling := redfishNode("bmc-hangs", hang.url()), redfishNode("bmc-dribbles", dribble.url())
	// A machine whose BMC answers, in the same conductor group, is on
	// while its node says off: the sync must see it while the others hang.
	stateFile := filepath.Join(t.TempDir(), "fake-state.json")
	if err := os.WriteFile(stateFile, []byte(`{"power": "power on", "boot": {}}`), 0o644); err != nil {
		t.Fatal(err)
	}
	fineName := "bmc-answers"
	fine := &store.Node{Name: &fineName, Driver: "fake-hardware", ProvisionState: "available", PowerState: psPtr("power off"),
		DriverInfo: map[string]any{"fake_state_file": stateFile}}
	if err := st.CreateNode(ctx, fine); err != nil {
		t.Fatal(err)
	}
	get := func(uuid string) *store.Node {
		n, err := st.GetNode(ctx, uuid)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	waitFor(t, "the sync to read the machine whose BMC answers", 2*time.Minute, func() bool {
		return powerStr(get(fine.UUID).PowerState) == string(bmc.PowerOn)
	})
	for _, tc := range []struct {
		n    *store.Node
		bmc  string
		what string
	}{{hung, hang.url(), "hangs"}, {dribbling, dribble.url(), "dribbles"}} {
		waitFor(t, "maintenance for the BMC that "+tc.what, 3*time.Minute, func() bool {
			return get(tc.n.UUID).Maintenance
		})
		n := get(tc.n.UUID)
		reason := deref(n.MaintenanceReason)
		if !strings.Contains(reason, strings.TrimPrefix(tc.bmc, "http://")) || !strings.Contains(reason, "power state") ||
			!strings.Contains(reason, "BMC unreachable") || !strings.Contains(reason, "within 2s") {
			t.Errorf("the BMC that %s: maintenance reason %q does not name the BMC %s, the call and its deadline", tc.what, reason, tc.bmc)
		}
		if n.Fault == nil || *n.Fault != "power failure" {
			t.Errorf("the BMC that %s: fault %s, want power failure", tc.what, deref(n.Fault))
		}
		t.Logf("the BMC that %s: %s", tc.what, reason)
	}

	// A power verb on a node whose BMC hangs: its workflow's calls end at
	// their deadlines, and its last_error says which BMC and which call.
	verbNode := redfishNode("bmc-hangs-verb", hang.url())
	if _, err := call2(t, "PUT", "/v1/nodes/"+verbNode.UUID+"/states/power", map[string]any{"target": "power on"}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the power verb to fail", 3*time.Minute, func() bool {
		n := get(verbNode.UUID)
		return n.TargetPowerState == nil && n.LastError != nil
	})
	last := deref(get(verbNode.UUID).LastError)
	if !strings.Contains(last, strings.TrimPrefix(hang.url(), "http://")) {
		t.Errorf("last_error %q does not name the BMC %s", last, hang.url())
	}
	if !strings.Contains(strings.ToLower(last), "power") {
		t.Errorf("last_error %q does not name the call", last)
	}
	t.Logf("power verb on a hanging BMC: last_error %q", last)
	for _, n := range []*store.Node{hung, dribbling, verbNode, fine} {
		if _, err := call2(t, "DELETE", "/v1/nodes/"+n.UUID, nil); err != nil {
			// Maintenance nodes may be deleted; a failure leaves a node in
			// the lab for later tests, which they do not look at.
			t.Logf("delete node %s: %v", n.UUID, err)
		}
	}

}
