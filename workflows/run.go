package workflows

import (
	"errors"
	"fmt"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/workflow"

	"github.com/ironflow/ironflow/hardware"
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
	// ErrTypePowerStateFailure: a soft power off or soft reboot whose
	// machine was still on at the deadline (Ironic's PowerStateFailure);
	// its details hold the power state the BMC read then.
	ErrTypePowerStateFailure = "PowerStateFailure"
)

// run is one provisioning workflow's composition of its parts, each in its
// own file:
//
//	rec      the node's state as the workflow records it, and the status
//	         query (recorder.go)
//	agent    the agent's session: heartbeats, callback URL, liveness timer,
//	         agent calls (agentsession.go)
//	operator the operator's signals: abort, retry, skip-step (operator.go)
//	hw       the hardware calls: BMC and boot activities (hardware.go)
//	steps    the running step's plan index (steprunner.go)
//
// None holds the workflow's input: a workflow function reads its
// provision.Request and hands each part, or each call, what it needs (the
// operation's states and target, the user's steps, disable_ramdisk).
type run struct {
	ctx  workflow.Context
	node NodeInfo

	rec      recorder
	agent    agentSession
	operator operator
	hw       hardwareCalls
	steps    stepRunner

	metrics runMetrics // what it measures (metrics.go)
}

// ErrTypeUndecidedRequest: a provision workflow was handed a request that
// carries no transition. The API decides every verb once (provision.Accept)
// and hands the decision on; a workflow never decides it again.
const ErrTypeUndecidedRequest = "UndecidedRequest"

// newRun starts the run of a provision verb's workflow: req must carry the
// transition the API decided, whose Next is the state the API recorded (the
// workflow's first write applies only while the node is still in it). It
// must be the first thing a provisioning workflow does, so that signals sent
// right after the start are never lost.
func newRun(ctx workflow.Context, req provision.Request, operation provision.Operation) (*run, error) {
	if req.Transition.Operation == "" {
		return nil, temporal.NewNonRetryableApplicationError(
			fmt.Sprintf("node %s: the %s request (verb %q from %q) carries no decided transition: the API decides it (provision.Accept)",
				req.NodeUUID, operation, req.Verb, req.FromState), ErrTypeUndecidedRequest, nil)
	}
	return startRun(ctx, runStart{node: req.NodeUUID, operation: operation, verb: req.Verb, from: req.FromState, accepted: req.Transition.Next})
}

// newNodeRun starts the run of a workflow no provision verb started (power,
// boot device, boot mode, virtual media): it changes no provision state.
func newNodeRun(ctx workflow.Context, nodeUUID string, operation provision.Operation) (*run, error) {
	return startRun(ctx, runStart{node: nodeUUID, operation: operation})
}

// runStart is what a run starts from: the node, the operation, and for a
// provision verb the verb, the state the API saw and the state it recorded.
type runStart struct {
	node           string
	operation      provision.Operation
	verb           provision.Verb
	from, accepted provision.State
}

// startRun registers the status query and the signal channels, then loads
// the node.
func startRun(ctx workflow.Context, in runStart) (*run, error) {
	r := &run{ctx: ctx}
	heartbeats := workflow.GetSignalChannel(ctx, SignalHeartbeat)
	r.operator = operator{
		ctx:   ctx,
		abort: workflow.GetSignalChannel(ctx, SignalAbort),
		retry: workflow.GetSignalChannel(ctx, SignalRetry),
		skip:  workflow.GetSignalChannel(ctx, SignalSkipStep),
	}
	r.rec = recorder{ctx: ctx, verb: in.verb, searchState: in.accepted}
	r.rec.status.Operation = in.operation
	r.rec.status.ProvisionState = in.from
	if err := workflow.SetQueryHandler(ctx, QueryStatus, func() (Status, error) { return r.rec.status, nil }); err != nil {
		return nil, fmt.Errorf("register status query: %w", err)
	}
	if err := r.rec.local(ActLoadNode, in.node, &r.node); err != nil {
		err = fmt.Errorf("load node %s: %w", in.node, err)
		var app *temporal.ApplicationError
		if errors.As(err, &app) && app.Type() == ErrTypeInvalidConfig {
			// The API has already recorded the operation's state: a node
			// whose settings cannot be read must not stay there silently.
			r.rec.refuseInvalidConfig(in.node, in.from, err)
		}
		return nil, err
	}
	r.rec.node = r.node.UUID
	r.metrics = startMetrics(ctx, in.operation)
	r.agent = agentSession{ctx: ctx, node: r.node.UUID, queue: HardwareQueue(r.node.ConductorGroup), policy: r.node.Policy, heartbeats: heartbeats}
	r.hw = hardwareCalls{ctx: ctx, node: &r.node}
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
	case provision.OpAdopt:
		return provision.AdoptFailed
	}
	return ""
}

// finish turns the outcome into the node's final record. A workflow that
// ends through abort or an operator wait that timed out leaves the node in
// its failure state with a last_error that says so, boot config removed and
// power off, so that nothing is left booting.
func (r *run) finish(err error) error {
	r.metrics.finish(r.ctx, err)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, errAborted), errors.Is(err, errGaveUp), errors.Is(err, errAgentLost):
		reason := "aborted by operator"
		switch {
		case errors.Is(err, errGaveUp):
			reason = fmt.Sprintf("no retry, skip-step or abort within %s", r.node.Policy.OperatorWaitTimeout)
		case errors.Is(err, errAgentLost):
			reason = "boot configuration removed and power off; deploy again when the machine is back"
		}
		// Whatever this workflow prepared to boot (agent, installer and its
		// kickstart with a token, ramdisk) is removed; CleanBoot is
		// idempotent when there is nothing.
		// (Rescue, unrescue and servicing always boot the agent.)
		if hardware.DeployOf(r.node.DeployInterface).PreparesBoot() || r.node.VirtualMedia() ||
			r.rec.status.Operation == provision.OpRescue || r.rec.status.Operation == provision.OpUnrescue || r.rec.status.Operation == provision.OpService {
			if cerr := r.hw.cleanBoot(BootAgent, nil); cerr != nil {
				workflow.GetLogger(r.ctx).Warn("clean up boot after failure", "node", r.node.UUID, "error", errorText(cerr))
			}
		}
		if perr := r.hw.power("power off"); perr != nil {
			workflow.GetLogger(r.ctx).Warn("power off after failure", "node", r.node.UUID, "error", errorText(perr))
		}
		last := r.rec.status.LastError
		event, severity := "", "ERROR"
		switch {
		case r.operator.supersededBy != "" && errors.Is(err, errAborted):
			// A new verb ended the wait (AbortRequest): the failure's
			// last_error stands, and nobody aborted anything.
			event, severity = fmt.Sprintf("%s requested in state \"%s\": the wait for retry, skip-step or abort ended",
				r.operator.supersededBy, r.rec.fail), "INFO"
		case r.operator.abortMessage != "" && errors.Is(err, errAborted):
			last = r.operator.abortMessage
		case last == "" || errors.Is(err, errAborted):
			last = fmt.Sprintf("%s %s at step %s", capitalize(string(r.rec.status.Operation)), reason, r.rec.status.Step)
		default:
			last = fmt.Sprintf("%s (%s)", last, reason)
		}
		if event == "" {
			event = last
		}
		if rerr := r.rec.record(RecordStateInput{To: r.rec.fail, LastError: last, Event: event, Severity: severity, EventType: string(r.rec.status.Operation), ClearAgent: true}); rerr != nil {
			return rerr
		}
		// The node says why; the workflow itself completed its job.
		return nil
	default:
		return err
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
