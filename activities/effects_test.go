package activities

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/testsuite"

	"github.com/ironflow/ironflow/internal/testkit/storetest"
	"github.com/ironflow/ironflow/provision"
	"github.com/ironflow/ironflow/store"
)

// A power call that completed, or any earlier call of the same run, is
// known as done when the workflow task runs its local activities again
// after a crash; a later call, or a call of another run, is not.
func TestCompletedLocalCallsAreNotRunAgain(t *testing.T) {
	st := storetest.New(t)
	ctx := context.Background()
	a := New(st, Config{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	n := &store.Node{Driver: "fake-hardware", ProvisionState: provision.Deploying}
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
	n := &store.Node{Driver: "fake-hardware", ProvisionState: provision.Cleaning}
	if err := st.CreateNode(ctx, n); err != nil {
		t.Fatal(err)
	}
	if err := st.RecordTransition(ctx, n.UUID, store.Transition{To: provision.CleanWait,
		SetInternal: map[string]any{keyProvisionRun: provisionRun{Run: "r1", State: provision.CleanWait}}}); err != nil {
		t.Fatal(err)
	}
	if !a.movedByThisRun(ctx, n.UUID, "r1") {
		t.Error("the run that recorded clean wait does not see it as its own")
	}
	if a.movedByThisRun(ctx, n.UUID, "r2") || a.movedByThisRun(ctx, n.UUID, "") {
		t.Error("another run sees clean wait as its own")
	}
	// The API moves the node on (no mark): the state is no longer the run's.
	if err := st.RecordTransition(ctx, n.UUID, store.Transition{To: provision.CleanFailed}); err != nil {
		t.Fatal(err)
	}
	if a.movedByThisRun(ctx, n.UUID, "r1") {
		t.Error("a state another writer recorded is taken as the run's")
	}
}

// An agent boot records its call and wipes the previous agent's session (one
// write, repeatedIn); the same call run again after a worker crash finds its mark and
// keeps the session its agent may have looked up since.
func TestAgentBootCallWipesTheSessionAndARerunKeepsIt(t *testing.T) {
	st := storetest.New(t)
	ctx := context.Background()
	a := New(st, Config{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	n := &store.Node{Driver: "fake-hardware", ProvisionState: provision.Deploying,
		DriverInternalInfo: map[string]any{store.KeyAgentToken: "old", store.KeyAgentURL: "http://192.0.2.9:9999", "kept": true}}
	if err := st.CreateNode(ctx, n); err != nil {
		t.Fatal(err)
	}
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	// first: the call as it runs the first time; rerun: the same call after
	// a crash that came after its write (the node records its identity).
	env.RegisterActivityWithOptions(func(ctx context.Context, rerun bool) (bool, error) {
		cur, err := st.GetNode(ctx, n.UUID)
		if err != nil {
			return false, err
		}
		if rerun {
			if err := st.MergeDriverInternalInfo(ctx, n.UUID, map[string]any{keyAgentBootCall: callID(ctx), store.KeyAgentToken: "looked-up"}); err != nil {
				return false, err
			}
			if cur, err = st.GetNode(ctx, n.UUID); err != nil {
				return false, err
			}
		}
		return a.repeatedIn(ctx, cur, keyAgentBootCall, store.AgentSessionKeys())
	}, activity.RegisterOptions{Name: "Mark"})

	var again bool
	v, err := env.ExecuteActivity("Mark", false)
	if err != nil || v.Get(&again) != nil || again {
		t.Fatalf("first run: again %v, %v", again, err)
	}
	got, err := st.GetNode(ctx, n.UUID)
	if err != nil {
		t.Fatal(err)
	}
	dii := got.DriverInternalInfo
	if _, ok := dii[store.KeyAgentToken]; ok || dii[store.KeyAgentURL] != nil || dii["kept"] != true {
		t.Errorf("first run left %v; want the session wiped and the rest kept", dii)
	}
	if mark, _ := dii[keyAgentBootCall].(string); mark == "" {
		t.Errorf("first run wrote no mark: %v", dii)
	}

	v, err = env.ExecuteActivity("Mark", true)
	if err != nil || v.Get(&again) != nil || !again {
		t.Fatalf("rerun: again %v, %v", again, err)
	}
	if got, err = st.GetNode(ctx, n.UUID); err != nil || got.DriverInternalInfo[store.KeyAgentToken] != "looked-up" {
		t.Errorf("rerun: token %v (%v); want the session the agent looked up kept", got.DriverInternalInfo[store.KeyAgentToken], err)
	}
}
