package apiserver

import (
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/ironflow/ironflow/pyliteral"
	"github.com/ironflow/ironflow/store"
)

// maxMaintenanceReason bounds a maintenance reason: Ironic stores it in a
// Text column, which on its reference database (MySQL) holds 65535 bytes.
const maxMaintenanceReason = 65535

func (s *server) setMaintenance(c *gin.Context, n *store.Node) error {
	body, err := decodeObject(c)
	if err != nil {
		return err
	}
	var reason *string
	if r, ok := body["reason"]; ok && r != nil {
		rs, ok := r.(string)
		if !ok {
			return badRequest("Invalid reason: %s is not a string", pyliteral.Repr(r))
		}
		reason = &rs
	} else if r := c.Query("reason"); r != "" {
		reason = &r
	}
	if reason != nil && len(*reason) > maxMaintenanceReason {
		return badRequest("Invalid reason: longer than %d bytes", maxMaintenanceReason)
	}
	_, err = s.store.UpdateNode(c.Request.Context(), n.UUID, func(cur *store.Node) error {
		cur.Maintenance = true
		cur.MaintenanceReason = reason
		return nil
	})
	if err != nil {
		return nodeWriteError(err, n)
	}
	s.addHistory(c, n.UUID, store.SeverityInfo, "maintenance", "Node set into maintenance"+reasonSuffix(reason))
	writeEmpty(c, http.StatusAccepted, "")
	return nil
}

func reasonSuffix(r *string) string {
	if r == nil || *r == "" {
		return ""
	}
	return ": " + *r
}

func (s *server) unsetMaintenance(c *gin.Context, n *store.Node) error {
	_, err := s.store.UpdateNode(c.Request.Context(), n.UUID, func(cur *store.Node) error {
		cur.Maintenance = false
		cur.MaintenanceReason = nil
		cur.Fault = nil
		return nil
	})
	if err != nil {
		return nodeWriteError(err, n)
	}
	s.addHistory(c, n.UUID, store.SeverityInfo, "maintenance", "Node taken out of maintenance")
	writeEmpty(c, http.StatusAccepted, "")
	return nil
}
