package apiserver

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/ironflow/ironflow/store"
)

// listParams are the pagination parameters shared by every list.
type listParams struct {
	limit   int
	marker  string
	sortKey string
	sortDir string
	fields  []string
	detail  bool
}

// parseListParams reads limit, marker, sort_key, sort_dir, detail and
// fields; field is the resource's fieldSince, which ?fields= is checked
// against.
func (s *server) parseListParams(c *gin.Context, field func(name string) (since int, ok bool)) (listParams, error) {
	p := listParams{limit: s.cfg.MaxLimit, sortKey: "id", sortDir: "asc"}
	if v := c.Query("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			return p, badRequest("Invalid value for limit: %s", v)
		}
		if n <= 0 {
			return p, badRequest("Limit must be positive")
		}
		p.limit = min(n, s.cfg.MaxLimit)
	}
	p.marker = c.Query("marker")
	if v := c.Query("sort_key"); v != "" {
		p.sortKey = v
	}
	if v := c.Query("sort_dir"); v != "" {
		if v != "asc" && v != "desc" {
			return p, badRequest("Invalid sort direction: %s. Acceptable values are 'asc' or 'desc'", v)
		}
		p.sortDir = v
	}
	if v := c.Query("detail"); v != "" {
		b, err := parseBool("detail", v)
		if err != nil {
			return p, err
		}
		p.detail = b
	}
	if v, ok := c.GetQuery("fields"); ok {
		if ver(c) < v8FetchFields {
			return p, notAcceptable()
		}
		var bad []string
		for _, f := range strings.Split(v, ",") {
			f = strings.TrimSpace(f)
			if f == "" {
				continue
			}
			since, known := field(f)
			if !known {
				bad = append(bad, f)
				continue
			}
			if since > ver(c) {
				return p, notAcceptable()
			}
			p.fields = append(p.fields, f)
		}
		if len(bad) > 0 {
			return p, badRequest("Field(s) \"%s\" are not valid", strings.Join(bad, ", "))
		}
		if p.detail {
			return p, badRequest("Can not specify ?detail=True and fields in the same request.")
		}
	}
	return p, nil
}

// nextLink builds Ironic's "next" URL: sort, fields, filters, limit, marker.
func nextLink(base, path string, p listParams, fields []string, filters url.Values, marker string, detail bool) string {
	var b strings.Builder
	b.WriteString(base + "/v1/" + path + "?sort_key=" + url.QueryEscape(p.sortKey) + "&sort_dir=" + p.sortDir)
	if fields != nil {
		b.WriteString("&fields=" + strings.Join(fields, ","))
	}
	if detail {
		b.WriteString("&detail=True")
	}
	keys := make([]string, 0, len(filters))
	for k := range filters {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		b.WriteString("&" + k + "=" + url.QueryEscape(filters.Get(k)))
	}
	b.WriteString("&limit=" + strconv.Itoa(p.limit) + "&marker=" + marker)
	return b.String()
}

func listError(err error, p listParams) error {
	switch {
	case errors.Is(err, store.ErrMarkerNotFound):
		return badRequest("Marker %s could not be found.", p.marker)
	case errors.Is(err, store.ErrInvalidSortKey):
		return badRequest("The sort_key value %s is an invalid field for sorting", p.sortKey)
	}
	return fmt.Errorf("list: %w", err)
}

// showOne answers GET of one object: the request's fields checked against
// the resource, then the object load finds, with those fields.
func showOne[T, F any](s *server, c *gin.Context, r *resource[T, F], load func(*gin.Context) (*T, error)) error {
	p, err := s.parseListParams(c, r.fieldSince)
	if err != nil {
		return err
	}
	obj, err := load(c)
	if err != nil {
		return err
	}
	r.writeOne(c, s.baseURL(c), http.StatusOK, obj, p.fields)
	return nil
}

// writePage answers a list request of a resource keyed by UUID with one
// page of items: its default fields unless the request asked for detail or
// for fields, and the next page's link when the page is full (Ironic's
// pagination: the last item's UUID is the next marker).
func writePage[T, F any](s *server, c *gin.Context, r *resource[T, F], key, path string, items []*T, uuid func(*T) string,
	p listParams, q url.Values, detailPath bool, defaults []string) {
	fields := p.fields
	if !detailPath && !p.detail && fields == nil {
		fields = defaults
	}
	v := viewCtx{minor: ver(c), base: s.baseURL(c)}
	next := ""
	if len(items) == p.limit && len(items) > 0 {
		next = nextLink(v.base, path, p, p.fields, q, uuid(items[len(items)-1]), !detailPath && p.detail)
	}
	writeList(c, r, key, items, v, fields, next)
}

// writeList answers a page of a list: {"<key>": [...], "next": ...} with
// next only when given (the page is full).
func writeList[T, F any](c *gin.Context, r *resource[T, F], key string, items []*T, v viewCtx, fields []string, next string) {
	sel := newFieldSet(fields)
	var buf bytes.Buffer
	buf.Grow(len(items) * 512)
	buf.WriteString(`{`)
	writeJSONString(&buf, key)
	buf.WriteString(`:[`)
	for i, it := range items {
		if i > 0 {
			buf.WriteByte(',')
		}
		r.write(&buf, it, v, sel)
	}
	buf.WriteByte(']')
	if next != "" {
		buf.WriteString(`,"next":`)
		writeJSONString(&buf, next)
	}
	buf.WriteByte('}')
	writeRawBytes(c, http.StatusOK, buf.Bytes())
}
