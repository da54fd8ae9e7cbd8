package workflows

import (
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/ironflow/ironflow/provision"
)

// recorder is a run's state recording: the node's provision state as the
// workflow writes it (local activities on the store), the ProvisionState
// search attribute, and the status the query handler answers.
type recorder struct {
	ctx workflow.Context
	// node is the node's UUID (set once the node is loaded).
	node string
	// verb is the provision verb that started the workflow, for the log
	// of a workflow another verb superseded.
	verb   provision.Verb
	status Status
	// active is the state a retried step returns to; fail is the failure
	// state a failed step records (deploy failed, clean failed, ...);
	// target is the operation's target, recorded with active. The
	// workflow function sets them from its request's transition.
	active, fail, target provision.State
	// current is the deploy or clean step that runs (nil between steps):
	// every record shows it as the node's deploy_step or clean_step.
	current *provision.Step
	// searchState is the ProvisionState search attribute as last written.
	searchState provision.State
	// recorded is set once the workflow has written the node's state: its
	// first write is conditional on the state the API recorded.
	recorded bool
}

// localOptions: store work is retried until the store answers again, so that
// a database restart never fails a deploy.
func localOptions(ctx workflow.Context) workflow.Context {
	return workflow.WithLocalActivityOptions(ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout:    30 * time.Second,
		ScheduleToCloseTimeout: 24 * time.Hour,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:        time.Second,
			BackoffCoefficient:     2,
			MaximumInterval:        30 * time.Second,
			NonRetryableErrorTypes: []string{ErrTypeNodeGone, ErrTypeStateConflict, ErrTypeInvalidConfig},
		},
	})
}

// local runs store work as a local activity.
func (rc *recorder) local(name string, in, out any) error {
	return workflow.ExecuteLocalActivity(localOptions(rc.ctx), name, in).Get(rc.ctx, out)
}

// record changes the node's provision state, writes a history row and keeps
// the ProvisionState search attribute and the status query current. While a
// step runs, the record shows it as the node's deploy_step or clean_step.
func (rc *recorder) record(in RecordStateInput) error {
	in.NodeUUID = rc.node
	if in.StepKind == "" && rc.current != nil {
		in.StepKind, in.Step = rc.stepKind(), rc.current
	}
	if in.Severity == "" {
		in.Severity = "INFO"
	}
	if in.EventType == "" {
		in.EventType = "provisioning"
	}
	first := !rc.recorded && rc.searchState != "" && len(in.From) == 0
	if first {
		// The API recorded searchState when it accepted the verb, before it
		// started this workflow: if the node has left it since, another verb
		// won the node and this workflow must not touch it. Only the
		// activity's input changes, so recorded histories replay as before.
		in.From = []provision.State{rc.searchState}
	}
	rc.recorded = true
	if err := rc.local(ActRecordState, in, nil); err != nil {
		var app *temporal.ApplicationError
		if first && errors.As(err, &app) && app.Type() == ErrTypeStateConflict {
			workflow.GetLogger(rc.ctx).Warn("node left the state the API recorded; this workflow ends without changing it",
				"node", rc.node, "verb", rc.verb, "expected", rc.searchState, "error", errorText(err))
			return errSuperseded
		}
		return fmt.Errorf("record state %q for node %s: %w", in.To, rc.node, err)
	}
	rc.status.ProvisionState = in.To
	rc.status.LastError = in.LastError
	// The workflow started with the state the API recorded; each upsert is
	// a history event, so only changes are written.
	if in.To != rc.searchState {
		_ = workflow.UpsertTypedSearchAttributes(rc.ctx, saProvisionState.ValueSet(string(in.To)))
		rc.searchState = in.To
	}
	return nil
}

// enter records a non-failure state with the operation's target.
func (rc *recorder) enter(state, target provision.State, event string) error {
	return rc.record(RecordStateInput{To: state, Target: target, Event: event})
}

// stepKind is the step field this workflow's steps show in.
func (rc *recorder) stepKind() provision.StepKind {
	switch rc.fail {
	case provision.CleanFailed:
		return provision.StepKindClean
	case provision.ServiceFailed:
		return provision.StepKindService
	}
	return provision.StepKindDeploy
}

// refuseInvalidConfig records why an operation could not start on node
// (whose settings could not be read; from is the state the API saw): the
// node moves to the operation's failure state (or, for a power change,
// keeps its power state with target cleared) with last_error naming the
// setting.
func (rc *recorder) refuseInvalidConfig(node string, from provision.State, err error) {
	op := rc.status.Operation
	msg := fmt.Sprintf("%s failed: %s", capitalize(string(op)), errorText(err))
	var rerr error
	if to := loadFailureState(op, from); to != "" {
		rerr = rc.local(ActRecordState, RecordStateInput{NodeUUID: node, To: to, LastError: msg, Event: msg,
			Severity: "ERROR", EventType: string(op)}, nil)
	} else if op == provision.OpPower {
		rerr = rc.local(ActRecordPowerState, PowerStateRecord{NodeUUID: node, KeepPowerState: true,
			LastError: msg, Event: msg, Severity: "ERROR"}, nil)
	}
	if rerr != nil {
		workflow.GetLogger(rc.ctx).Error("record a node whose settings cannot be read", "node", node, "error", rerr)
	}
}
