package activities_test

import (
	"context"
	"io"
	"log/slog"
	"testing"

	"github.com/ironflow/ironflow/activities"
	"github.com/ironflow/ironflow/internal/testkit/storetest"
	"github.com/ironflow/ironflow/provision"
	"github.com/ironflow/ironflow/store"
	"github.com/ironflow/ironflow/workflows"
)

// TestUndeployClearsInstanceName: ClearInstanceInfo clears instance_name
// (API 1.104) with instance_info and instance_uuid, as Ironic's tear_down.
func TestUndeployClearsInstanceName(t *testing.T) {
	st := storetest.New(t)
	ctx := context.Background()
	a := activities.New(st, activities.Config{Conductor: "c1"}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	name, inst := "web-1", "9f3e1a52-5b1c-4c1e-9d7e-2a6f8d1b0c44"
	n := &store.Node{Driver: "fake-hardware", ProvisionState: provision.Deleting, InstanceName: &name, InstanceUUID: &inst,
		InstanceInfo: map[string]any{"display_name": "web-1"}}
	if err := st.CreateNode(ctx, n); err != nil {
		t.Fatal(err)
	}
	if err := a.ClearInstanceInfo(ctx, n.UUID); err != nil {
		t.Fatal(err)
	}
	got, _ := st.GetNode(ctx, n.UUID)
	if got.InstanceName != nil || got.InstanceUUID != nil || len(got.InstanceInfo) != 0 {
		t.Fatalf("after ClearInstanceInfo: instance_name %v, instance_uuid %v, instance_info %v", got.InstanceName, got.InstanceUUID, got.InstanceInfo)
	}
}

// TestWorkflowHistoryRecordsTheNodeState: a history event a workflow
// writes records the provision state and target the node had and the
// seconds since it entered that state (API 1.115), with no project.
func TestWorkflowHistoryRecordsTheNodeState(t *testing.T) {
	st := storetest.New(t)
	ctx := context.Background()
	a := activities.New(st, activities.Config{Conductor: "c1"}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	n := &store.Node{Driver: "fake-hardware", ProvisionState: provision.Available}
	if err := st.CreateNode(ctx, n); err != nil {
		t.Fatal(err)
	}
	target := provision.Active
	if _, err := st.SetProvisionState(ctx, n.UUID, nil, provision.Deploying, &target, nil); err != nil {
		t.Fatal(err)
	}
	err := a.RecordState(ctx, workflows.RecordStateInput{NodeUUID: n.UUID, From: []provision.State{provision.Deploying},
		To: provision.DeployFailed, Target: provision.Active, LastError: "boom", Severity: "ERROR", EventType: "provisioning", Event: "Deploy failed"})
	if err != nil {
		t.Fatal(err)
	}
	events, _ := st.ListHistory(ctx, n.UUID)
	if len(events) != 1 {
		t.Fatalf("history %+v", events)
	}
	e := events[0]
	if e.State == nil || *e.State != string(provision.Deploying) || e.TargetProvisionState == nil || *e.TargetProvisionState != "active" ||
		e.DurationSeconds == nil || *e.DurationSeconds < 0 || *e.DurationSeconds > 60 || e.Project != "" {
		t.Fatalf("event state %v target %v duration %v project %q, want deploying, active, a few seconds, none",
			e.State, e.TargetProvisionState, e.DurationSeconds, e.Project)
	}
}
