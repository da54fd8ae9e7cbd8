package workflows

import (
	"path/filepath"
	"strings"
	"testing"

	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// Histories recorded by an earlier version of these workflows (against fake
// activities; one file per scenario: deploys that succeed, time out, are
// aborted, retried, skipped or given up on; ramdisk, anaconda and fake
// deploys; undeploy with cleaning, provide, manage, inspect, power and boot
// device) replay without a non-determinism error: a workflow in flight when
// the worker is upgraded carries on. A change that alters the commands a
// workflow issues fails here, and belongs behind workflow.GetVersion.
func TestHistoriesOfTheEarlierVersionReplay(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "history", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no recorded histories: %v", err)
	}
	r := worker.NewWorkflowReplayer()
	for name, fn := range map[string]any{
		WorkflowManageNode: ManageNode, WorkflowProvideNode: ProvideNode, WorkflowDeployNode: DeployNode,
		WorkflowUndeployNode: UndeployNode, WorkflowInspectNode: InspectNode, WorkflowSetPowerState: SetPowerState,
		WorkflowChangeBootDevice: ChangeBootDevice, WorkflowSyncPowerStates: SyncPowerStates,
	} {
		r.RegisterWorkflowWithOptions(fn, workflow.RegisterOptions{Name: name})
	}
	for _, f := range files {
		t.Run(strings.TrimSuffix(filepath.Base(f), ".json"), func(t *testing.T) {
			if err := r.ReplayWorkflowHistoryFromJSONFile(nil, f); err != nil {
				t.Fatalf("replay %s: %v", f, err)
			}
		})
	}
}
