package workflows

import (
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/ironflow/ironflow/provision"
)

// agentSession is a run's session with the node's agent: the heartbeats it
// signals (authenticated, noted), the callback URL they carry, the one
// liveness timer the agent steps share, and the short calls to the agent.
type agentSession struct {
	ctx workflow.Context
	// node is the node's UUID; queue its conductor group's hardware
	// queue; policy its timeouts.
	node   string
	queue  string
	policy Policy

	heartbeats workflow.ReceiveChannel
	// url is the callback URL of the agent that last heartbeated.
	url           string
	lastHeartbeat time.Time
	// signals remembers the signed heartbeats accepted (see authentic).
	signals signalLedger
	// liveness is the agent-silence timer all agent steps share (nil until
	// the first step); see agentStepOnce. livenessAt is when it fires.
	liveness   workflow.Future
	livenessAt time.Time
	// oneTimer: the callback wait's timer is liveness too
	// (waitCallbackOneTimer), so an agent deploy starts one timer where it
	// would start two and cancel one. Only the agent deploy sets it.
	oneTimer bool
	// lastResult is the command result of the agent step that last
	// succeeded (agentStep), for the event that ends it.
	lastResult string
}

// call runs a short call to the node's agent as a regular activity on
// the conductor-group queue, even for fake-hardware: an agent call changes
// the machine (it powers off, it reports once), and a regular activity's
// result is recorded before anything after it runs, whereas local
// activities are run again when their workflow task has to be retried.
//
// The activities heartbeat (activities/keepalive.go), so that the attempt of
// a worker that died is retried after the heartbeat timeout, not after the
// whole start-to-close timeout (docs/crash-safety.md). Timeouts are not part
// of what replay compares: recorded histories replay unchanged.
func (a *agentSession) call(name string, in, out any) error {
	ctx := workflow.WithActivityOptions(a.ctx, a.options(2*time.Minute, 3))
	return workflow.ExecuteActivity(ctx, name, in).Get(ctx, out)
}

// options are the activity options of an agent activity that may take
// timeout, attempted at most attempts times: on the node's queue,
// heartbeating, a failed agent command never retried.
func (a *agentSession) options(timeout time.Duration, attempts int32) workflow.ActivityOptions {
	return workflow.ActivityOptions{
		TaskQueue:           a.queue,
		StartToCloseTimeout: timeout,
		HeartbeatTimeout:    a.policy.AgentActivityHeartbeat,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:        2 * time.Second,
			BackoffCoefficient:     2,
			MaximumInterval:        30 * time.Second,
			MaximumAttempts:        attempts,
			NonRetryableErrorTypes: []string{ErrTypeAgentStepFailed, ErrTypeInvalidConfig, ErrTypeNodeGone},
		},
	}
}

// powerOffAgent asks the agent to sync and power the machine off (starts:
// the step this begins, nil for none); the BMC makes sure, and powers off
// a machine whose agent does not answer.
func (r *run) powerOffAgent(starts *provision.RunningStep) error {
	if err := r.agent.call(ActAgentPowerOff, r.agent.input(starts), nil); err != nil {
		workflow.GetLogger(r.ctx).Warn("agent power off failed, using the BMC", "node", r.node.UUID, "error", errorText(err))
	}
	return r.hw.power("power off")
}

// input is the agent's address for an activity's input; starts is the step
// the activity begins (nil for none).
func (a *agentSession) input(starts *provision.RunningStep) AgentInput {
	return AgentInput{NodeUUID: a.node, CallbackURL: a.url, Starts: starts}
}

func (a *agentSession) takeHeartbeat(c workflow.ReceiveChannel) (Heartbeat, bool) {
	var hb Heartbeat
	c.Receive(a.ctx, &hb)
	if !a.authentic(hb) {
		return Heartbeat{}, false
	}
	if hb.CallbackURL != "" {
		a.url = hb.CallbackURL
	}
	a.lastHeartbeat = workflow.Now(a.ctx)
	return hb, true
}

// authentic reports whether a heartbeat signal came from the API: anyone who
// reaches Temporal can signal the workflow, so the API signs each heartbeat
// with a key only it and the worker hold, and a signal that fails the check
// changes nothing (docs/architecture.md, "Signals are authenticated").
//
// The check is the local activity ActVerifySignal, not code of the workflow,
// so that the key stays in the worker's configuration and out of workflow
// code and history; its verdict is recorded, so replay never needs the key
// (nor the same clock). A signed heartbeat the run already accepted is
// refused (signalLedger, workflow state only).
func (a *agentSession) authentic(hb Heartbeat) bool {
	// The check reads the node's token from the database and waits out a
	// database that does not answer while the signal is fresh enough to
	// be accepted (signature.MaxAge, 5 minutes); activity timeouts are not
	// compared on replay.
	ctx := workflow.WithLocalActivityOptions(a.ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout: 5 * time.Minute,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, MaximumAttempts: 3},
	})
	var v SignalVerdict
	if err := workflow.ExecuteLocalActivity(ctx, ActVerifySignal, VerifySignalInput{NodeUUID: a.node, Heartbeat: hb}).Get(ctx, &v); err != nil {
		v.Reason = "verification failed: " + err.Error()
	}
	if v.Reason != "" {
		workflow.GetLogger(a.ctx).Warn("ignored a heartbeat signal that is not authentic", "node", a.node, "reason", v.Reason)
		return false
	}
	// A signal without a MAC never passes the worker's check; only the
	// workflow unit tests' stand-in verifier lets one through.
	if hb.MAC != "" {
		if why := a.signals.admit(hb); why != "" {
			workflow.GetLogger(a.ctx).Warn("ignored a replayed heartbeat signal", "node", a.node, "reason", why,
				"callback_url", hb.CallbackURL, "agent_status", hb.AgentStatus)
			return false
		}
	}
	return true
}

// armLiveness starts the liveness timer, to fire d from now.
func (a *agentSession) armLiveness(d time.Duration) {
	a.liveness = workflow.NewTimer(a.ctx, d)
	a.livenessAt = workflow.Now(a.ctx).Add(d)
}

// armFor is how far the shared timer of a one-timer deploy is set when d
// remains of its wait: never beyond the heartbeat timeout, so that an agent
// step that takes it over notices a silent agent as soon as with a timer
// of its own.
func (a *agentSession) armFor(d time.Duration) time.Duration {
	if hb := a.policy.HeartbeatTimeout; hb > 0 && d > hb {
		return hb
	}
	return d
}

// callbackTimedOut is the error of a callback wait that ran out.
func (a *agentSession) callbackTimedOut(state provision.State, timeout time.Duration) error {
	callbackTimedOutMetric(a.ctx, state)
	what := "callback"
	if state == provision.RescueWait {
		what = "rescue ramdisk callback" // Ironic's words for rescue wait
	}
	return fmt.Errorf("Timeout reached while waiting for %s for node %s (%s without a heartbeat)", what, a.node, timeout)
}

// waitCallback records the wait state and blocks until the agent's first
// heartbeat arrives. The durable timer is the callback timeout; every
// heartbeat that does not satisfy done resets it, as Ironic's
// touch_provisioning does.
func (r *run) waitCallback(state provision.State, done func(Heartbeat) bool) (Heartbeat, error) {
	return r.waitCallbackFor(state, r.node.Policy.CallbackTimeout, done)
}

// waitCallbackFor is waitCallback with the callback timeout of the wait
// (rescue wait has its own).
func (r *run) waitCallbackFor(state provision.State, timeout time.Duration, done func(Heartbeat) bool) (Heartbeat, error) {
	if err := r.rec.enter(state, r.rec.target, fmt.Sprintf("Waiting for the agent to call back (timeout %s)", timeout)); err != nil {
		return Heartbeat{}, err
	}
	r.rec.status.Step = "wait for agent"
	if r.agent.oneTimer {
		return r.waitCallbackOneTimer(state, timeout, done)
	}
	for {
		ctx, cancel := workflow.WithCancel(r.ctx)
		timer := workflow.NewTimer(ctx, timeout)
		var (
			hb       Heartbeat
			got      bool
			timedOut bool
			aborted  bool
		)
		// A heartbeat that is not authentic neither ends the wait nor
		// resets its timer: select again on the same timer.
		for !got && !timedOut && !aborted {
			sel := workflow.NewSelector(r.ctx)
			sel.AddReceive(r.agent.heartbeats, func(c workflow.ReceiveChannel, _ bool) { hb, got = r.agent.takeHeartbeat(c) })
			sel.AddReceive(r.operator.abort, func(c workflow.ReceiveChannel, _ bool) { c.Receive(r.ctx, nil); aborted = true })
			sel.AddFuture(timer, func(workflow.Future) { timedOut = true })
			sel.Select(r.ctx)
		}
		cancel()
		switch {
		case aborted:
			return Heartbeat{}, errAborted
		case timedOut:
			return Heartbeat{}, r.agent.callbackTimedOut(state, timeout)
		case got && done(hb):
			return hb, nil
		}
	}
}

// waitCallbackOneTimer is the callback wait of an agent deploy: its timer is the liveness timer the agent steps
// after it share (agentStepOnce), started here if none runs, and never
// cancelled. Each arming is at most the heartbeat timeout away, so the
// timer the steps take over fires no later than their own would; when it
// fires before the callback deadline (the wait's start, or the last
// heartbeat that did not end it, plus timeout) it is armed again for what
// remains. A wait the agent ends at once then records one TimerStarted
// instead of a TimerStarted and a TimerCanceled, and the first step no
// TimerStarted of its own; a wait longer than the heartbeat timeout costs
// one workflow task more per heartbeat timeout.
func (r *run) waitCallbackOneTimer(state provision.State, timeout time.Duration, done func(Heartbeat) bool) (Heartbeat, error) {
	a := &r.agent
	deadline := workflow.Now(r.ctx).Add(timeout)
	// A timer left by the steps before (a wait for the call-back after a
	// reboot) serves if it fires by the deadline; otherwise a new one is
	// armed, and the old one, no longer watched, fires unheeded.
	if a.liveness == nil || a.livenessAt.After(deadline) {
		a.armLiveness(a.armFor(timeout))
	}
	for {
		var (
			hb         Heartbeat
			got, fired bool
			aborted    bool
		)
		sel := workflow.NewSelector(r.ctx)
		sel.AddReceive(a.heartbeats, func(c workflow.ReceiveChannel, _ bool) { hb, got = a.takeHeartbeat(c) })
		sel.AddReceive(r.operator.abort, func(c workflow.ReceiveChannel, _ bool) { c.Receive(r.ctx, nil); aborted = true })
		sel.AddFuture(a.liveness, func(workflow.Future) { fired = true })
		sel.Select(r.ctx)
		switch {
		case aborted:
			return Heartbeat{}, errAborted
		case fired:
			left := deadline.Sub(workflow.Now(r.ctx))
			if left <= 0 {
				a.liveness = nil
				return Heartbeat{}, a.callbackTimedOut(state, timeout)
			}
			a.armLiveness(a.armFor(left))
		case got && done(hb):
			return hb, nil
		case got:
			// As Ironic's touch_provisioning: a heartbeat moves the
			// deadline, not the timer.
			deadline = workflow.Now(r.ctx).Add(timeout)
		}
	}
}

// agentStepOnce runs one in-band step while watching the agent's heartbeats:
// if the agent stays silent longer than the heartbeat timeout, the step
// fails instead of waiting forever; abort cancels it (after the step, when
// the operator's holdAbort says so). agentStep (agentprogress.go) runs it
// again when the machine rebooted under it.
func (r *run) agentStepOnce(kind provision.StepKind, s provision.Step) (AgentStepResult, error) {
	a := &r.agent
	p := a.policy
	actCtx, cancelAct := workflow.WithCancel(r.ctx)
	defer cancelAct()
	actCtx = workflow.WithActivityOptions(actCtx, a.options(p.AgentCommandTimeout, 5))
	fut := workflow.ExecuteActivity(actCtx, ActRunAgentStep, AgentStepInput{
		Agent: a.input(nil), Kind: kind, Step: s, Index: r.steps.takeIndex(),
	})
	// One liveness timer for all agent steps, not one per step or per
	// heartbeat: when it fires, the agent is lost only if neither a
	// heartbeat nor the current step's start came within the timeout;
	// otherwise it is re-armed for what remains. A heartbeat then costs the
	// workflow its signal alone, and a step no timer events. The timer is
	// left running between steps: a workflow that ends drops it.
	started := workflow.Now(r.ctx)
	if a.liveness == nil {
		a.armLiveness(p.HeartbeatTimeout)
	}
	for {
		var (
			done, fired, aborted bool
			err                  error
			res                  AgentStepResult
		)
		sel := workflow.NewSelector(r.ctx)
		sel.AddFuture(fut, func(f workflow.Future) { done = true; err = f.Get(r.ctx, &res) })
		sel.AddReceive(a.heartbeats, func(c workflow.ReceiveChannel, _ bool) { _, _ = a.takeHeartbeat(c) })
		sel.AddReceive(r.operator.abort, func(c workflow.ReceiveChannel, _ bool) { c.Receive(r.ctx, nil); aborted = true })
		sel.AddFuture(a.liveness, func(workflow.Future) { fired = true })
		sel.Select(r.ctx)
		switch {
		case done:
			return res, err
		case aborted && r.operator.holdAbort != nil && r.operator.holdAbort(s):
			r.operator.abortAfter = true
			workflow.GetLogger(r.ctx).Info("step is not abortable: abort after it", "node", a.node, "step", s.Name())
			continue
		case aborted:
			cancelAct()
			_ = fut.Get(r.ctx, nil)
			return AgentStepResult{}, errAborted
		case fired:
			last := started
			if a.lastHeartbeat.After(last) {
				last = a.lastHeartbeat
			}
			if left := last.Add(p.HeartbeatTimeout).Sub(workflow.Now(r.ctx)); left > 0 {
				a.armLiveness(left)
				continue
			}
			a.liveness = nil
			cancelAct()
			_ = fut.Get(r.ctx, nil)
			return AgentStepResult{}, fmt.Errorf("%w: no heartbeat for %s while running step %s", errAgentLost, p.HeartbeatTimeout, s.Name())
		}
	}
}
