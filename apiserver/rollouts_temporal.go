package apiserver

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/converter"

	"github.com/ironflow/ironflow/workflows"
)

// rolloutEngine is an Engine that runs rollouts (TemporalEngine); the API
// answers 501 for rollouts on an engine without it.
type rolloutEngine interface {
	StartRollout(ctx context.Context, in workflows.RolloutInput) error
	SignalRollout(ctx context.Context, rolloutUUID, signal string) error
	ShowRollout(ctx context.Context, rolloutUUID string) (*workflows.RolloutView, bool, error)
	// ListRollouts lists every rollout, or a project's alone.
	ListRollouts(ctx context.Context, project string) ([]rolloutSummary, error)
	// RolloutProject is the project a rollout belongs to ("" for the
	// system's); errNoRollout when there is no such rollout.
	RolloutProject(ctx context.Context, rolloutUUID string) (string, error)
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
		TypedSearchAttributes:    workflows.RolloutSearchAttributes(in.Spec.UUID, in.Spec.Project),
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
func (e *TemporalEngine) ListRollouts(ctx context.Context, project string) ([]rolloutSummary, error) {
	var out []rolloutSummary
	var token []byte
	query := fmt.Sprintf("WorkflowType = '%s'", workflows.WorkflowRollout)
	if project != "" {
		query += fmt.Sprintf(" AND %s = '%s'", workflows.SearchAttrRolloutProject, strings.ReplaceAll(project, "'", ""))
	}
	for {
		resp, err := e.Client.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
			Query:         query,
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

// RolloutProject reads the rollout's project from its workflow's search
// attributes (no query, so no worker is asked, and an ended rollout
// answers too).
func (e *TemporalEngine) RolloutProject(ctx context.Context, rolloutUUID string) (string, error) {
	d, err := e.Client.DescribeWorkflowExecution(ctx, workflows.RolloutWorkflowID(rolloutUUID), "")
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return "", errNoRollout
	}
	if err != nil {
		return "", fmt.Errorf("describe rollout %s: %w", rolloutUUID, err)
	}
	p := d.GetWorkflowExecutionInfo().GetSearchAttributes().GetIndexedFields()[workflows.SearchAttrRolloutProject]
	if p == nil {
		return "", nil
	}
	var project string
	if err := converter.GetDefaultDataConverter().FromPayload(p, &project); err != nil {
		return "", fmt.Errorf("rollout %s: search attribute %s: %w", rolloutUUID, workflows.SearchAttrRolloutProject, err)
	}
	return project, nil
}
