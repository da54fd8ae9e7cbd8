package apiserver

import (
	"errors"
	"net/http"

	"github.com/gin-gonic/gin"

	"github.com/ironflow/ironflow/store"
)

// listAllocations answers GET /v1/allocations: a page, sorted, filtered by
// node (UUID or name), resource_class, state and owner (1.60), with
// ?fields=, as Ironic's AllocationsController.get_all. A project-scoped
// caller without baremetal:allocation:list_all sees its project's
// allocations only (policy_allocations.go).
func (s *server) listAllocations(c *gin.Context) error {
	p, err := s.parseListParams(c, allocationResource.fieldSince)
	if err != nil {
		return err
	}
	if !allocationResource.sortable(p.sortKey) {
		return listError(store.ErrInvalidSortKey, p)
	}
	if p.marker != "" && !isUUID(p.marker) {
		return badRequest("Expected UUID for marker: %s", p.marker)
	}
	f := store.AllocationFilter{Limit: p.limit, Marker: p.marker, SortKey: p.sortKey, SortDir: p.sortDir}
	q, err := allocationResource.listFilters(c, &f)
	if err != nil {
		return err
	}
	if project := c.GetString(ctxListProject); project != "" {
		f.Owner = project
	}
	if ident := c.Query("node"); ident != "" {
		if !isUUID(ident) && !nodeNameRE.MatchString(ident) {
			return badRequest("Expected UUID or name for node: %s", ident)
		}
		// Ironic reads the node first: one that does not exist is a bad
		// request, not an empty list.
		n, err := s.loadNode(c, ident)
		var ae *apiError
		if errors.As(err, &ae) && ae.status == http.StatusNotFound {
			return badRequest("%s", ae.msg)
		}
		if err != nil {
			return err
		}
		f.NodeUUID = n.UUID
		q.Set("node", ident)
	}
	items, err := s.store.ListAllocations(c.Request.Context(), f)
	if errors.Is(err, store.ErrMarkerNotFound) {
		// Ironic loads the marker object first: its not-found message.
		return allocationNotFound(p.marker)
	}
	if err != nil {
		return listError(err, p)
	}
	writePage(s, c, allocationResource, "allocations", "allocations", items,
		func(a *store.Allocation) string { return a.UUID }, p, q, false, allocationDefaultFields)
	return nil
}
