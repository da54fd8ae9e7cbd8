package workflows

import (
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
)

// ReplayAdvice is what a developer whose change broke a recorded history
// reads (the guard test, replay_guard_test.go, expects it).
const ReplayAdvice = "a recorded history no longer replays: put the change behind workflow.GetVersion with a new change ID " +
	"in workflows/versions.go, keep the old path, see docs/versioning.md"

// ReplayedWorkflows are the workflow types the replay registers, by the
// names the worker registers them under (worker.Workflows; the coverage
// test, history_coverage_test.go, checks the two agree).
var ReplayedWorkflows = map[string]any{
	WorkflowManageNode: ManageNode, WorkflowProvideNode: ProvideNode, WorkflowDeployNode: DeployNode,
	WorkflowUndeployNode: UndeployNode, WorkflowInspectNode: InspectNode, WorkflowSetPowerState: SetPowerState,
	WorkflowChangeBootDevice: ChangeBootDevice, WorkflowSyncPowerStates: SyncPowerStates,
	WorkflowRescueNode: RescueNode, WorkflowUnrescueNode: UnrescueNode,
	WorkflowChangeVirtualMedia: ChangeVirtualMedia,
	WorkflowCleanNode:          CleanNode,
	WorkflowServiceNode:        ServiceNode,
	WorkflowChangeBootMode:     ChangeBootMode,
}

// Histories recorded by earlier versions of these workflows (one directory
// per version, named for its commit; recorded by workflows/testdata/record
// against fake activities; one file per scenario: deploys that succeed, time out, are
// aborted, retried, skipped or given up on; ramdisk, anaconda and fake
// deploys; undeploy with cleaning, provide, manage, inspect, power and boot
// device; from 0aaab4f on, rescue and unrescue; later ones add the agent
// lost mid-write, abort of a failed step, out-of-band inspection, plain
// provide and a power sync's run up to its continue-as-new) replay without
// a non-determinism error: a workflow in flight when
// the worker is upgraded carries on. A change that alters the commands a
// workflow issues fails here, and belongs behind workflow.GetVersion.
func TestHistoriesOfTheEarlierVersionReplay(t *testing.T) {
	var files []string
	err := filepath.WalkDir(filepath.Join("testdata", "history"), func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".json") {
			files = append(files, path)
		}
		return err
	})
	if err != nil || len(files) == 0 {
		t.Fatalf("no recorded histories: %v", err)
	}
	r := worker.NewWorkflowReplayer()
	for name, fn := range ReplayedWorkflows {
		r.RegisterWorkflowWithOptions(fn, workflow.RegisterOptions{Name: name})
	}
	for _, f := range files {
		name, _ := filepath.Rel(filepath.Join("testdata", "history"), f)
		t.Run(strings.TrimSuffix(name, ".json"), func(t *testing.T) {
			if err := r.ReplayWorkflowHistoryFromJSONFile(nil, f); err != nil {
				t.Fatalf("replay %s: %v\n%s", f, err, ReplayAdvice)
			}
		})
	}
}
