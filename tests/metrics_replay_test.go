package tests

import (
	"context"
	"testing"
	"time"

	"github.com/ironflow/ironflow/agent/sim"
	"github.com/ironflow/ironflow/internal/testkit/promcheck"
	"github.com/ironflow/ironflow/workflows"
)

// workerSeries scrapes the lab worker's metrics and sums the samples of
// name whose labels hold want (label=value pairs; a histogram's count).
func workerSeries(t *testing.T, name string, want ...string) float64 {
	t.Helper()
	return seriesAt(t, labWorkerMetrics, name, want...)
}

// seriesAt scrapes the metrics served at addr and sums the samples of
// name whose labels hold want (promcheck.Families.Sum).
func seriesAt(t *testing.T, addr, name string, want ...string) float64 {
	t.Helper()
	body, err := promcheck.Scrape("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	fams, err := promcheck.Parse(body)
	if err != nil {
		t.Fatal(err)
	}
	return fams.Sum(name, want...)
}

// TestWorkflowMetricsCountOnceAcrossAWorkerRestart kills the worker while
// a deploy waits for its agent; the worker started after it replays the
// deploy's history and then finishes it. The new worker counts the finish
// and the steps it ran, not the start it replayed: the workflows emit
// through Temporal's replay-aware metrics handler (docs/metrics.md).
func TestWorkflowMetricsCountOnceAcrossAWorkerRestart(t *testing.T) {
	img := newImageServer(t, 4<<20)
	const mac = "52:54:00:cc:b0:01"
	uuid := enrollAgentNode(t, "metrics-replay", mac, img)
	m := startSimMachine(t, uuid, []string{mac}, sim.Config{})
	mustCLI(t, "node", "manage", uuid, "--wait", "60")
	mustCLI(t, "node", "provide", uuid, "--wait", "120")

	m.paused.Store(true) // the machine does not boot its agent yet
	mustCLI(t, "node", "deploy", uuid)
	waitState(t, uuid, "wait call-back", time.Minute)
	// The state is written by a local activity inside the workflow task
	// that started the deploy: killed before that task completes, the
	// worker leaves the start to be run, not replayed. Kill it once the
	// task is recorded.
	c := temporalClient(t)
	waitFor(t, "the deploy's first workflow task to be recorded", time.Minute, func() bool {
		d, err := c.DescribeWorkflowExecution(context.Background(), workflows.WorkflowID(uuid), "")
		return err == nil && d.GetPendingWorkflowTask() == nil
	})
	lab.KillWorker()
	if err := lab.StartWorker(); err != nil {
		t.Fatal(err)
	}
	if err := lab.WaitHTTP(context.Background(), "http://"+labWorkerMetrics+"/metrics", lab.Worker); err != nil {
		t.Fatal(err)
	}
	m.paused.Store(false)
	waitState(t, uuid, "active", 3*time.Minute)

	if n := workerSeries(t, "ironflow_operations_started_total", "operation=deploy"); n != 0 {
		t.Errorf("the new worker counted %v deploy starts: it replayed the start and must not count it", n)
	}
	deadline := time.Now().Add(10 * time.Second)
	for workerSeries(t, "ironflow_operations_finished_total", "operation=deploy", "outcome=succeeded") != 1 && time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond) // the finish is counted as the workflow task completes
	}
	if n := workerSeries(t, "ironflow_operations_finished_total", "operation=deploy", "outcome=succeeded"); n != 1 {
		t.Errorf("the new worker counted %v finished deploys, want 1", n)
	}
	if n := workerSeries(t, "ironflow_step_duration_seconds", "operation=deploy", "step=deploy.write_image"); n != 1 {
		t.Errorf("the new worker counted %v write_image steps, want 1", n)
	}
}
