package devstack

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"
	sdklog "go.temporal.io/sdk/log"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/ironflow/ironflow/workflows"
)

// The dev server writes a task queue's workflow tasks and its activity
// tasks to one partition each (devServerDynamicConfig): a task never waits
// in the backlog of a partition no poll reaches. The CLI lists the
// partitions written to.
func TestDevServerWritesOneTaskQueuePartition(t *testing.T) {
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
	wf, act, err := TaskQueuePartitionsWritten(ctx, bin, workflows.TaskQueue, "--address", srv.Address())
	if err != nil {
		t.Fatal(err)
	}
	if wf != 1 || act != 1 {
		t.Errorf("task queue %s is written to %d workflow and %d activity partitions, want 1 and 1", workflows.TaskQueue, wf, act)
	}
}

// A release with fewer task-queue partitions must not strand the tasks
// an earlier release's server left in the backlog of a partition it no
// longer reads: workflows started on Temporal's default of four
// partitions while no worker polls, the server restarted with
// devServerDynamicConfig, then a worker starts; every workflow completes.
func TestDevServerRestartKeepsTasksOfFourPartitions(t *testing.T) {
	if testing.Short() {
		t.Skip("SKIPPED in -short mode: starts a Temporal dev server twice")
	}
	bin, err := FindTemporalCLI("")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	port, err := FreePort("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	cfg := TemporalConfig{Bin: bin, Port: port, UIPort: -1, DBFile: filepath.Join(t.TempDir(), "temporal.db")}
	log := slog.New(slog.DiscardHandler)

	current := devServerDynamicConfig
	// Temporal's default partitions, as a release before the setting ran,
	// with history's record of the tasks it handed to matching saved every
	// second instead of every 30 s: without that record saved, the
	// restarted server hands the tasks over again, to the partitions it
	// then writes, and nothing is left behind to find.
	devServerDynamicConfig = []string{"--dynamic-config-value", `history.transferProcessorUpdateAckInterval="1s"`}
	srv, err := StartTemporal(ctx, cfg, log)
	devServerDynamicConfig = current
	if err != nil {
		t.Fatal(err)
	}
	const queue, n = "partition-upgrade", 16
	if wf, act, err := TaskQueuePartitionsWritten(ctx, bin, queue, "--address", srv.Address()); err != nil {
		t.Fatal(err)
	} else if wf < 4 || act < 4 {
		t.Fatalf("the earlier release's server writes %d workflow and %d activity partitions, fewer than four, so nothing is left in a partition no longer read", wf, act)
	}
	c, err := client.Dial(client.Options{HostPort: srv.Address(), Logger: sdklog.NewStructuredLogger(log)})
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("partition-upgrade-%d", i)
		if _, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: ids[i], TaskQueue: queue}, "Upgraded"); err != nil {
			t.Fatal(err)
		}
	}
	c.Close()
	time.Sleep(4 * time.Second) // the ack level saved
	if err := srv.Stop(); err != nil {
		t.Fatal(err)
	}

	if srv, err = StartTemporal(ctx, cfg, log); err != nil {
		t.Fatal(err)
	}
	defer srv.Stop()
	if c, err = client.Dial(client.Options{HostPort: srv.Address(), Logger: sdklog.NewStructuredLogger(log)}); err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	w := sdkworker.New(c, queue, sdkworker.Options{})
	w.RegisterWorkflowWithOptions(func(workflow.Context) error { return nil }, workflow.RegisterOptions{Name: "Upgraded"})
	if err := w.Start(); err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var stuck []string
	for deadline := time.Now().Add(45 * time.Second); ; time.Sleep(500 * time.Millisecond) {
		stuck = stuck[:0]
		for _, id := range ids {
			d, err := c.DescribeWorkflowExecution(ctx, id, "")
			if err != nil {
				t.Fatal(err)
			}
			if st := d.GetWorkflowExecutionInfo().GetStatus(); st != enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED {
				stuck = append(stuck, fmt.Sprintf("%s (%s)", id, st))
			}
		}
		if len(stuck) == 0 || time.Now().After(deadline) {
			break
		}
	}
	if len(stuck) > 0 {
		t.Errorf("%d of %d workflows started on four partitions did not complete after the restart: %v", len(stuck), n, stuck)
	}
}
