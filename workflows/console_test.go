package workflows

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
)

// consoleRun runs SetConsoleNode against recording activities; prepared is
// what PrepareConsoleStop answers, startErr/stopErr fail those activities.
func consoleRun(t *testing.T, req ConsoleRequest, prepared ConsoleHeld, startErr, stopErr error) ([]string, []RecordConsoleInput, error) {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.RegisterWorkflow(SetConsoleNode)
	var calls []string
	var records []RecordConsoleInput
	reg := func(fn any, name string) { env.RegisterActivityWithOptions(fn, activity.RegisterOptions{Name: name}) }
	reg(func(ctx context.Context, uuid string) (NodeInfo, error) {
		return NodeInfo{UUID: uuid, Driver: "ipmi", ConductorGroup: "rack1"}, nil
	}, ActLoadNode)
	reg(func(ctx context.Context, in ConsoleInput) (ConsoleHeld, error) {
		calls = append(calls, ActStartConsole+" on "+activity.GetInfo(ctx).TaskQueue)
		return ConsoleHeld{Holder: "w1", Serial: "127.0.0.1:4000"}, startErr
	}, ActStartConsole)
	reg(func(ctx context.Context, in ConsoleInput) error {
		calls = append(calls, ActStopConsole+" on "+activity.GetInfo(ctx).TaskQueue)
		return stopErr
	}, ActStopConsole)
	reg(func(ctx context.Context, in ConsoleInput) (ConsoleHeld, error) {
		calls = append(calls, ActPrepareConsoleStop)
		return prepared, nil
	}, ActPrepareConsoleStop)
	reg(func(ctx context.Context, in RecordConsoleInput) error {
		records = append(records, in)
		return nil
	}, ActRecordConsole)
	env.ExecuteWorkflow(SetConsoleNode, req)
	return calls, records, env.GetWorkflowError()
}

// TestSetConsoleNode: enabling opens the endpoints on a worker of the
// node's group and records the holder; disabling revokes the tokens first,
// stops the console on the holder's own queue and only then records it
// disabled; a holder that is gone is not waited for; a failure records
// Ironic's error and leaves console_enabled as it was.
func TestSetConsoleNode(t *testing.T) {
	group := HardwareQueue("rack1")
	calls, recs, err := consoleRun(t, ConsoleRequest{NodeUUID: "n1", Enabled: true}, ConsoleHeld{}, nil, nil)
	if err != nil || !reflect.DeepEqual(calls, []string{ActStartConsole + " on " + group}) ||
		len(recs) != 1 || !recs[0].Enabled || recs[0].Held.Holder != "w1" || recs[0].Held.Serial != "127.0.0.1:4000" {
		t.Errorf("enable: calls %v, records %+v, err %v", calls, recs, err)
	}

	alive := ConsoleHeld{Holder: "w1", Serial: "127.0.0.1:4000", HolderAlive: true}
	calls, recs, err = consoleRun(t, ConsoleRequest{NodeUUID: "n1"}, alive, nil, nil)
	want := []string{ActPrepareConsoleStop, ActStopConsole + " on " + ConsoleQueue("rack1", "w1")}
	if err != nil || !reflect.DeepEqual(calls, want) || len(recs) != 1 || recs[0].Enabled || recs[0].Error != "" {
		t.Errorf("disable: calls %v, want %v; records %+v, err %v", calls, want, recs, err)
	}

	gone := ConsoleHeld{Holder: "w0", Serial: "127.0.0.1:4000"}
	calls, recs, err = consoleRun(t, ConsoleRequest{NodeUUID: "n1"}, gone, nil, nil)
	if err != nil || !reflect.DeepEqual(calls, []string{ActPrepareConsoleStop}) || len(recs) != 1 || recs[0].Enabled {
		t.Errorf("disable with the holder gone: calls %v, records %+v, err %v", calls, recs, err)
	}

	refused := temporal.NewNonRetryableApplicationError("node n1: driver_info ipmi_address is needed for the console", ErrTypeInvalidConfig, nil)
	_, recs, err = consoleRun(t, ConsoleRequest{NodeUUID: "n1", Enabled: true}, ConsoleHeld{}, refused, nil)
	if err == nil || len(recs) != 1 || recs[0].Enabled ||
		recs[0].Error != "Error enabling the console on node n1. Reason: node n1: driver_info ipmi_address is needed for the console" {
		t.Errorf("failed enable: records %+v, err %v", recs, err)
	}

	stopFails := temporal.NewNonRetryableApplicationError("close listener: boom", ErrTypeInvalidConfig, nil)
	_, recs, err = consoleRun(t, ConsoleRequest{NodeUUID: "n1"}, alive, nil, stopFails)
	if err == nil || len(recs) != 1 || !recs[0].Enabled || !strings.HasPrefix(recs[0].Error, "Error disabling the console on node n1.") {
		t.Errorf("failed disable: records %+v, err %v", recs, err)
	}
}

// TestConsoleQueueNamesTheHolder: the queue is the group's, per worker.
func TestConsoleQueueNamesTheHolder(t *testing.T) {
	if got := ConsoleQueue("", "w1"); got != TaskQueue+".default/console/w1" {
		t.Errorf("ConsoleQueue = %q", got)
	}
}
