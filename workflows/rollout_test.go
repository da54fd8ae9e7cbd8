package workflows

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"
)

// fakeFleet answers a rollout's activities: nodes in failing end failed,
// nodes in busy answer Busy the first busy[n] times, and every start is
// logged in order.
type fakeFleet struct {
	mu      sync.Mutex
	failing map[string]bool
	busy    map[string]int
	started []string
	// onStart runs after each start (signals sent at a node's start).
	onStart func(node string)
	// endOne: an await ends only the longest-running node; awaited logs
	// the running nodes of every await.
	endOne  bool
	awaited [][]string
}

func rolloutNodes(n int) []string {
	var out []string
	for i := range n {
		out = append(out, fmt.Sprintf("node-%02d", i))
	}
	return out
}

func newRolloutEnv(t *testing.T, f *fakeFleet) *testsuite.TestWorkflowEnvironment {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(Rollout, workflow.RegisterOptions{Name: WorkflowRollout})
	env.RegisterActivityWithOptions(func(ctx context.Context, in RolloutResolveInput) ([]string, error) {
		return in.Selector.Nodes, nil
	}, activity.RegisterOptions{Name: ActRolloutResolve})
	env.RegisterActivityWithOptions(func(ctx context.Context, in RolloutStartInput) (RolloutStartResult, error) {
		f.mu.Lock()
		if f.busy[in.Node] > 0 {
			f.busy[in.Node]--
			f.mu.Unlock()
			return RolloutStartResult{Busy: true, Error: "Node " + in.Node + " is locked by host x"}, nil
		}
		f.started = append(f.started, in.Node)
		cb := f.onStart
		f.mu.Unlock()
		if cb != nil {
			cb(in.Node)
		}
		return RolloutStartResult{Started: true, Expect: "active"}, nil
	}, activity.RegisterOptions{Name: ActRolloutStartNode})
	env.RegisterActivityWithOptions(func(ctx context.Context, in RolloutAwaitInput) ([]RolloutNodeEnd, error) {
		var out []RolloutNodeEnd
		f.mu.Lock()
		var names []string
		for _, n := range in.Nodes {
			names = append(names, n.UUID)
		}
		f.awaited = append(f.awaited, names)
		nodes := in.Nodes
		if f.endOne && len(nodes) > 1 {
			nodes = nodes[:1]
		}
		f.mu.Unlock()
		for _, n := range nodes {
			if f.failing[n.UUID] {
				out = append(out, RolloutNodeEnd{UUID: n.UUID, ProvisionState: "deploy failed", LastError: "boom on " + n.UUID})
			} else {
				out = append(out, RolloutNodeEnd{UUID: n.UUID, OK: true, ProvisionState: "active"})
			}
		}
		return out, nil
	}, activity.RegisterOptions{Name: ActRolloutAwait})
	return env
}

func rolloutSpec(nodes []string) RolloutSpec {
	return RolloutSpec{UUID: "r1", Operation: map[string]any{"target": "deploy"},
		Selector: RolloutSelector{Nodes: nodes}, WaveSize: 5, MaxFailures: -1, OnBusy: RolloutOnBusySkip}
}

func rolloutResult(t *testing.T, env *testsuite.TestWorkflowEnvironment) RolloutStatus {
	t.Helper()
	if !env.IsWorkflowCompleted() {
		t.Fatal("rollout did not complete")
	}
	if err := env.GetWorkflowError(); err != nil {
		t.Fatalf("rollout failed: %v", err)
	}
	var st RolloutStatus
	if err := env.GetWorkflowResult(&st); err != nil {
		t.Fatal(err)
	}
	return st
}

func nodesIn(st RolloutStatus, state string) []string {
	var out []string
	for _, n := range st.Nodes {
		if n.State == state {
			out = append(out, n.UUID)
		}
	}
	return out
}

func TestPlanWavesCanaryThenFixedSize(t *testing.T) {
	got := PlanWaves(12, 1, 5)
	want := [][]int{{0}, {1, 2, 3, 4, 5}, {6, 7, 8, 9, 10}, {11}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("PlanWaves(12, 1, 5) = %v, want %v", got, want)
	}
	if got := PlanWaves(3, 5, 2); fmt.Sprint(got) != fmt.Sprint([][]int{{0, 1, 2}}) {
		t.Fatalf("a canary larger than the fleet: %v", got)
	}
}

// TestRolloutStopsInTheWaveOfTheSixthFailure: 20 nodes in waves of 5, a
// budget of 5 failures; the sixth failure is in the third wave (index 2):
// the rollout stops there, the fourth wave never starts, and the node
// lists are exact.
func TestRolloutStopsInTheWaveOfTheSixthFailure(t *testing.T) {
	nodes := rolloutNodes(20)
	f := &fakeFleet{failing: map[string]bool{}}
	for _, i := range []int{1, 3, 6, 8, 9, 12} {
		f.failing[nodes[i]] = true
	}
	env := newRolloutEnv(t, f)
	spec := rolloutSpec(nodes)
	spec.MaxFailures = 5
	env.ExecuteWorkflow(Rollout, RolloutInput{Spec: spec})
	st := rolloutResult(t, env)
	if st.State != RolloutBudgetSpent || st.Wave != 2 {
		t.Fatalf("state %s in wave %d (%s), want failed in wave 2", st.State, st.Wave, st.Reason)
	}
	// A wave's starts go out together: within a wave in any order, the
	// waves one after the other.
	if len(f.started) != 15 {
		t.Fatalf("started %v, want the first three waves %v", f.started, nodes[:15])
	}
	for w := range 3 {
		got := slices.Clone(f.started[w*5 : (w+1)*5])
		slices.Sort(got)
		if want := nodes[w*5 : (w+1)*5]; !slices.Equal(got, want) {
			t.Errorf("wave %d started %v, want %v", w, got, want)
		}
	}
	wantFailed := []string{nodes[1], nodes[3], nodes[6], nodes[8], nodes[9], nodes[12]}
	if got := nodesIn(st, RolloutNodeFailed); !slices.Equal(got, wantFailed) {
		t.Errorf("failed %v, want %v", got, wantFailed)
	}
	if got := nodesIn(st, RolloutNodePending); !slices.Equal(got, nodes[15:]) {
		t.Errorf("pending %v, want the last wave %v", got, nodes[15:])
	}
	if st.Succeeded != 9 || st.Failed != 6 {
		t.Errorf("succeeded %d failed %d, want 9 and 6", st.Succeeded, st.Failed)
	}
	if st.Nodes[1].LastError != "boom on "+nodes[1] {
		t.Errorf("a failed node's last_error %q", st.Nodes[1].LastError)
	}
}

// TestRolloutPercentBudget: more than 20% of 10 nodes failed (3) stops it.
func TestRolloutPercentBudget(t *testing.T) {
	nodes := rolloutNodes(10)
	f := &fakeFleet{failing: map[string]bool{nodes[0]: true, nodes[1]: true, nodes[5]: true}}
	env := newRolloutEnv(t, f)
	spec := rolloutSpec(nodes)
	spec.WaveSize, spec.MaxFailurePercent = 3, 20
	env.ExecuteWorkflow(Rollout, RolloutInput{Spec: spec})
	st := rolloutResult(t, env)
	if st.State != RolloutBudgetSpent || st.Wave != 1 || len(f.started) != 6 {
		t.Fatalf("state %s wave %d started %d, want failed in wave 1 after 6 starts", st.State, st.Wave, len(f.started))
	}
}

// TestRolloutApprovalAfterTheCanary: a canary of one, then an approval
// before the next wave: nothing more starts until approve.
func TestRolloutApprovalAfterTheCanary(t *testing.T) {
	nodes := rolloutNodes(3)
	f := &fakeFleet{}
	env := newRolloutEnv(t, f)
	spec := rolloutSpec(nodes)
	spec.Canary, spec.WaveSize, spec.Approval = 1, 2, true
	var startedAtApproval []string
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(QueryRolloutStatus)
		if err != nil {
			t.Error(err)
			return
		}
		var view RolloutView
		_ = v.Get(&view)
		if view.State != RolloutAwaitingApprove {
			t.Errorf("state before approval %q, want %q", view.State, RolloutAwaitingApprove)
		}
		f.mu.Lock()
		startedAtApproval = slices.Clone(f.started)
		f.mu.Unlock()
		env.SignalWorkflow(SignalRolloutApprove, nil)
	}, time.Hour)
	env.ExecuteWorkflow(Rollout, RolloutInput{Spec: spec})
	st := rolloutResult(t, env)
	if st.State != RolloutSucceeded || st.Succeeded != 3 {
		t.Fatalf("state %s succeeded %d", st.State, st.Succeeded)
	}
	if !slices.Equal(startedAtApproval, nodes[:1]) {
		t.Errorf("started before the approval %v, want the canary only", startedAtApproval)
	}
}

// TestRolloutPauseResumeAndAbort: paused at the first node's start, the
// rollout starts nothing more until resume; an abort during the soak
// before the third wave ends it with that wave pending.
func TestRolloutPauseResumeAndAbort(t *testing.T) {
	nodes := rolloutNodes(6)
	f := &fakeFleet{}
	env := newRolloutEnv(t, f)
	spec := rolloutSpec(nodes)
	spec.WaveSize, spec.Parallelism, spec.SoakSeconds = 2, 1, 600
	f.onStart = func(node string) {
		if node == nodes[0] {
			env.SignalWorkflow(SignalRolloutPause, nil)
		}
	}
	var pausedStarts int
	env.RegisterDelayedCallback(func() {
		f.mu.Lock()
		pausedStarts = len(f.started)
		f.mu.Unlock()
		env.SignalWorkflow(SignalRolloutResume, nil)
	}, time.Minute)
	// Waves 0 and 1 end after the resume and one soak (10 min); the abort
	// comes in the second soak.
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(SignalRolloutAbort, nil) }, 15*time.Minute)
	env.ExecuteWorkflow(Rollout, RolloutInput{Spec: spec})
	st := rolloutResult(t, env)
	if pausedStarts != 1 {
		t.Errorf("%d nodes started while paused, want 1 (the one that was starting)", pausedStarts)
	}
	if st.State != RolloutAborted {
		t.Fatalf("state %s (%s), want aborted", st.State, st.Reason)
	}
	if got := slices.Sorted(slices.Values(f.started)); !slices.Equal(got, nodes[:4]) || !slices.Equal(nodesIn(st, RolloutNodePending), nodes[4:]) {
		t.Errorf("started %v, pending %v: want the first two waves started and the third pending", f.started, nodesIn(st, RolloutNodePending))
	}
}

// TestRolloutBusyNodesSkippedOrWaitedFor: a node another operation holds
// is skipped (listed with the refusal) or, with on_busy "wait", started
// once it is free.
func TestRolloutBusyNodesSkippedOrWaitedFor(t *testing.T) {
	for _, policy := range []string{RolloutOnBusySkip, RolloutOnBusyWait} {
		t.Run(policy, func(t *testing.T) {
			nodes := rolloutNodes(4)
			f := &fakeFleet{busy: map[string]int{nodes[1]: 3}}
			env := newRolloutEnv(t, f)
			spec := rolloutSpec(nodes)
			spec.WaveSize, spec.Parallelism, spec.OnBusy = 4, 1, policy
			env.ExecuteWorkflow(Rollout, RolloutInput{Spec: spec})
			st := rolloutResult(t, env)
			switch policy {
			case RolloutOnBusySkip:
				if st.Skipped != 1 || st.Nodes[1].State != RolloutNodeSkipped || st.Nodes[1].LastError == "" || slices.Contains(f.started, nodes[1]) {
					t.Errorf("skip: %+v, started %v", st.Nodes[1], f.started)
				}
			case RolloutOnBusyWait:
				if st.Skipped != 0 || st.Succeeded != 4 || !slices.Contains(f.started, nodes[1]) {
					t.Errorf("wait: skipped %d succeeded %d started %v", st.Skipped, st.Succeeded, f.started)
				}
			}
		})
	}
}

// TestRolloutContinuesAsNewWithItsStatus: after ContinueAsNewAfter starts
// the run continues as new, carrying the resolved nodes and outcomes; the
// next run starts only the nodes not yet started.
func TestRolloutContinuesAsNewWithItsStatus(t *testing.T) {
	nodes := rolloutNodes(7)
	f := &fakeFleet{failing: map[string]bool{nodes[2]: true}}
	env := newRolloutEnv(t, f)
	spec := rolloutSpec(nodes)
	spec.WaveSize, spec.ContinueAsNewAfter = 3, 4
	env.ExecuteWorkflow(Rollout, RolloutInput{Spec: spec})
	if !env.IsWorkflowCompleted() {
		t.Fatal("not completed")
	}
	var can *workflow.ContinueAsNewError
	if err := env.GetWorkflowError(); !errors.As(err, &can) {
		t.Fatalf("error %v, want continue-as-new", err)
	}
	// A wave's starts go out together, in any order.
	if got := slices.Sorted(slices.Values(f.started)); !slices.Equal(got, nodes[:4]) {
		t.Fatalf("first run started %v, want %v", f.started, nodes[:4])
	}
	var next RolloutInput
	if err := converterDecode(can, &next); err != nil {
		t.Fatal(err)
	}
	if next.Status == nil || next.Status.Failed != 1 || next.Status.Succeeded != 3 || next.Status.Runs != 1 {
		t.Fatalf("carried status %+v", next.Status)
	}
	env2 := newRolloutEnv(t, f)
	env2.ExecuteWorkflow(Rollout, next)
	st := rolloutResult(t, env2)
	if st.State != RolloutSucceeded || st.Succeeded != 6 || st.Failed != 1 || st.Runs != 2 {
		t.Fatalf("second run: %s succeeded %d failed %d runs %d", st.State, st.Succeeded, st.Failed, st.Runs)
	}
	if got := slices.Sorted(slices.Values(f.started)); !slices.Equal(got, nodes) {
		t.Errorf("started %v: each node once", f.started)
	}
}

// converterDecode reads a continue-as-new's argument.
func converterDecode(can *workflow.ContinueAsNewError, v any) error {
	return converter.GetDefaultDataConverter().FromPayloads(can.Input, v)
}

// TestRollingWavesStartAsSlotsFree: with rolling waves, the canary wave
// ends alone, then the next wave's nodes start as the current one's end,
// never more than a wave's size at once; without, a wave's nodes never
// run beside another wave's.
func TestRollingWavesStartAsSlotsFree(t *testing.T) {
	for _, rolling := range []bool{true, false} {
		t.Run(fmt.Sprintf("rolling=%t", rolling), func(t *testing.T) {
			f := &fakeFleet{endOne: true}
			env := newRolloutEnv(t, f)
			spec := rolloutSpec(rolloutNodes(12))
			spec.Canary, spec.Rolling = 1, rolling
			env.ExecuteWorkflow(Rollout, RolloutInput{Spec: spec})
			st := rolloutResult(t, env)
			if st.State != RolloutSucceeded || st.Succeeded != 12 {
				t.Fatalf("rollout %s, %d succeeded; want succeeded, 12", st.State, st.Succeeded)
			}
			waveOf := map[string]int{}
			for _, n := range st.Nodes {
				waveOf[n.UUID] = n.Wave
			}
			if len(f.awaited) == 0 || fmt.Sprint(f.awaited[0]) != "[node-00]" {
				t.Fatalf("first await %v, want the canary alone", f.awaited[:1])
			}
			mixed := false
			for _, running := range f.awaited {
				if len(running) > 5 {
					t.Fatalf("%d nodes running at once (%v), more than a wave of 5", len(running), running)
				}
				waves := map[int]bool{}
				for _, n := range running {
					waves[waveOf[n]] = true
				}
				if waves[0] && len(running) > 1 {
					t.Fatalf("the canary ran beside other nodes: %v", running)
				}
				mixed = mixed || len(waves) > 1
			}
			if mixed != rolling {
				t.Fatalf("nodes of two waves ran together: %v, want %v (awaits: %v)", mixed, rolling, f.awaited)
			}
		})
	}
}

// TestRolloutStopsAtAWavesOwnBudget: a per-wave budget of one failure
// lets a wave with one failure pass and stops the rollout in the first
// wave with two, though the overall budget is unlimited; the waves after
// it never start.
func TestRolloutStopsAtAWavesOwnBudget(t *testing.T) {
	f := &fakeFleet{failing: map[string]bool{"node-02": true, "node-07": true, "node-08": true}}
	env := newRolloutEnv(t, f)
	spec := rolloutSpec(rolloutNodes(20))
	spec.WaveMaxFailures = 1
	env.ExecuteWorkflow(Rollout, RolloutInput{Spec: spec})
	st := rolloutResult(t, env)
	if st.State != RolloutBudgetSpent || !strings.Contains(st.Reason, "the failure budget of wave 1 is spent: 2 of its 5 nodes failed") {
		t.Fatalf("rollout %s (%s), want stopped in wave 1 by its own budget", st.State, st.Reason)
	}
	if started := slices.Sorted(slices.Values(f.started)); fmt.Sprint(started) != fmt.Sprint(rolloutNodes(10)) {
		t.Fatalf("started %v, want waves 0 and 1 only", started)
	}
	if got := nodesIn(st, RolloutNodePending); len(got) != 10 {
		t.Fatalf("pending %v, want the 10 nodes of waves 2 and 3", got)
	}
	// The same with a percent: 1 of 5 is 20 %, 2 of 5 is 40 %.
	f2 := &fakeFleet{failing: f.failing}
	env = newRolloutEnv(t, f2)
	spec.WaveMaxFailures, spec.WaveMaxFailurePercent = 0, 30
	env.ExecuteWorkflow(Rollout, RolloutInput{Spec: spec})
	if st := rolloutResult(t, env); st.State != RolloutBudgetSpent || len(f2.started) != 10 {
		t.Fatalf("percent budget: %s after %d starts, want stopped after wave 1", st.State, len(f2.started))
	}
}
