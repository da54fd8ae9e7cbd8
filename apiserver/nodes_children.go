package apiserver

import (
	"net/http"
	"net/url"
	"strconv"

	"github.com/gin-gonic/gin"

	"github.com/ironflow/ironflow/store"
)

// Parent and child nodes (API 1.83): a node names its parent by UUID or
// name in parent_node, which is stored as the parent's UUID; node lists
// leave children out from 1.83 on unless ?include_children=True or
// ?parent_node= asks for them; GET /v1/nodes/{node}/children lists the
// UUIDs of a node's children, as Ironic's API reference describes.

// setParentNode takes the value as given; resolveParentNode, which can
// read the store, turns a name into the parent's UUID.
func setParentNode(n *node, v any) error {
	switch t := v.(type) {
	case nil:
		n.ParentNode = nil
	case string:
		s := t
		n.ParentNode = &s
	default:
		return typeErr(v, "string", "null")
	}
	return nil
}

// resolveParentNode checks that the parent a create or PATCH named exists
// (Ironic looks it up as any node: 404 "Node ... could not be found.") and
// stores its UUID.
func (s *server) resolveParentNode(c *gin.Context, n *store.Node) error {
	if n.ParentNode == nil {
		return nil
	}
	p, err := s.loadNode(c, *n.ParentNode)
	if err != nil {
		return err
	}
	n.ParentNode = &p.UUID
	return nil
}

// filterParentNode: ?parent_node= names the parent by UUID or name.
func (s *server) filterParentNode(c *gin.Context, f *store.NodeFilter) (string, error) {
	v, ok := c.GetQuery("parent_node")
	if !ok || v == "" {
		return "", nil
	}
	if ver(c) < v83ParentChildNodes {
		return "", notAcceptable()
	}
	p, err := s.loadNode(c, v)
	if err != nil {
		return "", err
	}
	f.ParentNode = p.UUID
	return v, nil
}

// childrenFilter applies ?parent_node= and ?include_children= to a node
// list and records in q what the "next" link repeats.
func (s *server) childrenFilter(c *gin.Context, f *store.NodeFilter, q url.Values) error {
	parent, err := s.filterParentNode(c, f)
	if err != nil {
		return err
	}
	if parent != "" {
		q.Set("parent_node", parent)
	}
	include := false
	if v, ok := c.GetQuery("include_children"); ok {
		if ver(c) < v83ParentChildNodes {
			return notAcceptable()
		}
		if include, err = parseBool("include_children", v); err != nil {
			return err
		}
		q.Set("include_children", strconv.FormatBool(include))
	}
	if ver(c) >= v83ParentChildNodes && f.ParentNode == "" && !include {
		f.ExcludeChildren = true
	}
	return nil
}

// listChildren answers GET /v1/nodes/{node}/children.
func (s *server) listChildren(c *gin.Context, n *store.Node) error {
	kids, err := s.store.ListNodes(c.Request.Context(), store.NodeFilter{ParentNode: n.UUID, Fields: []string{"uuid"}})
	if err != nil {
		return err
	}
	uuids := make([]string, 0, len(kids))
	for _, k := range kids {
		uuids = append(uuids, k.UUID)
	}
	writeJSON(c, http.StatusOK, map[string]any{"children": uuids})
	return nil
}
