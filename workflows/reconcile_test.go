package workflows

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/ironflow/ironflow/provision"
)

var (
	recNow   = time.Date(2026, 12, 7, 3, 0, 0, 0, time.UTC)
	recGrace = 2 * time.Minute
)

func closedRun(state provision.State, started, closed time.Time) *RunFacts {
	return &RunFacts{WorkflowType: WorkflowDeployNode, RunID: "run-1", State: state, Status: "Completed", Started: started, Closed: closed}
}

func accepted(verb provision.Verb, from, next, target provision.State) *provision.Accepted {
	return &provision.Accepted{Verb: verb, From: from, Next: next, Target: target}
}

// The reconciler's judgement, case by case: each row is one mismatch (or
// one that must be left alone) and the repair it gets.
func TestDecideRepairs(t *testing.T) {
	old := recNow.Add(-time.Hour)
	young := recNow.Add(-30 * time.Second)
	cases := []struct {
		name string
		node NodeFacts
		// want is the repair's kind and state ("" kind: no repair).
		want     RepairKind
		wantTo   provision.State
		wantText string
	}{
		{name: "API died between the write and the start of a provide: started again",
			node: NodeFacts{State: provision.Cleaning, Target: provision.Available, StateSince: old,
				Accepted: accepted(provision.VerbProvide, provision.Manageable, provision.Cleaning, provision.Available), AcceptedAt: old},
			want: RepairRestart, wantTo: provision.Cleaning, wantText: "started again"},
		{name: "API died before an undeploy's start, an earlier deploy's run closed before: started again",
			node: NodeFacts{State: provision.Deleting, Target: provision.Available, StateSince: old,
				Accepted: accepted(provision.VerbDeleted, provision.Active, provision.Deleting, provision.Available), AcceptedAt: old,
				Last: closedRun(provision.Active, old.Add(-time.Hour), old.Add(-time.Minute))},
			want: RepairRestart, wantTo: provision.Deleting},
		{name: "API died before a deploy's start: the config drive is not kept, so it fails",
			node: NodeFacts{State: provision.Deploying, Target: provision.Active, StateSince: old,
				Accepted: accepted(provision.VerbActive, provision.Available, provision.Deploying, provision.Active), AcceptedAt: old},
			want: RepairFail, wantTo: provision.DeployFailed, wantText: "config drive"},
		{name: "API died before a manual clean's start: fails with clean failed",
			node: NodeFacts{State: provision.Cleaning, Target: provision.Manageable, StateSince: old,
				Accepted: accepted(provision.VerbClean, provision.Manageable, provision.Cleaning, provision.Manageable), AcceptedAt: old},
			want: RepairFail, wantTo: provision.CleanFailed, wantText: "clean steps"},
		{name: "a young transient state is left alone (the API may be starting its workflow)",
			node: NodeFacts{State: provision.Cleaning, StateSince: young,
				Accepted: accepted(provision.VerbProvide, provision.Manageable, provision.Cleaning, provision.Available), AcceptedAt: young}},
		{name: "a running workflow holds the node",
			node: NodeFacts{State: provision.DeployWait, StateSince: old, Last: &RunFacts{Running: true, Started: old}}},
		{name: "the workflow ended while the node waited for its agent: deploy failed",
			node: NodeFacts{State: provision.DeployWait, StateSince: old, Last: closedRun(provision.DeployWait, old.Add(-time.Minute), old.Add(time.Minute))},
			want: RepairFail, wantTo: provision.DeployFailed, wantText: "ended"},
		{name: "a run started after the API's acceptance and ended: no restart, it fails",
			node: NodeFacts{State: provision.Cleaning, StateSince: old,
				Accepted: accepted(provision.VerbProvide, provision.Manageable, provision.Cleaning, provision.Available), AcceptedAt: old,
				Last: closedRun(provision.Cleaning, old.Add(time.Second), old.Add(time.Minute))},
			want: RepairFail, wantTo: provision.CleanFailed},
		{name: "deleting with no workflow known: error, as Ironic",
			node: NodeFacts{State: provision.Deleting, StateSince: old},
			want: RepairFail, wantTo: provision.Error, wantText: "no workflow"},
		{name: "verifying with no workflow: back to enroll, as Ironic",
			node: NodeFacts{State: provision.Verifying, StateSince: old},
			want: RepairFail, wantTo: provision.Enroll},
		{name: "restored database: the row says available, the deploy finished active after it",
			node: NodeFacts{State: provision.Available, StateSince: old, Last: closedRun(provision.Active, old.Add(time.Minute), old.Add(10*time.Minute))},
			want: RepairCorrect, wantTo: provision.Active, wantText: "corrected"},
		{name: "restored database: the row says deploying, the deploy finished active after it",
			node: NodeFacts{State: provision.Deploying, StateSince: old, Last: closedRun(provision.Active, old.Add(-time.Minute), old.Add(10*time.Minute))},
			want: RepairCorrect, wantTo: provision.Active},
		{name: "restored database: the undeploy's failure is written back with a last_error",
			node: NodeFacts{State: provision.Active, StateSince: old, Last: closedRun(provision.CleanFailed, old.Add(time.Minute), old.Add(10*time.Minute))},
			want: RepairCorrect, wantTo: provision.CleanFailed, wantText: "lost"},
		{name: "a verb accepted from a settled state while its previous workflow closed, its start not yet made, is not undone",
			node: NodeFacts{State: provision.Deploying, StateSince: young,
				Accepted: accepted(provision.VerbActive, provision.Available, provision.Deploying, provision.Active), AcceptedAt: young,
				Last: closedRun(provision.Available, old, young.Add(time.Second))}},
		{name: "the same verb's start lost for good: step 2 fails it, the earlier state is not written back",
			node: NodeFacts{State: provision.Deploying, StateSince: old,
				Accepted: accepted(provision.VerbActive, provision.Available, provision.Deploying, provision.Active), AcceptedAt: old,
				Last: closedRun(provision.Available, old.Add(-time.Hour), old.Add(time.Second))},
			want: RepairFail, wantTo: provision.DeployFailed, wantText: "never started"},
		{name: "restored database, the workflow closed a moment ago: wait for the grace",
			node: NodeFacts{State: provision.Available, StateSince: old, Last: closedRun(provision.Active, old, young)}},
		{name: "a verb accepted after the workflow closed is not undone",
			node: NodeFacts{State: provision.Manageable, StateSince: old, Last: closedRun(provision.Available, old.Add(-time.Hour), old.Add(-time.Minute))}},
		{name: "a power change's run (no provision state) proves nothing",
			node: NodeFacts{State: provision.Available, StateSince: old, Last: closedRun("", old.Add(time.Minute), old.Add(2*time.Minute))}},
		{name: "a settled node that agrees with its workflow",
			node: NodeFacts{State: provision.Active, StateSince: old, Last: closedRun(provision.Active, old.Add(-time.Minute), old.Add(time.Minute))}},
		{name: "a failed state is a resting state, left alone",
			node: NodeFacts{State: provision.DeployFailed, StateSince: old}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.node.NodeUUID = "1be26c0b-03f2-4d2e-ae87-c02d7f33c123"
			got := DecideRepairs(recNow, recGrace, "rack-1", ReconcileFacts{Candidates: []NodeFacts{c.node}})
			if c.want == "" {
				if len(got) != 0 {
					t.Fatalf("repairs %+v, want none", got)
				}
				return
			}
			if len(got) != 1 {
				t.Fatalf("repairs %+v, want one %s", got, c.want)
			}
			r := got[0]
			if r.Kind != c.want || r.To != c.wantTo || r.From != c.node.State || r.NodeUUID != c.node.NodeUUID {
				t.Fatalf("repair %s %s -> %s, want %s %s -> %s", r.Kind, r.From, r.To, c.want, c.node.State, c.wantTo)
			}
			if !strings.Contains(r.Event+" "+r.LastError, c.wantText) {
				t.Errorf("event %q, last_error %q: neither says %q", r.Event, r.LastError, c.wantText)
			}
			switch r.Kind {
			case RepairFail:
				if r.LastError == "" || r.LastError != r.Event {
					t.Errorf("a failed node's last_error %q must say why (event %q)", r.LastError, r.Event)
				}
			case RepairCorrect:
				if (r.LastError != "") != r.To.Failed() {
					t.Errorf("corrected to %q with last_error %q: a failure state needs one, a settled state none", r.To, r.LastError)
				}
			case RepairRestart:
				a := c.node.Accepted
				if r.Request == nil || r.Request.Verb != a.Verb || r.Request.FromState != a.From ||
					r.Request.Transition.Next != c.node.State || r.Request.ConductorGroup != "rack-1" {
					t.Errorf("restart request %+v does not repeat the accepted verb %+v", r.Request, a)
				}
			}
		})
	}
}

func TestDecideRepairsEndsOrphansAfterTheGrace(t *testing.T) {
	facts := ReconcileFacts{Orphans: []OrphanRun{
		{NodeUUID: "gone-1", RunID: "r1", WorkflowType: WorkflowDeployNode, Started: recNow.Add(-time.Hour)},
		{NodeUUID: "gone-2", RunID: "r2", WorkflowType: WorkflowDeployNode, Started: recNow.Add(-time.Second)},
	}}
	got := DecideRepairs(recNow, recGrace, "", facts)
	if len(got) != 1 || got[0].Kind != RepairEndOrphan || got[0].NodeUUID != "gone-1" || got[0].RunID != "r1" {
		t.Fatalf("repairs %+v, want gone-1's run r1 ended and the young gone-2 left", got)
	}
	if !strings.Contains(got[0].Event, "no longer exists") {
		t.Errorf("reason %q does not say the node is gone", got[0].Event)
	}
}

// fakeReconcile stands in for the two activities: a script of facts per
// pass, and every repair batch it was handed.
type fakeReconcile struct {
	mu      sync.Mutex
	scans   []ReconcileScan
	queues  []string
	facts   []func() (ReconcileFacts, error)
	batches []RepairBatch
}

func (f *fakeReconcile) read(ctx context.Context, in ReconcileScan) (ReconcileFacts, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	pass := len(f.scans)
	f.scans = append(f.scans, in)
	f.queues = append(f.queues, activity.GetInfo(ctx).TaskQueue)
	if pass < len(f.facts) && f.facts[pass] != nil {
		return f.facts[pass]()
	}
	return ReconcileFacts{At: recNow}, nil
}

func (f *fakeReconcile) repair(_ context.Context, in RepairBatch) ([]RepairOutcome, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.batches = append(f.batches, in)
	var out []RepairOutcome
	for _, r := range in.Repairs {
		out = append(out, RepairOutcome{Kind: r.Kind, NodeUUID: r.NodeUUID, From: r.From, To: r.To, Applied: true})
	}
	return out, nil
}

func newReconcileEnv(f *fakeReconcile) (*testsuite.TestWorkflowEnvironment, *[]time.Duration) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(Reconcile, workflow.RegisterOptions{Name: WorkflowReconcile})
	env.RegisterActivityWithOptions(f.read, activity.RegisterOptions{Name: ActReconcileFacts})
	env.RegisterActivityWithOptions(f.repair, activity.RegisterOptions{Name: ActReconcileRepair})
	timers := &[]time.Duration{}
	env.SetOnTimerScheduledListener(func(_ string, d time.Duration) { *timers = append(*timers, d) })
	return env, timers
}

// One run: a pass at start-up (no timer before it), then one per interval,
// each repair decided from the pass's facts and handed to the repair
// activity on the group's queue; a failed pass does not end it; after
// IterationsPerRun passes it continues as new, the next run waiting for its
// timer first.
func TestReconcilePassesAtStartThenOnTheTimerAndRepairs(t *testing.T) {
	stuck := NodeFacts{NodeUUID: "n-1", State: provision.Inspecting, StateSince: recNow.Add(-time.Hour),
		Accepted: accepted(provision.VerbInspect, provision.Manageable, provision.Inspecting, provision.Manageable), AcceptedAt: recNow.Add(-time.Hour)}
	f := &fakeReconcile{facts: []func() (ReconcileFacts, error){
		func() (ReconcileFacts, error) {
			return ReconcileFacts{At: recNow, Nodes: 3, Candidates: []NodeFacts{stuck}}, nil
		},
		func() (ReconcileFacts, error) {
			return ReconcileFacts{}, temporal.NewNonRetryableApplicationError("the store is down on purpose", "StoreDown", nil)
		},
	}}
	env, timers := newReconcileEnv(f)
	var status ReconcileStatus
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(QueryReconcileStatus)
		if err != nil {
			t.Errorf("query: %v", err)
			return
		}
		if err := v.Get(&status); err != nil {
			t.Errorf("decode status: %v", err)
		}
	}, 90*time.Second)
	env.ExecuteWorkflow(Reconcile, ReconcileInput{ConductorGroup: "rack-1", Interval: time.Minute, IterationsPerRun: 3})

	var can *workflow.ContinueAsNewError
	if err := env.GetWorkflowError(); !errors.As(err, &can) {
		t.Fatalf("workflow ended with %v, want continue-as-new", err)
	}
	var next ReconcileInput
	if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &next); err != nil {
		t.Fatal(err)
	}
	if !next.Continued || next.ConductorGroup != "rack-1" {
		t.Errorf("continued with %+v, want the group and Continued", next)
	}
	if len(f.scans) != 3 || len(*timers) != 2 {
		t.Fatalf("%d passes and %d timers, want 3 passes (the first at once) and 2 timers", len(f.scans), len(*timers))
	}
	for i, q := range f.queues {
		if q != HardwareQueue("rack-1") {
			t.Errorf("pass %d read on queue %q, want the group's", i, q)
		}
	}
	if len(f.batches) != 1 || len(f.batches[0].Repairs) != 1 {
		t.Fatalf("repair batches %+v, want one with the stuck node's repair", f.batches)
	}
	if r := f.batches[0].Repairs[0]; r.Kind != RepairRestart || r.NodeUUID != "n-1" || r.Request.Transition.Operation != provision.OpInspect {
		t.Errorf("repair %+v, want inspect started again", r)
	}
	if status.Passes != 2 || len(status.Changes) != 1 || status.Changes[0].NodeUUID != "n-1" || status.LastError == "" {
		t.Errorf("status after the failed second pass: %+v, want 2 passes, n-1's change listed and the error", status)
	}

	// The next run waits for its interval before it passes.
	f2 := &fakeReconcile{}
	env2, timers2 := newReconcileEnv(f2)
	env2.ExecuteWorkflow(Reconcile, ReconcileInput{Interval: time.Minute, IterationsPerRun: 1, Continued: true})
	if len(*timers2) != 1 || len(f2.scans) != 1 {
		t.Errorf("a continued run: %d timers, %d passes; want its timer before its one pass", len(*timers2), len(f2.scans))
	}
}

// A worker's start-up signal ends the wait: the pass runs at once, not at
// the end of the interval.
func TestReconcileSignalStartsAPassAtOnce(t *testing.T) {
	f := &fakeReconcile{}
	env, _ := newReconcileEnv(f)
	var passesBeforeSignal int
	env.RegisterDelayedCallback(func() {
		f.mu.Lock()
		passesBeforeSignal = len(f.scans)
		f.mu.Unlock()
		env.SignalWorkflow(SignalReconcileNow, nil)
	}, 10*time.Minute)
	start := env.Now()
	env.ExecuteWorkflow(Reconcile, ReconcileInput{Interval: time.Hour, IterationsPerRun: 2, Continued: true})
	if !env.IsWorkflowCompleted() {
		t.Fatal("workflow still running")
	}
	if passesBeforeSignal != 0 || len(f.scans) != 2 {
		t.Fatalf("passes: %d before the signal, %d in all; want 0 and 2", passesBeforeSignal, len(f.scans))
	}
	// Workflow time: the first pass came with the signal at 10 minutes,
	// the second an interval later, not two intervals.
	if got := env.Now().Sub(start); got != 70*time.Minute {
		t.Errorf("the run took %v of workflow time, want 1h10m", got)
	}
}
