package workflows

import (
	"errors"
	"fmt"

	"go.temporal.io/sdk/workflow"

	"github.com/ironflow/ironflow/provision"
)

// stepRunner is what a run keeps of the plan it runs: the deploy step
// index that is still to be written, and by whom (runDeploySteps,
// workflows/deploy_steps.go). The step that runs is the recorder's
// current, which every record shows.
type stepRunner struct {
	// planIndexed is the deploy_step_index that the agent deploy's plan
	// write set last, which runDeploySteps does not record again (nil:
	// none).
	planIndexed *int
	// pendingIndex is the index of a deploy step whose first activity
	// records it (stepIndexed), taken by the first running() or agent step
	// input.
	pendingIndex *int
}

// takeIndex hands the step's pending index to the first activity that
// asks (nil once taken, and for every other activity).
func (s *stepRunner) takeIndex() *int {
	idx := s.pendingIndex
	s.pendingIndex = nil
	return idx
}

// step runs one named stage of the workflow: a step (named interface.step),
// a part of one, or what runs between steps. When it fails, the node records
// the failure state with a last_error naming the stage, the running step as
// deploy_step or clean_step ({} between steps), and the workflow waits
// (bounded by the policy's OperatorWaitTimeout) for an operator: retry runs
// the stage again, skip-step goes on without it, abort ends the workflow.
func (r *run) step(name string, fn func() error) error {
	rec := &r.rec
	rec.status.Step = name
	rec.status.Attempts = 0
	for {
		if r.operator.pendingAbort() {
			return errAborted
		}
		rec.status.Attempts++
		err := fn()
		if err == nil {
			rec.status.Progress = ""
			return nil
		}
		if errors.Is(err, errAborted) {
			return err
		}
		r.metrics.stepFailed(r.ctx, name, err)
		msg := fmt.Sprintf("%s failed at step %s: %s", capitalize(string(rec.status.Operation)), name, errorText(err))
		workflow.GetLogger(r.ctx).Error("step failed", "node", r.node.UUID, "step", name, "error", msg)
		if rerr := rec.record(RecordStateInput{To: rec.fail, LastError: msg, Step: rec.current, StepKind: rec.stepKind(), Event: msg, Severity: "ERROR", EventType: string(rec.status.Operation)}); rerr != nil {
			return rerr
		}
		if errors.Is(err, errAgentLost) {
			// Nothing an operator fixes in place: finish cleans up now.
			return err
		}
		switch r.waitForOperator() {
		case SignalRetry:
			if err := rec.record(RecordStateInput{To: rec.active, Target: rec.target, Step: rec.current, StepKind: rec.stepKind(),
				Event: fmt.Sprintf("Operator asked to retry step %s", name)}); err != nil {
				return err
			}
			continue
		case SignalSkipStep:
			if err := rec.record(RecordStateInput{To: rec.active, Target: rec.target, Step: rec.current, StepKind: rec.stepKind(),
				Event: fmt.Sprintf("Operator skipped step %s", name)}); err != nil {
				return err
			}
			return nil
		case SignalAbort:
			return errAborted
		default:
			return errGaveUp
		}
	}
}

// runPlan runs steps in order, each with its handler in table.
func (r *run) runPlan(table []builtinStep, steps []provision.Step) error {
	for _, s := range steps {
		fn := handlerOf(table, s.StepID)
		if h := r.deployFlowStep(s); h != nil { // hold, wait, power_on, ... (workflows/hold.go)
			fn = h
		}
		if err := r.runStep(s, fn); err != nil {
			return err
		}
	}
	return nil
}

// handlerOf is what runs step id: its entry in table, else the agent.
func handlerOf(table []builtinStep, id provision.StepID) func(*run, provision.Step) error {
	for _, b := range table {
		if b.StepID == id {
			return b.run
		}
	}
	return (*run).inBand
}

// runStep runs a real deploy or clean step: while it runs, every state the
// workflow records, and the first activity of the step (RunningStep), show
// it as the node's deploy_step or clean_step. The stages the workflow runs
// between steps (waiting for the agent, cleaning up boot) have no identity
// of their own and record none.
func (r *run) runStep(s provision.Step, fn func(*run, provision.Step) error) error {
	r.rec.current = &s
	defer func() { r.rec.current = nil }()
	started := workflow.Now(r.ctx)
	err := fn(r, s)
	r.metrics.step(r.ctx, s.Name(), started, err)
	return err
}

// running is the step an activity begins, for its input's Starts; nil
// between steps.
func (r *run) running() *provision.RunningStep {
	if r.rec.current == nil {
		return nil
	}
	return &provision.RunningStep{Kind: r.rec.stepKind(), Step: *r.rec.current, Index: r.steps.takeIndex()}
}

// inBand runs s on the agent: steps 9-11, and every deploy or clean step the
// agent offers.
func (r *run) inBand(s provision.Step) error {
	if err := r.step(s.Name(), func() error { return r.agentStep(r.rec.stepKind(), s) }); err != nil {
		return err
	}
	return r.rebootAfterStep(s) // a step with reboot_requested (workflows/rebootstep.go)
}
