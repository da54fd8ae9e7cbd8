package apiserver

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/ironflow/ironflow/store"
)

func portgroupNotFound(ident string) *apiError {
	return errorf(http.StatusNotFound, "Portgroup %s could not be found.", ident)
}

// loadPortgroupIdent finds a group by UUID or logical name.
func (s *server) loadPortgroupIdent(c *gin.Context, ident string) (*store.Portgroup, error) {
	if !isUUID(ident) && !nodeNameRE.MatchString(ident) {
		return nil, badRequest("Expected a logical name or UUID but received %s.", ident)
	}
	g, err := s.store.GetPortgroup(c.Request.Context(), ident)
	if errors.Is(err, store.ErrNotFound) {
		return nil, portgroupNotFound(ident)
	}
	if err != nil {
		return nil, fmt.Errorf("get portgroup %s: %w", ident, err)
	}
	return g, nil
}

func (s *server) loadPortgroup(c *gin.Context) (*store.Portgroup, error) {
	return s.loadPortgroupIdent(c, c.Param("portgroup"))
}

// onPortgroup runs h on the group /v1/portgroups/{portgroup} names.
func (s *server) onPortgroup(h func(c *gin.Context, g *store.Portgroup) error) handler {
	return loaded(s.loadPortgroup, h)
}

func (s *server) writeOnePortgroup(c *gin.Context, status int, g *store.Portgroup, fields []string) {
	portgroupResource.writeOne(c, s.baseURL(c), status, g, fields)
}

func (s *server) showPortgroup(c *gin.Context) error {
	return showOne(s, c, portgroupResource, s.loadPortgroup)
}

// portgroupWriteError maps store errors to Ironic's messages. A missing
// node is a 400 on create and PATCH, as Ironic answers.
func portgroupWriteError(err error, g *store.Portgroup) error {
	switch {
	case errors.Is(err, store.ErrDuplicateMAC):
		return errorf(http.StatusConflict, "A portgroup with MAC address %s already exists.", strOr(g.Address))
	case errors.Is(err, store.ErrDuplicateName):
		return errorf(http.StatusConflict, "A portgroup with name %s already exists.", strOr(g.Name))
	case errors.Is(err, store.ErrDuplicateUUID):
		return errorf(http.StatusConflict, "A portgroup with UUID %s already exists.", g.UUID)
	case errors.Is(err, store.ErrPortgroupNotEmpty):
		return portgroupNotEmpty(g.UUID)
	case errors.Is(err, store.ErrNotFound):
		return errorf(http.StatusBadRequest, "Node %s could not be found.", g.NodeUUID)
	case errors.Is(err, store.ErrInvalidInput):
		return badRequest("Invalid portgroup: %s", err.Error())
	}
	return fmt.Errorf("write portgroup %s: %w", g.UUID, err)
}

func portgroupNotEmpty(uuid string) *apiError {
	return badRequest("Cannot complete the requested action because portgroup %s contains ports.", uuid)
}

func strOr(p *string) string {
	if p == nil {
		return "None"
	}
	return *p
}

func (s *server) createPortgroup(c *gin.Context) error {
	body, err := decodeObject(c)
	if err != nil {
		return err
	}
	// A null mode is the default mode, as Ironic's database layer sets it.
	if v, ok := body["mode"]; ok && v == nil {
		delete(body, "mode")
	}
	g := &store.Portgroup{StandalonePortsSupported: true, Mode: store.DefaultPortgroupMode,
		Extra: map[string]any{}, Properties: map[string]any{}, InternalInfo: map[string]any{}}
	if _, err := portgroupResource.create(g, body, ver(c)); err != nil {
		return err
	}
	if err := s.store.CreatePortgroup(c.Request.Context(), g); err != nil {
		return portgroupWriteError(err, g)
	}
	c.Header("Location", s.baseURL(c)+"/v1/portgroups/"+g.UUID)
	s.writeOnePortgroup(c, http.StatusCreated, g, nil)
	return nil
}

func (s *server) patchPortgroup(c *gin.Context, g *store.Portgroup) error {
	ops, err := portgroupResource.readPatch(c)
	if err != nil {
		return err
	}
	if err := checkPortgroupPatchNames(c.Param("portgroup"), ops); err != nil {
		return err
	}
	attempted := *g
	updated, err := s.store.UpdatePortgroup(c.Request.Context(), g.UUID, func(cur *store.Portgroup) error {
		wasStandalone := cur.StandalonePortsSupported
		if err := portgroupResource.applyPatch(cur, ops); err != nil {
			return err
		}
		attempted = *cur
		if wasStandalone && !cur.StandalonePortsSupported {
			return s.checkStandalonePorts(c.Request.Context(), cur)
		}
		return nil
	})
	if err != nil {
		return portgroupWriteError(err, &attempted)
	}
	s.writeOnePortgroup(c, http.StatusOK, updated, nil)
	return nil
}

func (s *server) deletePortgroup(c *gin.Context, g *store.Portgroup) error {
	if err := s.store.DeletePortgroup(c.Request.Context(), g.UUID); err != nil {
		switch {
		case errors.Is(err, store.ErrPortgroupNotEmpty):
			return portgroupNotEmpty(g.UUID)
		case errors.Is(err, store.ErrNotFound):
			return portgroupNotFound(g.UUID)
		}
		return fmt.Errorf("delete portgroup %s: %w", g.UUID, err)
	}
	writeEmpty(c, http.StatusNoContent, "")
	return nil
}
