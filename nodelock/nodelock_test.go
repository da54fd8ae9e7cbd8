package nodelock_test

import (
	"context"
	"io"
	"log/slog"
	"testing"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/ironflow/ironflow/embedded"
	"github.com/ironflow/ironflow/nodelock"
	"github.com/ironflow/ironflow/workflows"
)

// TestHeldWhileTheNodeWorkflowRuns runs on the Temporal dev server: a
// running node-<uuid> workflow holds its node, a terminated one does not, a
// node that never had one is free. (HeldAmong's visibility query is tested
// on the real stack in tests/, through the power sync.)
func TestHeldWhileTheNodeWorkflowRuns(t *testing.T) {
	ctx := context.Background()
	srv, err := embedded.StartTemporal(ctx, embedded.TemporalConfig{UIPort: -1}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	c, err := client.Dial(client.Options{HostPort: srv.Address()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)

	held, free := "5d1f1a7e-0000-4000-8000-00000000b001", "5d1f1a7e-0000-4000-8000-00000000b002"
	// No worker polls this queue: the workflow stays running, as a deploy
	// waiting for its agent does.
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: workflows.WorkflowID(held), TaskQueue: "nodelock-idle"}, "NodeLockTestHold")
	if err != nil {
		t.Fatal(err)
	}
	if h, err := nodelock.Held(ctx, c, held); err != nil || !h {
		t.Fatalf("Held(node with a running workflow) = %v, %v; want true", h, err)
	}
	if h, err := nodelock.Held(ctx, c, free); err != nil || h {
		t.Fatalf("Held(node that never had a workflow) = %v, %v; want false", h, err)
	}
	if err := c.TerminateWorkflow(ctx, run.GetID(), run.GetRunID(), "released"); err != nil {
		t.Fatal(err)
	}
	if h, err := nodelock.Held(ctx, c, held); err != nil || h {
		t.Fatalf("Held(node whose workflow ended) = %v, %v; want false", h, err)
	}
}

// noVisibility is a Temporal server whose visibility store refuses the
// lock query; it knows one running workflow.
type noVisibility struct {
	client.Client
	running string
}

func (c noVisibility) ListWorkflow(context.Context, *workflowservice.ListWorkflowExecutionsRequest) (*workflowservice.ListWorkflowExecutionsResponse, error) {
	return nil, serviceerror.NewInvalidArgument("STARTS_WITH is not supported")
}

func (c noVisibility) DescribeWorkflowExecution(_ context.Context, id, _ string) (*workflowservice.DescribeWorkflowExecutionResponse, error) {
	if id != c.running {
		return nil, serviceerror.NewNotFound("workflow not found")
	}
	return &workflowservice.DescribeWorkflowExecutionResponse{WorkflowExecutionInfo: &workflow.WorkflowExecutionInfo{
		Status: enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING,
	}}, nil
}

// TestHeldAmongDescribesEachNodeWithoutVisibility: where the visibility
// query is refused, each node's workflow is described instead.
func TestHeldAmongDescribesEachNodeWithoutVisibility(t *testing.T) {
	c := noVisibility{running: workflows.WorkflowID("a")}
	got, err := nodelock.HeldAmong(context.Background(), c, []string{"a", "b"})
	if err != nil {
		t.Fatal(err)
	}
	if !got["a"] || got["b"] || len(got) != 1 {
		t.Fatalf("HeldAmong = %v, want only a held", got)
	}
}
