package apiserver

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/ironflow/ironflow/store"
)

func chassisNotFound(id string) *apiError {
	return errorf(http.StatusNotFound, "Chassis %s could not be found.", id)
}

func (s *server) loadChassis(c *gin.Context) (*store.Chassis, error) {
	id := c.Param("chassis")
	if !isUUID(id) {
		return nil, badRequest("Expected a UUID but received %s.", id)
	}
	ch, err := s.store.GetChassis(c.Request.Context(), id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, chassisNotFound(id)
	}
	if err != nil {
		return nil, fmt.Errorf("get chassis %s: %w", id, err)
	}
	return ch, nil
}

// onChassis runs h on the chassis /v1/chassis/{chassis} names.
func (s *server) onChassis(h func(c *gin.Context, ch *store.Chassis) error) handler {
	return loaded(s.loadChassis, h)
}

func (s *server) showChassis(c *gin.Context) error {
	p, err := s.parseListParams(c, chassisResource.fieldSince)
	if err != nil {
		return err
	}
	ch, err := s.loadChassis(c)
	if err != nil {
		return err
	}
	chassisResource.writeOne(c, s.baseURL(c), http.StatusOK, ch, p.fields)
	return nil
}

func chassisWriteError(err error, ch *store.Chassis) error {
	switch {
	case errors.Is(err, store.ErrDuplicateUUID):
		return errorf(http.StatusConflict, "A chassis with UUID %s already exists.", ch.UUID)
	case errors.Is(err, store.ErrNotFound):
		return chassisNotFound(ch.UUID)
	case errors.Is(err, store.ErrInvalidInput):
		return badRequest("Invalid chassis: %s", err.Error())
	}
	return fmt.Errorf("write chassis %s: %w", ch.UUID, err)
}

func (s *server) createChassis(c *gin.Context) error {
	body, err := decodeObject(c)
	if err != nil {
		return err
	}
	ch := &store.Chassis{Extra: map[string]any{}}
	if _, err := chassisResource.create(ch, body, ver(c)); err != nil {
		return err
	}
	if err := s.store.CreateChassis(c.Request.Context(), ch); err != nil {
		return chassisWriteError(err, ch)
	}
	c.Header("Location", s.baseURL(c)+"/v1/chassis/"+ch.UUID)
	chassisResource.writeOne(c, s.baseURL(c), http.StatusCreated, ch, nil)
	return nil
}

func (s *server) patchChassis(c *gin.Context, ch *store.Chassis) error {
	ops, err := chassisResource.readPatch(c)
	if err != nil {
		return err
	}
	updated, err := s.store.UpdateChassis(c.Request.Context(), ch.UUID, func(cur *store.Chassis) error {
		return chassisResource.applyPatch(cur, ops)
	})
	if err != nil {
		return chassisWriteError(err, ch)
	}
	chassisResource.writeOne(c, s.baseURL(c), http.StatusOK, updated, nil)
	return nil
}

// deleteChassis refuses a chassis that still has nodes, as Ironic's
// ChassisNotEmpty (400).
func (s *server) deleteChassis(c *gin.Context, ch *store.Chassis) error {
	err := s.store.DeleteChassis(c.Request.Context(), ch.UUID)
	switch {
	case errors.Is(err, store.ErrChassisNotEmpty):
		return badRequest("Cannot complete the requested action because chassis %s contains nodes.", ch.UUID)
	case errors.Is(err, store.ErrNotFound):
		return chassisNotFound(ch.UUID)
	case err != nil:
		return fmt.Errorf("delete chassis %s: %w", ch.UUID, err)
	}
	writeEmpty(c, http.StatusNoContent, "")
	return nil
}

func strOrEmpty(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
