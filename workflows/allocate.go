package workflows

import (
	"time"

	"go.temporal.io/sdk/workflow"
)

// Allocations (API 1.52): POST /v1/allocations answers at once with the
// allocation in state allocating; this short workflow then picks the node,
// as Ironic's conductor does in a worker thread (do_allocate in
// ironic/conductor/allocations.py). It runs under its own ID, not a node's
// lock: it does not know its node before it has one, and the claim itself
// is one transaction in the store (store.ClaimNode), so that two
// allocations never take one node. It does not wait for a node to free
// up: no node, and the allocation ends in state error with Ironic's
// message.
const (
	WorkflowAllocate = "Allocate"
	// ActAllocateNode finds the candidates and claims one, or records the
	// failure. Local activity.
	ActAllocateNode = "AllocateNode"
)

// Named defaults of the claim, Ironic's: [conductor]node_locked_retry_attempts
// and node_locked_retry_interval, the tries over the nodes that were
// locked by another transaction at the first pass.
const (
	DefaultAllocationRetryAttempts = 3
	DefaultAllocationRetryInterval = time.Second
)

// AllocationWorkflowID is the ID of an allocation's workflow.
func AllocationWorkflowID(allocationUUID string) string { return "allocation-" + allocationUUID }

// AllocationRequest starts Allocate. Zero Attempts and Interval take the
// named defaults.
type AllocationRequest struct {
	AllocationUUID string        `json:"allocation_uuid"`
	Attempts       int           `json:"attempts,omitempty"`
	Interval       time.Duration `json:"interval,omitempty"`
}

// AllocationResult is what the allocation came to: the node it holds, or
// the allocation's last_error; both empty when it was deleted meanwhile.
type AllocationResult struct {
	NodeUUID  string `json:"node_uuid,omitempty"`
	LastError string `json:"last_error,omitempty"`
}

// Allocate fills one allocation.
func Allocate(ctx workflow.Context, req AllocationRequest) (AllocationResult, error) {
	var res AllocationResult
	err := workflow.ExecuteLocalActivity(localOptions(ctx), ActAllocateNode, req).Get(ctx, &res)
	return res, err
}
