package apiserver

import (
	"github.com/gin-gonic/gin"

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
