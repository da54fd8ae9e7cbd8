package workflows

import (
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	temporalotel "go.temporal.io/sdk/contrib/opentelemetry"
	"go.temporal.io/sdk/interceptor"

	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/ironflow/ironflow"
)

// ReplayAdvice is what a developer whose change broke a recorded history
// reads (the guard test, replay_guard_test.go, expects it).
const ReplayAdvice = "a recorded history no longer replays: put the change behind workflow.GetVersion with the change ID of its workflow type " +
	"for the next release in workflows/versions.go, keep the last release's path, see docs/versioning.md"

// ReplayedWorkflows are the workflow types the replay registers, by the
// names the worker registers them under (worker.Workflows; the coverage
// test, history_coverage_test.go, checks the two agree).
var ReplayedWorkflows = map[string]any{
	WorkflowManageNode: ManageNode, WorkflowProvideNode: ProvideNode, WorkflowDeployNode: DeployNode,
	WorkflowUndeployNode: UndeployNode, WorkflowInspectNode: InspectNode, WorkflowSetPowerState: SetPowerState,
	WorkflowChangeBootDevice: ChangeBootDevice, WorkflowSyncPowerStates: SyncPowerStates,
	WorkflowRescueNode: RescueNode, WorkflowUnrescueNode: UnrescueNode,
	WorkflowChangeVirtualMedia: ChangeVirtualMedia,
	WorkflowNodeManagement:     NodeManagement,
	WorkflowCleanNode:          CleanNode,
	WorkflowServiceNode:        ServiceNode,
	WorkflowChangeBootMode:     ChangeBootMode,
	WorkflowVendorPassthru:     VendorPassthru,
	WorkflowAllocate:           Allocate,
	WorkflowAdoptNode:          AdoptNode,
	WorkflowSetConsoleNode:     SetConsoleNode,
	WorkflowRollout:            Rollout,
	WorkflowReconcile:          Reconcile,
}

// lastRelease is the one directory of workflows/testdata/history: the last
// release's, named for it, which VERSION is (at the release) or follows (a
// "-dev" version of a later one, between releases).
func lastRelease(t *testing.T) string {
	t.Helper()
	entries, err := os.ReadDir(filepath.Join("testdata", "history"))
	if err != nil {
		t.Fatalf("no recorded histories (workflows/testdata/history): %v: record the release's (make record-histories, docs/versioning.md)", err)
	}
	if len(entries) != 1 || !entries[0].IsDir() {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Fatalf("workflows/testdata/history holds %q: only the last release's histories are kept, one directory named for it (docs/versioning.md)", names)
	}
	release, current := entries[0].Name(), ironflow.Version()
	rel, ok := releaseNumbers(release)
	if !ok {
		t.Fatalf("workflows/testdata/history/%s: the directory is named for a release (X.Y.Z), which %q is not", release, release)
	}
	cur, ok := releaseNumbers(strings.TrimSuffix(current, "-dev"))
	switch {
	case !ok:
		t.Fatalf("VERSION %q is neither a release (X.Y.Z) nor the next one's -dev", current)
	case current == release:
	case strings.HasSuffix(current, "-dev") && slices.Compare(cur, rel) > 0:
	default:
		t.Fatalf("VERSION is %s, but the recorded histories are release %s's: a release records its own (make record-histories), and between releases VERSION is the next one's -dev", current, release)
	}
	return release
}

// releaseNumbers are X, Y and Z of "X.Y.Z".
func releaseNumbers(v string) ([]int, bool) {
	parts := strings.Split(v, ".")
	if len(parts) != 3 {
		return nil, false
	}
	var out []int
	for _, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 {
			return nil, false
		}
		out = append(out, n)
	}
	return out, true
}

// The histories of the last release (workflows/testdata/history/<release>,
// recorded by internal/record-histories against fake activities; one file
// per scenario: deploys that succeed, time out, are aborted, retried,
// skipped or given up on; ramdisk, anaconda and fake deploys; undeploy with
// cleaning, provide, manage, inspect, power and boot device, rescue and
// unrescue, manual cleaning, servicing, the power sync up to its
// continue-as-new) replay without a non-determinism error: a workflow in
// flight when the worker is upgraded carries on. A change that alters the
// commands a workflow issues fails here, and belongs behind
// workflow.GetVersion (docs/versioning.md). The release's directory is the
// only one: older ones went with the gates they needed.
func TestHistoriesOfTheEarlierVersionReplay(t *testing.T) {
	release := lastRelease(t)
	dir := filepath.Join("testdata", "history", release)
	var files []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(path, ".json") {
			files = append(files, path)
		}
		return err
	})
	if err != nil || len(files) == 0 {
		t.Fatalf("no recorded histories of release %s in %s: %v: record them (make record-histories, docs/versioning.md)", release, dir, err)
	}
	r := worker.NewWorkflowReplayer()
	// A worker with --otel-endpoint runs the workflows under Temporal's
	// tracing interceptor (docs/tracing.md): it must replay the same
	// histories, and emit no span while it replays.
	spans := tracetest.NewSpanRecorder()
	icpt, err := temporalotel.NewTracingInterceptor(temporalotel.TracerOptions{
		Tracer: sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans)).Tracer("replay")})
	if err != nil {
		t.Fatal(err)
	}
	traced, err := worker.NewWorkflowReplayerWithOptions(worker.WorkflowReplayerOptions{Interceptors: []interceptor.WorkerInterceptor{icpt}})
	if err != nil {
		t.Fatal(err)
	}
	for name, fn := range ReplayedWorkflows {
		r.RegisterWorkflowWithOptions(fn, workflow.RegisterOptions{Name: name})
		traced.RegisterWorkflowWithOptions(fn, workflow.RegisterOptions{Name: name})
	}
	for _, f := range files {
		name, _ := filepath.Rel(dir, f)
		t.Run(strings.TrimSuffix(name, ".json"), func(t *testing.T) {
			if err := r.ReplayWorkflowHistoryFromJSONFile(nil, f); err != nil {
				t.Fatalf("replay %s: %v\n%s", f, err, ReplayAdvice)
			}
			if err := traced.ReplayWorkflowHistoryFromJSONFile(nil, f); err != nil {
				t.Fatalf("replay %s with the tracing interceptor: %v\n%s", f, err, ReplayAdvice)
			}
		})
	}
	t.Logf("spans ended while replaying under the tracing interceptor: %d", len(spans.Ended()))
	for _, s := range spans.Ended() {
		t.Logf("  %s", s.Name())
	}
}
