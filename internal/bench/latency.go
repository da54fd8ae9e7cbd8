package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/ironflow/ironflow/provision"
	"github.com/ironflow/ironflow/workflows"
)

// The latency part deploys one fake-hardware node on an otherwise idle
// stack, again and again, and splits each deploy's time by the workflow's
// history: what a single deploy waits for when nothing else runs.
const (
	// DefaultLatencyRuns: enough deploys for a p99 that is not the maximum
	// of a handful.
	DefaultLatencyRuns = 20
	// latencyPoll: how often the node is read while it deploys; fine
	// enough that the observed time is within a few ms of the server's.
	latencyPoll = 5 * time.Millisecond
	latencyWait = time.Minute
	// latencyQueue is the bare workflow's own queue.
	latencyQueue = "ironflow-bench-latency"
)

// latencyBreakdown is where one deploy's time went, from its history.
type latencyBreakdown struct {
	// startPath: PUT sent → WorkflowExecutionStarted (the API's checks,
	// its writes and the start round trip).
	startPath time.Duration
	// taskQueue: workflow tasks' scheduled → started, summed.
	taskQueue time.Duration
	// taskRun: workflow tasks' started → completed (the worker's code and
	// its local activities), summed.
	taskRun time.Duration
	// actQueue and actRun: regular activities' scheduled → started and
	// started → completed, summed.
	actQueue, actRun time.Duration
	// timers: timer started → fired, summed (fixed sleeps).
	timers time.Duration
	// closed: PUT sent → the workflow's last event.
	closed time.Duration
	// tasks, activities, locals: counts; taskFailures: workflow tasks
	// that failed or timed out (each retried).
	tasks, activities, locals, taskFailures int
}

func (b latencyBreakdown) add(o latencyBreakdown) latencyBreakdown {
	b.startPath += o.startPath
	b.taskQueue += o.taskQueue
	b.taskRun += o.taskRun
	b.actQueue += o.actQueue
	b.actRun += o.actRun
	b.timers += o.timers
	b.closed += o.closed
	b.tasks += o.tasks
	b.activities += o.activities
	b.locals += o.locals
	b.taskFailures += o.taskFailures
	return b
}

// describe says where the time of n deploys summed in b went, per deploy.
func (b latencyBreakdown) describe(n int) string {
	avg := func(d time.Duration) float64 { return ms(d / time.Duration(n)) }
	s := fmt.Sprintf("PUT → workflow started %.0f ms; %.1f workflow tasks: queued %.0f ms, run %.0f ms (with %.1f local activities); %.1f activities: queued %.0f ms, run %.0f ms; timers %.0f ms",
		avg(b.startPath), float64(b.tasks)/float64(n), avg(b.taskQueue), avg(b.taskRun), float64(b.locals)/float64(n),
		float64(b.activities)/float64(n), avg(b.actQueue), avg(b.actRun), avg(b.timers))
	if b.taskFailures > 0 {
		s += fmt.Sprintf("; %.1f workflow tasks failed or timed out", float64(b.taskFailures)/float64(n))
	}
	return s
}

// readBreakdown reads a workflow's latest run's history.
func readBreakdown(ctx context.Context, c client.Client, workflowID string, sent time.Time) (latencyBreakdown, error) {
	var b latencyBreakdown
	scheduled := map[int64]time.Time{} // scheduled event id → time
	started := map[int64]time.Time{}   // started event id → time
	it := c.GetWorkflowHistory(ctx, workflowID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return b, fmt.Errorf("read history of %s: %w", workflowID, err)
		}
		t := ev.GetEventTime().AsTime()
		b.closed = t.Sub(sent)
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_STARTED:
			b.startPath = t.Sub(sent)
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_SCHEDULED, enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			scheduled[ev.GetEventId()] = t
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_STARTED:
			b.tasks++
			started[ev.GetEventId()] = t
			b.taskQueue += t.Sub(scheduled[ev.GetWorkflowTaskStartedEventAttributes().GetScheduledEventId()])
		case enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED, enumspb.EVENT_TYPE_WORKFLOW_TASK_FAILED, enumspb.EVENT_TYPE_WORKFLOW_TASK_TIMED_OUT:
			if ev.GetEventType() != enumspb.EVENT_TYPE_WORKFLOW_TASK_COMPLETED {
				b.taskFailures++
			}
			var id int64
			switch {
			case ev.GetWorkflowTaskCompletedEventAttributes() != nil:
				id = ev.GetWorkflowTaskCompletedEventAttributes().GetStartedEventId()
			case ev.GetWorkflowTaskFailedEventAttributes() != nil:
				id = ev.GetWorkflowTaskFailedEventAttributes().GetStartedEventId()
			default:
				id = ev.GetWorkflowTaskTimedOutEventAttributes().GetStartedEventId()
			}
			if s, ok := started[id]; ok {
				b.taskRun += t.Sub(s)
			}
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:
			b.activities++
			started[ev.GetEventId()] = t
			b.actQueue += t.Sub(scheduled[ev.GetActivityTaskStartedEventAttributes().GetScheduledEventId()])
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_COMPLETED:
			if s, ok := started[ev.GetActivityTaskCompletedEventAttributes().GetStartedEventId()]; ok {
				b.actRun += t.Sub(s)
			}
		case enumspb.EVENT_TYPE_TIMER_STARTED:
			started[ev.GetEventId()] = t
		case enumspb.EVENT_TYPE_TIMER_FIRED:
			if s, ok := started[ev.GetTimerFiredEventAttributes().GetStartedEventId()]; ok {
				b.timers += t.Sub(s)
			}
		case enumspb.EVENT_TYPE_MARKER_RECORDED:
			if ev.GetMarkerRecordedEventAttributes().GetMarkerName() == "LocalActivity" {
				b.locals++
			}
		}
	}
	return b, nil
}

func benchLatency(ctx context.Context, cfg config, st *stack, log *slog.Logger) ([]Row, error) {
	if err := st.restart(ctx); err != nil {
		return nil, err
	}
	mode := deployMode{part: "latency", deployInterface: "fake"}
	nodes, err := enrollNodes(ctx, st, 1, mode, 1)
	if err != nil {
		return nil, err
	}
	bn := nodes[0]
	// One deploy not measured: the worker's first workflow task of a type
	// and the API's first start pay for connections and caches.
	if _, _, err := deployOne(ctx, st, bn); err != nil {
		return nil, fmt.Errorf("warm-up deploy: %w", err)
	}
	var (
		server, observed, closed []time.Duration
		sum                      latencyBreakdown
	)
	for i := range cfg.latencyRuns {
		if err := undeployOne(ctx, st, bn); err != nil {
			return nil, fmt.Errorf("run %d: %w", i+1, err)
		}
		sent, activeAt, err := deployOne(ctx, st, bn)
		if err != nil {
			return nil, fmt.Errorf("run %d: %w", i+1, err)
		}
		server = append(server, activeAt.Sub(sent))
		observed = append(observed, bn.observedAt.Sub(sent))
		b, err := readBreakdown(ctx, st.tc, workflows.WorkflowID(bn.uuid), sent)
		if err != nil {
			return nil, err
		}
		sum = sum.add(b)
		closed = append(closed, b.closed)
	}
	kinds, err := readMix(ctx, st.tc, workflows.WorkflowID(bn.uuid))
	if err != nil {
		return nil, err
	}
	bare, err := bareLatency(ctx, st, kinds.Kinds, cfg.latencyRuns)
	if err != nil {
		return nil, err
	}
	n := time.Duration(cfg.latencyRuns)
	avg := func(d time.Duration) float64 { return ms(d / n) }
	label := fmt.Sprintf("one fake-hardware deploy on an idle stack, %d runs", cfg.latencyRuns)
	rows := []Row{
		row("latency", label+": PUT → active (provision_updated_at) p50", ms(percentile(server, 50)), "ms").
			note(fmt.Sprintf("goal < 500 ms; seen by a %v poll of the node: p50 %.0f ms, p99 %.0f ms", latencyPoll, ms(percentile(observed, 50)), ms(percentile(observed, 99)))),
		row("latency", "idle single deploy PUT → active p99", ms(percentile(server, 99)), "ms"),
		lowerBetter(row("latency", "idle single deploy PUT → workflow closed p50", ms(percentile(closed, 50)), "ms"),
			fmt.Sprintf("bare workflow, same mix (%s), start → result p50", mixOf(kinds.Kinds)), ms(percentile(bare, 50))),
		lowerBetter(row("latency", "idle single deploy PUT → workflow closed p99", ms(percentile(closed, 99)), "ms"),
			"bare workflow p99", ms(percentile(bare, 99))),
		row("latency", "mean split of one deploy (history)", avg(sum.startPath+sum.taskQueue+sum.taskRun+sum.actQueue+sum.actRun+sum.timers), "ms").
			note(sum.describe(cfg.latencyRuns)),
	}
	log.Info("latency done", "p50", percentile(server, 50), "p99", percentile(server, 99), "bare_p50", percentile(bare, 50))
	return rows, nil
}

// deployOne deploys bn alone and waits for active: when the PUT was sent
// and the node's provision_updated_at.
func deployOne(ctx context.Context, st *stack, bn *benchNode) (time.Time, time.Time, error) {
	sent := time.Now()
	bn.requested = sent
	if _, err := st.call(ctx, http.MethodPut, "/v1/nodes/"+bn.uuid+"/states/provision", map[string]any{"target": provision.VerbActive}, nil); err != nil {
		return sent, time.Time{}, err
	}
	if err := waitOne(ctx, st, bn, provision.Active); err != nil {
		return sent, time.Time{}, err
	}
	return sent, bn.activeAt, nil
}

func undeployOne(ctx context.Context, st *stack, bn *benchNode) error {
	if _, err := st.call(ctx, http.MethodPut, "/v1/nodes/"+bn.uuid+"/states/provision", map[string]any{"target": provision.VerbDeleted}, nil); err != nil {
		return err
	}
	return waitOne(ctx, st, bn, provision.Available)
}

// waitOne reads bn every latencyPoll until it is in state (or failed).
func waitOne(ctx context.Context, st *stack, bn *benchNode, state provision.State) error {
	ctx, cancel := context.WithTimeout(ctx, latencyWait)
	defer cancel()
	for {
		var n listedNode
		if _, err := st.call(ctx, http.MethodGet, "/v1/nodes/"+bn.uuid+"?fields=uuid,provision_state,provision_updated_at,last_error", nil, &n); err != nil {
			return err
		}
		if n.ProvisionState == state || isFailed(n.ProvisionState) {
			bn.observedAt = time.Now()
			bn.state = n.ProvisionState
			bn.lastError = deref(n.LastError)
			if n.ProvisionUpdatedAt != nil {
				bn.activeAt = parseTime(*n.ProvisionUpdatedAt)
			}
			if bn.state != state {
				return fmt.Errorf("node %s went to %q instead of %q: %s", bn.name, bn.state, state, bn.lastError)
			}
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("node %s still %q: %w", bn.name, n.ProvisionState, ctx.Err())
		case <-time.After(latencyPoll):
		}
	}
}

// bareLatency runs the mix as one bare workflow at a time, runs times, with
// a worker configured as ironflow's: the floor the server and SDK set for a
// single deploy.
func bareLatency(ctx context.Context, st *stack, kinds []string, runs int) ([]time.Duration, error) {
	w := sdkworker.New(st.tc, latencyQueue, ceilingWorkerOptions())
	w.RegisterWorkflowWithOptions(ceilingWorkflowFn, workflow.RegisterOptions{Name: ceilingWorkflow})
	w.RegisterActivityWithOptions(noopActivity, activity.RegisterOptions{Name: ceilingActivity})
	if err := w.Start(); err != nil {
		return nil, fmt.Errorf("start the bare worker: %w", err)
	}
	defer w.Stop()
	runID := time.Now().UnixNano()
	var out []time.Duration
	for i := -1; i < runs; i++ { // the first one warms up
		t0 := time.Now()
		run, err := st.tc.ExecuteWorkflow(ctx, client.StartWorkflowOptions{ID: fmt.Sprintf("bench-latency-%d-%d", runID, i), TaskQueue: latencyQueue}, ceilingWorkflow, kinds)
		if err != nil {
			return nil, err
		}
		if err := run.Get(ctx, nil); err != nil {
			return nil, err
		}
		if i >= 0 {
			out = append(out, time.Since(t0))
		}
	}
	slices.Sort(out)
	return out, nil
}
