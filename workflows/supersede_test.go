package workflows

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/ironflow/ironflow/provision"
)

// failWriteImage makes the deploy's write_image fail for good, so that the
// deploy waits for an operator in deploy failed.
func failWriteImage(f *fakeCloud) {
	f.agentStep = func(ctx context.Context, in AgentStepInput) (AgentStepResult, error) {
		if in.Step.Step == "write_image" {
			return AgentStepResult{}, temporal.NewNonRetryableApplicationError("deploy.write_image on node x: agent command failed: image checksum mismatch", ErrTypeAgentStepFailed, nil)
		}
		return AgentStepResult{Status: "SUCCEEDED"}, nil
	}
}

// TestNewVerbEndsTheOperatorWaitWithoutAnAbort: a verb sent to a node in
// deploy failed ends its workflow's wait through an abort that names the
// verb (AbortRequest, as the API's abortWaiting sends it): the node is
// cleaned up as after an abort, but its last_error stays the failure's and
// its history says which verb ended the wait, at INFO, not that an
// operator aborted the deploy.
func TestNewVerbEndsTheOperatorWaitWithoutAnAbort(t *testing.T) {
	f := newFakeCloud()
	env := newEnv(t, f)
	heartbeatAfter(env, time.Minute)
	failWriteImage(f)
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(SignalAbort, provision.AbortRequest{SupersededBy: "deleted"}) }, 10*time.Minute)
	env.ExecuteWorkflow(DeployNode, deployRequest())
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if last := f.states[len(f.states)-1]; last != provision.DeployFailed {
		t.Fatalf("final state %q, want deploy failed (the API then moves it on)", last)
	}
	if !strings.Contains(f.lastErr, "checksum mismatch") || strings.Contains(f.lastErr, "abort") {
		t.Fatalf("last_error %q, want the failure's own", f.lastErr)
	}
	event, severity := f.events[len(f.events)-1], f.severities[len(f.severities)-1]
	if !strings.Contains(event, `Provision action "deleted" requested in state "deploy failed"`) || severity != "INFO" {
		t.Fatalf("last event %q (%s), want the verb that ended the wait, at INFO", event, severity)
	}
	for _, e := range f.events {
		if strings.Contains(e, "aborted by operator") {
			t.Fatalf("history says the operator aborted: %q", f.events)
		}
	}
	if calls := strings.Join(f.callList(), ","); !strings.Contains(calls, "CleanBoot,SetPower power off,RecordState deploy failed") {
		t.Fatalf("the node was not cleaned up as after an abort: %s", calls)
	}
}

// TestAbortWithAnyPayloadIsAnAbort: an operator's abort carries no
// payload, or whatever `temporal workflow signal --input` sent: each is an
// abort, with last_error saying so.
func TestAbortWithAnyPayloadIsAnAbort(t *testing.T) {
	for _, payload := range []any{nil, "now", 42, map[string]any{"reason": "bad image"}, provision.AbortRequest{}} {
		f := newFakeCloud()
		env := newEnv(t, f)
		heartbeatAfter(env, time.Minute)
		failWriteImage(f)
		env.RegisterDelayedCallback(func() { env.SignalWorkflow(SignalAbort, payload) }, 10*time.Minute)
		env.ExecuteWorkflow(DeployNode, deployRequest())
		if err := env.GetWorkflowError(); err != nil {
			t.Fatalf("payload %#v: %v", payload, err)
		}
		if !env.IsWorkflowCompleted() || !strings.Contains(f.lastErr, "aborted by operator") || f.severities[len(f.severities)-1] != "ERROR" {
			t.Fatalf("payload %#v: completed %v, last_error %q, want an abort", payload, env.IsWorkflowCompleted(), f.lastErr)
		}
	}
}

// TestNodeDeletionEndsTheOperatorWait: the API's deletion of a node in
// deploy failed (in maintenance) ends the wait through an abort that names
// the request (AbortRequest.Request), at INFO, the failure's last_error kept.
func TestNodeDeletionEndsTheOperatorWait(t *testing.T) {
	f := newFakeCloud()
	env := newEnv(t, f)
	heartbeatAfter(env, time.Minute)
	failWriteImage(f)
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(SignalAbort, provision.AbortRequest{Request: "Node deletion"}) }, 10*time.Minute)
	env.ExecuteWorkflow(DeployNode, deployRequest())
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	event, severity := f.events[len(f.events)-1], f.severities[len(f.severities)-1]
	if event != `Node deletion requested in state "deploy failed": the wait for retry, skip-step or abort ended` || severity != "INFO" {
		t.Fatalf("last event %q (%s), want the deletion that ended the wait, at INFO", event, severity)
	}
	if !strings.Contains(f.lastErr, "checksum mismatch") {
		t.Fatalf("last_error %q, want the failure's own", f.lastErr)
	}
}
