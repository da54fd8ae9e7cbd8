package devstack

import (
	"context"
	"encoding/json"
	"log/slog"
	"os/exec"
	"testing"
	"time"

	"github.com/ironflow/ironflow/workflows"
)

// The dev server gives a task queue one partition for workflow tasks and
// one for activity tasks (devServerDynamicConfig): a task never waits in
// the backlog of a partition no poll reaches.
func TestDevServerTaskQueuesHaveOnePartition(t *testing.T) {
	if testing.Short() {
		t.Skip("SKIPPED in -short mode: starts a Temporal dev server")
	}
	bin, err := FindTemporalCLI("")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv, err := StartTemporal(ctx, TemporalConfig{Bin: bin, Port: 0, UIPort: -1}, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	out, err := exec.CommandContext(ctx, bin, "task-queue", "list-partition", "--task-queue", workflows.TaskQueue,
		"--address", srv.Address(), "-o", "json").CombinedOutput()
	if err != nil {
		t.Fatalf("temporal task-queue list-partition: %v: %s", err, out)
	}
	var parts struct {
		Activity []struct{ Key string } `json:"activityTaskQueuePartitions"`
		Workflow []struct{ Key string } `json:"workflowTaskQueuePartitions"`
	}
	if err := json.Unmarshal(out, &parts); err != nil {
		t.Fatalf("list-partition output %s: %v", out, err)
	}
	if len(parts.Workflow) != 1 || len(parts.Activity) != 1 {
		t.Errorf("task queue %s has %d workflow and %d activity partitions, want 1 and 1: %s", workflows.TaskQueue, len(parts.Workflow), len(parts.Activity), out)
	}
}
