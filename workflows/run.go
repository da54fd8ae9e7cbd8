package workflows

import (
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/ironflow/ironflow/provision"
)

// Search attribute keys, typed.
var (
	saNodeUUID       = temporal.NewSearchAttributeKeyKeyword(SearchAttrNodeUUID)
	saProvisionState = temporal.NewSearchAttributeKeyKeyword(SearchAttrProvisionState)
	saOperation      = temporal.NewSearchAttributeKeyKeyword(SearchAttrOperation)
)

// SearchAttributes are the attributes a node's workflow starts with.
func SearchAttributes(nodeUUID string, operation provision.Operation, provisionState provision.State) temporal.SearchAttributes {
	return temporal.NewSearchAttributes(
		saNodeUUID.ValueSet(nodeUUID),
		saOperation.ValueSet(string(operation)),
		saProvisionState.ValueSet(string(provisionState)),
	)
}

var (
	// errAborted ends a workflow because an operator sent abort.
	errAborted = errors.New("aborted by operator")
	// errGaveUp ends a workflow whose failed step waited for an operator
	// longer than the policy allows.
	errGaveUp = errors.New("no operator action before the wait timed out")
	// errAgentLost ends a workflow whose agent stopped heartbeating: the
	// machine is gone or hung, and no retry of the step can reach it. The
	// workflow cleans up at once so that nothing is left booting.
	errAgentLost = errors.New("the agent stopped heartbeating")
	// errSuperseded ends a workflow whose node left the state the API
	// recorded for its verb before the workflow's first write: another verb
	// was accepted since. The workflow ends cleanly, changing nothing.
	errSuperseded = errors.New("the node left the state its verb was accepted in")
)

// ended is what a workflow returns for err: nil when it was superseded.
func ended(err error) error {
	if errors.Is(err, errSuperseded) {
		return nil
	}
	return err
}

// Non-retryable error types that activities return. A retry of the same call
// cannot help: an operator must change something first.
const (
	ErrTypeBMCAuth          = "BMCAuthFailed"
	ErrTypeBMCUnsupported   = "BMCUnsupported"
	ErrTypeInvalidConfig    = "InvalidConfig"
	ErrTypeAgentStepFailed  = "AgentStepFailed"
	ErrTypeAgentUnreachable = "AgentUnreachable"
	ErrTypeNodeGone         = "NodeNotFound"
	ErrTypeStateConflict    = "StateConflict"
)

// run is the state one provisioning workflow carries: the node, its status
// for the query handler, and the signal channels an operator and the agent
// use.
type run struct {
	ctx    workflow.Context
	req    provision.Request
	node   NodeInfo
	status Status
	// active is the state a retried step returns to; fail is the failure
	// state a failed step records (deploy failed, clean failed, ...).
	active, fail provision.State
	// current is the deploy or clean step that runs (nil between steps):
	// the node's deploy_step or clean_step shows it.
	current *provision.Step

	heartbeats workflow.ReceiveChannel
	abort      workflow.ReceiveChannel
	retry      workflow.ReceiveChannel
	skip       workflow.ReceiveChannel

	// searchState is the ProvisionState search attribute as last written.
	searchState provision.State
	// recorded is set once the workflow has written the node's state: its
	// first write is conditional on the state the API recorded.
	recorded bool

	// agent is the callback URL of the agent that last heartbeated.
	agent         string
	lastHeartbeat time.Time
	// signals remembers the signed heartbeats accepted (see authentic).
	signals signalLedger
	// planIndexed is the deploy_step_index that the agent deploy's plan
	// write set last, which runDeploySteps does not record again (nil:
	// none; deploy_steps.go).
	planIndexed *int
	// pendingIndex is the index of a deploy step whose first activity
	// records it (stepIndexed), taken by the first running() or agent step
	// input.
	pendingIndex *int
	// liveness is the agent-silence timer all agent steps share (nil until
	// the first step); see agentStep. livenessAt is when it fires.
	liveness   workflow.Future
	livenessAt time.Time
	// oneTimer: the callback wait's timer is liveness too
	// (waitCallbackOneTimer), so an agent deploy starts one timer where it
	// would start two and cancel one. Only the agent deploy sets it.
	oneTimer bool

	// holdAbort, when set, says whether an abort that arrives while agent
	// step s runs waits for its end (a step that is not abortable): the
	// run then notes abortAfter and lets the step finish. Only manual
	// cleaning sets it.
	holdAbort  func(s provision.Step) bool
	abortAfter bool
	// abortMessage, when set, is the last_error finish records for an
	// abort (Ironic's wording for the operation).
	abortMessage string
	// supersededBy is the verb whose arrival ended the operator wait
	// (AbortRequest), "" for an operator's abort.
	supersededBy string
	// lastResult is the command result of the agent step that last
	// succeeded (agentStep), for the event that ends it.
	lastResult string
}

// ErrTypeUndecidedRequest: a provision workflow was handed a request that
// carries no transition. The API decides every verb once (provision.Accept)
// and hands the decision on; a workflow never decides it again.
const ErrTypeUndecidedRequest = "UndecidedRequest"

// newRun starts the run of a provision verb's workflow: req must carry the
// transition the API decided. It must be the first thing a provisioning
// workflow does, so that signals sent right after the start are never lost.
func newRun(ctx workflow.Context, req provision.Request, operation provision.Operation) (*run, error) {
	if req.Transition.Operation == "" {
		return nil, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("node %s: the %s request (verb %q from %q) carries no decided transition: the API decides it (provision.Accept)",
				req.NodeUUID, operation, req.Verb, req.FromState), ErrTypeUndecidedRequest, nil)
	}
	return startRun(ctx, req, operation)
}

// newNodeRun starts the run of a workflow no provision verb started (power,
// boot device, boot mode, virtual media): it changes no provision state.
func newNodeRun(ctx workflow.Context, nodeUUID string, operation provision.Operation) (*run, error) {
	return startRun(ctx, provision.Request{NodeUUID: nodeUUID}, operation)
}

// startRun registers the status query and the signal channels, then loads
// the node.
func startRun(ctx workflow.Context, req provision.Request, operation provision.Operation) (*run, error) {
	r := &run{
		ctx:        ctx,
		req:        req,
		heartbeats: workflow.GetSignalChannel(ctx, SignalHeartbeat),
		abort:      workflow.GetSignalChannel(ctx, SignalAbort),
		retry:      workflow.GetSignalChannel(ctx, SignalRetry),
		skip:       workflow.GetSignalChannel(ctx, SignalSkipStep),
	}
	r.status.Operation = operation
	r.status.ProvisionState = req.FromState
	r.searchState = req.Transition.Next // what the API started the workflow with
	if err := workflow.SetQueryHandler(ctx, QueryStatus, func() (Status, error) { return r.status, nil }); err != nil {
		return nil, fmt.Errorf("register status query: %w", err)
	}
	if err := r.local(ActLoadNode, req.NodeUUID, &r.node); err != nil {
		err = fmt.Errorf("load node %s: %w", req.NodeUUID, err)
		var app *temporal.ApplicationError
		if errors.As(err, &app) && app.Type() == ErrTypeInvalidConfig {
			// The API has already recorded the operation's state: a node
			// whose settings cannot be read must not stay there silently.
			r.refuseInvalidConfig(err)
		}
		return nil, err
	}
	return r, nil
}

// loadFailureState is where a provision operation leaves a node whose
// settings it could not read; "" for operations without one.
func loadFailureState(operation provision.Operation, from provision.State) provision.State {
	switch operation {
	case provision.OpDeploy:
		return provision.DeployFailed
	case provision.OpProvide, provision.OpClean:
		return provision.CleanFailed
	case provision.OpInspect:
		return provision.InspectFailed
	case provision.OpUndeploy:
		return provision.Error
	case provision.OpManage:
		return from
	case provision.OpRescue:
		return provision.RescueFailed
	case provision.OpUnrescue:
		return provision.UnrescueFailed
	case provision.OpService:
		return provision.ServiceFailed
	}
	return ""
}

// refuseInvalidConfig records why an operation could not start: the node
// moves to the operation's failure state (or, for a power change, keeps its
// power state with target cleared) with last_error naming the setting.
func (r *run) refuseInvalidConfig(err error) {
	msg := fmt.Sprintf("%s failed: %s", capitalize(string(r.status.Operation)), errorText(err))
	var rerr error
	if to := loadFailureState(r.status.Operation, r.req.FromState); to != "" {
		rerr = r.local(ActRecordState, RecordStateInput{NodeUUID: r.req.NodeUUID, To: to, LastError: msg, Event: msg,
			Severity: "ERROR", EventType: string(r.status.Operation)}, nil)
	} else if r.status.Operation == provision.OpPower {
		rerr = r.local(ActRecordPowerState, PowerStateRecord{NodeUUID: r.req.NodeUUID, KeepPowerState: true,
			LastError: msg, Event: msg, Severity: "ERROR"}, nil)
	}
	if rerr != nil {
		workflow.GetLogger(r.ctx).Error("record a node whose settings cannot be read", "node", r.req.NodeUUID, "error", rerr)
	}
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

func (r *run) local(name string, in, out any) error {
	return workflow.ExecuteLocalActivity(localOptions(r.ctx), name, in).Get(r.ctx, out)
}

// hardware runs a BMC activity on the node's conductor-group queue (or as a
// local activity for fake-hardware, which has no network to reach), with the
// BMC retry policy: transient failures back off and retry, authentication and
// unsupported-operation failures stop at once.
func (r *run) hardware(name string, in, out any) error {
	p := r.node.Policy
	retry := &temporal.RetryPolicy{
		InitialInterval:        p.BMCInitialInterval,
		BackoffCoefficient:     2,
		MaximumInterval:        time.Minute,
		MaximumAttempts:        p.BMCAttempts,
		NonRetryableErrorTypes: []string{ErrTypeBMCAuth, ErrTypeBMCUnsupported, ErrTypeInvalidConfig, ErrTypeNodeGone},
	}
	if p.LocalBMC {
		ctx := workflow.WithLocalActivityOptions(r.ctx, workflow.LocalActivityOptions{
			StartToCloseTimeout: p.BMCCallTimeout,
			RetryPolicy:         retry,
		})
		return workflow.ExecuteLocalActivity(ctx, name, in).Get(ctx, out)
	}
	ctx := workflow.WithActivityOptions(r.ctx, workflow.ActivityOptions{
		TaskQueue:           HardwareQueue(r.node.ConductorGroup),
		StartToCloseTimeout: p.BMCCallTimeout,
		RetryPolicy:         retry,
	})
	return workflow.ExecuteActivity(ctx, name, in).Get(ctx, out)
}

// agentCall runs a short call to the node's agent as a regular activity on
// the conductor-group queue, even for fake-hardware: an agent call changes
// the machine (it powers off, it reports once), and a regular activity's
// result is recorded before anything after it runs, whereas local
// activities are run again when their workflow task has to be retried.
//
// The activities heartbeat (activities/keepalive.go), so that the attempt of
// a worker that died is retried after the heartbeat timeout, not after the
// whole start-to-close timeout (docs/crash-safety.md). Timeouts are not part
// of what replay compares: recorded histories replay unchanged.
func (r *run) agentCall(name string, in, out any) error {
	ctx := workflow.WithActivityOptions(r.ctx, workflow.ActivityOptions{
		TaskQueue:           HardwareQueue(r.node.ConductorGroup),
		StartToCloseTimeout: 2 * time.Minute,
		HeartbeatTimeout:    r.node.Policy.AgentActivityHeartbeat,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:        2 * time.Second,
			BackoffCoefficient:     2,
			MaximumInterval:        30 * time.Second,
			MaximumAttempts:        3,
			NonRetryableErrorTypes: []string{ErrTypeAgentStepFailed, ErrTypeInvalidConfig, ErrTypeNodeGone},
		},
	})
	return workflow.ExecuteActivity(ctx, name, in).Get(ctx, out)
}

// record changes the node's provision state, writes a history row and keeps
// the ProvisionState search attribute and the status query current. While a
// step runs, the record shows it as the node's deploy_step or clean_step.
func (r *run) record(in RecordStateInput) error {
	in.NodeUUID = r.node.UUID
	if in.StepKind == "" && r.current != nil {
		in.StepKind, in.Step = r.stepKind(), r.current
	}
	if in.Severity == "" {
		in.Severity = "INFO"
	}
	if in.EventType == "" {
		in.EventType = "provisioning"
	}
	first := !r.recorded && r.searchState != "" && len(in.From) == 0
	if first {
		// The API recorded searchState when it accepted the verb, before it
		// started this workflow: if the node has left it since, another verb
		// won the node and this workflow must not touch it. Only the
		// activity's input changes, so recorded histories replay as before.
		in.From = []provision.State{r.searchState}
	}
	r.recorded = true
	if err := r.local(ActRecordState, in, nil); err != nil {
		var app *temporal.ApplicationError
		if first && errors.As(err, &app) && app.Type() == ErrTypeStateConflict {
			workflow.GetLogger(r.ctx).Warn("node left the state the API recorded; this workflow ends without changing it",
				"node", r.node.UUID, "verb", r.req.Verb, "expected", r.searchState, "error", errorText(err))
			return errSuperseded
		}
		return fmt.Errorf("record state %q for node %s: %w", in.To, r.node.UUID, err)
	}
	r.status.ProvisionState = in.To
	r.status.LastError = in.LastError
	// The workflow started with the state the API recorded; each upsert is
	// a history event, so only changes are written.
	if in.To != r.searchState {
		_ = workflow.UpsertTypedSearchAttributes(r.ctx, saProvisionState.ValueSet(string(in.To)))
		r.searchState = in.To
	}
	return nil
}

// enter records a non-failure state with the operation's target.
func (r *run) enter(state, target provision.State, event string) error {
	return r.record(RecordStateInput{To: state, Target: target, Event: event})
}

// pendingAbort reports whether an abort signal has arrived, without blocking.
func (r *run) pendingAbort() bool {
	return r.abort.ReceiveAsync(nil)
}

// step runs one named stage of the workflow: a step (named interface.step),
// a part of one, or what runs between steps. When it fails, the node records
// the failure state with a last_error naming the stage, the running step as
// deploy_step or clean_step ({} between steps), and the workflow waits
// (bounded by the policy's OperatorWaitTimeout) for an operator: retry runs
// the stage again, skip-step goes on without it, abort ends the workflow.
func (r *run) step(name string, fn func() error) error {
	r.status.Step = name
	r.status.Attempts = 0
	for {
		if r.pendingAbort() {
			return errAborted
		}
		r.status.Attempts++
		err := fn()
		if err == nil {
			r.status.Progress = ""
			return nil
		}
		if errors.Is(err, errAborted) {
			return err
		}
		msg := fmt.Sprintf("%s failed at step %s: %s", capitalize(string(r.status.Operation)), name, errorText(err))
		workflow.GetLogger(r.ctx).Error("step failed", "node", r.node.UUID, "step", name, "error", msg)
		if rerr := r.record(RecordStateInput{To: r.fail, LastError: msg, Step: r.current, StepKind: r.stepKind(), Event: msg, Severity: "ERROR", EventType: string(r.status.Operation)}); rerr != nil {
			return rerr
		}
		if errors.Is(err, errAgentLost) {
			// Nothing an operator fixes in place: finish cleans up now.
			return err
		}
		switch r.waitForOperator() {
		case SignalRetry:
			if err := r.record(RecordStateInput{To: r.active, Target: r.req.Transition.Target, Step: r.current, StepKind: r.stepKind(),
				Event: fmt.Sprintf("Operator asked to retry step %s", name)}); err != nil {
				return err
			}
			continue
		case SignalSkipStep:
			if err := r.record(RecordStateInput{To: r.active, Target: r.req.Transition.Target, Step: r.current, StepKind: r.stepKind(),
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

// stepKind is the step field this workflow's steps show in.
func (r *run) stepKind() provision.StepKind {
	switch r.fail {
	case provision.CleanFailed:
		return provision.StepKindClean
	case provision.ServiceFailed:
		return provision.StepKindService
	}
	return provision.StepKindDeploy
}

// waitForOperator blocks until retry, skip-step or abort arrives, or the
// operator wait times out ("" then).
func (r *run) waitForOperator() string {
	r.status.WaitingFor = "retry, skip-step or abort"
	defer func() { r.status.WaitingFor = "" }()
	ctx, cancel := workflow.WithCancel(r.ctx)
	defer cancel()
	timer := workflow.NewTimer(ctx, r.node.Policy.OperatorWaitTimeout)
	got := ""
	for got == "" {
		sel := workflow.NewSelector(r.ctx)
		sel.AddReceive(r.retry, func(c workflow.ReceiveChannel, _ bool) { c.Receive(r.ctx, nil); got = SignalRetry })
		sel.AddReceive(r.skip, func(c workflow.ReceiveChannel, _ bool) { c.Receive(r.ctx, nil); got = SignalSkipStep })
		sel.AddReceive(r.abort, func(c workflow.ReceiveChannel, _ bool) { r.takeAbort(c); got = SignalAbort })
		// Heartbeats keep arriving while the agent waits with us; note them
		// so a retried agent step uses the current callback URL.
		sel.AddReceive(r.heartbeats, func(c workflow.ReceiveChannel, _ bool) { _, _ = r.takeHeartbeat(c) })
		sel.AddFuture(timer, func(workflow.Future) { got = "timeout" })
		sel.Select(r.ctx)
	}
	if got == "timeout" {
		return ""
	}
	return got
}

// takeAbort receives an abort signal and notes the verb that sent it, if
// the API did (AbortRequest). The payload is decoded into an any, so that an
// abort with any JSON payload, or none, is still an abort: a payload that
// did not decode would make the SDK drop the signal.
func (r *run) takeAbort(c workflow.ReceiveChannel) {
	var v any
	c.Receive(r.ctx, &v)
	if m, ok := v.(map[string]any); ok {
		if verb, ok := m["superseded_by"].(string); ok {
			r.supersededBy = verb
		}
	}
}

func (r *run) takeHeartbeat(c workflow.ReceiveChannel) (Heartbeat, bool) {
	var hb Heartbeat
	c.Receive(r.ctx, &hb)
	if !r.authentic(hb) {
		return Heartbeat{}, false
	}
	if hb.CallbackURL != "" {
		r.agent = hb.CallbackURL
	}
	r.lastHeartbeat = workflow.Now(r.ctx)
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
func (r *run) authentic(hb Heartbeat) bool {
	ctx := workflow.WithLocalActivityOptions(r.ctx, workflow.LocalActivityOptions{
		StartToCloseTimeout: 10 * time.Second,
		RetryPolicy:         &temporal.RetryPolicy{InitialInterval: time.Second, MaximumAttempts: 3},
	})
	var v SignalVerdict
	if err := workflow.ExecuteLocalActivity(ctx, ActVerifySignal, VerifySignalInput{NodeUUID: r.req.NodeUUID, Heartbeat: hb}).Get(ctx, &v); err != nil {
		v.Reason = "verification failed: " + err.Error()
	}
	if v.Reason != "" {
		workflow.GetLogger(r.ctx).Warn("ignored a heartbeat signal that is not authentic", "node", r.req.NodeUUID, "reason", v.Reason)
		return false
	}
	// A signal without a MAC never passes the worker's check; only the
	// workflow unit tests' stand-in verifier lets one through.
	if hb.MAC != "" {
		if why := r.signals.admit(hb); why != "" {
			workflow.GetLogger(r.ctx).Warn("ignored a replayed heartbeat signal", "node", r.req.NodeUUID, "reason", why,
				"callback_url", hb.CallbackURL, "agent_status", hb.AgentStatus)
			return false
		}
	}
	return true
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
	if err := r.enter(state, r.req.Transition.Target, fmt.Sprintf("Waiting for the agent to call back (timeout %s)", timeout)); err != nil {
		return Heartbeat{}, err
	}
	r.status.Step = "wait for agent"
	if r.oneTimer {
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
			sel.AddReceive(r.heartbeats, func(c workflow.ReceiveChannel, _ bool) { hb, got = r.takeHeartbeat(c) })
			sel.AddReceive(r.abort, func(c workflow.ReceiveChannel, _ bool) { c.Receive(r.ctx, nil); aborted = true })
			sel.AddFuture(timer, func(workflow.Future) { timedOut = true })
			sel.Select(r.ctx)
		}
		cancel()
		switch {
		case aborted:
			return Heartbeat{}, errAborted
		case timedOut:
			return Heartbeat{}, r.callbackTimedOut(state, timeout)
		case got && done(hb):
			return hb, nil
		}
	}
}

// callbackTimedOut is the error of a callback wait that ran out.
func (r *run) callbackTimedOut(state provision.State, timeout time.Duration) error {
	what := "callback"
	if state == provision.RescueWait {
		what = "rescue ramdisk callback" // Ironic's words for rescue wait
	}
	return fmt.Errorf("Timeout reached while waiting for %s for node %s (%s without a heartbeat)", what, r.node.UUID, timeout)
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
	deadline := workflow.Now(r.ctx).Add(timeout)
	// A timer left by the steps before (a wait for the call-back after a
	// reboot) serves if it fires by the deadline; otherwise a new one is
	// armed, and the old one, no longer watched, fires unheeded.
	if r.liveness == nil || r.livenessAt.After(deadline) {
		r.armLiveness(r.armFor(timeout))
	}
	for {
		var (
			hb         Heartbeat
			got, fired bool
			aborted    bool
		)
		sel := workflow.NewSelector(r.ctx)
		sel.AddReceive(r.heartbeats, func(c workflow.ReceiveChannel, _ bool) { hb, got = r.takeHeartbeat(c) })
		sel.AddReceive(r.abort, func(c workflow.ReceiveChannel, _ bool) { c.Receive(r.ctx, nil); aborted = true })
		sel.AddFuture(r.liveness, func(workflow.Future) { fired = true })
		sel.Select(r.ctx)
		switch {
		case aborted:
			return Heartbeat{}, errAborted
		case fired:
			left := deadline.Sub(workflow.Now(r.ctx))
			if left <= 0 {
				r.liveness = nil
				return Heartbeat{}, r.callbackTimedOut(state, timeout)
			}
			r.armLiveness(r.armFor(left))
		case got && done(hb):
			return hb, nil
		case got:
			// As Ironic's touch_provisioning: a heartbeat moves the
			// deadline, not the timer.
			deadline = workflow.Now(r.ctx).Add(timeout)
		}
	}
}

// armLiveness starts the liveness timer, to fire d from now.
func (r *run) armLiveness(d time.Duration) {
	r.liveness = workflow.NewTimer(r.ctx, d)
	r.livenessAt = workflow.Now(r.ctx).Add(d)
}

// armFor is how far the shared timer of a one-timer deploy is set when d
// remains of its wait: never beyond the heartbeat timeout, so that an agent
// step that takes it over notices a silent agent as soon as with a timer
// of its own.
func (r *run) armFor(d time.Duration) time.Duration {
	if hb := r.node.Policy.HeartbeatTimeout; hb > 0 && d > hb {
		return hb
	}
	return d
}

// agentStepOnce runs one in-band step while watching the agent's heartbeats:
// if the agent stays silent longer than the heartbeat timeout, the step
// fails instead of waiting forever; abort cancels it. agentStep
// (agentprogress.go) runs it again when the machine rebooted under it.
func (r *run) agentStepOnce(kind provision.StepKind, s provision.Step) (AgentStepResult, error) {
	p := r.node.Policy
	actCtx, cancelAct := workflow.WithCancel(r.ctx)
	defer cancelAct()
	actCtx = workflow.WithActivityOptions(actCtx, workflow.ActivityOptions{
		TaskQueue:           HardwareQueue(r.node.ConductorGroup),
		StartToCloseTimeout: p.AgentCommandTimeout,
		HeartbeatTimeout:    p.AgentActivityHeartbeat,
		RetryPolicy: &temporal.RetryPolicy{
			InitialInterval:        2 * time.Second,
			BackoffCoefficient:     2,
			MaximumInterval:        30 * time.Second,
			MaximumAttempts:        5,
			NonRetryableErrorTypes: []string{ErrTypeAgentStepFailed, ErrTypeInvalidConfig, ErrTypeNodeGone},
		},
	})
	fut := workflow.ExecuteActivity(actCtx, ActRunAgentStep, AgentStepInput{
		Agent: AgentInput{NodeUUID: r.node.UUID, CallbackURL: r.agent}, Kind: kind, Step: s, Index: r.takeIndex(),
	})
	// One liveness timer for all agent steps, not one per step or per
	// heartbeat: when it fires, the agent is lost only if neither a
	// heartbeat nor the current step's start came within the timeout;
	// otherwise it is re-armed for what remains. A heartbeat then costs the
	// workflow its signal alone, and a step no timer events. The timer is
	// left running between steps: a workflow that ends drops it.
	started := workflow.Now(r.ctx)
	if r.liveness == nil {
		r.armLiveness(p.HeartbeatTimeout)
	}
	for {
		var (
			done, fired, aborted bool
			err                  error
			res                  AgentStepResult
		)
		sel := workflow.NewSelector(r.ctx)
		sel.AddFuture(fut, func(f workflow.Future) { done = true; err = f.Get(r.ctx, &res) })
		sel.AddReceive(r.heartbeats, func(c workflow.ReceiveChannel, _ bool) { _, _ = r.takeHeartbeat(c) })
		sel.AddReceive(r.abort, func(c workflow.ReceiveChannel, _ bool) { c.Receive(r.ctx, nil); aborted = true })
		sel.AddFuture(r.liveness, func(workflow.Future) { fired = true })
		sel.Select(r.ctx)
		switch {
		case done:
			return res, err
		case aborted && r.holdAbort != nil && r.holdAbort(s):
			r.abortAfter = true
			workflow.GetLogger(r.ctx).Info("step is not abortable: abort after it", "node", r.node.UUID, "step", s.Name())
			continue
		case aborted:
			cancelAct()
			_ = fut.Get(r.ctx, nil)
			return AgentStepResult{}, errAborted
		case fired:
			last := started
			if r.lastHeartbeat.After(last) {
				last = r.lastHeartbeat
			}
			if left := last.Add(p.HeartbeatTimeout).Sub(workflow.Now(r.ctx)); left > 0 {
				r.armLiveness(left)
				continue
			}
			r.liveness = nil
			cancelAct()
			_ = fut.Get(r.ctx, nil)
			return AgentStepResult{}, fmt.Errorf("%w: no heartbeat for %s while running step %s", errAgentLost, p.HeartbeatTimeout, s.Name())
		}
	}
}

// errorText is the human part of an activity error: the application error's
// message without Temporal's wrapping.
func errorText(err error) string {
	var app *temporal.ApplicationError
	if errors.As(err, &app) {
		return app.Message()
	}
	var to *temporal.TimeoutError
	if errors.As(err, &to) {
		return fmt.Sprintf("timed out (%s)", to.TimeoutType())
	}
	var canceled *temporal.CanceledError
	if errors.As(err, &canceled) {
		return "canceled"
	}
	return err.Error()
}

func capitalize(s string) string {
	if s == "" {
		return s
	}
	b := []byte(s)
	if b[0] >= 'a' && b[0] <= 'z' {
		b[0] -= 'a' - 'A'
	}
	return string(b)
}
