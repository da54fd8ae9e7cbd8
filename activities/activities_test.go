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

	err := a.RecordState(ctx, workflows.RecordStateInput{NodeUUID: n.UUID, From: []workflows.State{workflows.Deploying},
		To: workflows.DeployFailed, Target: workflows.Active, LastError: "write failed",
		Step: &workflows.Step{StepID: workflows.StepWriteImage, Priority: 80}, StepKind: workflows.StepKindDeploy, Severity: "ERROR", EventType: "provisioning", Event: "Deploy failed at write_image"})
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
	if err := a.RecordState(ctx, workflows.RecordStateInput{NodeUUID: n.UUID, To: workflows.Active, ClearAgent: true}); err != nil {
		t.Fatalf("RecordState active: %v", err)
	}
	got, _ = st.GetNode(ctx, n.UUID)
	if _, ok := got.DriverInternalInfo["agent_url"]; ok || got.DriverInternalInfo["is_whole_disk_image"] != true || len(got.DeployStep) != 0 {
		t.Fatalf("after active: driver_internal_info %v, deploy_step %v", got.DriverInternalInfo, got.DeployStep)
	}

	// A state that moved under the workflow is not retried.
	err = a.RecordState(ctx, workflows.RecordStateInput{NodeUUID: n.UUID, From: []workflows.State{workflows.Deploying}, To: workflows.Active})
	var app *temporal.ApplicationError
	if !errors.As(err, &app) || app.Type() != workflows.ErrTypeStateConflict || !app.NonRetryable() {
		t.Fatalf("from the wrong state: %v, want a non-retryable %s", err, workflows.ErrTypeStateConflict)
	}
}

// The activity that begins a step shows it as the node's deploy_step or
// clean_step, in Ironic's form, before it acts: even when the step then
// fails at once (no agent to run it).
func TestActivitiesShowTheStepTheyBegin(t *testing.T) {
	st := storetest.New(t)
	ctx := context.Background()
	a := activities.New(st, activities.Config{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	n := &store.Node{Driver: "fake-hardware", ProvisionState: workflows.StateDeploying}
	if err := st.CreateNode(ctx, n); err != nil {
		t.Fatal(err)
	}
	boot := workflows.Step{StepID: workflows.StepBootInstance, Priority: 20}
	err := a.CleanBoot(ctx, workflows.BootInput{Node: workflows.NodeInfo{UUID: n.UUID}, Kind: workflows.BootAgent,
		Starts: &workflows.RunningStep{Kind: workflows.StepKindDeploy, Step: boot}})
	if err != nil {
		t.Fatalf("CleanBoot: %v", err)
	}
	got, _ := st.GetNode(ctx, n.UUID)
	if got.DeployStep["interface"] != "deploy" || got.DeployStep["step"] != "boot_instance" || got.DeployStep["priority"] != float64(20) || len(got.CleanStep) != 0 {
		t.Fatalf("after CleanBoot starting boot_instance: deploy_step %v, clean_step %v", got.DeployStep, got.CleanStep)
	}

	erase := workflows.Step{StepID: workflows.StepEraseDevicesMetadata, Priority: 99}
	_, err = a.RunAgentStep(ctx, workflows.AgentStepInput{Agent: workflows.AgentInput{NodeUUID: n.UUID}, Kind: workflows.StepKindClean, Step: erase})
	var app *temporal.ApplicationError
	if !errors.As(err, &app) || app.Type() != workflows.ErrTypeAgentUnreachable {
		t.Fatalf("RunAgentStep without an agent: %v, want %s", err, workflows.ErrTypeAgentUnreachable)
	}
	got, _ = st.GetNode(ctx, n.UUID)
	if got.CleanStep["step"] != "erase_devices_metadata" || got.CleanStep["priority"] != float64(99) || got.DeployStep["step"] != "boot_instance" {
		t.Fatalf("after RunAgentStep erase_devices_metadata: deploy_step %v, clean_step %v", got.DeployStep, got.CleanStep)
	}
}
