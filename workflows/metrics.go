package workflows

import (
	"errors"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/ironflow/ironflow/provision"
)

// The metrics the workflows emit, through workflow.GetMetricsHandler: the
// SDK hands them to the worker's metrics handler (package metrics) and
// emits nothing while a workflow replays its history, so that a workflow a
// new worker resumes is not counted twice. Emitting records nothing in the
// history (no command, no marker): no version gate is needed, and the
// recorded histories replay unchanged. The SDK adds the namespace,
// task_queue and workflow_type labels. Durations are workflow time
// (workflow.Now), which the history fixes.
//
// Names are the SDK's (the handler adds Prometheus's _total and _seconds);
// MetricHelp says what each is, under its Prometheus name.
const (
	metricOperationsStarted  = "ironflow_operations_started"
	metricOperationsFinished = "ironflow_operations_finished"
	metricOperationDuration  = "ironflow_operation_duration"
	metricStepDuration       = "ironflow_step_duration"
	metricStepFailures       = "ironflow_step_failures"
	metricCallbackTimeouts   = "ironflow_callback_timeouts"
	metricRolloutsStarted    = "ironflow_rollouts_started"
	metricRolloutsFinished   = "ironflow_rollouts_finished"
	metricRolloutNodes       = "ironflow_rollout_nodes"
)

// MetricHelp is the help text of the workflows' metrics by Prometheus name
// (docs/metrics.md).
var MetricHelp = map[string]string{
	metricOperationsStarted + "_total":   "Operations (workflows on a node) started, by operation.",
	metricOperationsFinished + "_total":  "Operations finished, by operation and outcome (succeeded, failed, aborted, operator_timeout, agent_lost, superseded).",
	metricOperationDuration + "_seconds": "Time from an operation's start to its end, by operation and outcome (workflow time).",
	metricStepDuration + "_seconds":      "Time a deploy, clean or service step took, by operation, step (interface.step) and outcome (ok, failed), an operator's wait after a failure included.",
	metricStepFailures + "_total":        "Failed attempts of a step or stage, by operation, step and failure class (bmc_auth, bmc_unsupported, invalid_config, agent_step_failed, agent_unreachable, timeout, ...).",
	metricCallbackTimeouts + "_total":    "Waits for the agent's first heartbeat that ran out (deploy_callback_timeout and its kin), by the state that waited.",
	metricRolloutsStarted + "_total":     "Rollouts started (docs/rollouts.md).",
	metricRolloutsFinished + "_total":    "Rollouts ended, by outcome (succeeded, failed: the failure budget spent, aborted).",
	metricRolloutNodes + "_total":        "Nodes of rollouts whose part ended, by outcome (succeeded, failed, skipped).",
}

// rolloutCount counts a rollout event (name) with its outcome, if any.
func rolloutCount(ctx workflow.Context, name, outcome string) {
	h := workflow.GetMetricsHandler(ctx)
	if outcome != "" {
		h = h.WithTags(map[string]string{"outcome": outcome})
	}
	h.Counter(name).Inc(1)
}

// runMetrics is what a run keeps to measure itself.
type runMetrics struct {
	operation provision.Operation
	started   time.Time
}

// startMetrics counts the operation's start.
func startMetrics(ctx workflow.Context, op provision.Operation) runMetrics {
	workflow.GetMetricsHandler(ctx).WithTags(map[string]string{"operation": string(op)}).Counter(metricOperationsStarted).Inc(1)
	return runMetrics{operation: op, started: workflow.Now(ctx)}
}

// finishMetrics counts the operation's end, err being what finish got.
func (m runMetrics) finish(ctx workflow.Context, err error) {
	if m.started.IsZero() {
		return
	}
	outcome := "succeeded"
	switch {
	case err == nil:
	case errors.Is(err, errAborted):
		outcome = "aborted"
	case errors.Is(err, errGaveUp):
		outcome = "operator_timeout"
	case errors.Is(err, errAgentLost):
		outcome = "agent_lost"
	case errors.Is(err, errSuperseded):
		outcome = "superseded"
	default:
		outcome = "failed"
	}
	h := workflow.GetMetricsHandler(ctx).WithTags(map[string]string{"operation": string(m.operation), "outcome": outcome})
	h.Counter(metricOperationsFinished).Inc(1)
	h.Timer(metricOperationDuration).Record(workflow.Now(ctx).Sub(m.started))
}

// step records a step's duration since started.
func (m runMetrics) step(ctx workflow.Context, step string, started time.Time, err error) {
	outcome := "ok"
	if err != nil {
		outcome = "failed"
	}
	workflow.GetMetricsHandler(ctx).WithTags(map[string]string{"operation": string(m.operation), "step": step, "outcome": outcome}).
		Timer(metricStepDuration).Record(workflow.Now(ctx).Sub(started))
}

// stepFailed counts a failed attempt of a step or stage.
func (m runMetrics) stepFailed(ctx workflow.Context, step string, err error) {
	workflow.GetMetricsHandler(ctx).WithTags(map[string]string{"operation": string(m.operation), "step": step, "failure_class": failureClass(err)}).
		Counter(metricStepFailures).Inc(1)
}

// callbackTimedOut counts a callback wait that ran out in state.
func callbackTimedOutMetric(ctx workflow.Context, state provision.State) {
	workflow.GetMetricsHandler(ctx).WithTags(map[string]string{"state": string(state)}).Counter(metricCallbackTimeouts).Inc(1)
}

// failureClass is a bounded name for why an attempt failed: the
// activity's error type, snake-cased, for the types ironflow's activities
// return; timeout for Temporal's timeouts; other for anything else.
func failureClass(err error) string {
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		switch app.Type() {
		case ErrTypeBMCAuth:
			return "bmc_auth"
		case ErrTypeBMCUnsupported:
			return "bmc_unsupported"
		case ErrTypeInvalidConfig:
			return "invalid_config"
		case ErrTypeAgentStepFailed:
			return "agent_step_failed"
		case ErrTypeAgentUnreachable:
			return "agent_unreachable"
		case ErrTypeNodeGone:
			return "node_not_found"
		case ErrTypeStateConflict:
			return "state_conflict"
		case "BMCError":
			return "bmc_error"
		}
		return "other"
	}
	var to *temporal.TimeoutError
	if errors.As(err, &to) {
		return "timeout"
	}
	if errors.Is(err, errAgentLost) {
		return "agent_lost"
	}
	return "other"
}
