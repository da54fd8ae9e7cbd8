package apiserver

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/ironflow/ironflow/networkdata"
	"github.com/ironflow/ironflow/provision"
	"github.com/ironflow/ironflow/pyliteral"
	"github.com/ironflow/ironflow/store"
	"github.com/ironflow/ironflow/workflows"
)

// Provision states a node may be deleted in (outside maintenance), in the
// order Ironic's message prints them.
var deletableStates = []provision.State{provision.Manageable, provision.Enroll, provision.AdoptFailed, provision.Available}

// loadNode finds a node by UUID or name as Ironic's get_rpc_node does.
func (s *server) loadNode(c *gin.Context, ident string) (*store.Node, error) {
	if !isUUID(ident) {
		if ver(c) < v5NodeName {
			return nil, nodeNotFound(ident)
		}
		if !nodeNameRE.MatchString(ident) {
			return nil, badRequest("Expected a logical name or UUID but received %s.", ident)
		}
	}
	n, err := s.store.GetNode(c.Request.Context(), ident)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nodeNotFound(ident)
	}
	if err != nil {
		return nil, fmt.Errorf("get node %s: %w", ident, err)
	}
	return n, nil
}

// loadNodeWithSuffix is loadNode with the compatibility Ironic kept until
// API 1.91 for clients that asked for "<node>.json": a node not found
// under that name is looked up without the suffix. From 1.91 on the name
// is taken as it is.
func (s *server) loadNodeWithSuffix(c *gin.Context, ident string) (*store.Node, error) {
	n, err := s.loadNode(c, ident)
	bare, suffixed := strings.CutSuffix(ident, ".json")
	var ae *apiError
	if err != nil && suffixed && bare != "" && ver(c) < v91DotJSON && errors.As(err, &ae) && ae.status == http.StatusNotFound {
		return s.loadNode(c, bare)
	}
	return n, err
}

// onNode runs h on the node /v1/nodes/{node} names.
func (s *server) onNode(h func(c *gin.Context, n *store.Node) error) handler {
	return loaded(func(c *gin.Context) (*store.Node, error) { return s.loadNode(c, c.Param("node")) }, h)
}

func nodeLocked(uuid, holder string) *apiError {
	return errorf(http.StatusConflict, "Node %s is locked by host %s, please retry after the current operation is completed.", uuid, holder)
}

// lockHolder is the "host" a NodeLocked message names: the node's
// reservation when a worker recorded one, else the workflow that holds it.
func lockHolder(n *store.Node) string {
	if n.Reservation != nil && *n.Reservation != "" {
		return *n.Reservation
	}
	return workflows.WorkflowID(n.UUID)
}

// writeOneNode answers a single node with the fields the request asked.
func (s *server) writeOneNode(c *gin.Context, status int, n *store.Node, fields []string) {
	s.sanitizeNodes(c, n) // keystone strategy: policy_view.go
	v, err := s.nodeView(c, fields)
	if err != nil {
		s.writeError(c, err)
		return
	}
	writeNodeView(c, status, n, v, fields)
}

func (s *server) showNode(c *gin.Context) error {
	p, err := s.parseListParams(c, nodeResource.fieldSince)
	if err != nil {
		return err
	}
	n, err := s.loadNodeWithSuffix(c, c.Param("node"))
	if err != nil {
		return err
	}
	s.writeOneNode(c, http.StatusOK, n, p.fields)
	return nil
}

func (s *server) createNode(c *gin.Context) error {
	body, err := decodeObject(c)
	if err != nil {
		return err
	}
	n := &store.Node{
		DriverInfo: map[string]any{}, DriverInternalInfo: map[string]any{}, InstanceInfo: map[string]any{},
		Properties: map[string]any{}, Extra: map[string]any{}, CleanStep: map[string]any{},
		DeployStep: map[string]any{}, ServiceStep: map[string]any{}, NetworkData: map[string]any{}, RAIDConfig: map[string]any{},
		TargetRAIDConfig: map[string]any{}, Traits: []string{},
	}
	set, err := nodeResource.create(n, body, ver(c))
	if err != nil {
		return err
	}
	// A project admin's own node (keystone strategy: policy_routes.go).
	if o := c.GetString(ctxSelfOwner); o != "" {
		n.Owner = &o
	}
	n.ProvisionState = provision.Enroll
	if ver(c) < v11EnrollState {
		n.ProvisionState = provision.Available
	}
	if err := s.applyInterfaces(n, explicitInterfaces(set)); err != nil {
		return err
	}
	if err := s.resolveParentNode(c, n); err != nil {
		return err
	}
	if err := s.store.CreateNode(c.Request.Context(), n); err != nil {
		return nodeWriteError(err, n)
	}
	c.Header("Location", s.baseURL(c)+"/v1/nodes/"+n.UUID)
	s.writeOneNode(c, http.StatusCreated, n, nil)
	return nil
}

// explicitInterfaces are the interface kinds among the fields a request
// set, which applyInterfaces must not replace by the driver's defaults.
func explicitInterfaces(fields map[string]bool) map[string]bool {
	explicit := map[string]bool{}
	for k := range fields {
		if kind, ok := strings.CutSuffix(k, "_interface"); ok {
			explicit[kind] = true
		}
	}
	return explicit
}

func nodeWriteError(err error, n *store.Node) error {
	switch {
	case errors.Is(err, store.ErrDuplicateName):
		name := ""
		if n.Name != nil {
			name = *n.Name
		}
		return errorf(http.StatusConflict, "A node with name %s already exists.", name)
	case errors.Is(err, store.ErrDuplicateUUID):
		return errorf(http.StatusConflict, "A node with UUID %s already exists.", n.UUID)
	case errors.Is(err, store.ErrInstanceAssociated):
		inst := ""
		if n.InstanceUUID != nil {
			inst = *n.InstanceUUID
		}
		return errorf(http.StatusConflict, "Instance %s is already associated with a node, it cannot be associated with this other node %s", inst, n.UUID)
	case errors.Is(err, store.ErrChassisNotFound):
		// Ironic answers 400, not 404, for a node naming a missing chassis.
		return badRequest("Chassis %s could not be found.", strOrEmpty(n.ChassisUUID))
	case errors.Is(err, store.ErrParentNotFound):
		// The parent went away between the check and the write (1.83).
		return nodeNotFound(strOrEmpty(n.ParentNode))
	case errors.Is(err, store.ErrNotFound):
		return nodeNotFound(n.UUID)
	case errors.Is(err, store.ErrInvalidInput):
		return badRequest("Invalid node: %s", strings.TrimPrefix(err.Error(), store.ErrInvalidInput.Error()+": "))
	}
	return fmt.Errorf("write node %s: %w", n.UUID, err)
}

func (s *server) patchNode(c *gin.Context, n *store.Node) error {
	reset, err := resetInterfaces(c)
	if err != nil {
		return err
	}
	body, err := readBody(c)
	if err != nil {
		return err
	}
	ops, err := decodePatch(body)
	if err != nil {
		return err
	}
	// Ironic's _validate_patch refuses reset_interfaces without a new
	// driver before the patch's fields are checked.
	if reset && !slices.ContainsFunc(ops, func(op patchOp) bool { return op.Path == "/driver" && op.Op != "remove" }) {
		return badRequest("The reset_interfaces parameter can only be used when changing the node's driver.")
	}
	if err := nodeResource.checkPatch(ops, ver(c)); err != nil {
		return err
	}
	// Ironic's _validate_patch checks a value set at /network_data itself
	// against network_data's schema; a patch below it is checked with
	// the patched node (setNetworkData).
	for _, op := range ops {
		if op.Path == "/network_data" && op.Op != "remove" {
			if msg := networkdata.Message(normalizeNumbers(deepCopy(op.Value))); msg != "" {
				return badRequest("%s", msg)
			}
		}
	}
	touched := map[string]bool{}
	for _, op := range ops {
		if op.Op != "remove" {
			touched[patchRoot(op)] = true
		}
	}
	attempted := *n
	updated, err := s.store.UpdateNode(c.Request.Context(), n.UUID, func(cur *store.Node) error {
		defer func() { attempted = *cur }()
		wasMaintenance := cur.Maintenance
		wasInstance, wasChassis := cur.InstanceUUID, cur.ChassisUUID
		if err := nodeResource.applyPatch(cur, ops); err != nil {
			return err
		}
		// The holder of an enabled console could not stop a console of
		// another driver (Ironic's _check_driver_changed_and_console_enabled).
		if cur.Driver != n.Driver && cur.ConsoleEnabled {
			return errorf(http.StatusConflict, "Node %s can not update the driver while the console is enabled. Please stop the console first.", c.Param("node"))
		}
		if touched["parent_node"] {
			if err := s.resolveParentNode(c, cur); err != nil {
				return err
			}
		}
		syncInstanceName(cur, patchUpdates(ops, "/instance_info"))
		if err := checkInstanceReplaced(cur, wasInstance); err != nil {
			return err
		}
		if err := checkAllocationKept(cur, wasInstance); err != nil {
			return err
		}
		// Ironic lets a node leave its chassis from 1.25 on.
		if wasChassis != nil && cur.ChassisUUID == nil && ver(c) < v25UnsetChassis {
			return notAcceptable()
		}
		if wasMaintenance && !cur.Maintenance {
			cur.MaintenanceReason, cur.Fault = nil, nil
		}
		// ?reset_interfaces=true: the new driver's defaults for every
		// interface the patch does not set (Ironic's conductor
		// update_node), where otherwise only those it does not support
		// change.
		if reset && cur.Driver != n.Driver {
			explicit := explicitInterfaces(touched)
			for kind, p := range nodeIfaces(cur) {
				if !explicit[string(kind)] {
					*p = ""
				}
			}
		}
		return s.applyInterfaces(cur, explicitInterfaces(touched))
	})
	// A patch refused by the callback is an *apiError inside the store's
	// wrapping; nodeWriteError wraps it again and the adapter finds it.
	if err != nil {
		return nodeWriteError(err, &attempted)
	}
	s.writeOneNode(c, http.StatusOK, updated, nil)
	return nil
}

// resetInterfaces reads PATCH's ?reset_interfaces= (API 1.45) as Ironic's
// node controller does: its value checked as args.boolean first, at any
// version, then 406 below 1.45.
func resetInterfaces(c *gin.Context) (bool, error) {
	vals, set := c.GetQueryArray("reset_interfaces")
	if !set {
		return false, nil
	}
	reset, err := argsBoolean("reset_interfaces", vals)
	if err != nil {
		return false, err
	}
	if ver(c) < v45ResetInterfaces {
		return false, notAcceptable()
	}
	return reset, nil
}

// argsBoolean is Ironic's args.boolean of a query parameter (oslo's
// strutils.bool_from_string, strict): a repeated parameter reaches it as
// a Python list, refused as such.
func argsBoolean(name string, vals []string) (bool, error) {
	if len(vals) == 1 {
		switch strings.ToLower(strings.TrimSpace(vals[0])) {
		case "1", "t", "true", "on", "y", "yes":
			return true, nil
		case "0", "f", "false", "off", "n", "no":
			return false, nil
		}
	}
	shown := vals[0]
	if len(vals) > 1 {
		shown = pyliteral.List(vals)
	}
	return false, badRequest("Invalid %s: Unrecognized value '%s', acceptable values are: '0', '1', 'f', 'false', 'n', 'no', 'off', 'on', 't', 'true', 'y', 'yes'", name, shown)
}

// checkInstanceReplaced is Ironic's guard against overwriting a node's
// instance_uuid: Nova's reservation of a node taken by another instance is
// 409 (NodeAssociated); clearing it, or setting the same value, is not.
func checkInstanceReplaced(n *store.Node, was *string) error {
	if was != nil && n.InstanceUUID != nil && *was != *n.InstanceUUID {
		return errorf(http.StatusConflict, "Node %s is associated with instance %s.", n.UUID, *was)
	}
	return nil
}

// nodeUpdateStates are the provision states in which Ironic's update_node
// lets a node with an allocation lose its instance_uuid (and with it the
// allocation, store.UpdateNode) outside maintenance.
var nodeUpdateStates = []provision.State{provision.Enroll, provision.Inspecting, provision.InspectWait,
	provision.Manageable, provision.Available}

// checkAllocationKept is Ironic's guard in update_node: removing the
// instance_uuid of a node that has an allocation is 409 unless the node
// is in maintenance or in one of nodeUpdateStates.
func checkAllocationKept(n *store.Node, was *string) error {
	if was == nil || n.InstanceUUID != nil || n.AllocationUUID == nil || n.Maintenance || slices.Contains(nodeUpdateStates, n.ProvisionState) {
		return nil
	}
	q := make([]string, len(nodeUpdateStates))
	for i, st := range nodeUpdateStates {
		q[i] = string(st)
	}
	return errorf(http.StatusConflict, "Node %s with an allocation can not have instance_uuid removed unless it is in one of allowed (%s) states or in maintenance mode.",
		n.UUID, strings.Join(q, ", "))
}

func (s *server) deleteNode(c *gin.Context, n *store.Node) error {
	if n.Protected {
		return errorf(http.StatusForbidden, "Node %s is protected and cannot be undeployed, rebuilt or deleted", n.UUID)
	}
	// Ironic's destroy_node: a node with an instance (an allocation's
	// too) is deleted only in maintenance; its allocation goes with it
	// (the foreign key of store/migrations/0011_allocations.sql).
	if !n.Maintenance && n.InstanceUUID != nil {
		return errorf(http.StatusConflict, "Node %s is associated with instance %s.", n.UUID, *n.InstanceUUID)
	}
	if !n.Maintenance && !slices.Contains(deletableStates, n.ProvisionState) {
		q := make([]string, len(deletableStates))
		for i, st := range deletableStates {
			q[i] = fmt.Sprintf("'%s'", st)
		}
		return errorf(http.StatusConflict,
			"Can not delete node \"%s\" while it is in provision state \"%s\". Valid provision states to perform deletion are: \"(%s)\", or set the node into maintenance mode",
			n.UUID, n.ProvisionState, strings.Join(q, ", "))
	}
	if n.ProvisionState.Failed() {
		// A failed operation that waits for an operator holds the node;
		// in Ironic the failed state rests unlocked and the node can go.
		if err := s.abortWaiting(c.Request.Context(), n.UUID, provision.AbortRequest{Request: "Node deletion"}); err != nil {
			return err
		}
	}
	running, err := s.eng.Running(c.Request.Context(), n.UUID)
	if err != nil {
		return fmt.Errorf("check workflow of node %s: %w", n.UUID, err)
	}
	if running {
		return nodeLocked(n.UUID, lockHolder(n))
	}
	if err := s.store.DeleteNode(c.Request.Context(), n.UUID); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return nodeNotFound(c.Param("node"))
		}
		return fmt.Errorf("delete node %s: %w", n.UUID, err)
	}
	writeEmpty(c, http.StatusNoContent, "")
	return nil
}
