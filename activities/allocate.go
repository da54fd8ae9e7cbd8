package activities

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"

	"github.com/ironflow/ironflow/store"
	"github.com/ironflow/ironflow/workflows"
)

// AllocateNode fills an allocation as Ironic's do_allocate does
// (ironic/conductor/allocations.py): the candidates, those with every
// requested trait, in random order so that parallel allocations do not
// try the nodes in the same order, a node named as the allocation first
// (API 1.79); then each is claimed in one transaction (store.ClaimNode)
// until one is the allocation's. Nodes another transaction held are tried
// again, in.Attempts times in all. When none is left, the allocation
// records Ironic's message and ends in state error. Local activity; safe
// to run again (an allocation no longer allocating is left as it is).
func (a *Activities) AllocateNode(ctx context.Context, in workflows.AllocationRequest) (workflows.AllocationResult, error) {
	alloc, err := a.Store.GetAllocation(ctx, in.AllocationUUID)
	if errors.Is(err, store.ErrNotFound) {
		return workflows.AllocationResult{}, nil
	}
	if err != nil {
		return workflows.AllocationResult{}, storeErr(err, "read allocation %s", in.AllocationUUID)
	}
	if alloc.State != store.AllocationAllocating {
		return allocationResult(alloc), nil
	}
	node, reason, err := a.allocate(ctx, alloc, in)
	if err != nil {
		return workflows.AllocationResult{}, err
	}
	if node != "" || reason == "" {
		// Claimed, or deleted while it was being filled.
		return workflows.AllocationResult{NodeUUID: node}, nil
	}
	// Ironic's AllocationFailed: "Failed to process allocation %(uuid)s:
	// %(error)s."
	msg := fmt.Sprintf("Failed to process allocation %s: %s.", alloc.UUID, reason)
	if err := a.Store.FailAllocation(ctx, alloc.UUID, msg); err != nil {
		return workflows.AllocationResult{}, storeErr(err, "record failed allocation %s", alloc.UUID)
	}
	return workflows.AllocationResult{LastError: msg}, nil
}

func allocationResult(alloc *store.Allocation) workflows.AllocationResult {
	var r workflows.AllocationResult
	if alloc.NodeUUID != nil {
		r.NodeUUID = *alloc.NodeUUID
	}
	if alloc.LastError != nil {
		r.LastError = *alloc.LastError
	}
	return r
}

// allocate returns the node the allocation got, or why it got none in
// Ironic's words.
func (a *Activities) allocate(ctx context.Context, alloc *store.Allocation, in workflows.AllocationRequest) (node, reason string, err error) {
	rc := ""
	if alloc.ResourceClass != nil {
		rc = *alloc.ResourceClass
	}
	found, err := a.Store.AllocationCandidates(ctx, alloc)
	if err != nil {
		return "", "", storeErr(err, "find nodes for allocation %s", alloc.UUID)
	}
	if len(found) == 0 {
		if len(alloc.CandidateNodes) > 0 {
			return "", "none of the requested nodes are available and match the resource class " + rc, nil
		}
		return "", "no available nodes match the resource class " + rc, nil
	}
	var nodes []store.AllocationCandidate
	for _, c := range found {
		if hasAll(c.Traits, alloc.Traits) {
			nodes = append(nodes, c)
		}
	}
	if len(nodes) == 0 {
		return "", "no suitable nodes have the requested traits " + strings.Join(alloc.Traits, ", "), nil
	}
	rand.Shuffle(len(nodes), func(i, j int) { nodes[i], nodes[j] = nodes[j], nodes[i] })
	if alloc.Name != nil {
		// API 1.79: a node named as the allocation is tried first.
		if i := slices.IndexFunc(nodes, func(c store.AllocationCandidate) bool { return c.Name != nil && *c.Name == *alloc.Name }); i > 0 {
			named := nodes[i]
			nodes = append([]store.AllocationCandidate{named}, slices.Delete(nodes, i, i+1)...)
		}
	}
	attempts, interval := in.Attempts, in.Interval
	if attempts <= 0 {
		attempts = workflows.DefaultAllocationRetryAttempts
	}
	if interval <= 0 {
		interval = workflows.DefaultAllocationRetryInterval
	}
	for attempt := 1; ; attempt++ {
		var locked []store.AllocationCandidate
		for _, c := range nodes {
			res, err := a.Store.ClaimNode(ctx, alloc, c.UUID)
			if err != nil {
				return "", "", storeErr(err, "claim node %s for allocation %s", c.UUID, alloc.UUID)
			}
			switch res {
			case store.Claimed:
				return c.UUID, "", nil
			case store.ClaimAllocationGone:
				return "", "", nil
			case store.ClaimLocked:
				locked = append(locked, c)
			}
		}
		nodes = locked
		if len(nodes) == 0 {
			return "", "all nodes were filtered out during reservation", nil
		}
		if attempt >= attempts {
			return "", fmt.Sprintf("could not reserve any of %d suitable nodes", len(nodes)), nil
		}
		select {
		case <-ctx.Done():
			return "", "", ctx.Err()
		case <-time.After(interval):
		}
	}
}

// hasAll reports whether have holds every trait of want.
func hasAll(have, want []string) bool {
	for _, t := range want {
		if !slices.Contains(have, t) {
			return false
		}
	}
	return true
}
