package activities_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"testing"

	"go.temporal.io/sdk/temporal"

	"github.com/ironflow/ironflow/activities"
	"github.com/ironflow/ironflow/store"
	"github.com/ironflow/ironflow/store/storetest"
	"github.com/ironflow/ironflow/workflows"
)

func TestRecordStateWritesStateStepAgentKeysAndHistory(t *testing.T) {
	st := storetest.New(t)
	ctx := context.Background()
	a := activities.New(st, activities.Config{Conductor: "conductor-1"}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	n := &store.Node{Driver: "fake-hardware", ProvisionState: workflows.StateDeploying,
		DriverInternalInfo: map[string]any{"agent_url": "http://127.0.0.1:9999", "agent_secret_token": "t", "is_whole_disk_image": true}}
	if err := st.CreateNode(ctx, n); err != nil {
		t.Fatal(err)
	}

	err := a.RecordState(ctx, workflows.RecordStateInput{NodeUUID: n.UUID, From: []string{workflows.StateDeploying},
		To: workflows.StateDeployFailed, Target: workflows.StateActive, LastError: "write failed",
		Step: "deploy.write_image", StepKind: "deploy", Severity: "ERROR", EventType: "provisioning", Event: "Deploy failed at write_image"})
	if err != nil {
		t.Fatalf("RecordState: %v", err)
	}
	got, _ := st.GetNode(ctx, n.UUID)
	if got.ProvisionState != workflows.StateDeployFailed || *got.TargetProvisionState != workflows.StateActive ||
		*got.LastError != "write failed" || got.DeployStep["interface"] != "deploy" || got.DeployStep["step"] != "write_image" {
		t.Fatalf("after a failed step: %+v", got)
	}
	events, _ := st.ListHistory(ctx, n.UUID)
	if len(events) != 1 || events[0].Severity != "ERROR" || events[0].Conductor != "conductor-1" || events[0].Event != "Deploy failed at write_image" {
		t.Fatalf("history %+v", events)
	}

	// The end of an operation drops the agent's session keys only.
	if err := a.RecordState(ctx, workflows.RecordStateInput{NodeUUID: n.UUID, To: workflows.StateActive, ClearAgent: true}); err != nil {
		t.Fatalf("RecordState active: %v", err)
	}
	got, _ = st.GetNode(ctx, n.UUID)
	if _, ok := got.DriverInternalInfo["agent_url"]; ok || got.DriverInternalInfo["is_whole_disk_image"] != true || len(got.DeployStep) != 0 {
		t.Fatalf("after active: driver_internal_info %v, deploy_step %v", got.DriverInternalInfo, got.DeployStep)
	}

	// A state that moved under the workflow is not retried.
	err = a.RecordState(ctx, workflows.RecordStateInput{NodeUUID: n.UUID, From: []string{workflows.StateDeploying}, To: workflows.StateActive})
	var app *temporal.ApplicationError
	if !errors.As(err, &app) || app.Type() != workflows.ErrTypeStateConflict || !app.NonRetryable() {
		t.Fatalf("from the wrong state: %v, want a non-retryable %s", err, workflows.ErrTypeStateConflict)
	}
}
