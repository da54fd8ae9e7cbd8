package apiserver

import (
	"errors"
	"net/url"

	"github.com/gin-gonic/gin"

	"github.com/ironflow/ironflow/store"
)

// listHandler answers GET /v1/{path}: a page, sorted, with ?fields= or
// ?detail=, as Ironic's get_all of deploy templates and runbooks.
func (k *stepsKind[T]) listHandler(s *server) handler {
	return func(c *gin.Context) error {
		p, err := s.parseListParams(c, k.res.fieldSince)
		if err != nil {
			return err
		}
		if !k.res.sortable(p.sortKey) {
			return listError(store.ErrInvalidSortKey, p)
		}
		f := store.StepListFilter{Limit: p.limit, Marker: p.marker, SortKey: p.sortKey, SortDir: p.sortDir,
			Project: c.GetString(ctxListProject)} // runbooks of a project-scoped caller: policy_runbooks.go
		items, err := k.list(s.store, c.Request.Context(), f)
		if errors.Is(err, store.ErrMarkerNotFound) {
			// Ironic loads the marker object first: its not-found message.
			return k.notFound(p.marker)
		}
		if err != nil {
			return listError(err, p)
		}
		fields := p.fields
		if !p.detail && fields == nil {
			fields = k.defaults
		}
		v := viewCtx{minor: ver(c), base: s.baseURL(c)}
		next := ""
		if len(items) == p.limit && len(items) > 0 {
			next = nextLink(v.base, k.path, p, p.fields, url.Values{}, k.uuid(items[len(items)-1]), p.detail)
		}
		writeList(c, k.res, k.path, items, v, fields, next)
		return nil
	}
}
