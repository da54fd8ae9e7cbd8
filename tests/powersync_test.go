package tests

import (
	"context"
	"io"
	"log/slog"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/ironflow/ironflow/activities"
	"github.com/ironflow/ironflow/bmc"
	"github.com/ironflow/ironflow/store"
	"github.com/ironflow/ironflow/worker"
	"github.com/ironflow/ironflow/workflows"
)

// Queues of the power-sync tests' own in-process worker, so that the
// stack's worker (which may not register the sync yet) never sees their
// tasks.
const (
	powerSyncTestQueue = "powersync-test"
	powerSyncTestGroup = "powersync-it"
	// idleQueue has no worker: a workflow started on it stays running, the
	// way a deploy waiting for its agent holds its node.
	idleQueue = "powersync-test-idle"
)

// holdNode starts a node-<uuid> workflow that runs until the test ends.
func holdNode(t *testing.T, c client.Client, nodeUUID string) {
	t.Helper()
	run, err := c.ExecuteWorkflow(context.Background(), client.StartWorkflowOptions{
		ID: workflows.WorkflowID(nodeUUID), TaskQueue: idleQueue,
	}, "PowerSyncTestHold")
	if err != nil {
		t.Fatalf("start holding workflow: %v", err)
	}
	t.Cleanup(func() { _ = c.TerminateWorkflow(context.Background(), run.GetID(), run.GetRunID(), "test over") })
}

// TestPowerSyncNodeLockFromTemporalVisibility checks the node-lock check on
// the real Temporal dev server: its visibility store answers the one query,
// a running node-<uuid> workflow holds the node, a finished one does not.
func TestPowerSyncNodeLockFromTemporalVisibility(t *testing.T) {
	c := temporalClient(t)
	ctx := context.Background()
	if _, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
		Query: "WorkflowId STARTS_WITH 'node-' AND ExecutionStatus = 'Running'",
	}); err != nil {
		t.Fatalf("the dev server refuses the node-lock visibility query (the sync would fall back to one describe per node): %v", err)
	}
	held, free := "5d1f1a7e-0000-4000-8000-00000000a001", "5d1f1a7e-0000-4000-8000-00000000a002"
	holdNode(t, c, held)
	check := activities.TemporalHeld(c)
	waitFor(t, "the holding workflow to show in visibility", 30*time.Second, func() bool {
		got, err := check(ctx, []string{held, free})
		if err != nil {
			t.Fatalf("TemporalHeld: %v", err)
		}
		if got[free] {
			t.Fatalf("node %s reported held with no workflow", free)
		}
		return got[held]
	})
	if err := c.TerminateWorkflow(ctx, workflows.WorkflowID(held), "", "released"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the released node to show free", 30*time.Second, func() bool {
		got, err := check(ctx, []string{held})
		if err != nil {
			t.Fatalf("TemporalHeld: %v", err)
		}
		return !got[held]
	})
}

// TestPowerSyncOnTemporalAndPostgres runs the power-sync workflow on the
// real Temporal server and PostgreSQL with an in-process worker: the power
// state is stored, a node held by a workflow is left alone, a dead BMC puts
// its node in maintenance after 3 ticks (across continue-as-new) and its
// recovery clears it; starting the sync twice keeps one.
func TestPowerSyncOnTemporalAndPostgres(t *testing.T) {
	ctx := context.Background()
	c := temporalClient(t)
	st, err := store.Open(ctx, lab.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(st.Close)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	ps := activities.NewPowerSync(activities.New(st, activities.Config{Conductor: "powersync-test"}, log), c)

	wf := sdkworker.New(c, powerSyncTestQueue, sdkworker.Options{})
	wf.RegisterWorkflowWithOptions(workflows.SyncPowerStates, workflow.RegisterOptions{Name: workflows.WorkflowSyncPowerStates})
	hw := sdkworker.New(c, workflows.HardwareQueue(powerSyncTestGroup), sdkworker.Options{})
	hw.RegisterActivityWithOptions(ps.SyncPowerStates, activity.RegisterOptions{Name: workflows.ActSyncPowerStates})
	for _, w := range []sdkworker.Worker{wf, hw} {
		if err := w.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(w.Stop)
	}

	newNode := func() *store.Node {
		n := &store.Node{Driver: "fake-hardware", ProvisionState: "available", ConductorGroup: powerSyncTestGroup, PowerState: psPtr("power off")}
		if err := st.CreateNode(ctx, n); err != nil {
			t.Fatal(err)
		}
		d, err := bmc.New("fake-hardware", map[string]any{"fake_id": n.UUID})
		if err != nil {
			t.Fatal(err)
		}
		if err := d.SetPower(ctx, bmc.ActionPowerOn); err != nil {
			t.Fatal(err)
		}
		return n
	}
	get := func(uuid string) *store.Node {
		n, err := st.GetNode(ctx, uuid)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	synced, held := newNode(), newNode()
	holdNode(t, c, held.UUID)
	waitFor(t, "the held node's workflow in visibility", 30*time.Second, func() bool {
		got, err := activities.TemporalHeld(c)(ctx, []string{held.UUID})
		return err == nil && got[held.UUID]
	})

	in := workflows.SyncPowerInput{ConductorGroup: powerSyncTestGroup, Interval: time.Second, RecoveryInterval: time.Second, IterationsPerRun: 2}
	first, err := worker.StartPowerSyncOn(ctx, c, powerSyncTestQueue, in)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.TerminateWorkflow(context.Background(), first.GetID(), "", "test over") })
	if first.GetID() != "power-sync-"+powerSyncTestGroup {
		t.Fatalf("workflow ID %q", first.GetID())
	}
	again, err := worker.StartPowerSyncOn(ctx, c, powerSyncTestQueue, in)
	if err != nil {
		t.Fatalf("second start: %v", err)
	}
	if again.GetRunID() != first.GetRunID() {
		t.Fatalf("second start began run %s beside %s, want the running one kept", again.GetRunID(), first.GetRunID())
	}

	waitFor(t, "the power state to be synced", time.Minute, func() bool {
		return powerStr(get(synced.UUID).PowerState) == "power on"
	})

	if _, err := st.UpdateNode(ctx, synced.UUID, func(n *store.Node) error {
		n.DriverInfo = map[string]any{"fake_id": n.UUID, "fake_fail_rate": 1}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "maintenance after 3 failed ticks", time.Minute, func() bool {
		n := get(synced.UUID)
		return n.Maintenance && powerStr(n.Fault) == workflows.FaultPowerFailure
	})
	if _, err := st.UpdateNode(ctx, synced.UUID, func(n *store.Node) error {
		n.DriverInfo = map[string]any{"fake_id": n.UUID}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "recovery from power failure", time.Minute, func() bool {
		n := get(synced.UUID)
		return !n.Maintenance && n.Fault == nil && powerStr(n.PowerState) == "power on"
	})

	// By now many ticks ran: the held node was never read.
	if n := get(held.UUID); powerStr(n.PowerState) != "power off" {
		t.Fatalf("the sync changed node %s that a workflow holds: %s", held.UUID, powerStr(n.PowerState))
	}
	d, err := c.DescribeWorkflowExecution(ctx, first.GetID(), "")
	if err != nil {
		t.Fatal(err)
	}
	info := d.GetWorkflowExecutionInfo()
	if info.GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING || info.GetExecution().GetRunId() == first.GetRunID() {
		t.Fatalf("sync status %s run %s, want a running later run after continue-as-new (first run %s)",
			info.GetStatus(), info.GetExecution().GetRunId(), first.GetRunID())
	}
	hist := syncHistory(t, st, synced.UUID)
	if len(hist) != 3 {
		t.Fatalf("history %v, want changed, maintenance, recovered", hist)
	}
	// The events the workflow's activities wrote record the node's
	// provision state and target (API 1.115) and no project (1.113).
	events, err := st.ListHistory(ctx, synced.UUID)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range events {
		if powerStr(e.State) != "available" || e.TargetProvisionState != nil || e.Project != "" {
			t.Errorf("history event %q: state %s, target %v, project %q; want available, none, none",
				e.Event, powerStr(e.State), e.TargetProvisionState, e.Project)
		}
	}
}

func psPtr(s string) *string { return &s }

func powerStr(s *string) string {
	if s == nil {
		return "None"
	}
	return *s
}

func syncHistory(t *testing.T, st *store.Store, uuid string) []string {
	t.Helper()
	h, err := st.ListHistory(context.Background(), uuid)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range h {
		out = append(out, e.Severity+" "+e.Event)
	}
	return out
}
