package activities_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"testing"

	"go.temporal.io/sdk/temporal"

	"github.com/ironflow/ironflow/activities"
	"github.com/ironflow/ironflow/internal/testkit/storetest"
	"github.com/ironflow/ironflow/provision"
	"github.com/ironflow/ironflow/store"
	"github.com/ironflow/ironflow/workflows"
)

func TestRecordStateWritesStateStepAgentKeysAndHistory(t *testing.T) {
	st := storetest.New(t)
	ctx := context.Background()
	a := activities.New(st, activities.Config{Conductor: "conductor-1"}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	n := &store.Node{Driver: "fake-hardware", ProvisionState: provision.Deploying,
		DriverInternalInfo: map[string]any{"agent_url": "http://127.0.0.1:9999", "agent_secret_token": "t", "is_whole_disk_image": true}}
	if err := st.CreateNode(ctx, n); err != nil {
		t.Fatal(err)
	}

	err := a.RecordState(ctx, workflows.RecordStateInput{NodeUUID: n.UUID, From: []provision.State{provision.Deploying},
		To: provision.DeployFailed, Target: provision.Active, LastError: "write failed",
		Step: &provision.Step{StepID: provision.StepWriteImage, Priority: 80}, StepKind: provision.StepKindDeploy, Severity: "ERROR", EventType: "provisioning", Event: "Deploy failed at write_image"})
	if err != nil {
		t.Fatalf("RecordState: %v", err)
	}
	got, _ := st.GetNode(ctx, n.UUID)
	if got.ProvisionState != provision.DeployFailed || *got.TargetProvisionState != provision.Active ||
		*got.LastError != "write failed" || got.DeployStep["interface"] != "deploy" || got.DeployStep["step"] != "write_image" {
		t.Fatalf("after a failed step: %+v", got)
	}
	events, _ := st.ListHistory(ctx, n.UUID)
	if len(events) != 1 || events[0].Severity != "ERROR" || events[0].Conductor != "conductor-1" || events[0].Event != "Deploy failed at write_image" {
		t.Fatalf("history %+v", events)
	}

	// The end of an operation drops the agent's session keys only.
	if err := a.RecordState(ctx, workflows.RecordStateInput{NodeUUID: n.UUID, To: provision.Active, ClearAgent: true}); err != nil {
		t.Fatalf("RecordState active: %v", err)
	}
	got, _ = st.GetNode(ctx, n.UUID)
	if _, ok := got.DriverInternalInfo["agent_url"]; ok || got.DriverInternalInfo["is_whole_disk_image"] != true || len(got.DeployStep) != 0 {
		t.Fatalf("after active: driver_internal_info %v, deploy_step %v", got.DriverInternalInfo, got.DeployStep)
	}

	// A state that moved under the workflow is not retried.
	err = a.RecordState(ctx, workflows.RecordStateInput{NodeUUID: n.UUID, From: []provision.State{provision.Deploying}, To: provision.Active})
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
	n := &store.Node{Driver: "fake-hardware", ProvisionState: provision.Deploying}
	if err := st.CreateNode(ctx, n); err != nil {
		t.Fatal(err)
	}
	boot := provision.Step{StepID: provision.StepBootInstance, Priority: 20}
	err := a.CleanBoot(ctx, workflows.BootInput{Node: workflows.NodeInfo{UUID: n.UUID}, Kind: workflows.BootAgent,
		Starts: &provision.RunningStep{Kind: provision.StepKindDeploy, Step: boot}})
	if err != nil {
		t.Fatalf("CleanBoot: %v", err)
	}
	got, _ := st.GetNode(ctx, n.UUID)
	if got.DeployStep["interface"] != "deploy" || got.DeployStep["step"] != "boot_instance" || got.DeployStep["priority"] != float64(20) || len(got.CleanStep) != 0 {
		t.Fatalf("after CleanBoot starting boot_instance: deploy_step %v, clean_step %v", got.DeployStep, got.CleanStep)
	}

	erase := provision.Step{StepID: provision.StepEraseDevicesMetadata, Priority: 99}
	_, err = a.RunAgentStep(ctx, workflows.AgentStepInput{Agent: workflows.AgentInput{NodeUUID: n.UUID}, Kind: provision.StepKindClean, Step: erase})
	var app *temporal.ApplicationError
	if !errors.As(err, &app) || app.Type() != workflows.ErrTypeAgentUnreachable {
		t.Fatalf("RunAgentStep without an agent: %v, want %s", err, workflows.ErrTypeAgentUnreachable)
	}
	got, _ = st.GetNode(ctx, n.UUID)
	if got.CleanStep["step"] != "erase_devices_metadata" || got.CleanStep["priority"] != float64(99) || got.DeployStep["step"] != "boot_instance" {
		t.Fatalf("after RunAgentStep erase_devices_metadata: deploy_step %v, clean_step %v", got.DeployStep, got.CleanStep)
	}

	// With the plan's index (agent-deploy-baseline version 3) the step's
	// first activity moves the plan too: index set, the previous step's
	// progress gone, with the step; RunAgentStep's input carries it too.
	progress := workflows.StepProgressKey(provision.StepKindDeploy)
	if err := st.MergeDriverInternalInfo(ctx, n.UUID, map[string]any{progress: map[string]any{"fraction": 1.0}, "deploy_step_index": 3}); err != nil {
		t.Fatal(err)
	}
	four, five := 4, 5
	if err := a.CleanBoot(ctx, workflows.BootInput{Node: workflows.NodeInfo{UUID: n.UUID}, Kind: workflows.BootAgent,
		Starts: &provision.RunningStep{Kind: provision.StepKindDeploy, Step: boot, Index: &four}}); err != nil {
		t.Fatalf("CleanBoot: %v", err)
	}
	got, _ = st.GetNode(ctx, n.UUID)
	if _, left := got.DriverInternalInfo[progress]; left || got.DriverInternalInfo["deploy_step_index"] != float64(4) || got.DeployStep["step"] != "boot_instance" {
		t.Fatalf("after CleanBoot at index 4: driver_internal_info %v, deploy_step %v", got.DriverInternalInfo, got.DeployStep)
	}
	write := provision.Step{StepID: provision.StepWriteImage, Priority: 80}
	_, _ = a.RunAgentStep(ctx, workflows.AgentStepInput{Agent: workflows.AgentInput{NodeUUID: n.UUID}, Kind: provision.StepKindDeploy, Step: write, Index: &five})
	got, _ = st.GetNode(ctx, n.UUID)
	if got.DriverInternalInfo["deploy_step_index"] != float64(5) || got.DeployStep["step"] != "write_image" {
		t.Fatalf("after RunAgentStep at index 5: driver_internal_info %v, deploy_step %v", got.DriverInternalInfo, got.DeployStep)
	}
}

// A step plan record written with a state (RecordStateInput.StepPlan, the
// agent deploy since agent-deploy-baseline version 2) leaves
// driver_internal_info as RecordStepPlan's separate writes do: the plan, the
// agent's steps and the index set with the previous step's progress gone,
// and cleared with the state that ends the deploy.
func TestRecordStateWithAStepPlanWritesWhatRecordStepPlanWrites(t *testing.T) {
	st := storetest.New(t)
	ctx := context.Background()
	a := activities.New(st, activities.Config{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	plan := []provision.Step{{StepID: provision.StepDeploy, Priority: 100}, {StepID: provision.StepWriteImage, Priority: 80}}
	agentSteps := []provision.Step{{StepID: provision.StepWriteImage, Priority: 80}}
	progress := workflows.StepProgressKey(provision.StepKindDeploy)
	newNode := func() *store.Node {
		n := &store.Node{Driver: "fake-hardware", ProvisionState: provision.Deploying,
			DriverInternalInfo: map[string]any{progress: map[string]any{"fraction": 0.5}, "agent_url": "http://127.0.0.1:9999"}}
		if err := st.CreateNode(ctx, n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	one := 1

	separate := newNode()
	for _, err := range []error{
		a.RecordStepPlan(ctx, workflows.StepPlanRecord{NodeUUID: separate.UUID, Kind: provision.StepKindDeploy, Steps: plan, AgentSteps: agentSteps}),
		a.RecordState(ctx, workflows.RecordStateInput{NodeUUID: separate.UUID, To: provision.Deploying, Target: provision.Active, Event: "Deploy steps"}),
		a.RecordStepPlan(ctx, workflows.StepPlanRecord{NodeUUID: separate.UUID, Kind: provision.StepKindDeploy, Index: &one, OnlyIndex: true}),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	folded := newNode()
	if err := a.RecordState(ctx, workflows.RecordStateInput{NodeUUID: folded.UUID, To: provision.Deploying, Target: provision.Active, Event: "Deploy steps",
		StepPlan: &workflows.StepPlanRecord{NodeUUID: folded.UUID, Kind: provision.StepKindDeploy, Steps: plan, AgentSteps: agentSteps, Index: &one}}); err != nil {
		t.Fatal(err)
	}
	s, _ := st.GetNode(ctx, separate.UUID)
	f, _ := st.GetNode(ctx, folded.UUID)
	for _, key := range []string{"deploy_steps", "deploy_step_index", "agent_cached_deploy_steps", progress, "agent_url"} {
		sv, sok := s.DriverInternalInfo[key]
		fv, fok := f.DriverInternalInfo[key]
		if sok != fok || fmt.Sprint(sv) != fmt.Sprint(fv) {
			t.Errorf("driver_internal_info %s: separate writes %v (%v), one write %v (%v)", key, sv, sok, fv, fok)
		}
	}
	if f.DriverInternalInfo["deploy_step_index"] != float64(1) {
		t.Fatalf("deploy_step_index %v, want 1", f.DriverInternalInfo["deploy_step_index"])
	}
	if _, ok := f.DriverInternalInfo[progress]; ok {
		t.Fatal("the previous step's progress stayed")
	}
	if steps, _ := f.DriverInternalInfo["deploy_steps"].([]any); len(steps) != 2 {
		t.Fatalf("deploy_steps %v", f.DriverInternalInfo["deploy_steps"])
	}
	if events, _ := st.ListHistory(ctx, folded.UUID); len(events) != 1 || events[0].Event != "Deploy steps" {
		t.Fatalf("history %+v", events)
	}

	// Cleared with active: the plan's keys and the agent's session go, the
	// agent's cached steps stay for the next request's check.
	if err := a.RecordState(ctx, workflows.RecordStateInput{NodeUUID: folded.UUID, To: provision.Active, ClearAgent: true,
		StepPlan: &workflows.StepPlanRecord{NodeUUID: folded.UUID, Kind: provision.StepKindDeploy, Clear: true}}); err != nil {
		t.Fatal(err)
	}
	f, _ = st.GetNode(ctx, folded.UUID)
	for _, key := range []string{"deploy_steps", "deploy_step_index", progress, "agent_url"} {
		if v, ok := f.DriverInternalInfo[key]; ok {
			t.Errorf("driver_internal_info %s = %v after active", key, v)
		}
	}
	if _, ok := f.DriverInternalInfo["agent_cached_deploy_steps"]; !ok || f.ProvisionState != provision.Active {
		t.Fatalf("after active: %s, driver_internal_info %v", f.ProvisionState, f.DriverInternalInfo)
	}
}
