package apiserver

import (
	"context"
	"errors"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/ironflow/ironflow/workflows"
)

// rolloutEngine is an Engine that runs rollouts (TemporalEngine); the API
// answers 501 for rollouts on an engine without it.
type rolloutEngine interface {
	StartRollout(ctx context.Context, in workflows.RolloutInput) error
	SignalRollout(ctx context.Context, rolloutUUID, signal string) error
	ShowRollout(ctx context.Context, rolloutUUID string) (*workflows.RolloutView, bool, error)
	ListRollouts(ctx context.Context) ([]rolloutSummary, error)
}

// rolloutSummary is one rollout of the list.
type rolloutSummary struct {
	UUID      string    `json:"uuid"`
	Running   bool      `json:"running"`
	StartedAt time.Time `json:"started_at"`
	ClosedAt  time.Time `json:"closed_at,omitzero"`
}

// errNoRollout: no rollout has the UUID (or, for a signal, none runs).
var errNoRollout = errors.New("no such rollout")

// StartRollout starts a rollout's workflow (docs/rollouts.md).
func (e *TemporalEngine) StartRollout(ctx context.Context, in workflows.RolloutInput) error {
	_, err := e.Client.ExecuteWorkflow(ctx, client.StartWorkflowOptions{
		ID:                       workflows.RolloutWorkflowID(in.Spec.UUID),
		TaskQueue:                workflows.TaskQueue,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_REJECT_DUPLICATE,
		TypedSearchAttributes:    workflows.RolloutSearchAttributes(in.Spec.UUID),
	}, workflows.WorkflowRollout, in)
	if err != nil {
		return fmt.Errorf("start rollout %s: %w", in.Spec.UUID, err)
	}
	return nil
}

// SignalRollout sends pause, resume, approve or abort.
func (e *TemporalEngine) SignalRollout(ctx context.Context, rolloutUUID, signal string) error {
	err := e.Client.SignalWorkflow(ctx, workflows.RolloutWorkflowID(rolloutUUID), "", signal, nil)
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return errNoRollout
	}
	return err
}

// ShowRollout queries the rollout's status; running reports whether its
// workflow still runs.
func (e *TemporalEngine) ShowRollout(ctx context.Context, rolloutUUID string) (*workflows.RolloutView, bool, error) {
	id := workflows.RolloutWorkflowID(rolloutUUID)
	d, err := e.Client.DescribeWorkflowExecution(ctx, id, "")
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return nil, false, errNoRollout
	}
	if err != nil {
		return nil, false, err
	}
	running := d.GetWorkflowExecutionInfo().GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING
	v, err := e.Client.QueryWorkflow(ctx, id, "", workflows.QueryRolloutStatus)
	if err != nil {
		return nil, running, fmt.Errorf("query rollout %s: %w", rolloutUUID, err)
	}
	var view workflows.RolloutView
	if err := v.Get(&view); err != nil {
		return nil, running, err
	}
	return &view, running, nil
}

// ListRollouts lists the rollouts' workflows, newest first.
func (e *TemporalEngine) ListRollouts(ctx context.Context) ([]rolloutSummary, error) {
	var out []rolloutSummary
	var token []byte
	for {
		resp, err := e.Client.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Query:         fmt.Sprintf("WorkflowType = '%s'", workflows.WorkflowRollout),
			NextPageToken: token,
		})
		if err != nil {
			return nil, fmt.Errorf("list rollouts: %w", err)
		}
		seen := map[string]bool{}
		for _, ex := range resp.GetExecutions() {
			id := ex.GetExecution().GetWorkflowId()
			// A continued rollout lists each of its runs: the newest counts.
			if seen[id] {
				continue
			}
			seen[id] = true
			s := rolloutSummary{
				UUID:      id[len("rollout-"):],
				Running:   ex.GetStatus() == enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING,
				StartedAt: ex.GetStartTime().AsTime(),
			}
			if ex.GetCloseTime() != nil {
				s.ClosedAt = ex.GetCloseTime().AsTime()
			}
			out = append(out, s)
		}
		token = resp.GetNextPageToken()
		if len(token) == 0 {
			return dedupRollouts(out), nil
		}
	}
}

// dedupRollouts keeps one entry per rollout, the first (newest) listed.
func dedupRollouts(in []rolloutSummary) []rolloutSummary {
	seen := map[string]bool{}
	out := in[:0]
	for _, s := range in {
		if !seen[s.UUID] {
			seen[s.UUID] = true
			out = append(out, s)
		}
	}
	return out
}
