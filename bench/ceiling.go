package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/ironflow/ironflow/worker"
)

// The ceiling's workflow runs a DeployNode's activity mix as no-ops on its
// own task queue: what the same Temporal server allows for that mix.
const (
	ceilingQueue    = "ironflow-bench-ceiling"
	ceilingWorkflow = "BenchCeiling"
	ceilingActivity = "BenchNoop"
	// Activity kinds in a mix.
	kindLocal   = "local"
	kindRegular = "regular"
)

// ceilingWorkflowFn runs kinds in order: local activities as markers in the
// workflow task, regular ones through the task queue.
func ceilingWorkflowFn(ctx workflow.Context, kinds []string) error {
	lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2},
	})
	rctx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 2 * time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumAttempts: 5},
	})
	for _, k := range kinds {
		var err error
		if k == kindLocal {
			err = workflow.ExecuteLocalActivity(lctx, ceilingActivity).Get(ctx, nil)
		} else {
			err = workflow.ExecuteActivity(rctx, ceilingActivity).Get(ctx, nil)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func noopActivity(context.Context) error { return nil }

// activityMix reads a workflow's history: the kinds of its activities in
// order, and its event count and signal count.
type activityMix struct {
	Kinds   []string
	Events  int
	Signals int
	Timers  int
	// split is where the time went (deploys only).
	split latencyBreakdown
}

func (m activityMix) count(kind string) int {
	n := 0
	for _, k := range m.Kinds {
		if k == kind {
			n++
		}
	}
	return n
}

func readMix(ctx context.Context, c client.Client, workflowID string) (activityMix, error) {
	var m activityMix
	it := c.GetWorkflowHistory(ctx, workflowID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return m, fmt.Errorf("read history of %s: %w", workflowID, err)
		}
		m.Events++
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			m.Kinds = append(m.Kinds, kindRegular)
		case enumspb.EVENT_TYPE_MARKER_RECORDED:
			// Version and side-effect markers are not activities.
			if ev.GetMarkerRecordedEventAttributes().GetMarkerName() == "LocalActivity" {
				m.Kinds = append(m.Kinds, kindLocal)
			}
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
			m.Signals++
		case enumspb.EVENT_TYPE_TIMER_STARTED:
			m.Timers++
		}
	}
	return m, nil
}

// ceilingResult is n bare workflows of one mix on the server.
type ceilingResult struct {
	Rate        float64 // workflows/s
	Completed   int
	Events      int // per workflow
	Wall        time.Duration
	TemporalCPU time.Duration // per workflow
	// Starts are the ExecuteWorkflow round trips: what a provision request
	// waits for at least.
	Starts []time.Duration
}

// ceilingWorkerOptions are ironflow's workflow worker's defaults.
func ceilingWorkerOptions() sdkworker.Options {
	return sdkworker.Options{
		MaxConcurrentWorkflowTaskExecutionSize:  worker.DefaultMaxConcurrentWorkflowTasks,
		MaxConcurrentLocalActivityExecutionSize: worker.DefaultMaxConcurrentLocalActivities,
		MaxConcurrentActivityExecutionSize:      worker.DefaultMaxConcurrentActivities,
		MaxConcurrentWorkflowTaskPollers:        worker.DefaultWorkflowTaskPollers,
		MaxConcurrentActivityTaskPollers:        worker.DefaultActivityTaskPollers,
	}
}

// runCeiling starts n workflows of the mix through a pool of clients, with a
// worker in this process configured as ironflow's workflow worker, and waits
// for all to complete.
// With eager, the starts ask for eager execution, which the worker of the
// same client takes.
func runCeiling(ctx context.Context, st *stack, n, clients int, kinds []string, timeout time.Duration, eager bool) (ceilingResult, error) {
	var res ceilingResult
	w := sdkworker.New(st.tc, ceilingQueue, ceilingWorkerOptions())
	w.RegisterWorkflowWithOptions(ceilingWorkflowFn, workflow.RegisterOptions{Name: ceilingWorkflow})
	w.RegisterActivityWithOptions(noopActivity, activity.RegisterOptions{Name: ceilingActivity})
	if err := w.Start(); err != nil {
		return res, fmt.Errorf("start the ceiling worker: %w", err)
	}
	defer w.Stop()

	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	runID := time.Now().UnixNano()
	before := procCPU(st.temporalPID())
	start := time.Now()
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
	)
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("bench-ceiling-%d-%d", runID, i)
	}
	jobs := make(chan int)
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				t0 := time.Now()
				_, err := st.tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: ids[i], TaskQueue: ceilingQueue, EnableEagerStart: eager}, ceilingWorkflow, kinds)
				took := time.Since(t0)
				mu.Lock()
				if err != nil {
					errs = append(errs, err)
				} else {
					res.Starts = append(res.Starts, took)
				}
				mu.Unlock()
			}
		}()
	}
	for i := range n {
		select {
		case jobs <- i:
		case <-ctx.Done():
		}
	}
	close(jobs)
	wg.Wait()
	if len(errs) > 0 {
		return res, fmt.Errorf("%d of %d ceiling workflows not started, first: %w", len(errs), n, errs[0])
	}
	// Wait as the deploys are waited for: one cheap query every poll
	// interval, not a long poll per workflow, which would load the server
	// the deploys do not have.
	query := fmt.Sprintf("WorkflowType = '%s' AND ExecutionStatus = 'Running'", ceilingWorkflow)
	for {
		resp, err := st.tc.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{Query: query})
		if err != nil {
			return res, fmt.Errorf("count running ceiling workflows: %w", err)
		}
		if resp.GetCount() == 0 {
			break
		}
		select {
		case <-ctx.Done():
			return res, fmt.Errorf("ceiling workflows still running: %w", ctx.Err())
		case <-time.After(DefaultPollInterval):
		}
	}
	// The end is the last workflow's close time on the server, as for
	// ironflow's deploys.
	last, lastID, completed, err := closeInfo(context.Background(), st, ids)
	if err != nil {
		return res, err
	}
	// The run's end is its last workflow's close: where that one's time
	// went (from the run's start) tells a straggler from a slow server.
	if b, err := readBreakdown(context.Background(), st.tc, lastID, start); err == nil {
		st.log.Info("ceiling done", "workflows", n, "eager", eager, "wall", last.Sub(start).Round(time.Millisecond),
			"slowest", fmt.Sprintf("%s: %s", lastID, b.describe(1)))
	}
	res.Completed = completed
	res.Wall = last.Sub(start)
	if res.Completed > 0 && res.Wall > 0 {
		res.Rate = float64(res.Completed) / res.Wall.Seconds()
		res.TemporalCPU = (procCPU(st.temporalPID()) - before) / time.Duration(res.Completed)
	}
	if mix, err := readMix(context.Background(), st.tc, ids[0]); err == nil {
		res.Events = mix.Events
	}
	if completed < n {
		return res, fmt.Errorf("%d of %d ceiling workflows did not complete", n-completed, n)
	}
	return res, nil
}

// mixOf summarises kinds as "L local + R regular".
func mixOf(kinds []string) string {
	m := activityMix{Kinds: kinds}
	return fmt.Sprintf("%d local + %d regular activities", m.count(kindLocal), m.count(kindRegular))
}

// describeWorkers bound the DescribeWorkflowExecution calls in flight.
const describeWorkers = 16

// closeInfo is the latest close time among the workflows' latest runs and
// how many of them completed.
func closeInfo(ctx context.Context, st *stack, ids []string) (time.Time, string, int, error) {
	var (
		mu        sync.Mutex
		last      time.Time
		lastID    string
		completed int
		first     error
		wg        sync.WaitGroup
	)
	jobs := make(chan string)
	for range describeWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for id := range jobs {
				d, err := st.tc.DescribeWorkflowExecution(ctx, id, "")
				mu.Lock()
				if err != nil {
					if first == nil {
						first = fmt.Errorf("describe %s: %w", id, err)
					}
				} else {
					info := d.GetWorkflowExecutionInfo()
					if info.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED {
						completed++
					}
					if ct := info.GetCloseTime(); ct != nil && ct.AsTime().After(last) {
						last, lastID = ct.AsTime(), id
					}
				}
				mu.Unlock()
			}
		}()
	}
	for _, id := range ids {
		jobs <- id
	}
	close(jobs)
	wg.Wait()
	return last, lastID, completed, first
}
