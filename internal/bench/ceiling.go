package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	historypb "go.temporal.io/api/history/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"
	sdkworker "go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"
	"google.golang.org/protobuf/proto"

	"github.com/ironflow/ironflow/provision"
	"github.com/ironflow/ironflow/worker"
	"github.com/ironflow/ironflow/workflows"
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
	// The other commands of a shape.
	kindNotify  = "local-notify" // a local activity that asks for the signal
	kindVersion = "version"
	kindUpsert  = "upsert"
	kindTimer   = "timer"
	kindCancel  = "cancel-timer"
	kindSignal  = "signal"
	// ceilingNotifyActivity is the notify kind's local activity.
	ceilingNotifyActivity = "BenchNotify"
	ceilingSignal         = "bench-heartbeat"
	// ceilingTimer outlasts every run, as a deploy's callback and
	// liveness timers do.
	ceilingTimer = 30 * time.Minute
)

// ceilingStateKey is the search attribute a shape's upserts set, the one
// ironflow's workflows keep the provision state in.
var ceilingStateKey = temporal.NewSearchAttributeKeyKeyword(workflows.SearchAttrProvisionState)

// ceilingSignalPayload is as large as an agent heartbeat's signal (a signed
// heartbeat, about 1.5 KiB in the history).
var ceilingSignalPayload = make([]byte, 1024)

// ceilingWorkflowFn runs kinds in order: local activities as markers in the
// workflow task, regular ones through the task queue. A shape (readMix's
// Shape) also has ironflow's other commands: a version marker, search
// attribute upserts, durable timers started and cancelled, and a wait for a
// signal, which the notify local activity before it asks the benchmark to
// send.
func ceilingWorkflowFn(ctx workflow.Context, kinds []string) error {
	lctx := workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout: 30 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2},
	})
	rctx := workflow.WithActivityOptions(ctx, workflow.ActivityOptions{
		StartToCloseTimeout: 2 * time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, BackoffCoefficient: 2, MaximumAttempts: 5},
	})
	var timers []workflow.CancelFunc
	signals := workflow.GetSignalChannel(ctx, ceilingSignal)
	for i, k := range kinds {
		var err error
		switch k {
		case kindLocal:
			err = workflow.ExecuteLocalActivity(lctx, ceilingActivity).Get(ctx, nil)
		case kindNotify:
			err = workflow.ExecuteLocalActivity(lctx, ceilingNotifyActivity, workflow.GetInfo(ctx).WorkflowExecution.ID).Get(ctx, nil)
		case kindVersion:
			workflow.GetVersion(ctx, "bench-ceiling-shape", workflow.DefaultVersion, 1)
		case kindUpsert:
			err = workflow.UpsertTypedSearchAttributes(ctx, ceilingStateKey.ValueSet(fmt.Sprintf("step-%d", i)))
		case kindTimer:
			tctx, cancel := workflow.WithCancel(ctx)
			workflow.NewTimer(tctx, ceilingTimer)
			timers = append(timers, cancel)
		case kindCancel:
			if len(timers) > 0 {
				timers[0]()
				timers = timers[1:]
			}
		case kindSignal:
			signals.Receive(ctx, nil)
		default:
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
	Kinds []string
	// Shape is every command of the history in order (the kinds above):
	// activities, version markers, upserts other than the SDK's own with a
	// version marker, timers started and cancelled, and where a signal came.
	Shape  []string
	Events int
	// Bytes is the history's size, its events' encoded protobuf summed.
	Bytes   int
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
	var events []*historypb.HistoryEvent
	it := c.GetWorkflowHistory(ctx, workflowID, "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			return activityMix{}, fmt.Errorf("read history of %s: %w", workflowID, err)
		}
		events = append(events, ev)
	}
	return mixFromEvents(events), nil
}

// mixFromEvents is the mix and shape of a history.
func mixFromEvents(events []*historypb.HistoryEvent) activityMix {
	var m activityMix
	for _, ev := range events {
		m.Events++
		m.Bytes += proto.Size(ev)
		switch ev.GetEventType() {
		case enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED:
			m.Kinds = append(m.Kinds, kindRegular)
			m.Shape = append(m.Shape, kindRegular)
		case enumspb.EVENT_TYPE_MARKER_RECORDED:
			// Version and side-effect markers are not activities.
			switch ev.GetMarkerRecordedEventAttributes().GetMarkerName() {
			case "LocalActivity":
				m.Kinds = append(m.Kinds, kindLocal)
				m.Shape = append(m.Shape, kindLocal)
			case "Version":
				m.Shape = append(m.Shape, kindVersion)
			}
		case enumspb.EVENT_TYPE_UPSERT_WORKFLOW_SEARCH_ATTRIBUTES:
			// The SDK upserts TemporalChangeVersion with each version
			// marker; the shape's version marker brings its own.
			fields := ev.GetUpsertWorkflowSearchAttributesEventAttributes().GetSearchAttributes().GetIndexedFields()
			if _, ok := fields["TemporalChangeVersion"]; !ok || len(fields) > 1 {
				m.Shape = append(m.Shape, kindUpsert)
			}
		case enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED:
			m.Signals++
			m.Shape = append(m.Shape, kindSignal)
		case enumspb.EVENT_TYPE_TIMER_STARTED:
			m.Timers++
			m.Shape = append(m.Shape, kindTimer)
		case enumspb.EVENT_TYPE_TIMER_CANCELED:
			m.Shape = append(m.Shape, kindCancel)
		}
	}
	// The last local activity before a signal asks for it; a signal with
	// none before it (since the previous signal) gets a notify of its own,
	// one marker more than the history has.
	var shape []string
	last := -1 // the local activity since the last signal
	for _, k := range m.Shape {
		switch k {
		case kindLocal:
			last = len(shape)
		case kindSignal:
			if last >= 0 {
				shape[last] = kindNotify
			} else {
				shape = append(shape, kindNotify)
			}
			last = -1
		}
		shape = append(shape, k)
	}
	m.Shape = shape
	return m
}

// ceilingResult is n bare workflows of one mix on the server.
type ceilingResult struct {
	Rate        float64 // workflows/s
	Completed   int
	Events      int // per workflow
	Bytes       int // history size per workflow
	Wall        time.Duration
	TemporalCPU time.Duration // per workflow
	// Starts are the ExecuteWorkflow round trips: what a provision request
	// waits for at least.
	Starts []time.Duration
	// Calls are the server's requests and store calls per workflow (nil
	// without a metrics endpoint).
	Calls serverCalls
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
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// A shape's signals: the notify activity hands the workflow's ID over,
	// and a pool of clients signals it, as the API signals a deploy when
	// its agent calls back.
	notifies := activityMix{Kinds: kinds}.count(kindNotify)
	notify := make(chan string, n*notifies)
	var signalled sync.WaitGroup
	var signalErrs []error
	var signalMu sync.Mutex
	for range clients * min(notifies, 1) {
		signalled.Add(1)
		go func() {
			defer signalled.Done()
			for id := range notify {
				if err := st.tc.SignalWorkflow(ctx, id, "", ceilingSignal, ceilingSignalPayload); err != nil {
					signalMu.Lock()
					signalErrs = append(signalErrs, fmt.Errorf("signal %s: %w", id, err))
					signalMu.Unlock()
				}
			}
		}()
	}
	defer signalled.Wait()
	defer close(notify)
	w := sdkworker.New(st.tc, ceilingQueue, ceilingWorkerOptions())
	w.RegisterWorkflowWithOptions(ceilingWorkflowFn, workflow.RegisterOptions{Name: ceilingWorkflow})
	w.RegisterActivityWithOptions(noopActivity, activity.RegisterOptions{Name: ceilingActivity})
	w.RegisterActivityWithOptions(func(_ context.Context, id string) error {
		select {
		case notify <- id:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}, activity.RegisterOptions{Name: ceilingNotifyActivity})
	if err := w.Start(); err != nil {
		return res, fmt.Errorf("start the ceiling worker: %w", err)
	}
	defer w.Stop()
	shape := slices.ContainsFunc(kinds, func(k string) bool { return k != kindLocal && k != kindRegular })
	runID := time.Now().UnixNano()
	callsBefore := st.serverCallsBefore(ctx)
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
				opts := client.StartWorkflowOptions{ID: ids[i], TaskQueue: ceilingQueue, EnableEagerStart: eager}
				if shape {
					// The search attributes ironflow's API starts a deploy with.
					opts.TypedSearchAttributes = workflows.SearchAttributes(ids[i], provision.OpDeploy, provision.Deploying)
				}
				_, err := st.tc.ExecuteWorkflow(ctx, opts, ceilingWorkflow, kinds)
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
	// Wait as the deploys are waited for: one query every deploy poll
	// interval (deployPollInterval, as deployAll lists the nodes), not a
	// long poll per workflow, which would load the server the deploys do
	// not have. A count of the visibility store is no cheap read on the
	// dev server's SQLite, which grows with every run.
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
			signalMu.Lock()
			defer signalMu.Unlock()
			return res, errors.Join(fmt.Errorf("ceiling workflows still running: %w", ctx.Err()), errors.Join(signalErrs...))
		case <-time.After(deployPollInterval):
		}
	}
	// The server's work ends here: what follows (a describe of every
	// workflow, a history read) is the bench's, as it is for ironflow's
	// deploys, whose CPU is read before theirs.
	cpu := procCPU(st.temporalPID()) - before
	callsAfter := st.serverCallsAfter(ctx, callsBefore)
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
		res.TemporalCPU = cpu / time.Duration(res.Completed)
		res.Calls = callsAfter.per(callsBefore, res.Completed)
		for k := range res.Calls {
			// The bench's own wait for the workflows, which ironflow's
			// deploys wait for through the API instead.
			if strings.HasSuffix(k, "/CountWorkflowExecutions") {
				delete(res.Calls, k)
			}
		}
	}
	if mix, err := readMix(context.Background(), st.tc, ids[0]); err == nil {
		res.Events, res.Bytes = mix.Events, mix.Bytes
	}
	if completed < n {
		return res, fmt.Errorf("%d of %d ceiling workflows did not complete", n-completed, n)
	}
	return res, nil
}

// shapeWithout is shape without the commands of one kind: a timer's
// cancels go with it, and without the signal its notify is a plain local
// activity.
func shapeWithout(shape []string, kind string) []string {
	var out []string
	for _, k := range shape {
		switch {
		case k == kind, kind == kindTimer && k == kindCancel:
			continue
		case kind == kindSignal && k == kindNotify:
			k = kindLocal
		}
		out = append(out, k)
	}
	return out
}

// describeShape names what a shape adds to its activity mix.
func describeShape(m activityMix) string {
	count := func(kind string) int { return activityMix{Kinds: m.Shape}.count(kind) }
	return fmt.Sprintf("%s, %d version markers, %d upserts, %d timers (%d cancelled), %d signals, and the search attributes at start",
		mixOf(m.Kinds), count(kindVersion), count(kindUpsert), count(kindTimer), count(kindCancel), count(kindSignal))
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
