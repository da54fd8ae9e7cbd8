package workflows

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/ironflow/ironflow/provision"
)

// TestDeployNodeRunsTheTransitionTheAPIDecided: a request that carries the
// API's decision is not decided again by the workflow (newRun), and its
// target is the decided one.
func TestDeployNodeRunsTheTransitionTheAPIDecided(t *testing.T) {
	f := newFakeCloud()
	env := newEnv(t, f)
	heartbeatAfter(env, 2*time.Minute)
	req := deployRequest()
	var ok bool
	req.Transition, ok = provision.Accept(req.FromState, req.Verb)
	if !ok {
		t.Fatalf("%s not accepted in %s", req.Verb, req.FromState)
	}
	before := provision.Decisions()
	env.ExecuteWorkflow(DeployNode, req)
	if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
		t.Fatalf("workflow did not complete cleanly: %v", env.GetWorkflowError())
	}
	if n := provision.Decisions() - before; n != 0 {
		t.Errorf("DeployNode evaluated the state machine %d times for a decided request, want 0", n)
	}
	if lastState(f) != provision.Active {
		t.Errorf("ended in %s, want active", lastState(f))
	}
}

// decided is req with the transition the API decides for it
// (provision.Accept, as apiserver's provision handler calls it): the
// workflows run only decided requests (newRun).
func decided(req provision.Request) provision.Request {
	t, ok := provision.Accept(req.FromState, req.Verb)
	if !ok {
		panic(fmt.Sprintf("test request: %s is not accepted in %s", req.Verb, req.FromState))
	}
	req.Transition = t
	return req
}

// TestUndecidedRequestIsRefused: a provision workflow handed a request
// without the API's decision fails at once, non-retryable, before any
// activity runs.
func TestUndecidedRequestIsRefused(t *testing.T) {
	f := newFakeCloud()
	env := newEnv(t, f)
	req := deployRequest()
	req.Transition = provision.Transition{}
	env.ExecuteWorkflow(DeployNode, req)
	var app *temporal.ApplicationError
	if err := env.GetWorkflowError(); !errors.As(err, &app) || app.Type() != ErrTypeUndecidedRequest || !app.NonRetryable() {
		t.Fatalf("workflow error %v, want a non-retryable %s", err, ErrTypeUndecidedRequest)
	}
	if calls := f.callList(); len(calls) != 0 {
		t.Errorf("an undecided request ran activities: %v", calls)
	}
}
