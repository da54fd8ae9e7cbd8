package workflows

import (
	"fmt"

	"go.temporal.io/sdk/workflow"

	"github.com/ironflow/ironflow/provision"
)

// operator is what a run knows of its operator: the abort, retry and
// skip-step signals, and how an abort ends the operation.
type operator struct {
	ctx   workflow.Context
	abort workflow.ReceiveChannel
	retry workflow.ReceiveChannel
	skip  workflow.ReceiveChannel

	// holdAbort, when set, says whether an abort that arrives while agent
	// step s runs waits for its end (a step that is not abortable): the
	// run then notes abortAfter and lets the step finish. Only manual
	// cleaning and servicing set it.
	holdAbort  func(s provision.Step) bool
	abortAfter bool
	// abortMessage, when set, is the last_error finish records for an
	// abort (Ironic's wording for the operation).
	abortMessage string
	// supersededBy says what request ended the operator wait
	// (AbortRequest): `Provision action "deleted"`, `Node deletion`; ""
	// for an operator's abort.
	supersededBy string
}

// pendingAbort reports whether an abort signal has arrived, without blocking.
func (o *operator) pendingAbort() bool {
	return o.abort.ReceiveAsync(nil)
}

// takeAbort receives an abort signal and notes the verb that sent it, if
// the API did (AbortRequest). The payload is decoded into an any, so that an
// abort with any JSON payload, or none, is still an abort: a payload that
// did not decode would make the SDK drop the signal.
func (o *operator) takeAbort(c workflow.ReceiveChannel) {
	var v any
	c.Receive(o.ctx, &v)
	if m, ok := v.(map[string]any); ok {
		if verb, ok := m["superseded_by"].(string); ok && verb != "" {
			o.supersededBy = fmt.Sprintf("Provision action \"%s\"", verb)
		}
		if req, ok := m["request"].(string); ok && req != "" {
			o.supersededBy = req
		}
	}
}

// waitForOperator blocks until retry, skip-step or abort arrives, or the
// operator wait (the policy's OperatorWaitTimeout) times out ("" then).
func (r *run) waitForOperator() string {
	r.rec.status.WaitingFor = "retry, skip-step or abort"
	defer func() { r.rec.status.WaitingFor = "" }()
	ctx, cancel := workflow.WithCancel(r.ctx)
	defer cancel()
	timer := workflow.NewTimer(ctx, r.node.Policy.OperatorWaitTimeout)
	got := ""
	for got == "" {
		sel := workflow.NewSelector(r.ctx)
		sel.AddReceive(r.operator.retry, func(c workflow.ReceiveChannel, _ bool) { c.Receive(r.ctx, nil); got = SignalRetry })
		sel.AddReceive(r.operator.skip, func(c workflow.ReceiveChannel, _ bool) { c.Receive(r.ctx, nil); got = SignalSkipStep })
		sel.AddReceive(r.operator.abort, func(c workflow.ReceiveChannel, _ bool) { r.operator.takeAbort(c); got = SignalAbort })
		// Heartbeats keep arriving while the agent waits with us; note them
		// so a retried agent step uses the current callback URL.
		sel.AddReceive(r.agent.heartbeats, func(c workflow.ReceiveChannel, _ bool) { _, _ = r.agent.takeHeartbeat(c) })
		sel.AddFuture(timer, func(workflow.Future) { got = "timeout" })
		sel.Select(r.ctx)
	}
	if got == "timeout" {
		return ""
	}
	return got
}
