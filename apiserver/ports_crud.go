package apiserver

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/ironflow/ironflow/pyliteral"
	"github.com/ironflow/ironflow/store"
)

func (s *server) loadPort(c *gin.Context) (*store.Port, error) {
	id := c.Param("port")
	byName := ver(c) >= v88PortName
	if !isUUID(id) {
		if !byName {
			return nil, badRequest("Expected a UUID but received %s.", id)
		}
		if !nodeNameRE.MatchString(id) {
			return nil, badRequest("Expected a logical name or UUID but received %s.", id)
		}
	}
	// From 1.88 a port is found by its name too.
	find := s.store.GetPort
	if byName {
		find = s.store.FindPort
	}
	p, err := find(c.Request.Context(), id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, errorf(http.StatusNotFound, "Port %s could not be found.", id)
	}
	if err != nil {
		return nil, fmt.Errorf("get port %s: %w", id, err)
	}
	return p, nil
}

// onPort runs h on the port /v1/ports/{port} names.
func (s *server) onPort(h func(c *gin.Context, p *store.Port) error) handler {
	return loaded(s.loadPort, h)
}

func (s *server) writeOnePort(c *gin.Context, status int, p *store.Port, fields []string) {
	portResource.writeOne(c, s.baseURL(c), status, p, fields)
}

func (s *server) showPort(c *gin.Context) error { return showOne(s, c, portResource, s.loadPort) }

func portWriteError(err error, p *store.Port) error {
	switch {
	case errors.Is(err, store.ErrDuplicateMAC):
		return errorf(http.StatusConflict, "A port with MAC address %s already exists.", p.Address)
	case errors.Is(err, store.ErrDuplicateUUID):
		return errorf(http.StatusConflict, "A port with UUID %s already exists.", p.UUID)
	case errors.Is(err, store.ErrDuplicateName):
		return errorf(http.StatusConflict, "A port with name %s already exists.", strOrEmpty(p.Name))
	case errors.Is(err, store.ErrPortgroupNotFound):
		return portgroupNotFound(strOr(p.PortgroupUUID))
	case errors.Is(err, store.ErrPortgroupOtherNode):
		return badRequest("Port can not be added to a portgroup belonging to a different node.")
	case errors.Is(err, store.ErrNotFound):
		return nodeNotFound(p.NodeUUID)
	case errors.Is(err, store.ErrInvalidInput):
		return badRequest("Invalid port: %s", err.Error())
	}
	return fmt.Errorf("write port %s: %w", p.Address, err)
}

func (s *server) createPort(c *gin.Context) error {
	body, err := decodeObject(c)
	if err != nil {
		return err
	}
	if err := s.portNodeIdent(c, body); err != nil {
		return err
	}
	p := &store.Port{PXEEnabled: true, AvailableForDynamicPortgroup: true, Extra: map[string]any{}, LocalLinkConnection: map[string]any{}, InternalInfo: map[string]any{}}
	if _, err := portResource.create(p, body, ver(c)); err != nil {
		return err
	}
	if err := checkLocalLinkKeys(p.LocalLinkConnection, ver(c)); err != nil {
		return err
	}
	if err := s.checkPortInGroup(c.Request.Context(), p, true); err != nil {
		return err
	}
	if err := s.store.CreatePort(c.Request.Context(), p); err != nil {
		return portWriteError(err, p)
	}
	c.Header("Location", s.baseURL(c)+"/v1/ports/"+p.UUID)
	s.writeOnePort(c, http.StatusCreated, p, nil)
	return nil
}

// portNodeIdent reads the node of a port create body as Ironic's PORT_SCHEMA
// does since API 1.94 (Ironic's api/controllers/v1/port.py): exactly one of
// node_ident (the node's name or UUID) and the deprecated node_uuid, checked
// after unknown keys and the address and before the values; node_ident
// below 1.94 is 406 (as Ironic master), where node_uuid stays required as in
// Ironic 21.4's schema. A node_ident found becomes the body's node_uuid.
func (s *server) portNodeIdent(c *gin.Context, body map[string]any) error {
	if err := portResource.checkUnknown(body, []string{"node_ident"}); err != nil {
		return err
	}
	if _, ok := body["address"]; !ok {
		return schemaError("port", fmt.Errorf("'address' is a required property"))
	}
	ident, hasIdent := body["node_ident"]
	_, hasUUID := body["node_uuid"]
	if hasIdent && ver(c) < v94PortNodeIdent {
		return notAcceptable()
	}
	if ver(c) < v94PortNodeIdent {
		// The schema before 1.94 (Ironic 21.4's): node_uuid required.
		return nil
	}
	switch {
	case hasIdent && hasUUID:
		return schemaError("port", fmt.Errorf("%s is valid under each of {'required': ['node_uuid']}, {'required': ['node_ident']}", pyliteral.Repr(body)))
	case !hasIdent && !hasUUID:
		return schemaError("port", fmt.Errorf("%s is not valid under any of the given schemas. Possible root cause: 'node_ident' is a required property", pyliteral.Repr(body)))
	case !hasIdent:
		return nil
	}
	name, ok := ident.(string)
	if !ok {
		return schemaError("port", typeErr(ident, "string"))
	}
	delete(body, "node_ident")
	var n *store.Node
	err := store.ErrNotFound
	if isUUID(name) || validNodeName(name) {
		n, err = s.store.GetNode(c.Request.Context(), name)
	}
	if errors.Is(err, store.ErrNotFound) {
		// Ironic's NodeNotFound with a 400: a POST names no resource of
		// its own that could be missing.
		return badRequest("Node %s could not be found.", name)
	}
	if err != nil {
		return fmt.Errorf("get node %s: %w", name, err)
	}
	body["node_uuid"] = n.UUID
	return nil
}

func (s *server) patchPort(c *gin.Context, p *store.Port) error {
	ops, err := portResource.readPatch(c)
	if err != nil {
		return err
	}
	var attempted store.Port
	updated, err := s.store.UpdatePort(c.Request.Context(), p.UUID, func(cur *store.Port) error {
		before := *cur
		if err := portResource.applyPatch(cur, ops); err != nil {
			return err
		}
		if err := checkLocalLinkKeys(addedLocalLinkKeys(before.LocalLinkConnection, cur.LocalLinkConnection), ver(c)); err != nil {
			return err
		}
		attempted = *cur
		// From 1.102 a port in a group has the group's physical network
		// (the group's PATCH changes both), as Ironic's port controller.
		if ver(c) >= v102PortgroupPhysnet && cur.PortgroupUUID != nil && patchUpdates(ops, "/physical_network") {
			return badRequest("physical_network cannot be changed while the port belongs to a portgroup.")
		}
		changed := cur.PXEEnabled != before.PXEEnabled || strOr(cur.PortgroupUUID) != strOr(before.PortgroupUUID)
		return s.checkPortInGroup(c.Request.Context(), cur, changed)
	})
	// A patch refused by the callback is an *apiError inside the store's
	// wrapping; portWriteError wraps it again and the adapter finds it.
	if err != nil {
		return portWriteError(err, &attempted)
	}
	s.writeOnePort(c, http.StatusOK, updated, nil)
	return nil
}

func (s *server) deletePort(c *gin.Context, p *store.Port) error {
	if err := s.store.DeletePort(c.Request.Context(), p.UUID); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return errorf(http.StatusNotFound, "Port %s could not be found.", p.UUID)
		}
		return fmt.Errorf("delete port %s: %w", p.UUID, err)
	}
	writeEmpty(c, http.StatusNoContent, "")
	return nil
}
