package activities_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/worker"
	"go.temporal.io/sdk/workflow"

	"github.com/ironflow/ironflow/activities"
	"github.com/ironflow/ironflow/embedded"
	"github.com/ironflow/ironflow/internal/testkit/storetest"
	"github.com/ironflow/ironflow/provision"
	"github.com/ironflow/ironflow/store"
	"github.com/ironflow/ironflow/workflows"
)

// releaseSignal ends a held stand-in run (the bench never sends it).
const releaseSignal = "release"

// standInNodeRun is the body of the node workflows the benchmark seeds
// into a real Temporal server's visibility (registered under the node
// workflow's type name): the reconciler reads only what visibility lists
// of them (ID, type, status, times, search attributes), so a run that
// completes at once stands for one closed in agreement with its node, and
// one that waits for a signal for one that still holds it.
func standInNodeRun(ctx workflow.Context, hold bool) error {
	if hold {
		workflow.GetSignalChannel(ctx, releaseSignal).Receive(ctx, nil)
	}
	return nil
}

// seedNodeRuns starts one node workflow (ID node-<uuid>, the search
// attributes ironflow's runs carry) for every node that is not
// deploying, the first held of them left running, on the server c
// reaches, with a worker of its own; it returns once visibility lists them
// all (running and completed).
func seedNodeRuns(b *testing.B, c client.Client, nodes []*store.Node, held int) {
	ctx := context.Background()
	const queue = "reconcile-bench"
	w := worker.New(c, queue, worker.Options{})
	w.RegisterWorkflowWithOptions(standInNodeRun, workflow.RegisterOptions{Name: workflows.WorkflowDeployNode})
	if err := w.Start(); err != nil {
		b.Fatal(err)
	}
	defer w.Stop()
	type start struct {
		uuid  string
		state provision.State
		hold  bool
	}
	starts := make(chan start)
	var wg sync.WaitGroup
	errs := make(chan error, 1)
	for range 32 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for st := range starts {
				_, err := c.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
					ID: workflows.WorkflowID(st.uuid), TaskQueue: queue,
					TypedSearchAttributes: workflows.SearchAttributes(st.uuid, provision.OpDeploy, st.state),
				}, workflows.WorkflowDeployNode, st.hold)
				if err != nil {
					select {
					case errs <- err:
					default:
					}
				}
			}
		}()
	}
	running, total := 0, 0
	for _, n := range nodes {
		if n.ProvisionState == provision.Deploying {
			continue
		}
		starts <- start{uuid: n.UUID, state: n.ProvisionState, hold: running < held}
		if running < held {
			running++
		}
		total++
	}
	close(starts)
	wg.Wait()
	select {
	case err := <-errs:
		b.Fatalf("start the node runs: %v", err)
	default:
	}
	deadline := time.Now().Add(5 * time.Minute)
	for {
		open, err1 := c.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{Query: "WorkflowId STARTS_WITH 'node-' AND ExecutionStatus = 'Running'"})
		closed, err2 := c.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{Query: "WorkflowId STARTS_WITH 'node-' AND ExecutionStatus = 'Completed'"})
		if err := errors.Join(err1, err2); err != nil {
			b.Fatal(err)
		}
		if open.GetCount() == int64(held) && closed.GetCount() == int64(total-held) {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("visibility lists %d running and %d completed node runs, want %d and %d", open.GetCount(), closed.GetCount(), held, total-held)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// pagesCounted counts the visibility pages a pass reads.
type pagesCounted struct {
	client.Client
	pages int
}

func (p *pagesCounted) ListWorkflow(ctx context.Context, req *workflowservice.ListWorkflowExecutionsRequest) (*workflowservice.ListWorkflowExecutionsResponse, error) {
	p.pages++
	return p.Client.ListWorkflow(ctx, req)
}

// BenchmarkReconcilePass10000Nodes is one reconciler pass over 10,000
// nodes of a conductor group on real PostgreSQL and a real Temporal
// server's visibility: 9,000 settled nodes whose last run closed in
// agreement with them, 500 held by a running one, 500 left in deploying
// with no workflow (the API's start lost). The pass reads the facts
// (ReconcileFacts, run as an activity) and decides (DecideRepairs). It
// reports the payload one pass adds to the reconciler's history (facts and
// repairs: bounded by MaxCandidates whatever the group's size), the CPU
// the pass costs the Temporal server and the process that runs it, and,
// as a ratio, the pass against the baseline of the same command: listing
// the same nodes' columns alone.
func BenchmarkReconcilePass10000Nodes(b *testing.B) {
	st := storetest.New(b)
	ctx := context.Background()
	const nodes, held, stuck = 10000, 500, 500
	_, err := st.Pool().Exec(ctx, `INSERT INTO nodes (uuid, name, driver, provision_state, conductor_group, provision_updated_at)
		SELECT gen_random_uuid()::text, 'bench-' || g, 'fake-hardware',
			CASE WHEN g <= $2 THEN 'deploying' WHEN g % 2 = 0 THEN 'active' ELSE 'available' END,
			'', now() - interval '1 hour'
		FROM generate_series(1, $1) g`, nodes, stuck)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := st.Pool().Exec(ctx, "ANALYZE nodes"); err != nil {
		b.Fatal(err)
	}
	all, err := st.ListNodes(ctx, store.NodeFilter{Fields: []string{"provision_state"}})
	if err != nil {
		b.Fatal(err)
	}
	// Visibility: a real Temporal dev server (in memory) listing every
	// settled node's last run, closed in agreement with it, the first
	// `held` of them still running.
	srv, err := embedded.StartTemporal(ctx, embedded.TemporalConfig{UIPort: -1, SearchAttributes: embedded.WorkflowSearchAttributes()},
		slog.New(slog.DiscardHandler))
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Stop()
	tc, err := client.Dial(client.Options{HostPort: srv.Address(), Logger: tlog.NewStructuredLogger(slog.New(slog.DiscardHandler))})
	if err != nil {
		b.Fatal(err)
	}
	defer tc.Close()
	seedNodeRuns(b, tc, all, held)
	dc := converter.GetDefaultDataConverter()
	vis := &pagesCounted{Client: tc}
	a := activities.New(st, activities.Config{Conductor: "bench"}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	rec := activities.NewReconciler(a, vis)
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(tlog.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivity(rec.ReconcileFacts)
	scan := workflows.ReconcileScan{Grace: workflows.DefaultReconcileGrace, Lookback: workflows.DefaultReconcileLookback,
		MaxCandidates: workflows.DefaultReconcileMaxCandidates}

	group := ""
	var baseline, pass, serverCPU, ownCPU time.Duration
	var facts workflows.ReconcileFacts
	var repairs []workflows.Repair
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		if _, err := st.ListNodes(ctx, store.NodeFilter{ConductorGroup: &group, Fields: []string{
			"provision_state", "target_provision_state", "provision_updated_at"}}); err != nil {
			b.Fatal(err)
		}
		baseline += time.Since(t0)

		t0, s0, o0 := time.Now(), pidCPU(b, srv.Pid()), selfCPU()
		v, err := env.ExecuteActivity(rec.ReconcileFacts, scan)
		if err != nil {
			b.Fatal(err)
		}
		if err := v.Get(&facts); err != nil {
			b.Fatal(err)
		}
		repairs = workflows.DecideRepairs(facts.At, scan.Grace, group, facts)
		pass += time.Since(t0)
		serverCPU += pidCPU(b, srv.Pid()) - s0
		ownCPU += selfCPU() - o0
	}
	if facts.Nodes != nodes || facts.Held != held || len(facts.Candidates) != stuck || len(repairs) != stuck {
		b.Fatalf("pass read %d nodes, %d held, %d candidates, %d repairs; want %d, %d, %d, %d",
			facts.Nodes, facts.Held, len(facts.Candidates), len(repairs), nodes, held, stuck, stuck)
	}
	factsPayload, _ := dc.ToPayload(facts)
	repairsPayload, _ := dc.ToPayload(workflows.RepairBatch{Repairs: repairs})
	b.ReportMetric(float64(len(factsPayload.Data)+len(repairsPayload.Data)), "history-bytes/pass")
	b.ReportMetric(float64(pass)/float64(baseline), "x-list-nodes")
	b.ReportMetric(float64(vis.pages)/float64(b.N), "visibility-pages/pass")
	b.ReportMetric(float64(serverCPU.Milliseconds())/float64(b.N), "temporal-cpu-ms/pass")
	b.ReportMetric(float64(ownCPU.Milliseconds())/float64(b.N), "worker-cpu-ms/pass")
}

// pidCPU is the user and system CPU process pid has used (/proc/<pid>/stat).
func pidCPU(b *testing.B, pid int) time.Duration {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// The fields after the command name, which is in parentheses.
	f := strings.Fields(string(raw[bytes.LastIndexByte(raw, ')')+1:]))
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * time.Second / 100 // USER_HZ
}

// selfCPU is the user and system CPU this process has used: the pass's
// own side (the activity runs here, as in a worker).
func selfCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
