package workflows

import (
	"encoding/json"
	"fmt"
	"math"
	"time"

	"go.temporal.io/sdk/workflow"

	"github.com/ironflow/ironflow/provision"
)

// SignalUnhold is what PUT states/provision {"target":"unhold"} (API 1.85)
// sends to the workflow paused in a hold state: the plan goes on with the
// step after the hold step. It carries no payload.
const SignalUnhold = "unhold"

// Ironic's reserved step names (Ironic's steps documentation, "Reserved
// Functional Steps"): a step with one of these names is run by the
// conductor itself whatever interface the user gave it, in clean_steps,
// service_steps and deploy_steps alike.
const (
	FlowStepHold     = "hold"
	FlowStepWait     = "wait"
	FlowStepPowerOn  = "power_on"
	FlowStepPowerOff = "power_off"
	FlowStepReboot   = "reboot"
)

// MaxWaitStepSeconds is Ironic's [conductor]max_conductor_wait_step_seconds
// default: the longest a wait step may sleep; Ironic points longer pauses
// to hold steps.
const MaxWaitStepSeconds = 30

// IsFlowStep reports whether s is one of Ironic's reserved steps.
func IsFlowStep(id provision.StepID) bool {
	switch id.Step {
	case FlowStepHold, FlowStepWait, FlowStepPowerOn, FlowStepPowerOff, FlowStepReboot:
		return true
	}
	return false
}

// FlowSteps are the reserved steps among the user's, as steps a plan may
// hold (MergeSteps' Available): each under the interface the user named,
// out-of-band (no ramdisk needed), priority 0, and wait with its optional
// seconds argument.
func FlowSteps(user []UserStep) []provision.Step {
	var out []provision.Step
	for _, u := range user {
		if !IsFlowStep(u.StepID) {
			continue
		}
		s := provision.Step{StepID: u.StepID, OutOfBand: true, Abortable: true}
		if u.StepID.Step == FlowStepWait {
			s.ArgsInfo = map[string]provision.ArgInfo{"seconds": {Description: "the number of seconds to wait"}}
		}
		out = append(out, s)
	}
	return out
}

// holdStates are the states a plan's reserved steps move between: the
// operation's active, wait and hold states and its target.
type holdStates struct {
	verb                     string // Ironic's messages: "clean", "service", "deploy"
	active, wait, hold, goal provision.State
}

var (
	cleanHolds   = holdStates{verb: "clean", active: provision.Cleaning, wait: provision.CleanWait, hold: provision.CleanHold, goal: provision.Manageable}
	serviceHolds = holdStates{verb: "service", active: provision.Servicing, wait: provision.ServiceWait, hold: provision.ServiceHold, goal: provision.Active}
	deployHolds  = holdStates{verb: "deploy", active: provision.Deploying, wait: provision.DeployWait, hold: provision.DeployHold, goal: provision.Active}
)

// flowStepsOf is the reserved steps (FlowSteps) a user plan names.
func (r *run) flowStepsOf(user []UserStep) []provision.Step {
	flow := FlowSteps(user)
	if len(flow) == 0 {
		return nil
	}
	return flow
}

// deployFlowStep is the handler of a reserved step in a deploy plan (nil
// for any other step).
func (r *run) deployFlowStep(s provision.Step) func(*run, provision.Step) error {
	if !IsFlowStep(s.StepID) {
		return nil
	}
	return func(r *run, s provision.Step) error { return r.flowStep(deployHolds, s) }
}

// flowStep runs one reserved step, as Ironic's conductor does (Ironic's
// steps documentation, "Reserved Functional Steps").
func (r *run) flowStep(h holdStates, s provision.Step) error {
	switch s.StepID.Step {
	case FlowStepHold:
		return r.hold(h, s)
	case FlowStepWait:
		return r.waitStep(s)
	case FlowStepPowerOn:
		return r.step(s.Name(), func() error { return r.hw.power("power on") })
	case FlowStepPowerOff:
		if err := r.step(s.Name(), func() error { return r.hw.power("power off") }); err != nil {
			return err
		}
		// As Ironic's power_off step, the agent's token and URL go, so
		// that the machine's next boot looks up and gets a new one.
		return r.rec.record(RecordStateInput{To: r.rec.status.ProvisionState, Target: h.goal, ClearAgent: true,
			Event: fmt.Sprintf("Step %s: powered off; the agent token is removed", s.Name())})
	case FlowStepReboot:
		return r.step(s.Name(), func() error { return r.hw.power("rebooting") })
	}
	return fmt.Errorf("%s is not a reserved step", s.Name())
}

// hold is Ironic's hold step: the node moves to its hold state (clean
// hold, service hold, deploy hold) and stays there, durably and without a
// timeout, until the operator's unhold (back to the wait state, then the
// plan goes on with the next step) or abort (the operation fails, as
// Ironic's state machine has it: clean hold --abort--> clean failed).
// Heartbeats keep arriving meanwhile: they are noted (the agent's callback
// URL, its liveness) and acted on only once the plan goes on.
func (r *run) hold(h holdStates, s provision.Step) error {
	if r.operator.pendingAbort() {
		return errAborted
	}
	// An unhold that came before this hold was recorded was meant for an
	// earlier one (sent twice while the node was still held): it must not
	// release this one.
	unhold := workflow.GetSignalChannel(r.ctx, SignalUnhold)
	for unhold.ReceiveAsync(nil) {
	}
	if err := r.rec.enter(h.hold, h.goal, fmt.Sprintf("Step %s: holding until unhold", s.Name())); err != nil {
		return err
	}
	r.rec.status.Step = s.Name()
	r.rec.status.WaitingFor = "unhold or abort"
	defer func() { r.rec.status.WaitingFor = "" }()
	for {
		var resumed, aborted bool
		sel := workflow.NewSelector(r.ctx)
		sel.AddReceive(unhold, func(c workflow.ReceiveChannel, _ bool) { c.Receive(r.ctx, nil); resumed = true })
		sel.AddReceive(r.operator.abort, func(c workflow.ReceiveChannel, _ bool) { c.Receive(r.ctx, nil); aborted = true })
		sel.AddReceive(r.agent.heartbeats, func(c workflow.ReceiveChannel, _ bool) { _, _ = r.agent.takeHeartbeat(c) })
		sel.Select(r.ctx)
		switch {
		case aborted:
			if r.operator.abortMessage == "" {
				r.operator.abortMessage = fmt.Sprintf("By request, the %s operation was aborted on step \"%s\"", h.verb, s.Name())
			}
			return errAborted
		case resumed:
			if err := r.rec.enter(h.wait, h.goal, fmt.Sprintf("Unhold: step %s released", s.Name())); err != nil {
				return err
			}
			return r.rec.enter(h.active, h.goal, fmt.Sprintf("Step %s finished", s.Name()))
		}
	}
}

// waitStep is Ironic's wait step: with a seconds argument it pauses that
// long (at most MaxWaitStepSeconds), without one until the agent's next
// heartbeat. Abort ends the pause.
func (r *run) waitStep(s provision.Step) error {
	seconds, err := waitSeconds(s.Args)
	if err != nil {
		return r.step(s.Name(), func() error { return err })
	}
	return r.step(s.Name(), func() error {
		ctx, cancel := workflow.WithCancel(r.ctx)
		defer cancel()
		var timer workflow.Future
		if seconds > 0 {
			timer = workflow.NewTimer(ctx, time.Duration(seconds*float64(time.Second)))
		}
		for {
			var done, aborted bool
			sel := workflow.NewSelector(r.ctx)
			sel.AddReceive(r.operator.abort, func(c workflow.ReceiveChannel, _ bool) { c.Receive(r.ctx, nil); aborted = true })
			sel.AddReceive(r.agent.heartbeats, func(c workflow.ReceiveChannel, _ bool) {
				if _, ok := r.agent.takeHeartbeat(c); ok && timer == nil {
					done = true
				}
			})
			if timer != nil {
				sel.AddFuture(timer, func(workflow.Future) { done = true })
			}
			sel.Select(r.ctx)
			switch {
			case aborted:
				return errAborted
			case done:
				return nil
			}
		}
	})
}

// waitSeconds reads a wait step's seconds argument: 0 when absent.
func waitSeconds(args json.RawMessage) (float64, error) {
	if len(args) == 0 || string(args) == "null" {
		return 0, nil
	}
	var a map[string]any
	if err := json.Unmarshal(args, &a); err != nil {
		return 0, fmt.Errorf("wait step: args: %w", err)
	}
	v, ok := a["seconds"]
	if !ok || v == nil {
		return 0, nil
	}
	f, ok := v.(float64)
	if !ok || f < 0 || math.IsNaN(f) {
		return 0, fmt.Errorf("wait step: seconds must be a non-negative number, got %v", v)
	}
	if f > MaxWaitStepSeconds {
		return 0, fmt.Errorf("wait step: %v seconds exceeds the maximum of %d seconds; use a hold step for longer pauses", v, MaxWaitStepSeconds)
	}
	return f, nil
}
