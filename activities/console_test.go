package activities

import (
	"bufio"
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/ironflow/ironflow/console"
	"github.com/ironflow/ironflow/internal/testkit/storetest"
	"github.com/ironflow/ironflow/provision"
	"github.com/ironflow/ironflow/store"
	"github.com/ironflow/ironflow/workflows"
)

func consoleWorker(st *store.Store, host string) *Activities {
	a := New(st, Config{Conductor: host}, nil)
	a.Consoles = &console.Manager{}
	return a
}

func greets(t *testing.T, addr, node string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("connect to the console of %s at %s: %v", node, addr, err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if line, err := bufio.NewReader(c).ReadString('\n'); err != nil || !strings.Contains(line, node) {
		t.Fatalf("console of %s at %s read %q, %v", node, addr, line, err)
	}
}

// TestConsoleRestoredByItsHolderOrTakenOverWhenGone: a worker that starts
// brings back the consoles it held and those whose holder is gone, opens
// new endpoints and records them, and leaves alone a console whose holder
// is alive; a disable then finds the new holder.
func TestConsoleRestoredByItsHolderOrTakenOverWhenGone(t *testing.T) {
	st := storetest.New(t)
	ctx := context.Background()
	mk := func(name string) string {
		n := &store.Node{Name: &name, Driver: "fake-hardware", ConsoleInterface: "fake", ConductorGroup: "rack1"}
		if err := st.CreateNode(ctx, n); err != nil {
			t.Fatal(err)
		}
		return n.UUID
	}
	mine, gone, live := mk("mine"), mk("gone"), mk("live")
	if err := st.RegisterConductor(ctx, &store.Conductor{Hostname: "w-live", ConductorGroups: []string{"rack1"}}); err != nil {
		t.Fatal(err)
	}

	w1 := consoleWorker(st, "w1")
	held, err := w1.StartConsole(ctx, workflows.ConsoleInput{NodeUUID: mine})
	if err != nil || held.Holder != "w1" || held.Serial == "" {
		t.Fatalf("StartConsole = %+v, %v", held, err)
	}
	if err := w1.RecordConsole(ctx, workflows.RecordConsoleInput{NodeUUID: mine, Enabled: true, Held: held}); err != nil {
		t.Fatal(err)
	}
	greets(t, held.Serial, mine)
	for node, holder := range map[string]string{gone: "w-gone", live: "w-live"} {
		if err := st.SetConsoleEnabled(ctx, node, true, map[string]any{store.KeyConsoleHolder: holder, store.KeyConsoleAddress: "127.0.0.1:1"}); err != nil {
			t.Fatal(err)
		}
	}

	// w1 dies: its listener goes with it.
	w1.Consoles.StopAll()
	w1again := consoleWorker(st, "w1")
	restored, err := w1again.RestoreConsoles(ctx, "rack1")
	if err != nil || len(restored) != 2 {
		t.Fatalf("RestoreConsoles = %v, %v; want mine and gone", restored, err)
	}
	for _, node := range []string{mine, gone} {
		n, _ := st.GetNode(ctx, node)
		h := heldOf(n)
		if h.Holder != "w1" || !n.ConsoleEnabled {
			t.Errorf("node %s after restore: %+v", node, h)
		}
		greets(t, h.Serial, node)
	}
	if n, _ := st.GetNode(ctx, live); heldOf(n).Holder != "w-live" || w1again.Consoles.Held(live) {
		t.Errorf("the console of a live holder was taken: %+v", heldOf(n))
	}
	hs, _ := st.ListHistory(ctx, gone)
	if len(hs) == 0 || !strings.HasPrefix(hs[len(hs)-1].Event, "Console taken over from worker w-gone on worker w1") {
		t.Errorf("history of the taken-over console: %+v", hs)
	}

	// The deploy timeline says where the console is while the node waits
	// for its agent, and says nothing for a node without a console.
	plain := mk("plain")
	for _, node := range []string{mine, plain} {
		if err := w1again.RecordState(ctx, workflows.RecordStateInput{NodeUUID: node, To: provision.DeployWait, Event: "waiting"}); err != nil {
			t.Fatal(err)
		}
	}
	n, _ := st.GetNode(ctx, mine)
	hs, _ = st.ListHistory(ctx, mine)
	if want := "Console of the node during wait call-back: worker w1, serial endpoint tcp://" + heldOf(n).Serial; hs[len(hs)-1].Event != want {
		t.Errorf("history in wait call-back: %q, want %q", hs[len(hs)-1].Event, want)
	}
	hs, _ = st.ListHistory(ctx, plain)
	for _, h := range hs {
		if h.EventType == "console" {
			t.Errorf("a node without a console has a console event: %+v", h)
		}
	}

	// A claim against a stale holder loses.
	if ok, err := st.ClaimConsole(ctx, gone, "w-gone", "w9", nil); err != nil || ok {
		t.Errorf("a stale claim = %v, %v", ok, err)
	}

	// Disabling: the holder is w1, alive once it heartbeats.
	if err := st.RegisterConductor(ctx, &store.Conductor{Hostname: "w1", ConductorGroups: []string{"rack1"}}); err != nil {
		t.Fatal(err)
	}
	prep, err := w1again.PrepareConsoleStop(ctx, workflows.ConsoleInput{NodeUUID: mine})
	if err != nil || prep.Holder != "w1" || !prep.HolderAlive {
		t.Fatalf("PrepareConsoleStop = %+v, %v", prep, err)
	}
	if err := w1again.StopConsole(ctx, workflows.ConsoleInput{NodeUUID: mine}); err != nil {
		t.Fatal(err)
	}
	if _, err := net.DialTimeout("tcp", prep.Serial, time.Second); err == nil {
		t.Error("the endpoint still listens after StopConsole")
	}
	w1again.Consoles.StopAll()
}

// TestReconcileClosesConsolesNoNodeRecords: a node deleted with its
// console enabled, and a console another worker took over, are closed by
// the holder's next check; a console still recorded stays, and so does
// one younger than the grace (its enable has not recorded it yet).
func TestReconcileClosesConsolesNoNodeRecords(t *testing.T) {
	st := storetest.New(t)
	ctx := context.Background()
	w := consoleWorker(st, "w1")
	defer w.Consoles.StopAll()
	var nodes []string
	for _, name := range []string{"kept", "deleted", "taken"} {
		n := &store.Node{Name: &name, Driver: "fake-hardware", ConsoleInterface: "fake"}
		if err := st.CreateNode(ctx, n); err != nil {
			t.Fatal(err)
		}
		held, err := w.StartConsole(ctx, workflows.ConsoleInput{NodeUUID: n.UUID})
		if err != nil {
			t.Fatal(err)
		}
		if err := w.RecordConsole(ctx, workflows.RecordConsoleInput{NodeUUID: n.UUID, Enabled: true, Held: held}); err != nil {
			t.Fatal(err)
		}
		nodes = append(nodes, n.UUID)
	}
	if closed, err := w.ReconcileConsoles(ctx, time.Hour); err != nil || len(closed) != 0 {
		t.Fatalf("within the grace: closed %v, %v", closed, err)
	}
	if err := st.DeleteNode(ctx, nodes[1]); err != nil {
		t.Fatal(err)
	}
	if ok, err := st.ClaimConsole(ctx, nodes[2], "w1", "w2", nil); err != nil || !ok {
		t.Fatalf("take over: %v, %v", ok, err)
	}
	closed, err := w.ReconcileConsoles(ctx, 0)
	if err != nil || len(closed) != 2 || w.Consoles.Held(nodes[1]) || w.Consoles.Held(nodes[2]) || !w.Consoles.Held(nodes[0]) {
		t.Errorf("closed %v, %v; held: kept %v deleted %v taken %v", closed, err,
			w.Consoles.Held(nodes[0]), w.Consoles.Held(nodes[1]), w.Consoles.Held(nodes[2]))
	}
}
