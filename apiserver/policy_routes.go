package apiserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/ironflow/ironflow/store"
)

// ctxCreds holds the caller's *creds; ctxListProject the project a list is
// narrowed to (owner or lessee), set when the caller may not list all.
// ctxSelfOwner the owner a node created by a project admin gets.
const (
	ctxCreds       = "ironflow.creds"
	ctxListProject = "ironflow.list_project"
	ctxSelfOwner   = "ironflow.self_owner"
)

// How a route is authorized, after the helpers of Ironic's
// ironic/api/controllers/v1/utils.py.
type routeKind int

const (
	// onGlobal: check_policy, the caller's credentials only.
	onGlobal routeKind = iota
	// onNode: check_node_policy_and_retrieve on :node — baremetal:node:get
	// first (a project-scoped caller who may not see the node gets 404),
	// then the rule (403).
	onNode
	// onNodePatch: onNode with the rules the patch's paths need
	// (Ironic's _authorize_patch_and_get_node).
	onNodePatch
	// onNodeDelete: baremetal:node:delete, else
	// baremetal:node:delete:self_owned_node ([api]project_admin_can_manage_own_nodes).
	onNodeDelete
	// onNodeList: check_list_policy — <list>_all, else <list> narrowed to
	// the caller's project; an owner filter naming another project is 403.
	onNodeList
	// onNodeSubList: a list under /nodes/{node}: node:get (404 hidden),
	// then the list rules as onNodeList.
	onNodeSubList
	// onPort, onPortgroup, onVolume: check_port_policy_and_retrieve and
	// check_volume_policy_and_retrieve — node:get of the object's node
	// (404 naming the object), then the rule (403).
	onPort
	onPortgroup
	onConnector
	onVolumeTarget
	// onPortgroupSubList: /portgroups/{pg}/ports, node:get of the group's
	// node (404 naming the group), then the list rules.
	onPortgroupSubList
	// onNodeCreate: baremetal:node:create, else, for a project-scoped
	// caller, baremetal:node:create:self_owned_node: the node is the
	// caller's project's ([api]project_admin_can_manage_own_nodes).
	onNodeCreate
	// onCreateForNode: a port, port group or volume object created for
	// body.node_uuid: the rule with that node's owner and lessee.
	onCreateForNode
	// onNodeProvision: onNode, then baremetal:runbook:use for the
	// request's runbook (policy_runbooks.go).
	onNodeProvision
	// onRunbook, onRunbookPatch, onRunbookCreate: a runbook's rules with
	// its owner as the target (policy_runbooks.go); onRunbookTraits: the
	// same without the public fallback of a GET (API 1.112).
	onRunbook
	onRunbookPatch
	onRunbookCreate
	onRunbookTraits
	// onAllocation, onAllocationCreate: an allocation's rules with its
	// owner as the target; onNodeAllocation: /nodes/{node}/allocation,
	// node:get of the node, then the allocation's rule
	// (policy_allocations.go). Their lists are onNodeList's check.
	onAllocation
	onAllocationCreate
	onNodeAllocation
	// onRollout, onRolloutCreate, onRolloutList: ironflow's rollouts,
	// checked with the rollout's project as "rollout.project"
	// (policy_rollouts.go).
	onRollout
	onRolloutCreate
	onRolloutList
)

// routeRule is the policy of one route's operation (its op in routes.go).
type routeRule struct {
	kind routeKind
	rule string
	// list is the rule prefix of a list ("baremetal:port:list"): "_all"
	// is appended for the unfiltered view.
	list string
}

// forbidden is Ironic's HTTPForbidden for a rule (ironic.common.exception).
func forbidden(rule string) *apiError {
	return errorf(http.StatusForbidden, "Access was denied to the following resource: %s", rule)
}

// authorize enforces rr, the policy of an authenticated route (its op in
// routes.go), under the keystone strategy (no policy otherwise, as Ironic's
// authorize returns true unless auth_strategy is keystone).
func (s *server) authorize(rr routeRule) gin.HandlerFunc {
	return func(c *gin.Context) {
		if s.policy == nil || c.IsAborted() {
			return
		}
		cr, _ := c.Get(ctxCreds)
		cred, _ := cr.(*creds)
		if cred == nil {
			s.writeError(c, errorf(http.StatusUnauthorized, "Authentication required"))
			return
		}
		if rr == (routeRule{}) {
			key := c.Request.Method + " " + c.FullPath()
			s.log.ErrorContext(c.Request.Context(), "route has no policy rule; refused", "route", key)
			s.writeError(c, forbidden(key))
			return
		}
		if err := s.enforce(c, cred, rr); err != nil {
			var ae *apiError
			if errors.As(err, &ae) && ae.status == http.StatusForbidden {
				// oslo.policy's PolicyNotAuthorized, as Ironic logs it.
				s.log.WarnContext(c.Request.Context(), "Rejecting authorization",
					"error", fmt.Sprintf("%s is disallowed by policy", strings.TrimPrefix(ae.msg, "Access was denied to the following resource: ")))
			}
			s.writeError(c, err)
		}
	}
}

func nodeTarget(n *store.Node) policyTarget {
	t := policyTarget{}
	if n != nil {
		if n.Owner != nil {
			t["node.owner"] = *n.Owner
		}
		if n.Lessee != nil {
			t["node.lessee"] = *n.Lessee
		}
	}
	return t
}

func (s *server) enforce(c *gin.Context, cr *creds, rr routeRule) error {
	switch rr.kind {
	case onGlobal:
		if err := s.policy.authorize(rr.rule, cr, nil); err != nil {
			return err
		}
		return nil
	case onNode, onNodeSubList:
		if _, err := s.nodeAllowed(c, cr, c.Param("node"), rr.rule); err != nil {
			return err
		}
		if rr.kind == onNodeSubList {
			return s.listAllowed(c, cr, rr.list)
		}
		return nil
	case onNodeDelete:
		_, err := s.nodeAllowed(c, cr, c.Param("node"), rr.rule)
		var ae *apiError
		if errors.As(err, &ae) && ae.status == http.StatusForbidden {
			_, err = s.nodeAllowed(c, cr, c.Param("node"), "baremetal:node:delete:self_owned_node")
		}
		return err
	case onNodePatch:
		rules, err := nodePatchRules(c)
		if err != nil {
			return err
		}
		n, err := s.nodeAllowed(c, cr, c.Param("node"), rules[0])
		if err != nil {
			return err
		}
		if n.ProvisionState == "active" && slices.Contains(rules, "baremetal:node:update:owner") {
			// Ironic's node patch: the owner of a provisioned node
			// changes only under baremetal:node:update_owner_provisioned.
			rules = append(rules, "baremetal:node:update_owner_provisioned")
		}
		for _, r := range rules[1:] {
			if err := s.policy.authorize(r, cr, nodeTarget(n)); err != nil {
				return err
			}
		}
		return nil
	case onNodeCreate:
		if s.policy.allowed(rr.rule, cr, nil) {
			return nil
		}
		const self = "baremetal:node:create:self_owned_node"
		if cr.ProjectID == "" {
			return forbidden(rr.rule)
		}
		if err := s.policy.authorize(self, cr, nil); err != nil {
			return err
		}
		body, err := peekBody(c)
		if err != nil {
			return err
		}
		var obj struct {
			Owner *string `json:"owner"`
		}
		_ = json.Unmarshal(body, &obj)
		if obj.Owner != nil && *obj.Owner != cr.ProjectID {
			return forbidden(self)
		}
		c.Set(ctxSelfOwner, cr.ProjectID)
		return nil
	case onNodeList:
		return s.listAllowed(c, cr, rr.list)
	case onNodeProvision:
		if _, err := s.nodeAllowed(c, cr, c.Param("node"), rr.rule); err != nil {
			return err
		}
		return s.runbookUseAllowed(c, cr)
	case onRunbook, onRunbookPatch, onRunbookCreate, onRunbookTraits:
		return s.runbookAllowed(c, cr, rr)
	case onAllocation, onAllocationCreate, onNodeAllocation:
		return s.allocationRouteAllowed(c, cr, rr)
	case onRollout, onRolloutCreate, onRolloutList:
		return s.rolloutRouteAllowed(c, cr, rr)
	case onPort, onPortgroup, onConnector, onVolumeTarget:
		nodeUUID, notFound, err := s.objectNode(c, rr.kind)
		if err != nil {
			return err
		}
		var n *store.Node
		if nodeUUID != "" {
			if n, err = s.store.GetNode(c.Request.Context(), nodeUUID); err != nil && !errors.Is(err, store.ErrNotFound) {
				return err
			}
		}
		t := nodeTarget(n)
		if !s.policy.allowed("baremetal:node:get", cr, t) {
			return notFound
		}
		if err := s.policy.authorize(rr.rule, cr, t); err != nil {
			return err
		}
		return nil
	case onPortgroupSubList:
		g, err := s.loadPortgroup(c)
		if err != nil {
			return err
		}
		n, err := s.store.GetNode(c.Request.Context(), g.NodeUUID)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		if !s.policy.allowed("baremetal:node:get", cr, nodeTarget(n)) {
			return errorf(http.StatusNotFound, "Port Group %s could not be found.", c.Param("portgroup"))
		}
		return s.listAllowed(c, cr, rr.list)
	case onCreateForNode:
		body, err := peekBody(c)
		if err != nil {
			return err
		}
		var obj struct {
			NodeUUID string `json:"node_uuid"`
		}
		_ = json.Unmarshal(body, &obj)
		var n *store.Node
		if obj.NodeUUID != "" {
			if n, err = s.store.GetNode(c.Request.Context(), obj.NodeUUID); err != nil && !errors.Is(err, store.ErrNotFound) {
				return err
			}
		}
		if err := s.policy.authorize(rr.rule, cr, nodeTarget(n)); err != nil {
			return err
		}
		return nil
	}
	return forbidden("unknown")
}

// nodeAllowed is Ironic's check_node_policy_and_retrieve: a node the caller
// may not see (baremetal:node:get) is 404, as a missing one is, whatever
// the scope (Ironic hides its existence); seen but not allowed is 403.
func (s *server) nodeAllowed(c *gin.Context, cr *creds, ident, rule string) (*store.Node, error) {
	n, err := s.loadNodeWithSuffix(c, ident)
	if err != nil {
		return nil, err
	}
	t := nodeTarget(n)
	if !s.policy.allowed("baremetal:node:get", cr, t) {
		return nil, nodeNotFound(ident)
	}
	if err := s.policy.authorize(rule, cr, t); err != nil {
		return nil, err
	}
	return n, nil
}

// listAllowed is Ironic's check_list_policy: <list>_all sees everything;
// otherwise a project-scoped caller allowed <list> sees its project's
// objects (nodes it owns or leases) and may not ask for another owner's.
func (s *server) listAllowed(c *gin.Context, cr *creds, list string) error {
	if s.policy.allowed(list+"_all", cr, nil) {
		return nil
	}
	if cr.ProjectID == "" {
		return forbidden(list + "_all")
	}
	if o := c.Query("owner"); o != "" && o != cr.ProjectID {
		return forbidden(list + "_all")
	}
	if err := s.policy.authorize(list, cr, nil); err != nil {
		return err
	}
	c.Set(ctxListProject, cr.ProjectID)
	return nil
}

// objectNode finds the node of the port, port group or volume object the
// path names, and the 404 Ironic answers when the caller may not see it.
func (s *server) objectNode(c *gin.Context, kind routeKind) (string, error, error) {
	ctx := c.Request.Context()
	switch kind {
	case onPort:
		p, err := s.loadPort(c)
		if err != nil {
			return "", nil, err
		}
		return p.NodeUUID, errorf(http.StatusNotFound, "Port %s could not be found.", c.Param("port")), nil
	case onPortgroup:
		g, err := s.loadPortgroup(c)
		if err != nil {
			return "", nil, err
		}
		return g.NodeUUID, errorf(http.StatusNotFound, "Port Group %s could not be found.", c.Param("portgroup")), nil
	case onConnector:
		v, err := s.store.GetVolumeConnector(ctx, c.Param("uuid"))
		if errors.Is(err, store.ErrNotFound) {
			return "", nil, errorf(http.StatusNotFound, "Volume connector %s could not be found.", c.Param("uuid"))
		}
		if err != nil {
			return "", nil, err
		}
		return v.NodeUUID, errorf(http.StatusNotFound, "Volume connector %s could not be found.", c.Param("uuid")), nil
	default:
		v, err := s.store.GetVolumeTarget(ctx, c.Param("uuid"))
		if errors.Is(err, store.ErrNotFound) {
			return "", nil, errorf(http.StatusNotFound, "Volume target %s could not be found.", c.Param("uuid"))
		}
		if err != nil {
			return "", nil, err
		}
		return v.NodeUUID, errorf(http.StatusNotFound, "Volume target %s could not be found.", c.Param("uuid")), nil
	}
}

// peekBody reads the request body and puts it back for the handler.
func peekBody(c *gin.Context) ([]byte, error) {
	body, err := readBody(c)
	if err != nil {
		return nil, err
	}
	c.Request.Body = io.NopCloser(bytes.NewReader(body))
	return body, nil
}

// nodeInterfaces are the *_interface fields Ironic's patch check treats as
// driver interfaces (driver_base.ALL_INTERFACES).
var nodeInterfaces = map[string]bool{
	"bios": true, "boot": true, "console": true, "deploy": true, "firmware": true, "inspect": true,
	"management": true, "network": true, "power": true, "raid": true, "rescue": true, "storage": true, "vendor": true,
}

// nodePatchRules are the rules a node patch needs, in Ironic's order
// (ironic/api/controllers/v1/node.py _authorize_patch_and_get_node).
func nodePatchRules(c *gin.Context) ([]string, error) {
	body, err := peekBody(c)
	if err != nil {
		return nil, err
	}
	var ops []struct {
		Path  string `json:"path"`
		Value any    `json:"value"`
	}
	// A malformed patch is the handler's 400 to answer; authorize it as
	// a generic update.
	_ = json.Unmarshal(body, &ops)
	var rules []string
	generic := false
	for _, op := range ops {
		p := op.Path
		iface, isIface := strings.CutSuffix(strings.TrimPrefix(p, "/"), "_interface")
		switch {
		case strings.HasPrefix(p, "/instance_info"), strings.HasPrefix(p, "/instance_name"):
			// instance_name (API 1.104) has instance_info's rule, as in
			// Ironic's node controller.
			rules = append(rules, "baremetal:node:update_instance_info")
		case strings.HasPrefix(p, "/extra"):
			rules = append(rules, "baremetal:node:update_extra")
		case strings.HasPrefix(p, "/automated_clean") && isFalse(op.Value):
			rules = append(rules, "baremetal:node:disable_cleaning")
		case strings.HasPrefix(p, "/driver_info"):
			rules = append(rules, "baremetal:node:update:driver_info")
		case strings.HasPrefix(p, "/properties"):
			rules = append(rules, "baremetal:node:update:properties")
		case strings.HasPrefix(p, "/chassis_uuid"):
			rules = append(rules, "baremetal:node:update:chassis_uuid")
		case strings.HasPrefix(p, "/instance_uuid"):
			rules = append(rules, "baremetal:node:update:instance_uuid")
		case strings.HasPrefix(p, "/lessee"):
			rules = append(rules, "baremetal:node:update:lessee")
		case strings.HasPrefix(p, "/owner"):
			rules = append(rules, "baremetal:node:update:owner")
		case strings.HasPrefix(p, "/driver"):
			rules = append(rules, "baremetal:node:update:driver_interfaces")
		case isIface && nodeInterfaces[iface]:
			rules = append(rules, "baremetal:node:update:driver_interfaces")
		case strings.HasPrefix(p, "/network_data"):
			rules = append(rules, "baremetal:node:update:network_data")
		case strings.HasPrefix(p, "/conductor_group"):
			rules = append(rules, "baremetal:node:update:conductor_group")
		case strings.HasPrefix(p, "/name"):
			rules = append(rules, "baremetal:node:update:name")
		case strings.HasPrefix(p, "/retired"):
			rules = append(rules, "baremetal:node:update:retired")
		case strings.HasPrefix(p, "/shard"):
			rules = append(rules, "baremetal:node:update:shard")
		case strings.HasPrefix(p, "/parent_node"):
			rules = append(rules, "baremetal:node:update:parent_node")
		default:
			generic = true
		}
	}
	if generic || len(rules) == 0 {
		rules = append(rules, "baremetal:node:update")
	}
	return rules, nil
}

func isFalse(v any) bool {
	switch x := v.(type) {
	case bool:
		return !x
	case string:
		b, err := parseBool("automated_clean", x)
		return err == nil && !b
	}
	return false
}
