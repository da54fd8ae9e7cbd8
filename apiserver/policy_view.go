package apiserver

import (
	"github.com/gin-gonic/gin"

	"github.com/ironflow/ironflow/provision"
	"github.com/ironflow/ironflow/store"
)

// sanitizeNodes redacts, for a caller below baremetal:node:get:filter_threshold
// (not a system reader), the fields the per-field rules keep from it, with
// the texts of Ironic's node_sanitize (ironic/api/controllers/v1/node.py):
// a lessee sees its node but not the owner's BMC details. No-op outside the
// keystone strategy. The nodes are the request's own copies.
func (s *server) sanitizeNodes(c *gin.Context, nodes ...*store.Node) {
	if s.policy == nil {
		return
	}
	v, _ := c.Get(ctxCreds)
	cr, _ := v.(*creds)
	if cr == nil {
		return
	}
	for _, n := range nodes {
		t := nodeTarget(n)
		if s.policy.allowed("baremetal:node:get:filter_threshold", cr, t) {
			continue
		}
		if !s.policy.allowed("baremetal:node:get:last_error", cr, t) {
			msg := "** Value Redacted - Requires baremetal:node:get:last_error permission. **"
			n.LastError = &msg
		}
		if !s.policy.allowed("baremetal:node:get:reservation", cr, t) {
			msg := "** Redacted - requires baremetal:node:get:reservation permission. **"
			n.Reservation = &msg
		}
		if !s.policy.allowed("baremetal:node:get:driver_internal_info", cr, t) {
			n.DriverInternalInfo = map[string]any{"content": "** Redacted - Requires baremetal:node:get:driver_internal_info permission. **"}
		}
		if !s.policy.allowed("baremetal:node:get:driver_info", cr, t) {
			n.DriverInfo = map[string]any{"content": "** Redacted - requires baremetal:node:get:driver_info permission. **"}
		}
	}
}

// automaticLessee is Ironic's [conductor]automatic_lessee_source =
// instance (its default), under the keystone strategy where a lessee is a
// grant: a deploy records instance_info's project_id (Nova's) as the
// lessee of a node that has none, and marks it so; the teardown of such a
// deployment takes the lessee away again (Ironic's deployments.py and
// manager.py do both). It runs once the verb is accepted (the answer is
// written), so a failure is logged, not answered.
func (s *server) automaticLessee(c *gin.Context, nodeUUID string, verb provision.Verb) {
	if s.policy == nil {
		return
	}
	var err error
	switch verb {
	case "active", "deploy":
		_, err = s.store.UpdateNode(c.Request.Context(), nodeUUID, func(n *store.Node) error {
			project, _ := n.InstanceInfo["project_id"].(string)
			if project == "" || n.Lessee != nil && *n.Lessee != "" {
				return nil
			}
			n.Lessee = &project
			if n.DriverInternalInfo == nil {
				n.DriverInternalInfo = map[string]any{}
			}
			n.DriverInternalInfo["automatic_lessee"] = true
			return nil
		})
	case "deleted", "undeploy":
		_, err = s.store.UpdateNode(c.Request.Context(), nodeUUID, func(n *store.Node) error {
			if auto, _ := n.DriverInternalInfo["automatic_lessee"].(bool); auto {
				n.Lessee = nil
				delete(n.DriverInternalInfo, "automatic_lessee")
			}
			return nil
		})
	}
	if err != nil {
		s.log.ErrorContext(c.Request.Context(), "automatic lessee", "node", nodeUUID, "verb", verb, "err", err)
	}
}
