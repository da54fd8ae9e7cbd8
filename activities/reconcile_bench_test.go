package activities_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	workflowpb "go.temporal.io/api/workflow/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"
	tlog "go.temporal.io/sdk/log"
	"go.temporal.io/sdk/testsuite"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/ironflow/ironflow/activities"
	"github.com/ironflow/ironflow/internal/testkit/storetest"
	"github.com/ironflow/ironflow/provision"
	"github.com/ironflow/ironflow/store"
	"github.com/ironflow/ironflow/workflows"
)

// listedVisibility stands in for Temporal's visibility in the benchmark
// (named so: a fake): it answers ListWorkflow from a fixed set of
// executions, a page of 1000 at a time, as the server pages them. Every
// other client method is absent.
type listedVisibility struct {
	client.Client
	execs []*workflowpb.WorkflowExecutionInfo
	pages int
}

func (v *listedVisibility) ListWorkflow(_ context.Context, req *workflowservice.ListWorkflowExecutionsRequest) (*workflowservice.ListWorkflowExecutionsResponse, error) {
	v.pages++
	start := 0
	if len(req.NextPageToken) > 0 {
		fmt.Sscan(string(req.NextPageToken), &start)
	}
	end := min(start+int(req.PageSize), len(v.execs))
	resp := &workflowservice.ListWorkflowExecutionsResponse{Executions: v.execs[start:end]}
	if end < len(v.execs) {
		resp.NextPageToken = []byte(fmt.Sprint(end))
	}
	return resp, nil
}

// BenchmarkReconcilePass10000Nodes is one reconciler pass over 10,000
// nodes of a conductor group on real PostgreSQL: 9,000 settled nodes whose
// last deploy or undeploy closed in agreement with them, 500 held by a
// running workflow, 500 left in deploying with no workflow (the API's
// start lost). The pass reads the facts (ReconcileFacts, run as an
// activity) and decides (DecideRepairs). It reports the payload one pass
// adds to the reconciler's history (facts and repairs: bounded by
// MaxCandidates whatever the group's size) and, as a ratio, the pass
// against the baseline of the same command: listing the same nodes'
// columns alone.
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
	// Visibility: every settled node's last run, closed in agreement after
	// its state; the first `held` of those still running.
	dc := converter.GetDefaultDataConverter()
	kw := func(s string) *commonpb.Payload { p, _ := dc.ToPayload(s); return p }
	started := timestamppb.New(time.Now().Add(-2 * time.Hour))
	closed := timestamppb.New(time.Now().Add(-10 * time.Minute))
	vis := &listedVisibility{}
	running := 0
	for _, n := range all {
		if n.ProvisionState == provision.Deploying {
			continue
		}
		e := &workflowpb.WorkflowExecutionInfo{
			Execution: &commonpb.WorkflowExecution{WorkflowId: workflows.WorkflowID(n.UUID), RunId: "run-" + n.UUID},
			Type:      &commonpb.WorkflowType{Name: workflows.WorkflowDeployNode},
			StartTime: started, CloseTime: closed, Status: enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED,
			SearchAttributes: &commonpb.SearchAttributes{IndexedFields: map[string]*commonpb.Payload{
				workflows.SearchAttrNodeUUID: kw(n.UUID), workflows.SearchAttrOperation: kw("deploy"),
				workflows.SearchAttrProvisionState: kw(string(n.ProvisionState)),
			}},
		}
		if running < held {
			e.Status, e.CloseTime = enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING, nil
			running++
		}
		vis.execs = append(vis.execs, e)
	}
	a := activities.New(st, activities.Config{Conductor: "bench"}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	rec := activities.NewReconciler(a, vis)
	var suite testsuite.WorkflowTestSuite
	suite.SetLogger(tlog.NewStructuredLogger(slog.New(slog.DiscardHandler)))
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivity(rec.ReconcileFacts)
	scan := workflows.ReconcileScan{Grace: workflows.DefaultReconcileGrace, Lookback: workflows.DefaultReconcileLookback,
		MaxCandidates: workflows.DefaultReconcileMaxCandidates}

	group := ""
	var baseline, pass time.Duration
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

		t0 = time.Now()
		v, err := env.ExecuteActivity(rec.ReconcileFacts, scan)
		if err != nil {
			b.Fatal(err)
		}
		if err := v.Get(&facts); err != nil {
			b.Fatal(err)
		}
		repairs = workflows.DecideRepairs(facts.At, scan.Grace, group, facts)
		pass += time.Since(t0)
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
}
