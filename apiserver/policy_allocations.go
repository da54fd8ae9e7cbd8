package apiserver

import (
	"encoding/json"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/ironflow/ironflow/store"
)

// Allocations under the keystone strategy, as Ironic's allocation.py and
// the allocation helpers of its api/controllers/v1/utils.py: an
// allocation's rules are checked with its owner as "allocation.owner"; a
// caller who may not read it (baremetal:allocation:get) is told it does
// not exist; a project-scoped creator's allocation is its project's and
// matches only the nodes its project owns or leases.

// ctxAllocationOwner is the owner a create gives the allocation (the
// caller's project); ctxAllocationProject the project candidate nodes must
// belong to.
const (
	ctxAllocationOwner   = "ironflow.allocation_owner"
	ctxAllocationProject = "ironflow.allocation_project"
)

// allocationTarget is the policy target of a.
func allocationTarget(a *store.Allocation) policyTarget {
	t := policyTarget{}
	if a.Owner != nil {
		t["allocation.owner"] = *a.Owner
	}
	return t
}

// allocationAllowed is check_owner_policy('allocation', rule, owner) for
// a handler that found the allocation itself (below a node): no policy,
// no check.
func (s *server) allocationAllowed(c *gin.Context, a *store.Allocation, rule string) error {
	if s.policy == nil {
		return nil
	}
	cr, _ := c.Get(ctxCreds)
	cred, _ := cr.(*creds)
	if cred == nil {
		return errorf(http.StatusUnauthorized, "Authentication required")
	}
	return s.policy.authorize(rule, cred, allocationTarget(a))
}

// allocationRouteAllowed enforces the allocation routes.
func (s *server) allocationRouteAllowed(c *gin.Context, cr *creds, rr routeRule) error {
	if ver(c) < v52Allocation {
		return nil // the route's version gate answers
	}
	switch rr.kind {
	case onAllocationCreate:
		return s.allocationCreateAllowed(c, cr, rr.rule)
	case onNodeAllocation:
		// The node first (hidden as missing), then the allocation's
		// rule in the handler (allocationAllowed).
		_, err := s.nodeAllowed(c, cr, c.Param("node"), "baremetal:node:get")
		return err
	}
	// check_allocation_policy_and_retrieve.
	a, err := s.loadAllocation(c)
	if err != nil {
		return err
	}
	if !s.policy.allowed("baremetal:allocation:get", cr, allocationTarget(a)) {
		return allocationNotFound(c.Param("ident"))
	}
	return s.policy.authorize(rr.rule, cr, allocationTarget(a))
}

// allocationCreateAllowed is _authorize_create_allocation and the owner
// rules of post: baremetal:allocation:create; a caller that is not
// system-scoped creates its project's allocation unless
// create_restricted lets it name another owner, and its candidate nodes
// must be its project's.
func (s *server) allocationCreateAllowed(c *gin.Context, cr *creds, rule string) error {
	if err := s.policy.authorize(rule, cr, nil); err != nil {
		return err
	}
	restricted := s.policy.allowed("baremetal:allocation:create_restricted", cr, nil)
	if !restricted && cr.ProjectID != "" {
		c.Set(ctxAllocationProject, cr.ProjectID)
	}
	if cr.SystemScope == "all" {
		return nil
	}
	body, err := peekBody(c)
	if err != nil {
		return err
	}
	var obj map[string]any
	if json.Unmarshal(body, &obj) != nil || obj == nil {
		return nil // not an object: the handler's 400
	}
	owner, _ := obj["owner"].(string)
	switch {
	case owner == "" && cr.ProjectID != "":
		c.Set(ctxAllocationOwner, cr.ProjectID)
	case owner != "" && !restricted && owner != cr.ProjectID:
		return errorf(http.StatusForbidden, "Cannot create allocation with an owner Project ID value %s not matching the requestor "+
			"Project ID %s. Policy baremetal:allocation:create_restricted is required for this capability.", owner, cr.ProjectID)
	}
	return nil
}
