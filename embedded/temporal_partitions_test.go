package embedded

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
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
// tasks to one partition each (devServerPartitions): a task never waits
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
// devServerPartitions, then a worker starts; every workflow completes.
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

	current := devServerPartitions
	// Temporal's default partitions and no record of them, as a release
	// before the setting ran, with history's record of the tasks it handed
	// to matching saved every second instead of every 30 s: without that
	// record saved, the restarted server hands the tasks over again, to
	// the partitions it then writes, and nothing is left behind to find.
	devServerPartitions = func(string) ([]string, error) {
		return []string{"--dynamic-config-value", `history.transferProcessorUpdateAckInterval="1s"`}, nil
	}
	srv, err := StartTemporal(ctx, cfg, log)
	devServerPartitions = current
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

// ReadPartitions reads a fresh store on the partitions written and
// records them; an existing store on its record, or on four without one.
func TestReadPartitions(t *testing.T) {
	file := filepath.Join(t.TempDir(), "temporal.db.partitions")
	if n, err := ReadPartitions(file, false, 1); err != nil || n != LegacyTaskQueuePartitions {
		t.Fatalf("an existing store without a record: %d, %v; want %d", n, err, LegacyTaskQueuePartitions)
	}
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Fatalf("a store without a record got one: %v", err)
	}
	if n, err := ReadPartitions(file, true, 1); err != nil || n != 1 {
		t.Fatalf("a fresh store: %d, %v; want 1", n, err)
	}
	if b, err := os.ReadFile(file); err != nil || string(b) != "1\n" {
		t.Fatalf("the record of a fresh store: %q, %v", b, err)
	}
	if n, err := ReadPartitions(file, false, 1); err != nil || n != 1 {
		t.Fatalf("a store recorded at one: %d, %v; want 1", n, err)
	}
	// Written on more partitions than recorded: read them all from now.
	if n, err := ReadPartitions(file, false, 3); err != nil || n != 3 {
		t.Fatalf("a store recorded at one written on three: %d, %v; want 3", n, err)
	}
	// Written on fewer again: the three keep being read.
	if n, err := ReadPartitions(file, false, 1); err != nil || n != 3 {
		t.Fatalf("a store recorded at three written on one: %d, %v; want 3", n, err)
	}
	if err := os.WriteFile(file, []byte("many\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadPartitions(file, false, 1); err == nil || !strings.Contains(err.Error(), `"many" is not a number of task-queue partitions`) {
		t.Fatalf("a record that is not a number: %v", err)
	}
}

// The dev server in memory, or on a new file, reads the one partition it
// writes; on a file an earlier release left, four.
func TestDevServerPartitions(t *testing.T) {
	read := func(args []string) string {
		i := slices.IndexFunc(args, func(a string) bool { return strings.HasPrefix(a, "matching.numTaskqueueReadPartitions=") })
		if i < 0 {
			t.Fatalf("no read partitions in %q", args)
		}
		return strings.TrimPrefix(args[i], "matching.numTaskqueueReadPartitions=")
	}
	args, err := devServerPartitions("")
	if err != nil || read(args) != "1" || !slices.Contains(args, "matching.numTaskqueueWritePartitions=1") {
		t.Fatalf("in memory: %q, %v", args, err)
	}
	db := filepath.Join(t.TempDir(), "temporal.db")
	if args, err = devServerPartitions(db); err != nil || read(args) != "1" {
		t.Fatalf("a new file: %q, %v", args, err)
	}
	if err := os.WriteFile(db, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if args, err = devServerPartitions(db); err != nil || read(args) != "1" {
		t.Fatalf("the file again: %q, %v", args, err)
	}
	legacy := filepath.Join(t.TempDir(), "temporal.db")
	if err := os.WriteFile(legacy, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if args, err = devServerPartitions(legacy); err != nil || read(args) != "4" || !slices.Contains(args, "matching.numTaskqueueWritePartitions=1") {
		t.Fatalf("a file without a record: %q, %v", args, err)
	}
}
