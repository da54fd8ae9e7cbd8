package apiserver

import (
	"context"
	"errors"
	"fmt"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/sdk/client"
	"go.temporal.io/sdk/temporal"

	"github.com/ironflow/ironflow/nodelock"
	"github.com/ironflow/ironflow/provision"
	"github.com/ironflow/ironflow/workflows"
)

// TemporalEngine is the Engine backed by a Temporal client: each node has at
// most one running workflow, ID node-<uuid>, which is the node lock.
type TemporalEngine struct {
	Client client.Client
}

func (e *TemporalEngine) start(ctx context.Context, nodeUUID string, operation provision.Operation, state provision.State, workflowType string, arg any) (client.WorkflowRun, error) {
	return e.startWith(ctx, nodeUUID, operation, state, workflowType, arg, "")
}

// startWith is start for a node's operation that a rollout sent: its
// workflow also carries the rollout's search attribute (docs/rollouts.md).
func (e *TemporalEngine) startWith(ctx context.Context, nodeUUID string, operation provision.Operation, state provision.State, workflowType string, arg any, rollout string) (client.WorkflowRun, error) {
	sa := workflows.SearchAttributes(nodeUUID, operation, state)
	if rollout != "" {
		sa = workflows.NodeRolloutSearchAttributes(nodeUUID, operation, state, rollout)
	}
	opts := client.StartWorkflowOptions{
		ID:                       workflows.WorkflowID(nodeUUID),
		TaskQueue:                workflows.TaskQueue,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
		// Without this the SDK hands back the running workflow as if it
		// were ours, and two verbs would both be accepted.
		WorkflowExecutionErrorWhenAlreadyStarted: true,
		WorkflowIDReusePolicy:                    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		TypedSearchAttributes:                    sa,
		// Eager start: when a worker of the same client polls the workflow
		// queue (ironflow dev, make run), the server hands it the first
		// workflow task in the start's answer instead of through matching
		// (Temporal's "eager workflow start"). Elsewhere the SDK does not
		// ask for it, and the start is the plain one.
		EnableEagerStart: true,
	}
	run, err := e.Client.ExecuteWorkflow(ctx, opts, workflowType, arg)
	if err != nil {
		var started *serviceerror.WorkflowExecutionAlreadyStarted
		if errors.As(err, &started) {
			return nil, ErrNodeLocked
		}
		return nil, fmt.Errorf("start workflow %s for node %s: %w", workflowType, nodeUUID, err)
	}
	return run, nil
}

// StartProvision implements Engine.
func (e *TemporalEngine) StartProvision(ctx context.Context, req provision.Request) error {
	// The API decided the transition (provision.Accept); the workflow
	// starts as it.
	t := req.Transition
	if t.Operation == "" {
		return fmt.Errorf("verb %q from state %q: no transition decided", req.Verb, req.FromState)
	}
	wf, ok := workflows.WorkflowFor(t.Operation)
	if !ok {
		return fmt.Errorf("%w: provision verb %q", ErrNotImplemented, req.Verb)
	}
	_, err := e.startWith(ctx, req.NodeUUID, t.Operation, t.Next, wf, req, req.Rollout)
	return err
}

// StartPower implements Engine.
func (e *TemporalEngine) StartPower(ctx context.Context, req workflows.PowerRequest) error {
	_, err := e.start(ctx, req.NodeUUID, provision.OpPower, "", workflows.WorkflowSetPowerState, req)
	return err
}

// SetConsole implements Engine: the change runs under the console's own
// workflow ID (workflows.ConsoleWorkflowID), beside the node's operation;
// ErrNodeLocked while another console change of the node runs.
func (e *TemporalEngine) SetConsole(ctx context.Context, req workflows.ConsoleRequest) error {
	opts := client.StartWorkflowOptions{
		ID:                                       workflows.ConsoleWorkflowID(req.NodeUUID),
		TaskQueue:                                workflows.TaskQueue,
		WorkflowIDConflictPolicy:                 enumspb.WORKFLOW_ID_CONFLICT_POLICY_FAIL,
		WorkflowExecutionErrorWhenAlreadyStarted: true,
		WorkflowIDReusePolicy:                    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		TypedSearchAttributes:                    workflows.SearchAttributes(req.NodeUUID, provision.OpConsole, ""),
	}
	_, err := e.Client.ExecuteWorkflow(ctx, opts, workflows.WorkflowSetConsoleNode, req)
	var started *serviceerror.WorkflowExecutionAlreadyStarted
	if errors.As(err, &started) {
		return ErrNodeLocked
	}
	if err != nil {
		return fmt.Errorf("start the console change of node %s: %w", req.NodeUUID, err)
	}
	return nil
}

// SetBootDevice implements Engine: it waits for the BMC's answer.
func (e *TemporalEngine) SetBootDevice(ctx context.Context, req workflows.BootDeviceRequest) error {
	run, err := e.start(ctx, req.NodeUUID, provision.OpBootDevice, "", workflows.WorkflowChangeBootDevice, req)
	if err != nil {
		return err
	}
	if err := run.Get(ctx, nil); err != nil {
		return fmt.Errorf("set boot device of node %s: %w", req.NodeUUID, unwrapWorkflowError(err))
	}
	return nil
}

// ChangeVirtualMedia implements Engine: it waits for the BMC's answer.
func (e *TemporalEngine) ChangeVirtualMedia(ctx context.Context, req workflows.VirtualMediaRequest) error {
	run, err := e.start(ctx, req.NodeUUID, provision.OpVirtualMedia, "", workflows.WorkflowChangeVirtualMedia, req)
	if err != nil {
		return err
	}
	if err := run.Get(ctx, nil); err != nil {
		return fmt.Errorf("%w: %w", ErrHardware, unwrapWorkflowError(err))
	}
	return nil
}

// ReadVirtualMedia implements Engine: the read runs under its own workflow
// ID (workflows.VirtualMediaReadID), not the node lock, as Ironic reads
// under a shared lock; reads that overlap share one run.
func (e *TemporalEngine) ReadVirtualMedia(ctx context.Context, req workflows.VirtualMediaRequest) ([]workflows.VirtualMediaDevice, error) {
	req.Read = true
	opts := client.StartWorkflowOptions{
		ID:                       workflows.VirtualMediaReadID(req.NodeUUID),
		TaskQueue:                workflows.TaskQueue,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		WorkflowIDReusePolicy:    enumspb.WORKFLOW_ID_REUSE_POLICY_ALLOW_DUPLICATE,
		TypedSearchAttributes:    workflows.SearchAttributes(req.NodeUUID, provision.OpVirtualMedia, ""),
	}
	run, err := e.Client.ExecuteWorkflow(ctx, opts, workflows.WorkflowChangeVirtualMedia, req)
	if err != nil {
		return nil, fmt.Errorf("start the virtual media read of node %s: %w", req.NodeUUID, err)
	}
	var out []workflows.VirtualMediaDevice
	if err := run.Get(ctx, &out); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrHardware, unwrapWorkflowError(err))
	}
	return out, nil
}

// Manage implements Engine: it waits for the BMC's answer.
func (e *TemporalEngine) Manage(ctx context.Context, req workflows.ManagementRequest) ([]workflows.Indicator, error) {
	run, err := e.start(ctx, req.NodeUUID, provision.OpManagement, "", workflows.WorkflowNodeManagement, req)
	if err != nil {
		return nil, err
	}
	var out []workflows.Indicator
	if err := run.Get(ctx, &out); err != nil {
		// The activity's own message names the call and the BMC's
		// answer; its causes are only the typed sentinels of bmc.
		var app *temporal.ApplicationError
		switch {
		case errors.As(err, &app) && app.Type() == workflows.ErrTypeInvalidParameter:
			return nil, fmt.Errorf("%w: %s", ErrInvalidParameter, app.Message())
		case app != nil:
			return nil, fmt.Errorf("%w: %s", ErrHardware, app.Message())
		}
		return nil, fmt.Errorf("%w: %w", ErrHardware, unwrapWorkflowError(err))
	}
	return out, nil
}

// VendorPassthru implements Engine: it waits for the BMC's answer.
func (e *TemporalEngine) VendorPassthru(ctx context.Context, req workflows.VendorPassthruRequest) (any, error) {
	run, err := e.start(ctx, req.NodeUUID, provision.OpVendorPassthru, "", workflows.WorkflowVendorPassthru, req)
	if err != nil {
		return nil, err
	}
	var out any
	if err := run.Get(ctx, &out); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrHardware, err)
	}
	return out, nil
}

// ErrInvalidParameter: the BMC's answer shows the request to be wrong
// (Ironic's InvalidParameterValue, a 400); the message follows it.
var ErrInvalidParameter = errors.New("invalid parameter")

// StartAllocation implements Engine: the allocation's own workflow, not a
// node's lock (workflows/allocate.go).
func (e *TemporalEngine) StartAllocation(ctx context.Context, allocationUUID string) error {
	opts := client.StartWorkflowOptions{
		ID:                       workflows.AllocationWorkflowID(allocationUUID),
		TaskQueue:                workflows.TaskQueue,
		WorkflowIDConflictPolicy: enumspb.WORKFLOW_ID_CONFLICT_POLICY_USE_EXISTING,
		EnableEagerStart:         true,
	}
	if _, err := e.Client.ExecuteWorkflow(ctx, opts, workflows.WorkflowAllocate, workflows.AllocationRequest{AllocationUUID: allocationUUID}); err != nil {
		return fmt.Errorf("start the allocation %s: %w", allocationUUID, err)
	}
	return nil
}

// ErrHardware: the BMC refused or failed an operation the API waited for.
var ErrHardware = errors.New("hardware operation failed")

// Signal implements Engine.
func (e *TemporalEngine) Signal(ctx context.Context, nodeUUID, name string, arg any) error {
	err := e.Client.SignalWorkflow(ctx, workflows.WorkflowID(nodeUUID), "", name, arg)
	var nf *serviceerror.NotFound
	if errors.As(err, &nf) {
		return ErrNoWorkflow
	}
	return err
}

// Running implements Engine.
func (e *TemporalEngine) Running(ctx context.Context, nodeUUID string) (bool, error) {
	return nodelock.Held(ctx, e.Client, nodeUUID)
}

// WaitClosed implements closeWaiter: a long poll on the node's running
// workflow that returns as soon as it closes, or after d.
func (e *TemporalEngine) WaitClosed(ctx context.Context, nodeUUID string, d time.Duration) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	// The workflow's own result does not matter, only that it ended.
	_ = e.Client.GetWorkflow(ctx, workflows.WorkflowID(nodeUUID), "").Get(ctx, nil)
}

// unwrapWorkflowError keeps the innermost message of a failed workflow: the
// activity's own words.
func unwrapWorkflowError(err error) error {
	for {
		next := errors.Unwrap(err)
		if next == nil {
			return err
		}
		err = next
	}
}

// ErrNotImplemented: a verb ironflow does not run yet.
var ErrNotImplemented = errors.New("not implemented")

// WorkflowTypes lists every workflow type the API starts, so that the
// worker's registration can be checked against it.
func WorkflowTypes() []string {
	var out []string
	for _, op := range []provision.Operation{provision.OpManage, provision.OpProvide, provision.OpDeploy,
		provision.OpUndeploy, provision.OpInspect, provision.OpPower, provision.OpBootDevice,
		provision.OpRescue, provision.OpUnrescue, provision.OpVirtualMedia, provision.OpManagement, provision.OpVendorPassthru,
		provision.OpAdopt, provision.OpConsole} {
		if wf, ok := workflows.WorkflowFor(op); ok {
			out = append(out, wf)
		}
	}
	return append(out, workflows.WorkflowAllocate)
}
