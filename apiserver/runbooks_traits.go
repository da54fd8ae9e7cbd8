package apiserver

import (
	"errors"
	"fmt"
	"net/http"
	"slices"

	"github.com/gin-gonic/gin"

	"github.com/ironflow/ironflow/pyliteral"
	"github.com/ironflow/ironflow/store"
)

// Runbook traits (API 1.112): GET/PUT/DELETE /v1/runbooks/{runbook}/traits
// and PUT/DELETE .../traits/{trait}, as Ironic's RunbookTraitsController.
// From 1.112 a runbook is approved for a node that has any of its traits
// (RunbookSteps); below it, for a node with a trait of its name.

// runbookTraitsPutUsage is Ironic's answer to a PUT that is neither form.
const runbookTraitsPutUsage = "A single runbook trait may be added via PUT /v1/runbooks/<runbook identifier>/traits/<trait> with no body, " +
	"or all runbook traits may be replaced via PUT /v1/runbooks/<runbook identifier>/traits with the list of traits specified in the request body."

// runbookTrait validates a trait as Ironic's TRAITS_SCHEMA (standard or
// CUSTOM_), with args.schema's message for what.
func runbookTrait(what string, v any) (string, error) {
	var probe runbook
	if err := traitName(func(r *runbook) *string { return &r.Name }).set(&probe, v); err != nil {
		return "", badRequest("Schema error for %s: %s", what, err.Error())
	}
	return probe.Name, nil
}

func (s *server) listRunbookTraits(c *gin.Context) error {
	rb, err := s.loadRunbook(c, c.Param("ident"))
	if err != nil {
		return err
	}
	writeJSON(c, http.StatusOK, map[string]any{"traits": stringsOrEmpty(rb.Traits)})
	return nil
}

// putRunbookTraits answers PUT .../traits: the body's list replaces the
// runbook's traits.
func (s *server) putRunbookTraits(c *gin.Context) error {
	rb, err := s.loadRunbook(c, c.Param("ident"))
	if err != nil {
		return err
	}
	body, err := decodeObject(c)
	if err != nil {
		return err
	}
	for k := range body {
		if k != "traits" {
			return badRequest("Schema error for body: Additional properties are not allowed (%s was unexpected)", pyliteral.Repr(k))
		}
	}
	raw, given := body["traits"]
	if !given || raw == nil {
		return badRequest("%s", runbookTraitsPutUsage)
	}
	list, ok := raw.([]any)
	if !ok {
		return badRequest("Schema error for body: %s is not of type 'array'", pyliteral.Repr(raw))
	}
	traits := make([]string, 0, len(list))
	for _, v := range list {
		t, err := runbookTrait("body", v)
		if err != nil {
			return err
		}
		traits = append(traits, t)
	}
	return s.runbookTraitsWritten(c, rb, "", s.store.SetRunbookTraits(c.Request.Context(), rb.UUID, traits))
}

// addRunbookTrait answers PUT .../traits/{trait}: no body.
func (s *server) addRunbookTrait(c *gin.Context) error {
	rb, err := s.loadRunbook(c, c.Param("ident"))
	if err != nil {
		return err
	}
	t, err := runbookTrait("trait", c.Param("trait"))
	if err != nil {
		return err
	}
	if err := refuseTraitBody(c); err != nil {
		return err
	}
	location := s.baseURL(c) + "/v1/runbooks/" + c.Param("ident") + "/traits/" + t
	return s.runbookTraitsWritten(c, rb, location, s.store.AddRunbookTrait(c.Request.Context(), rb.UUID, t))
}

// removeRunbookTraits answers DELETE .../traits[/{trait}]: one trait (a
// trait the runbook lacks is no error, as Ironic's), or all.
func (s *server) removeRunbookTraits(c *gin.Context) error {
	rb, err := s.loadRunbook(c, c.Param("ident"))
	if err != nil {
		return err
	}
	t := c.Param("trait")
	if t == "" {
		return s.runbookTraitsWritten(c, rb, "", s.store.SetRunbookTraits(c.Request.Context(), rb.UUID, nil))
	}
	if !slices.Contains(rb.Traits, t) {
		writeEmpty(c, http.StatusNoContent, "")
		return nil
	}
	return s.runbookTraitsWritten(c, rb, "", s.store.RemoveRunbookTrait(c.Request.Context(), rb.UUID, t))
}

func (s *server) runbookTraitsWritten(c *gin.Context, rb *store.Runbook, location string, err error) error {
	if errors.Is(err, store.ErrNotFound) {
		return runbookKind.notFound(rb.UUID)
	}
	if err != nil {
		return fmt.Errorf("change traits of runbook %s: %w", rb.UUID, err)
	}
	writeEmpty(c, http.StatusNoContent, location)
	return nil
}
