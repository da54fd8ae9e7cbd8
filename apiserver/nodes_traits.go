package apiserver

//go:generate ../scripts/gen-os-traits.sh

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/ironflow/ironflow/pyliteral"
	"github.com/ironflow/ironflow/store"
)

// Node traits (API 1.37): GET/PUT/DELETE /v1/nodes/{node}/traits[/{trait}].
// A trait is a standard os-traits name (os_traits_table.go, generated from
// the os-traits library) or CUSTOM_ followed by A-Z, 0-9 and _, at most 255
// characters, as Ironic's validate_trait; a node has at most 50, the limit
// Ironic shares with Placement's resource providers.

const maxTraitsPerNode = 50

var customTraitRE = regexp.MustCompile(`^CUSTOM_[A-Z0-9_]+$`)

// validateTrait is Ironic's validate_trait with its message.
func validateTrait(v any) (string, error) {
	t, ok := v.(string)
	if ok && len(t) >= 1 && len(t) <= 255 && (standardTraits[t] || customTraitRE.MatchString(t)) {
		return t, nil
	}
	return "", badRequest("Invalid trait. A valid trait must be no longer than 255 characters. " +
		"Standard traits are defined in the os_traits library. " +
		"A custom trait must start with the prefix CUSTOM_ and use the following characters: A-Z, 0-9 and _")
}

func (s *server) listTraits(c *gin.Context, n *store.Node) error {
	traits := slices.Clone(n.Traits)
	if traits == nil {
		traits = []string{}
	}
	sort.Strings(traits)
	writeJSON(c, http.StatusOK, map[string]any{"traits": traits})
	return nil
}

// setTraits answers PUT /v1/nodes/{node}/traits: the body's list replaces
// the node's traits.
func (s *server) setTraits(c *gin.Context, n *store.Node) error {
	body, err := decodeObject(c)
	if err != nil {
		return err
	}
	raw, given := body["traits"]
	if !given || raw == nil {
		return badRequest("%s", traitsPutUsage)
	}
	for k := range body {
		if k != "traits" {
			return badRequest("Schema error for body: Additional properties are not allowed (%s was unexpected)", pyliteral.Repr(k))
		}
	}
	list, ok := raw.([]any)
	if !ok {
		return badRequest("Schema error for body: %s is not of type 'array'", pyliteral.Repr(raw))
	}
	var want []string
	for _, v := range list {
		t, err := validateTrait(v)
		if err != nil {
			return err
		}
		if !slices.Contains(want, t) {
			want = append(want, t)
		}
	}
	return s.writeTraits(c, n, "", func([]string) []string { return want })
}

// traitsPutUsage is Ironic's answer to a PUT of traits that is neither form.
const traitsPutUsage = "A single node trait may be added via PUT /v1/nodes/<node identifier>/traits/<trait> with no body, " +
	"or all node traits may be replaced via PUT /v1/nodes/<node identifier>/traits with the list of traits specified in the request body."

// refuseTraitBody refuses a PUT of one trait (a node's or a runbook's)
// that has a body, as Ironic's traits controllers; an empty one passes.
func refuseTraitBody(c *gin.Context) error {
	if c.Request.ContentLength == 0 {
		return nil
	}
	body, err := io.ReadAll(c.Request.Body)
	if err != nil {
		return fmt.Errorf("read body: %w", err)
	}
	var v any
	if json.Unmarshal(body, &v) == nil && !isEmptyValue(v) {
		return badRequest("No body should be provided when adding a trait")
	}
	return nil
}

// addTrait answers PUT /v1/nodes/{node}/traits/{trait}.
func (s *server) addTrait(c *gin.Context, n *store.Node) error {
	t, err := validateTrait(c.Param("trait"))
	if err != nil {
		return err
	}
	if err := refuseTraitBody(c); err != nil {
		return err
	}
	// The Location Ironic sets for a single trait names the node as the
	// request did.
	return s.writeTraits(c, n, "/v1/nodes/"+c.Param("node")+"/traits/"+t, func(cur []string) []string {
		if slices.Contains(cur, t) {
			return cur
		}
		return append(cur, t)
	})
}

// removeTraits answers DELETE /v1/nodes/{node}/traits[/{trait}]: one
// trait, or all of them.
func (s *server) removeTraits(c *gin.Context, n *store.Node) error {
	t := c.Param("trait")
	_, err := s.store.UpdateNode(c.Request.Context(), n.UUID, func(cur *store.Node) error {
		if t == "" {
			cur.Traits = []string{}
			return nil
		}
		i := slices.Index(cur.Traits, t)
		if i < 0 {
			return errorf(http.StatusNotFound, "Node %s doesn't have a trait '%s'", cur.UUID, t)
		}
		cur.Traits = slices.Delete(cur.Traits, i, i+1)
		return nil
	})
	if err != nil {
		return nodeWriteError(err, n)
	}
	writeEmpty(c, http.StatusNoContent, "")
	return nil
}

// writeTraits stores change(current traits), sorted as Ironic stores them,
// within Ironic's limit and answers 204 (with a Location when location is
// a path: a single trait added).
func (s *server) writeTraits(c *gin.Context, n *store.Node, location string, change func([]string) []string) error {
	_, err := s.store.UpdateNode(c.Request.Context(), n.UUID, func(cur *store.Node) error {
		next := change(slices.Clone(cur.Traits))
		sort.Strings(next)
		if len(next) > maxTraitsPerNode {
			// Ironic names the node by its database id here too.
			return badRequest("Could not modify traits for node %d as it would exceed the maximum number of traits per node (%d vs. %d)",
				cur.ID, len(next), maxTraitsPerNode)
		}
		cur.Traits = next
		return nil
	})
	if err != nil {
		return nodeWriteError(err, n)
	}
	if location != "" {
		location = s.baseURL(c) + location
	}
	writeEmpty(c, http.StatusNoContent, location)
	return nil
}

// instanceTraitsProblem is Ironic's validate_instance_info_traits: the
// traits instance_info asks for (Nova writes the flavor's required traits
// there) must all be traits of the node. It returns "" when they are.
func instanceTraitsProblem(n *store.Node) string {
	raw, ok := n.InstanceInfo["traits"]
	if !ok || raw == nil {
		return ""
	}
	malformed := fmt.Sprintf("Error parsing traits from Node %s instance_info field. A list of strings is expected.", n.UUID)
	list, ok := raw.([]any)
	if !ok {
		if s, isStr := raw.(string); isStr && s == "" {
			return ""
		}
		return malformed
	}
	var missing []string
	for _, v := range list {
		t, ok := v.(string)
		if !ok {
			return malformed
		}
		if !slices.Contains(n.Traits, t) && !slices.Contains(missing, t) {
			missing = append(missing, t)
		}
	}
	if len(missing) == 0 {
		return ""
	}
	sort.Strings(missing)
	return fmt.Sprintf("Cannot specify instance traits that are not also set on the node. Node %s is missing traits %s",
		n.UUID, strings.Join(missing, ", "))
}
