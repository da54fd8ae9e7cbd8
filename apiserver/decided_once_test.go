package apiserver

import (
	"context"
	"net/http"
	"testing"

	"go.temporal.io/sdk/client"

	"github.com/ironflow/ironflow/provision"
	"github.com/ironflow/ironflow/workflows"
)

// startRecorder is a Temporal client that records the workflow a start
// asks for instead of starting it.
type startRecorder struct {
	client.Client
	workflowType string
	opts         client.StartWorkflowOptions
	args         []any
}

func (c *startRecorder) ExecuteWorkflow(_ context.Context, opts client.StartWorkflowOptions, workflow any, args ...any) (client.WorkflowRun, error) {
	c.workflowType, c.opts, c.args = workflow.(string), opts, args
	return nil, nil
}

// TestProvisionRequestIsDecidedOnce: PUT .../states/provision evaluates
// Ironic's state machine once, in the handler; the engine starts the
// workflow the decision names and hands the decision on in the request,
// without deciding again.
func TestProvisionRequestIsDecidedOnce(t *testing.T) {
	e := newEnv(t)
	uuid := e.createNode(map[string]any{"driver": "fake-hardware"})["uuid"].(string)
	e.setState(uuid, provision.Available)

	before := provision.Decisions()
	r := e.do("PUT", "/v1/nodes/"+uuid+"/states/provision", "1.78", map[string]any{"target": "active"})
	if r.status != http.StatusAccepted {
		t.Fatalf("active: %d %s", r.status, r.body)
	}
	e.eng.mu.Lock()
	reqs := append([]provision.Request(nil), e.eng.provisions...)
	e.eng.mu.Unlock()
	if len(reqs) != 1 {
		t.Fatalf("workflows started: %+v, want one", reqs)
	}
	req := reqs[0]
	want := provision.Transition{Operation: provision.OpDeploy, Next: provision.Deploying, Target: provision.Active}
	if req.Transition != want || req.Verb != provision.VerbActive || req.FromState != provision.Available {
		t.Errorf("request %+v, want the transition %+v from available", req, want)
	}

	// The Temporal engine starts what the request carries.
	c := &startRecorder{}
	if err := (&TemporalEngine{Client: c}).StartProvision(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	if c.workflowType != workflows.WorkflowDeployNode || len(c.args) != 1 || c.args[0].(provision.Request).Transition != want {
		t.Errorf("started %s with %+v, want DeployNode with the decided transition", c.workflowType, c.args)
	}
	if n := provision.Decisions() - before; n != 1 {
		t.Errorf("one provision request evaluated the state machine %d times, want 1", n)
	}
}
