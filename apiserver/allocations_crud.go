package apiserver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/ironflow/ironflow/provision"
	"github.com/ironflow/ironflow/store"
)

// Allocations (API 1.52, Ironic's allocation.py): create answers 201 with
// the allocation allocating and the Allocate workflow picks the node
// (workflows/allocate.go); a create that names its node (1.58) backfills
// it at once, as Ironic's conductor does synchronously; delete frees the
// node in the store's transaction (store.DeleteAllocation). Undeploy and
// node delete release a node's allocation in the store (store.UpdateNode,
// the allocations' foreign key).

func allocationNotFound(ident string) *apiError {
	return errorf(http.StatusNotFound, "Allocation %s could not be found.", ident)
}

// loadAllocation finds the allocation /v1/allocations/{ident} names, by
// UUID or name (Ironic's get_rpc_allocation).
func (s *server) loadAllocation(c *gin.Context) (*store.Allocation, error) {
	ident := c.Param("ident")
	if !isUUID(ident) && !nodeNameRE.MatchString(ident) {
		return nil, badRequest("Expected UUID or name for allocation_ident: %s", ident)
	}
	a, err := s.store.GetAllocation(c.Request.Context(), ident)
	if errors.Is(err, store.ErrNotFound) {
		return nil, allocationNotFound(ident)
	}
	if err != nil {
		return nil, fmt.Errorf("get allocation %s: %w", ident, err)
	}
	return a, nil
}

func (s *server) showAllocation(c *gin.Context) error {
	return showOne(s, c, allocationResource, s.loadAllocation)
}

// allocationWriteError words the store's conflicts as Ironic's
// AllocationDuplicateName and AllocationAlreadyExists (409).
func allocationWriteError(err error, a *store.Allocation) error {
	switch {
	case errors.Is(err, store.ErrDuplicateName):
		name := ""
		if a.Name != nil {
			name = *a.Name
		}
		return errorf(http.StatusConflict, "An allocation with name %s already exists.", name)
	case errors.Is(err, store.ErrDuplicateUUID):
		return errorf(http.StatusConflict, "An allocation with UUID %s already exists.", a.UUID)
	case errors.Is(err, store.ErrNotFound):
		return allocationNotFound(a.UUID)
	}
	return fmt.Errorf("write allocation %s: %w", a.UUID, err)
}

func (s *server) createAllocation(c *gin.Context) error {
	body, err := decodeObject(c)
	if err != nil {
		return err
	}
	// "node" (1.58) names the node to backfill: no field of the view.
	nodeIdent, err := allocationNodeParam(body)
	if err != nil {
		return err
	}
	a := &store.Allocation{Extra: map[string]any{}}
	if _, err := allocationResource.create(a, body, ver(c)); err != nil {
		return err
	}
	if a.Name != nil && !nodeNameRE.MatchString(*a.Name) {
		return badRequest("Cannot create allocation with invalid name '%s'", *a.Name)
	}
	if owner, ok := c.Get(ctxAllocationOwner); ok {
		o := owner.(string)
		a.Owner = &o
	}
	ctx := c.Request.Context()
	var node *store.Node
	if nodeIdent != "" {
		if ver(c) < v58AllocationBackfill {
			return badRequest("Cannot set node when creating an allocation in this API version")
		}
		if node, err = s.backfillNode(c, nodeIdent); err != nil {
			return err
		}
	}
	if a.ResourceClass == nil || *a.ResourceClass == "" {
		if node == nil {
			return badRequest("The resource_class field is mandatory when not backfilling")
		}
		a.ResourceClass = node.ResourceClass
	}
	if len(a.CandidateNodes) > 0 {
		if a.CandidateNodes, err = s.resolveCandidates(ctx, a.CandidateNodes, c.GetString(ctxAllocationProject)); err != nil {
			return err
		}
	}
	if a.UUID == "" && node != nil && node.InstanceUUID != nil {
		// A backfill without a UUID takes the node's instance's.
		a.UUID = *node.InstanceUUID
	}
	if err := s.store.CreateAllocation(ctx, a); err != nil {
		return allocationWriteError(err, a)
	}
	if node != nil {
		if err := s.backfill(ctx, a, node.UUID); err != nil {
			return err
		}
		if a, err = s.store.GetAllocation(ctx, a.UUID); err != nil {
			return fmt.Errorf("read allocation: %w", err)
		}
	} else if err := s.eng.StartAllocation(ctx, a.UUID); err != nil {
		msg := fmt.Sprintf("Unexpected exception during allocation: %v", err)
		if ferr := s.store.FailAllocation(ctx, a.UUID, msg); ferr != nil {
			s.log.ErrorContext(c.Request.Context(), "record failed allocation", "allocation", a.UUID, "error", ferr)
		}
		return fmt.Errorf("start allocation %s: %w", a.UUID, err)
	}
	// Otherwise the allocation as created, allocating, as Ironic answers
	// before its conductor's worker picks the node.
	c.Header("Location", s.baseURL(c)+"/v1/allocations/"+a.UUID)
	allocationResource.writeOne(c, s.baseURL(c), http.StatusCreated, a, nil)
	return nil
}

// allocationNodeParam takes "node" out of a create body: a string or null
// (ALLOCATION_SCHEMA).
func allocationNodeParam(body map[string]any) (string, error) {
	v, ok := body["node"]
	if !ok {
		return "", nil
	}
	delete(body, "node")
	switch t := v.(type) {
	case nil:
		return "", nil
	case string:
		return t, nil
	}
	return "", schemaError("allocation", typeErr(v, "string", "null"))
}

// backfillNode is the node a backfill names: 400 when it does not exist
// (Ironic turns NodeNotFound into a bad request here), and, under the
// keystone strategy, hidden as missing from a caller who may not see it.
func (s *server) backfillNode(c *gin.Context, ident string) (*store.Node, error) {
	n, err := s.loadNode(c, ident)
	var ae *apiError
	if errors.As(err, &ae) && ae.status == http.StatusNotFound {
		return nil, badRequest("%s", ae.msg)
	}
	if err != nil {
		return nil, err
	}
	if cr, ok := c.Get(ctxCreds); ok && s.policy != nil {
		if !s.policy.allowed("baremetal:node:get", cr.(*creds), nodeTarget(n)) {
			return nil, badRequest("%s", nodeNotFound(ident).msg)
		}
	}
	return n, nil
}

// resolveCandidates turns candidate node names into UUIDs, in the order
// given, as Ironic's check_node_list: a candidate that names no node
// (of project, when set) is 400.
func (s *server) resolveCandidates(ctx context.Context, idents []string, project string) ([]string, error) {
	found, err := s.store.ResolveNodes(ctx, idents, project)
	if err != nil {
		return nil, fmt.Errorf("resolve candidate nodes: %w", err)
	}
	var missing []string
	out := make([]string, 0, len(idents))
	for _, id := range idents {
		u, ok := found[id]
		if !ok {
			if !slices.Contains(missing, id) {
				missing = append(missing, id)
			}
			continue
		}
		out = append(out, u)
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return nil, badRequest("Nodes cannot be found: %s", strings.Join(missing, ", "))
	}
	return out, nil
}

// backfill gives the node to a new allocation, with the checks of
// Ironic's _do_backfill_allocation; a refusal leaves the allocation in
// state error with the message, as Ironic's backfill_allocation does.
func (s *server) backfill(ctx context.Context, a *store.Allocation, nodeUUID string) error {
	_, err := s.store.BackfillAllocation(ctx, a, nodeUUID, func(n *store.Node) error {
		return backfillRefusal(a, n)
	})
	if err == nil {
		return nil
	}
	var ae *apiError
	switch {
	case errors.As(err, &ae):
	case errors.Is(err, store.ErrNodeAssociated):
		inst := ""
		if n, gerr := s.store.GetNode(ctx, nodeUUID); gerr == nil && n.InstanceUUID != nil {
			inst = *n.InstanceUUID
		}
		ae = errorf(http.StatusConflict, "Node %s is associated with instance %s.", nodeUUID, inst)
	case errors.Is(err, store.ErrInstanceAssociated):
		ae = errorf(http.StatusConflict, "Instance %s is already associated with a node, it cannot be associated with this other node %s", a.UUID, nodeUUID)
	case errors.Is(err, store.ErrNotFound):
		ae = badRequest("Node %s could not be found.", nodeUUID)
	default:
		return fmt.Errorf("backfill allocation %s: %w", a.UUID, err)
	}
	if ferr := s.store.FailAllocation(ctx, a.UUID, ae.msg); ferr != nil {
		return fmt.Errorf("record failed allocation %s: %w", a.UUID, ferr)
	}
	return ae
}

// backfillRefusal is Ironic's list of reasons a node cannot be
// backfilled (AllocationFailed). Ironic answers it with a 500; a client's
// request that names the wrong node is its mistake, hence 400 here, with
// Ironic's words.
func backfillRefusal(a *store.Allocation, n *store.Node) error {
	var errs []string
	if n.ProvisionState != provision.Active {
		errs = append(errs, fmt.Sprintf(`Node must be in the "active" state, but the current state is "%s"`, n.ProvisionState))
	}
	if a.ResourceClass != nil && *a.ResourceClass != "" && (n.ResourceClass == nil || *n.ResourceClass != *a.ResourceClass) {
		cur := "None"
		if n.ResourceClass != nil {
			cur = *n.ResourceClass
		}
		errs = append(errs, fmt.Sprintf("Resource class %s does not match the requested resource class %s", cur, *a.ResourceClass))
	}
	if len(a.Traits) > 0 {
		for _, t := range a.Traits {
			if !slices.Contains(n.Traits, t) {
				errs = append(errs, fmt.Sprintf("List of traits %s does not match the requested traits %s", pyList(n.Traits), pyList(a.Traits)))
				break
			}
		}
	}
	if len(a.CandidateNodes) > 0 && !slices.Contains(a.CandidateNodes, n.UUID) {
		errs = append(errs, fmt.Sprintf("Candidate nodes must be empty or contain the target node, but got %s", pyList(a.CandidateNodes)))
	}
	if len(errs) == 0 {
		return nil
	}
	return badRequest("Failed to process allocation %s: Cannot backfill an allocation for node %s: %s.", a.UUID, n.UUID, strings.Join(errs, "; "))
}

// pyList is a list of strings as Python prints it.
func pyList(l []string) string {
	q := make([]string, len(l))
	for i, s := range l {
		q[i] = "'" + s + "'"
	}
	return "[" + strings.Join(q, ", ") + "]"
}

func (s *server) patchAllocation(c *gin.Context) error {
	if ver(c) < v57AllocationUpdate {
		return errorf(http.StatusMethodNotAllowed, "The API version does not allow updating allocations")
	}
	ops, err := allocationResource.readPatch(c)
	if err != nil {
		return err
	}
	a, err := s.loadAllocation(c)
	if err != nil {
		return err
	}
	for _, op := range ops {
		if op.Path == "/name" && op.Op != "remove" {
			if name, ok := op.Value.(string); ok && name != "" && !nodeNameRE.MatchString(name) {
				return badRequest("Cannot update allocation with invalid name '%s'", name)
			}
		}
	}
	updated, err := s.store.UpdateAllocation(c.Request.Context(), a.UUID, func(cur *store.Allocation) error {
		return allocationResource.applyPatch(cur, ops)
	})
	if err != nil {
		var ae *apiError
		if errors.As(err, &ae) {
			return ae
		}
		return allocationWriteError(err, a)
	}
	allocationResource.writeOne(c, s.baseURL(c), http.StatusOK, updated, nil)
	return nil
}

func (s *server) deleteAllocation(c *gin.Context) error {
	a, err := s.loadAllocation(c)
	if err != nil {
		return err
	}
	return s.releaseAllocation(c, a, c.Param("ident"))
}

// releaseAllocation deletes a and frees its node, unless the node's
// state forbids it (Ironic's verify_node_for_deallocation).
func (s *server) releaseAllocation(c *gin.Context, a *store.Allocation, ident string) error {
	err := s.store.DeleteAllocation(c.Request.Context(), a.UUID, func(n *store.Node) error {
		return deallocationRefusal(a, n)
	})
	var ae *apiError
	switch {
	case errors.As(err, &ae):
		return ae
	case errors.Is(err, store.ErrNotFound):
		return allocationNotFound(ident)
	case err != nil:
		return fmt.Errorf("delete allocation %s: %w", a.UUID, err)
	}
	writeEmpty(c, http.StatusNoContent, "")
	return nil
}

// updateAllowedStates are Ironic's UPDATE_ALLOWED_STATES: transitional
// states in which a node may be updated.
var updateAllowedStates = []provision.State{provision.DeployFailed, provision.Inspecting, provision.InspectFailed,
	provision.InspectWait, provision.CleanFailed, provision.Error, provision.Verifying, provision.AdoptFailed,
	provision.RescueFailed, provision.UnrescueFailed}

// deallocationRefusal is Ironic's verify_node_for_deallocation (409
// InvalidState): outside maintenance, not while the node is on its way
// somewhere, not while it is active.
func deallocationRefusal(a *store.Allocation, n *store.Node) error {
	if n.Maintenance {
		return nil
	}
	if n.TargetProvisionState != nil && *n.TargetProvisionState != "" && !slices.Contains(updateAllowedStates, n.ProvisionState) {
		return errorf(http.StatusConflict, "Cannot remove allocation %s for node %s, because the node is in state %s where updates are not allowed (and maintenance mode is off)",
			a.UUID, n.UUID, n.ProvisionState)
	}
	if n.ProvisionState == provision.Active {
		return errorf(http.StatusConflict, "Cannot remove allocation %s for node %s, because the node is active (and maintenance mode is off)", a.UUID, n.UUID)
	}
	return nil
}

// nodeAllocation is the allocation of the node /v1/nodes/{node} names.
func (s *server) nodeAllocation(c *gin.Context, n *store.Node) (*store.Allocation, error) {
	list, err := s.store.ListAllocations(c.Request.Context(), store.AllocationFilter{NodeUUID: n.UUID, Limit: 1})
	if err != nil {
		return nil, fmt.Errorf("allocation of node %s: %w", n.UUID, err)
	}
	if len(list) == 0 {
		return nil, errorf(http.StatusNotFound, "Allocation for node %s was not found", c.Param("node"))
	}
	return list[0], nil
}

func (s *server) showNodeAllocation(c *gin.Context, n *store.Node) error {
	return showOne(s, c, allocationResource, func(c *gin.Context) (*store.Allocation, error) {
		a, err := s.nodeAllocation(c, n)
		if err != nil {
			return nil, err
		}
		return a, s.allocationAllowed(c, a, "baremetal:allocation:get")
	})
}

func (s *server) deleteNodeAllocation(c *gin.Context, n *store.Node) error {
	a, err := s.nodeAllocation(c, n)
	if err != nil {
		return err
	}
	if err := s.allocationAllowed(c, a, "baremetal:allocation:delete"); err != nil {
		return err
	}
	return s.releaseAllocation(c, a, a.UUID)
}
