package store_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/ironflow/ironflow/internal/testkit/storetest"
	"github.com/ironflow/ironflow/provision"
	"github.com/ironflow/ironflow/store"
)

func TestRecordTransition(t *testing.T) {
	s := storetest.New(t)
	ctx := context.Background()
	n := newNode(t, s, &store.Node{
		ProvisionState: "available", TargetProvisionState: ptr(provision.Active),
		DriverInternalInfo: map[string]any{"agent_url": "http://127.0.0.1:9999", "agent_secret_token": "t", "kept": true},
		CleanStep:          map[string]any{"interface": "deploy", "step": "erase_devices"},
	})
	before := mustGet(t, s, n.UUID)

	// A deploy step is recorded; the clean step stays; history is added.
	err := s.RecordTransition(ctx, n.UUID, store.Transition{
		From: []provision.State{"available"}, To: "deploying", Target: ptr(provision.Active),
		StepKind: "deploy", Step: map[string]any{"interface": "deploy", "step": "write_image"},
		History: store.HistoryEvent{EventType: "provisioning", Event: "Deploy requested", Conductor: "worker-1"},
	})
	if err != nil {
		t.Fatalf("RecordTransition: %v", err)
	}
	got := mustGet(t, s, n.UUID)
	if got.ProvisionState != "deploying" || *got.TargetProvisionState != "active" || got.LastError != nil ||
		got.DeployStep["step"] != "write_image" || got.CleanStep["step"] != "erase_devices" {
		t.Fatalf("after deploying: %+v", got)
	}
	if got.ProvisionUpdatedAt == nil || (before.ProvisionUpdatedAt != nil && !got.ProvisionUpdatedAt.After(*before.ProvisionUpdatedAt)) {
		t.Fatalf("provision_updated_at did not move on a state change: %v → %v", before.ProvisionUpdatedAt, got.ProvisionUpdatedAt)
	}
	// Same state again: provision_updated_at stays, an empty event adds no
	// history, the agent keys go and the others stay; any other step kind
	// clears both steps.
	err = s.RecordTransition(ctx, n.UUID, store.Transition{To: "deploying", LastError: ptr("boom"),
		DropInternal: []string{"agent_url", "agent_secret_token"}})
	if err != nil {
		t.Fatalf("RecordTransition again: %v", err)
	}
	again := mustGet(t, s, n.UUID)
	if !again.ProvisionUpdatedAt.Equal(*got.ProvisionUpdatedAt) {
		t.Fatalf("provision_updated_at moved without a state change")
	}
	if again.TargetProvisionState != nil || *again.LastError != "boom" || len(again.DeployStep) != 0 || len(again.CleanStep) != 0 {
		t.Fatalf("after the second transition: %+v", again)
	}
	if _, ok := again.DriverInternalInfo["agent_url"]; ok || again.DriverInternalInfo["kept"] != true {
		t.Fatalf("driver_internal_info %v: want agent keys gone, kept kept", again.DriverInternalInfo)
	}
	events, err := s.ListHistory(ctx, n.UUID)
	if err != nil || len(events) != 1 || events[0].Event != "Deploy requested" || events[0].Conductor != "worker-1" || events[0].Severity != store.SeverityInfo {
		t.Fatalf("history %+v, %v: want the one event", events, err)
	}

	// From that does not hold: a conflict naming the state, nothing written.
	err = s.RecordTransition(ctx, n.UUID, store.Transition{From: []provision.State{"available"}, To: "active",
		History: store.HistoryEvent{Event: "must not appear"}})
	if !errors.Is(err, store.ErrStateConflict) || !strings.Contains(err.Error(), `"deploying"`) {
		t.Fatalf("wrong from: %v, want ErrStateConflict naming deploying", err)
	}
	if events, _ := s.ListHistory(ctx, n.UUID); len(events) != 1 {
		t.Fatalf("a refused transition wrote history: %+v", events)
	}
	if err := s.RecordTransition(ctx, "6a1f0c4e-0000-4000-8000-000000000000", store.Transition{To: "active"}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("missing node: %v, want ErrNotFound", err)
	}
}

func TestRecordTransitionKeepsNewestHistory(t *testing.T) {
	s := storetest.New(t)
	ctx := context.Background()
	n := newNode(t, s, &store.Node{})
	const added = store.DefaultHistoryMaxEntries + 3
	for i := range added {
		if err := s.RecordTransition(ctx, n.UUID, store.Transition{To: "deploying", History: store.HistoryEvent{Event: fmt.Sprintf("event %d", i)}}); err != nil {
			t.Fatal(err)
		}
	}
	events, err := s.ListHistory(ctx, n.UUID)
	if err != nil || len(events) != store.DefaultHistoryMaxEntries || events[0].Event != "event 3" {
		t.Fatalf("%d events (first %+v), %v: want the newest %d", len(events), events[0], err, store.DefaultHistoryMaxEntries)
	}
}

func mustGet(t *testing.T, s *store.Store, uuid string) *store.Node {
	t.Helper()
	n, err := s.GetNode(context.Background(), uuid)
	if err != nil {
		t.Fatalf("get node %s: %v", uuid, err)
	}
	return n
}

func TestGetNodeForWorkListsPXEMACs(t *testing.T) {
	s := storetest.New(t)
	ctx := context.Background()
	n := newNode(t, s, &store.Node{Driver: "ipmi"})
	for _, p := range []*store.Port{
		{Address: "52:54:00:00:00:02", NodeUUID: n.UUID, PXEEnabled: true},
		{Address: "52:54:00:00:00:01", NodeUUID: n.UUID, PXEEnabled: false},
		{Address: "52:54:00:00:00:03", NodeUUID: n.UUID, PXEEnabled: true},
	} {
		if err := s.CreatePort(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	got, macs, err := s.GetNodeForWork(ctx, n.UUID)
	if err != nil || got.UUID != n.UUID || got.Driver != "ipmi" {
		t.Fatalf("GetNodeForWork = %+v, %v", got, err)
	}
	if strings.Join(macs, ",") != "52:54:00:00:00:02,52:54:00:00:00:03" {
		t.Fatalf("MACs %v: want the PXE-enabled ones, oldest first", macs)
	}
	if _, _, err := s.GetNodeForWork(ctx, "6a1f0c4e-0000-4000-8000-000000000000"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("missing node: %v, want ErrNotFound", err)
	}
}

func TestRecordStepShowsTheRunningStepOnly(t *testing.T) {
	s := storetest.New(t)
	ctx := context.Background()
	n := newNode(t, s, &store.Node{
		ProvisionState: "deploying", TargetProvisionState: ptr(provision.Active), LastError: ptr("kept"),
		CleanStep: map[string]any{"interface": "deploy", "step": "erase_devices"},
	})
	step := map[string]any{"interface": "deploy", "step": "write_image", "priority": 80, "argsinfo": nil}
	if err := s.RecordStep(ctx, n.UUID, "deploy", step); err != nil {
		t.Fatalf("RecordStep: %v", err)
	}
	got := mustGet(t, s, n.UUID)
	if got.DeployStep["step"] != "write_image" || got.DeployStep["priority"] != float64(80) || got.CleanStep["step"] != "erase_devices" ||
		got.ProvisionState != "deploying" || *got.TargetProvisionState != "active" || *got.LastError != "kept" {
		t.Fatalf("after RecordStep deploy: %+v", got)
	}
	if err := s.RecordStep(ctx, n.UUID, "clean", nil); err != nil {
		t.Fatalf("RecordStep clean: %v", err)
	}
	if got := mustGet(t, s, n.UUID); len(got.CleanStep) != 0 || got.DeployStep["step"] != "write_image" {
		t.Fatalf("after RecordStep clean {}: deploy_step %v, clean_step %v", got.DeployStep, got.CleanStep)
	}
	if err := s.RecordStep(ctx, n.UUID, "rescue", step); !errors.Is(err, store.ErrInvalidInput) {
		t.Fatalf("unknown kind: %v, want ErrInvalidInput", err)
	}
	if err := s.RecordStep(ctx, "6a1f0c4e-0000-4000-8000-000000000000", "deploy", step); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("missing node: %v, want ErrNotFound", err)
	}
}

// A service step (API 1.87) is the node's service_step, set by RecordStep
// and RecordTransition of kind "service" and cleared by any other kind,
// leaving deploy_step and clean_step alone.
func TestServiceStepIsRecordedAndCleared(t *testing.T) {
	s := storetest.New(t)
	ctx := context.Background()
	n := newNode(t, s, &store.Node{ProvisionState: "servicing", TargetProvisionState: ptr(provision.Active),
		DeployStep: map[string]any{"interface": "deploy", "step": "write_image"}})
	step := map[string]any{"interface": "deploy", "step": "erase_pstore"}
	if err := s.RecordStep(ctx, n.UUID, "service", step); err != nil {
		t.Fatalf("RecordStep service: %v", err)
	}
	if got := mustGet(t, s, n.UUID); got.ServiceStep["step"] != "erase_pstore" || got.DeployStep["step"] != "write_image" {
		t.Fatalf("after RecordStep service: service_step %v, deploy_step %v", got.ServiceStep, got.DeployStep)
	}
	if err := s.RecordTransition(ctx, n.UUID, store.Transition{To: "service wait", Target: ptr(provision.Active), StepKind: "service",
		Step: map[string]any{"interface": "deploy", "step": "burnin_cpu"}}); err != nil {
		t.Fatal(err)
	}
	if got := mustGet(t, s, n.UUID); got.ServiceStep["step"] != "burnin_cpu" || got.DeployStep["step"] != "write_image" {
		t.Fatalf("after a service transition: service_step %v, deploy_step %v", got.ServiceStep, got.DeployStep)
	}
	if err := s.RecordTransition(ctx, n.UUID, store.Transition{To: "active"}); err != nil {
		t.Fatal(err)
	}
	if got := mustGet(t, s, n.UUID); len(got.ServiceStep) != 0 {
		t.Fatalf("service_step kept after active: %v", got.ServiceStep)
	}
}

// RecordStepAt moves the plan to the step once: the index set and the
// previous step's progress removed with the step; an activity's retry at
// the same index writes the step and keeps the progress the step has made.
func TestRecordStepAtMovesThePlanOnce(t *testing.T) {
	s := storetest.New(t)
	ctx := context.Background()
	n := newNode(t, s, &store.Node{ProvisionState: "deploying",
		DriverInternalInfo: map[string]any{"deploy_step_index": 1, "deploy_step_progress": map[string]any{"fraction": 0.5}, "kept": true}})
	step := map[string]any{"interface": "deploy", "step": "tear_down_agent"}
	progress := []string{"deploy_step_progress"}
	if err := s.RecordStepAt(ctx, n.UUID, "deploy", step, "deploy_step_index", 3, progress); err != nil {
		t.Fatal(err)
	}
	got := mustGet(t, s, n.UUID)
	if got.DriverInternalInfo["deploy_step_index"] != float64(3) || got.DriverInternalInfo["kept"] != true || got.DeployStep["step"] != "tear_down_agent" {
		t.Fatalf("after the move: driver_internal_info %v, deploy_step %v", got.DriverInternalInfo, got.DeployStep)
	}
	if _, ok := got.DriverInternalInfo["deploy_step_progress"]; ok {
		t.Fatalf("the previous step's progress stayed: %v", got.DriverInternalInfo)
	}
	if err := s.MergeDriverInternalInfo(ctx, n.UUID, map[string]any{"deploy_step_progress": map[string]any{"fraction": 0.2}}); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordStepAt(ctx, n.UUID, "deploy", step, "deploy_step_index", 3, progress); err != nil {
		t.Fatal(err)
	}
	got = mustGet(t, s, n.UUID)
	if p, _ := got.DriverInternalInfo["deploy_step_progress"].(map[string]any); p["fraction"] != 0.2 || got.DriverInternalInfo["deploy_step_index"] != float64(3) {
		t.Fatalf("a retry at the same index: %v", got.DriverInternalInfo)
	}
	if err := s.RecordStepAt(ctx, "00000000-0000-4000-8000-00000000dead", "deploy", step, "deploy_step_index", 3, progress); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("unknown node: %v", err)
	}
	if err := s.RecordStepAt(ctx, n.UUID, "inspect", step, "deploy_step_index", 3, progress); !errors.Is(err, store.ErrInvalidInput) {
		t.Fatalf("unknown kind: %v", err)
	}
}
