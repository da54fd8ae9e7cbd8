package activities

import (
	"context"
	"errors"
	"fmt"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/ironflow/ironflow/metrics"
	"github.com/ironflow/ironflow/nodelock"
	"github.com/ironflow/ironflow/provision"
	"github.com/ironflow/ironflow/store"
	"github.com/ironflow/ironflow/workflows"
)

// Reconciler holds the reconciler's two activities (workflows/reconcile.go):
// Activities for the store, Client for Temporal's visibility, the node lock
// and the starts and terminations a repair makes.
type Reconciler struct {
	Activities *Activities
	Client     client.Client
}

// NewReconciler returns the reconciler's activities.
func NewReconciler(a *Activities, c client.Client) *Reconciler {
	return &Reconciler{Activities: a, Client: c}
}

// reconcileHistoryType is the event_type of the repairs' history rows.
const reconcileHistoryType = "reconcile"

// ReconcileFacts reads one pass: every node of the group (one query), the
// node workflows running or closed within the lookback window (one
// visibility listing, paged), and the last history event of the nodes that
// may disagree with their workflows. Only those candidates, at most
// MaxCandidates, are handed back. Regular activity on the group's hardware
// queue.
func (r *Reconciler) ReconcileFacts(ctx context.Context, in workflows.ReconcileScan) (workflows.ReconcileFacts, error) {
	st := r.Activities.Store
	facts := workflows.ReconcileFacts{At: time.Now().UTC()}
	runs, err := r.nodeRuns(ctx, facts.At.Add(-in.Lookback))
	if err != nil {
		return facts, err
	}
	facts.Workflows = len(runs.all)
	group := in.ConductorGroup
	// The nodes are read after the workflows: a verb accepted meanwhile is
	// seen with its state newer than the workflow it follows.
	nodes, err := st.ListNodes(ctx, store.NodeFilter{ConductorGroup: &group, Fields: []string{
		"provision_state", "target_provision_state", "provision_updated_at",
	}})
	if err != nil {
		return facts, fmt.Errorf("list the nodes of conductor group %q: %w", group, err)
	}
	facts.Nodes = len(nodes)
	var cands []workflows.NodeFacts
	for i, n := range nodes {
		if i%1000 == 0 {
			activity.RecordHeartbeat(ctx, i)
		}
		last := runs.latest[n.UUID]
		if last != nil && last.Running {
			facts.Held++
			continue
		}
		nf := workflows.NodeFacts{NodeUUID: n.UUID, State: n.ProvisionState, Last: last}
		if n.TargetProvisionState != nil {
			nf.Target = *n.TargetProvisionState
		}
		if n.ProvisionUpdatedAt != nil {
			nf.StateSince = n.ProvisionUpdatedAt.UTC()
		}
		_, transient := provision.FailureOf(nf.State)
		disagrees := last != nil && last.Closed.After(nf.StateSince) && last.State != "" && last.State != nf.State
		if !(transient && facts.At.Sub(nf.StateSince) >= in.Grace) && !disagrees {
			continue
		}
		if len(cands) >= in.MaxCandidates {
			facts.Deferred++
			continue
		}
		cands = append(cands, nf)
	}
	if len(cands) > 0 {
		uuids := make([]string, len(cands))
		for i, c := range cands {
			uuids[i] = c.NodeUUID
		}
		lastEvents, err := st.LastHistoryEvents(ctx, uuids)
		if err != nil {
			return facts, err
		}
		for i := range cands {
			e, ok := lastEvents[cands[i].NodeUUID]
			if !ok {
				continue
			}
			if a, ok := provision.ParseAcceptedEvent(e.Event); ok {
				cands[i].Accepted, cands[i].AcceptedAt = &a, e.CreatedAt.UTC()
			}
		}
	}
	facts.Candidates = cands
	// Running workflows of nodes outside the group may be orphans: their
	// node is looked up by UUID.
	var others []string
	inGroup := make(map[string]bool, len(nodes))
	for _, n := range nodes {
		inGroup[n.UUID] = true
	}
	for u, run := range runs.latest {
		if run.Running && !inGroup[u] {
			others = append(others, u)
		}
	}
	if len(others) > 0 {
		exist, err := st.ExistingNodes(ctx, others)
		if err != nil {
			return facts, err
		}
		for _, u := range others {
			if exist[u] || len(facts.Orphans) >= in.MaxCandidates {
				continue
			}
			run := runs.latest[u]
			facts.Orphans = append(facts.Orphans, workflows.OrphanRun{NodeUUID: u, RunID: run.RunID, WorkflowType: run.WorkflowType, Started: run.Started})
		}
	}
	return facts, nil
}

// nodeRunSet is the visibility listing of node workflows: every run read,
// and the latest-started run of each node.
type nodeRunSet struct {
	all    []*workflows.RunFacts
	latest map[string]*workflows.RunFacts
}

// nodeRuns lists the node workflows (ID node-<uuid>) running, or closed
// since since.
func (r *Reconciler) nodeRuns(ctx context.Context, since time.Time) (nodeRunSet, error) {
	set := nodeRunSet{latest: map[string]*workflows.RunFacts{}}
	query := fmt.Sprintf("WorkflowId STARTS_WITH 'node-' AND (ExecutionStatus = 'Running' OR CloseTime > '%s')", since.UTC().Format(time.RFC3339Nano))
	var token []byte
	for {
		resp, err := r.Client.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Query: query, NextPageToken: token, PageSize: 1000,
		})
		if err != nil {
			return set, fmt.Errorf("list node workflows: %w", err)
		}
		for _, e := range resp.Executions {
			sa := e.GetSearchAttributes().GetIndexedFields()
			node := keyword(sa[workflows.SearchAttrNodeUUID])
			if node == "" || e.GetExecution().GetWorkflowId() != workflows.WorkflowID(node) {
				continue
			}
			run := &workflows.RunFacts{
				WorkflowType: e.GetType().GetName(),
				RunID:        e.GetExecution().GetRunId(),
				Operation:    provision.Operation(keyword(sa[workflows.SearchAttrOperation])),
				State:        provision.State(keyword(sa[workflows.SearchAttrProvisionState])),
				Running:      e.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING,
				Status:       e.GetStatus().String(),
				Started:      e.GetStartTime().AsTime().UTC(),
			}
			if ct := e.GetCloseTime(); ct != nil && !run.Running {
				run.Closed = ct.AsTime().UTC()
			}
			set.all = append(set.all, run)
			if prev := set.latest[node]; prev == nil || run.Running || (!prev.Running && run.Started.After(prev.Started)) {
				set.latest[node] = run
			}
		}
		token = resp.NextPageToken
		if len(token) == 0 {
			return set, nil
		}
		activity.RecordHeartbeat(ctx, len(set.all))
	}
}

// keyword decodes a keyword search attribute ("" when absent).
func keyword(p *commonpb.Payload) string {
	if p == nil {
		return ""
	}
	var s string
	if err := converter.GetDefaultDataConverter().FromPayload(p, &s); err != nil {
		return ""
	}
	return s
}

// ReconcileRepair applies one pass's repairs, each under the node's lock as
// a verb takes it: a node a workflow holds is left alone, a state write is
// conditional on the state the pass saw, and a restart is the start of the
// node's workflow, refused while another runs. Each applied repair is a
// row of the node's history and a count of ironflow_reconcile_repairs_total.
// Regular activity on the group's hardware queue.
func (r *Reconciler) ReconcileRepair(ctx context.Context, in workflows.RepairBatch) ([]workflows.RepairOutcome, error) {
	out := make([]workflows.RepairOutcome, 0, len(in.Repairs))
	for _, rep := range in.Repairs {
		o := workflows.RepairOutcome{Kind: rep.Kind, NodeUUID: rep.NodeUUID, From: rep.From, To: rep.To}
		skipped, err := r.repair(ctx, rep)
		if err != nil {
			return out, fmt.Errorf("reconcile node %s (%s): %w", rep.NodeUUID, rep.Kind, err)
		}
		if skipped != "" {
			o.Skipped = skipped
		} else {
			o.Applied = true
			metrics.ReconcileRepairs.WithLabelValues(in.ConductorGroup, string(rep.Kind)).Inc()
			r.Activities.Log.Info("reconciler repaired a node", "node", rep.NodeUUID, "kind", rep.Kind, "from", rep.From, "to", rep.To, "event", rep.Event)
		}
		out = append(out, o)
	}
	return out, nil
}

// repair applies one repair; skipped says why it was not (the node moved
// on), err is a failure to be retried by the next pass.
func (r *Reconciler) repair(ctx context.Context, rep workflows.Repair) (skipped string, err error) {
	st := r.Activities.Store
	if rep.Kind == workflows.RepairEndOrphan {
		exist, err := st.ExistingNodes(ctx, []string{rep.NodeUUID})
		if err != nil {
			return "", err
		}
		if exist[rep.NodeUUID] {
			return "the node exists again", nil
		}
		err = r.Client.TerminateWorkflow(ctx, workflows.WorkflowID(rep.NodeUUID), rep.RunID, rep.Event)
		var nf *serviceerror.NotFound
		if errors.As(err, &nf) {
			return "the workflow has ended", nil
		}
		return "", err
	}
	held, err := nodelock.Held(ctx, r.Client, rep.NodeUUID)
	if err != nil {
		return "", err
	}
	if held {
		return "a workflow holds the node", nil
	}
	if rep.Kind == workflows.RepairRestart {
		return r.restart(ctx, rep)
	}
	severity := store.SeverityInfo
	var lastError *string
	if rep.LastError != "" {
		severity, lastError = store.SeverityError, &rep.LastError
	}
	err = st.RecordTransition(ctx, rep.NodeUUID, store.Transition{
		From: []provision.State{rep.From}, To: rep.To, Target: nil, LastError: lastError,
		History: store.HistoryEvent{Severity: severity, EventType: reconcileHistoryType, Event: rep.Event,
			Conductor: r.Activities.Config.Conductor},
	})
	switch {
	case errors.Is(err, store.ErrStateConflict):
		return "the node left state \"" + string(rep.From) + "\"", nil
	case errors.Is(err, store.ErrNotFound):
		return "the node is gone", nil
	}
	return "", err
}

// restart starts the node's workflow for the verb the API accepted, as
// the API starts it (apiserver's TemporalEngine): the node lock is the
// start, refused while another workflow of the node runs, and the
// workflow's first write is conditional on the state the API recorded.
func (r *Reconciler) restart(ctx context.Context, rep workflows.Repair) (string, error) {
	req := rep.Request
	if req == nil {
		return "", errors.New("restart without a request")
	}
	wf, ok := workflows.WorkflowFor(req.Transition.Operation)
	if !ok {
		return "no workflow for operation " + string(req.Transition.Operation), nil
	}
	n, err := r.Activities.Store.GetNode(ctx, rep.NodeUUID)
	if errors.Is(err, store.ErrNotFound) {
		return "the node is gone", nil
	}
	if err != nil {
		return "", err
	}
	if n.ProvisionState != rep.From {
		return "the node left state \"" + string(rep.From) + "\"", nil
	}
	_, err = r.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                                       workflows.WorkflowID(rep.NodeUUID),
		TaskQueue:                                workflows.TaskQueue,
		WorkflowIDConflictPolicy:                 enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
		WorkflowExecutionErrorWhenAlreadyStarted: true,
		WorkflowIDReusePolicy:                    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		TypedSearchAttributes:                    workflows.SearchAttributes(rep.NodeUUID, req.Transition.Operation, req.Transition.Next),
	}, wf, *req)
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	if errors.As(err, &started) {
		return "a workflow holds the node", nil
	}
	if err != nil {
		return "", fmt.Errorf("start %s for node %s: %w", wf, rep.NodeUUID, err)
	}
	err = r.Activities.Store.AddHistory(ctx, rep.NodeUUID, store.HistoryEvent{Severity: store.SeverityInfo,
		EventType: reconcileHistoryType, Event: rep.Event, Conductor: r.Activities.Config.Conductor})
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		// The start is made; its history row is what is missing.
		r.Activities.Log.Warn("reconciler restarted a node's operation but could not record it", "node", rep.NodeUUID, "error", err)
	}
	return "", nil
}
