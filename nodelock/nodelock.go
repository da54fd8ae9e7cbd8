// Package nodelock reads Ironic's node lock as ironflow keeps it: a node is
// held while the Temporal workflow with ID workflows.WorkflowID(node) runs.
// Taking the lock is starting that workflow (the API does it, refusing a
// second start); this package only answers whether it is taken, for the API
// (one node) and the power sync (many).
package nodelock

import (
	"context"
	"errors"
	"fmt"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/ironflow/ironflow/workflows"
)

// Held reports whether a workflow holds the node. A node that never had a
// workflow is free.
func Held(ctx context.Context, c client.Client, nodeUUID string) (bool, error) {
	d, err := c.DescribeWorkflowExecution(ctx, workflows.WorkflowID(nodeUUID), "")
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("describe workflow %s: %w", workflows.WorkflowID(nodeUUID), err)
	}
	return d.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, nil
}

// HeldAmong reports which of the nodes a workflow holds; nodes absent from
// the map are free. One visibility query lists every running lock; where
// the server's visibility store cannot answer it, each node's workflow is
// described instead. Visibility lags starts by a moment: a caller that acts
// on a free node rechecks the node's state when it writes.
func HeldAmong(ctx context.Context, c client.Client, nodeUUIDs []string) (map[string]bool, error) {
	running, err := runningLocks(ctx, c)
	if err == nil {
		held := map[string]bool{}
		for _, u := range nodeUUIDs {
			if running[workflows.WorkflowID(u)] {
				held[u] = true
			}
		}
		return held, nil
	}
	var invalid *serviceerror.InvalidArgument
	if !errors.As(err, &invalid) {
		return nil, err
	}
	held := map[string]bool{}
	for _, u := range nodeUUIDs {
		h, err := Held(ctx, c, u)
		if err != nil {
			return nil, err
		}
		if h {
			held[u] = true
		}
	}
	return held, nil
}

// runningLocksQuery selects every running node lock.
const runningLocksQuery = "WorkflowId STARTS_WITH 'node-' AND ExecutionStatus = 'Running'"

// runningLocks returns the IDs of the running node workflows.
func runningLocks(ctx context.Context, c client.Client) (map[string]bool, error) {
	running := map[string]bool{}
	var token []byte
	for {
		resp, err := c.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Query: runningLocksQuery, NextPageToken: token, PageSize: 1000,
		})
		if err != nil {
			return nil, fmt.Errorf("list running node workflows: %w", err)
		}
		for _, e := range resp.Executions {
			running[e.GetExecution().GetWorkflowId()] = true
		}
		token = resp.NextPageToken
		if len(token) == 0 {
			return running, nil
		}
	}
}
