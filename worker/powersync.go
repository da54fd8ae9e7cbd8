package worker

import (
	"context"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/ironflow/ironflow/workflows"
)

// StartPowerSync starts the power sync of a conductor group, or leaves the
// running one as it is: every worker process calls it at startup for each
// group it serves, and the first one wins. interval <= 0 disables the sync
// (Ironic's sync_power_state_interval 0): nothing is started and the run is
// nil. A sync already running keeps its settings; terminate it
// (`temporal workflow terminate --workflow-id power-sync-<group>`) and
// restart a worker to apply new ones.
func StartPowerSync(ctx context.Context, c client.Client, group string, interval time.Duration) (client.WorkflowRun, error) {
	if interval <= 0 {
		return nil, nil
	}
	return StartPowerSyncOn(ctx, c, workflows.TaskQueue, workflows.SyncPowerInput{ConductorGroup: group, Interval: interval})
}

// StartPowerSyncOn is StartPowerSync with every setting and the workflow
// task queue given.
func StartPowerSyncOn(ctx context.Context, c client.Client, taskQueue string, in workflows.SyncPowerInput) (client.WorkflowRun, error) {
	run, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                       workflows.PowerSyncWorkflowID(in.ConductorGroup),
		TaskQueue:                taskQueue,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
	}, workflows.WorkflowSyncPowerStates, in)
	if err != nil {
		return nil, fmt.Errorf("start power sync of conductor group %q: %w", in.ConductorGroup, err)
	}
	return run, nil
}
