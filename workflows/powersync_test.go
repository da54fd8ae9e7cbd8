package workflows

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"
)

// fakeSync stands in for the SyncPowerStates batch activity: it records every
// batch with the queue it ran on and answers from a script of results.
type fakeSync struct {
	mu      sync.Mutex
	batches []PowerSyncBatch
	queues  []string
	script  []func() (PowerSyncResult, error) // per tick; past the end: empty result
}

func (f *fakeSync) run(ctx context.Context, in PowerSyncBatch) (PowerSyncResult, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	tick := len(f.batches)
	f.batches = append(f.batches, in)
	f.queues = append(f.queues, activity.GetInfo(ctx).TaskQueue)
	if tick < len(f.script) && f.script[tick] != nil {
		return f.script[tick]()
	}
	return PowerSyncResult{}, nil
}

func newSyncEnv(f *fakeSync) (*testsuite.TestWorkflowEnvironment, *[]time.Duration) {
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.RegisterWorkflowWithOptions(SyncPowerStates, workflow.RegisterOptions{Name: WorkflowSyncPowerStates})
	env.RegisterActivityWithOptions(f.run, activity.RegisterOptions{Name: ActSyncPowerStates})
	timers := &[]time.Duration{}
	env.SetOnTimerScheduledListener(func(_ string, d time.Duration) { *timers = append(*timers, d) })
	return env, timers
}

// continuedWith returns the input the workflow continued as new with.
func continuedWith(t *testing.T, env *testsuite.TestWorkflowEnvironment) SyncPowerInput {
	t.Helper()
	if !env.IsWorkflowCompleted() {
		t.Fatal("workflow still running")
	}
	var can *workflow.ContinueAsNewError
	if err := env.GetWorkflowError(); !errors.As(err, &can) {
		t.Fatalf("workflow ended with %v, want continue-as-new", err)
	}
	if can.WorkflowType.Name != WorkflowSyncPowerStates {
		t.Fatalf("continued as %q, want %q", can.WorkflowType.Name, WorkflowSyncPowerStates)
	}
	var next SyncPowerInput
	if err := converter.GetDefaultDataConverter().FromPayloads(can.Input, &next); err != nil {
		t.Fatalf("decode continue-as-new input: %v", err)
	}
	return next
}

func TestSyncPowerStatesTicksOnTheTimerThenContinuesAsNew(t *testing.T) {
	f := &fakeSync{}
	env, timers := newSyncEnv(f)
	env.ExecuteWorkflow(SyncPowerStates, SyncPowerInput{ConductorGroup: "rack-1", Interval: 2 * time.Minute, IterationsPerRun: 4, Workers: 3})
	next := continuedWith(t, env)

	if len(f.batches) != 4 {
		t.Fatalf("ran %d batches, want 4 (one per tick)", len(f.batches))
	}
	if len(*timers) != 4 {
		t.Fatalf("scheduled %d timers, want 4", len(*timers))
	}
	for i, d := range *timers {
		if d != 2*time.Minute {
			t.Errorf("timer %d is %s, want the 2m interval", i, d)
		}
	}
	for i, b := range f.batches {
		if b.ConductorGroup != "rack-1" || b.Workers != 3 || b.MaxRetries != DefaultPowerSyncMaxRetries || b.NodeTimeout != DefaultPowerSyncNodeTimeout {
			t.Errorf("batch %d = %+v, want group rack-1, 3 workers and the default retries and node timeout", i, b)
		}
		if f.queues[i] != "ironflow.rack-1" {
			t.Errorf("batch %d ran on %q, want the group's hardware queue ironflow.rack-1", i, f.queues[i])
		}
	}
	// The next run keeps the settings, defaults filled in, and the
	// recovery clock.
	if next.ConductorGroup != "rack-1" || next.Interval != 2*time.Minute || next.IterationsPerRun != 4 || next.Workers != 3 ||
		next.MaxRetries != DefaultPowerSyncMaxRetries || next.RecoveryInterval != DefaultPowerRecoveryInterval {
		t.Errorf("continued with %+v", next)
	}
	if next.LastRecovery.IsZero() {
		t.Error("continued without the time of the last recovery check")
	}
}

func TestSyncPowerStatesDefaultGroupUsesDefaultQueue(t *testing.T) {
	f := &fakeSync{}
	env, timers := newSyncEnv(f)
	env.ExecuteWorkflow(SyncPowerStates, SyncPowerInput{IterationsPerRun: 1})
	continuedWith(t, env)
	if len(*timers) != 1 || (*timers)[0] != DefaultPowerSyncInterval {
		t.Fatalf("timers %v, want one of the default %s", *timers, DefaultPowerSyncInterval)
	}
	if len(f.queues) != 1 || f.queues[0] != "ironflow.default" {
		t.Fatalf("batches ran on %v, want ironflow.default", f.queues)
	}
	if got := PowerSyncWorkflowID(""); got != "power-sync-default" {
		t.Errorf("PowerSyncWorkflowID(\"\") = %q", got)
	}
}

func TestSyncPowerStatesRecoveryCadence(t *testing.T) {
	fail := func() (PowerSyncResult, error) {
		return PowerSyncResult{}, temporal.NewApplicationError("database restarting", "StoreError")
	}
	cases := []struct {
		name   string
		script []func() (PowerSyncResult, error)
		want   []bool
	}{
		// Ticks at 2, 4, 6, 8, 10, 12 min; recovery every 5 min, first at
		// once.
		{"every recovery interval", nil, []bool{true, false, false, true, false, false}},
		// A failed batch did not recover anything: the next tick tries again.
		{"failed batch retried", []func() (PowerSyncResult, error){fail}, []bool{true, true, false, false, true, false}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakeSync{script: tc.script}
			env, _ := newSyncEnv(f)
			env.ExecuteWorkflow(SyncPowerStates, SyncPowerInput{Interval: 2 * time.Minute, RecoveryInterval: 5 * time.Minute, IterationsPerRun: 6})
			continuedWith(t, env)
			var got []bool
			for _, b := range f.batches {
				got = append(got, b.Recover)
			}
			if len(got) != len(tc.want) {
				t.Fatalf("Recover per tick = %v, want %v", got, tc.want)
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Fatalf("Recover per tick = %v, want %v", got, tc.want)
				}
			}
		})
	}
}

func TestSyncPowerStatesSurvivesFailedBatchesAndReportsStatus(t *testing.T) {
	f := &fakeSync{script: []func() (PowerSyncResult, error){
		func() (PowerSyncResult, error) {
			return PowerSyncResult{Nodes: 3, Checked: 2, Failed: 1, Maintenance: []string{"n3"}}, nil
		},
		func() (PowerSyncResult, error) {
			return PowerSyncResult{}, temporal.NewApplicationError("list nodes: connection refused", "StoreError")
		},
	}}
	env, _ := newSyncEnv(f)
	var mid PowerSyncStatus
	// Between tick 2 (4 min) and tick 3 (6 min).
	env.RegisterDelayedCallback(func() {
		v, err := env.QueryWorkflow(QueryPowerSyncStatus)
		if err != nil {
			t.Errorf("query: %v", err)
			return
		}
		if err := v.Get(&mid); err != nil {
			t.Errorf("decode status: %v", err)
		}
	}, 5*time.Minute)
	env.ExecuteWorkflow(SyncPowerStates, SyncPowerInput{Interval: 2 * time.Minute, IterationsPerRun: 3})
	continuedWith(t, env)
	if len(f.batches) != 3 {
		t.Fatalf("ran %d batches, want 3: a failed batch must not end the sync", len(f.batches))
	}
	if mid.Ticks != 2 || mid.LastError == "" || len(mid.Last.Maintenance) != 1 || mid.Last.Maintenance[0] != "n3" {
		t.Errorf("status after a good and a failed tick = %+v, want 2 ticks, the failure and the last good result", mid)
	}
}
