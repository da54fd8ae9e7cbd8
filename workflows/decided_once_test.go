package workflows

import (
	"testing"
	"time"

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
