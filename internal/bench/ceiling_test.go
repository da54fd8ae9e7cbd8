package main

import (
	"context"
	"slices"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"
)

func ev(t enumspb.EventType, attrs any) *historypb.HistoryEvent {
	e := &historypb.HistoryEvent{EventType: t}
	switch a := attrs.(type) {
	case *historypb.MarkerRecordedEventAttributes:
		e.Attributes = &historypb.HistoryEvent_MarkerRecordedEventAttributes{MarkerRecordedEventAttributes: a}
	case *historypb.UpsertWorkflowSearchAttributesEventAttributes:
		e.Attributes = &historypb.HistoryEvent_UpsertWorkflowSearchAttributesEventAttributes{UpsertWorkflowSearchAttributesEventAttributes: a}
	}
	return e
}

func marker(name string) *historypb.HistoryEvent {
	return ev(enumspb.EVENT_TYPE_MARKER_RECORDED, &historypb.MarkerRecordedEventAttributes{MarkerName: name})
}

func upsert(keys ...string) *historypb.HistoryEvent {
	fields := map[string]*commonpb.Payload{}
	for _, k := range keys {
		fields[k] = &commonpb.Payload{}
	}
	return ev(enumspb.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES, &historypb.UpsertWorkflowSearchAttributesEventAttributes{
		SearchAttributes: &commonpb.SearchAttributes{IndexedFields: fields}})
}

// An agent deploy's history, cut down: the shape keeps its commands in
// order, drops the SDK's own upsert beside a version marker, and makes the
// last local activity before the signal the one that asks for it.
func TestMixFromEventsKeepsTheDeploysShape(t *testing.T) {
	events := []*historypb.HistoryEvent{
		ev(enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED, nil),
		ev(enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED, nil),
		ev(enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED, nil),
		ev(enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED, nil),
		marker("LocalActivity"),
		marker("Version"),
		upsert("TemporalChangeVersion"),
		marker("LocalActivity"),
		upsert("ProvisionState"),
		ev(enumspb.EVENT_TYPE_TIMER_STARTED, nil),
		ev(enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED, nil),
		ev(enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED, nil),
		ev(enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED, nil),
		ev(enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED, nil),
		ev(enumspb.EVENT_TYPE_TIMER_CANCELED, nil),
		ev(enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED, nil),
		ev(enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED, nil),
		ev(enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED, nil),
		ev(enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_COMPLETED, nil),
	}
	m := mixFromEvents(events)
	wantKinds := []string{kindLocal, kindLocal, kindRegular}
	wantShape := []string{kindLocal, kindVersion, kindNotify, kindUpsert, kindTimer, kindSignal, kindCancel, kindRegular}
	if !slices.Equal(m.Kinds, wantKinds) {
		t.Errorf("kinds %v, want %v", m.Kinds, wantKinds)
	}
	if !slices.Equal(m.Shape, wantShape) {
		t.Errorf("shape %v, want %v", m.Shape, wantShape)
	}
	if m.Events != len(events) || m.Signals != 1 || m.Timers != 1 {
		t.Errorf("events %d signals %d timers %d, want %d, 1, 1", m.Events, m.Signals, m.Timers, len(events))
	}
}

// The ceiling's workflow runs a shape to the end once its notify activity
// has asked for the signal and the signal came, and waits for it until then.
func TestCeilingWorkflowRunsAShape(t *testing.T) {
	shape := []string{kindLocal, kindVersion, kindNotify, kindUpsert, kindTimer, kindSignal, kindCancel, kindRegular, kindUpsert}
	for _, signal := range []bool{true, false} {
		var s testsuite.WorkflowTestSuite
		env := s.NewTestWorkflowEnvironment()
		env.RegisterWorkflowWithOptions(ceilingWorkflowFn, workflow.RegisterOptions{Name: ceilingWorkflow})
		env.RegisterActivityWithOptions(noopActivity, activity.RegisterOptions{Name: ceilingActivity})
		notified := 0
		env.RegisterActivityWithOptions(func(_ context.Context, id string) error {
			notified++
			if signal {
				env.RegisterDelayedCallback(func() { env.SignalWorkflow(ceilingSignal, ceilingSignalPayload) }, time.Second)
			}
			return nil
		}, activity.RegisterOptions{Name: ceilingNotifyActivity})
		env.SetTestTimeout(10 * time.Second)
		env.ExecuteWorkflow(ceilingWorkflow, shape)
		if notified != 1 {
			t.Errorf("signal %v: notify ran %d times, want once", signal, notified)
		}
		if signal {
			if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
				t.Errorf("with the signal: completed %v, error %v; want completed without error", env.IsWorkflowCompleted(), env.GetWorkflowError())
			}
		} else if env.IsWorkflowCompleted() && env.GetWorkflowError() == nil {
			t.Error("without the signal the workflow completed; it must wait for it")
		}
	}
}

func TestShapeWithoutDropsOneKind(t *testing.T) {
	shape := []string{kindLocal, kindVersion, kindNotify, kindUpsert, kindTimer, kindSignal, kindCancel, kindRegular, kindUpsert}
	cases := map[string][]string{
		kindVersion: {kindLocal, kindNotify, kindUpsert, kindTimer, kindSignal, kindCancel, kindRegular, kindUpsert},
		kindUpsert:  {kindLocal, kindVersion, kindNotify, kindTimer, kindSignal, kindCancel, kindRegular},
		kindTimer:   {kindLocal, kindVersion, kindNotify, kindUpsert, kindSignal, kindRegular, kindUpsert},
		kindSignal:  {kindLocal, kindVersion, kindLocal, kindUpsert, kindTimer, kindCancel, kindRegular, kindUpsert},
	}
	for kind, want := range cases {
		if got := shapeWithout(shape, kind); !slices.Equal(got, want) {
			t.Errorf("without %s: %v, want %v", kind, got, want)
		}
	}
}

// A signal with no local activity before it (since the last signal) gets a
// notify of its own, so that the ceiling's workflow still asks for it.
func TestMixFromEventsGivesEverySignalANotify(t *testing.T) {
	events := []*historypb.HistoryEvent{
		marker("LocalActivity"),
		ev(enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED, nil),
		ev(enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED, nil),
		ev(enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED, nil),
	}
	want := []string{kindNotify, kindSignal, kindNotify, kindSignal, kindRegular}
	if got := mixFromEvents(events).Shape; !slices.Equal(got, want) {
		t.Errorf("shape %v, want %v", got, want)
	}
}
