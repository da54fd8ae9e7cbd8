package activities

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/ironflow/ironflow/store"
	"github.com/ironflow/ironflow/store/storetest"
	"github.com/ironflow/ironflow/workflows"
)

// A power call that completed, or any earlier call of the same run, is
// known as done when the workflow task runs its local activities again
// after a crash; a later call, or a call of another run, is not.
func TestCompletedLocalCallsAreNotRunAgain(t *testing.T) {
	st := storetest.New(t)
	ctx := context.Background()
	a := New(st, Config{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	n := &store.Node{Driver: "fake-hardware", ProvisionState: workflows.StateDeploying}
	if err := st.CreateNode(ctx, n); err != nil {
		t.Fatal(err)
	}
	if done, err := a.completedCall(ctx, n.UUID, keyPowerCall, localCall{Run: "r1", Seq: 7}); err != nil || done {
		t.Fatalf("before any mark: done %v, %v", done, err)
	}
	// SetPower's write of the state it left, with its mark.
	on := "power on"
	if err := st.SetPowerStateMerging(ctx, n.UUID, &on, map[string]any{keyPowerCall: localCall{Run: "r1", Seq: 9}}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		call localCall
		want bool
	}{
		{localCall{Run: "r1", Seq: 7}, true},   // the power off before the power on that completed
		{localCall{Run: "r1", Seq: 9}, true},   // the power on itself
		{localCall{Run: "r1", Seq: 10}, false}, // a later call of the run
		{localCall{Run: "r2", Seq: 3}, false},  // another workflow run
	} {
		if done, err := a.completedCall(ctx, n.UUID, keyPowerCall, c.call); err != nil || done != c.want {
			t.Errorf("%+v: done %v (%v), want %v", c.call, done, err, c.want)
		}
	}
}

// A conditional state record that finds the node where the same run left it
// is told apart from a node another verb has taken.
func TestMovedByThisRun(t *testing.T) {
	st := storetest.New(t)
	ctx := context.Background()
	a := New(st, Config{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	n := &store.Node{Driver: "fake-hardware", ProvisionState: workflows.StateCleaning}
	if err := st.CreateNode(ctx, n); err != nil {
		t.Fatal(err)
	}
	if err := st.RecordTransition(ctx, n.UUID, store.Transition{To: workflows.StateCleanWait,
		SetInternal: map[string]any{keyProvisionRun: provisionRun{Run: "r1", State: workflows.StateCleanWait}}}); err != nil {
		t.Fatal(err)
	}
	if !a.movedByThisRun(ctx, n.UUID, "r1") {
		t.Error("the run that recorded clean wait does not see it as its own")
	}
	if a.movedByThisRun(ctx, n.UUID, "r2") || a.movedByThisRun(ctx, n.UUID, "") {
		t.Error("another run sees clean wait as its own")
	}
	// The API moves the node on (no mark): the state is no longer the run's.
	if err := st.RecordTransition(ctx, n.UUID, store.Transition{To: workflows.StateCleanFailed}); err != nil {
		t.Fatal(err)
	}
	if a.movedByThisRun(ctx, n.UUID, "r1") {
		t.Error("a state another writer recorded is taken as the run's")
	}
}
