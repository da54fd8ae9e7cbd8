package worker

import (
	"context"
	"fmt"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/ironflow/ironflow/workflows"
)

// StartReconciler starts the reconciler of a conductor group
// (workflows/reconcile.go) or, when it runs already, asks it for a pass at
// once: every worker process calls it at start-up for each group it
// serves, so that a pass follows every start of the control plane. An
// Interval of 0 or less takes the default; a reconciler already running
// keeps its settings (terminate `reconcile-<group>` and restart a worker to
// apply new ones).
func StartReconciler(ctx context.Context, c client.Client, in workflows.ReconcileInput) (client.WorkflowRun, error) {
	return StartReconcilerOn(ctx, c, workflows.TaskQueue, in)
}

// StartReconcilerOn is StartReconciler with the workflow task queue given.
func StartReconcilerOn(ctx context.Context, c client.Client, taskQueue string, in workflows.ReconcileInput) (client.WorkflowRun, error) {
	run, err := c.SignalWithStartWorkflow(ctx, workflows.ReconcileWorkflowID(in.ConductorGroup), workflows.SignalReconcileNow, nil,
		client.StartWorkflowOptions{
			ID:                       workflows.ReconcileWorkflowID(in.ConductorGroup),
			TaskQueue:                taskQueue,
			WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
			WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		}, workflows.WorkflowReconcile, in)
	if err != nil {
		return nil, fmt.Errorf("start the reconciler of conductor group %q: %w", in.ConductorGroup, err)
	}
	return run, nil
}
