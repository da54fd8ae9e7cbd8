package apiserver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"

	"github.com/gin-gonic/gin"

	"github.com/ironflow/ironflow/bmc"
	"github.com/ironflow/ironflow/store"
)

// volumeKind is what the handlers of volume connectors and of volume
// targets differ in; both follow Ironic's volume_connector.py and
// volume_target.py, which are alike.
type volumeKind[T any] struct {
	what     string // "volume connector": messages
	title    string // "Volume connector": the not-found message
	path     string // "connectors": under /v1/volume/
	param    string // "connector_uuid": Ironic's argument name in messages
	res      *resource[T, volumeQuery]
	defaults []string // the fields of a list without detail
	blank    func() *T
	uuid     func(*T) *string
	node     func(*T) *string
	conflict func(err error, obj *T) error // the store's duplicate errors as Ironic's

	get    func(st *store.Store, ctx context.Context, id string) (*T, error)
	list   func(st *store.Store, ctx context.Context, f store.VolumeFilter) ([]*T, error)
	create func(st *store.Store, ctx context.Context, obj *T) error
	update func(st *store.Store, ctx context.Context, obj *T) error
	delete func(st *store.Store, ctx context.Context, id string) error
}

var connectorKind = &volumeKind[connector]{
	what: "volume connector", title: "Volume connector", path: "connectors", param: "connector_uuid",
	res: connectorResource, defaults: connectorDefaultFields,
	blank: func() *connector { return &connector{Extra: map[string]any{}} },
	uuid:  func(c *connector) *string { return &c.UUID },
	node:  func(c *connector) *string { return &c.NodeUUID },
	conflict: func(err error, c *connector) error {
		switch {
		case errors.Is(err, store.ErrDuplicateConnector):
			return errorf(http.StatusConflict, "A volume connector with type %s and connector ID %s already exists.", c.Type, c.ConnectorID)
		case errors.Is(err, store.ErrDuplicateUUID):
			return errorf(http.StatusConflict, "A volume connector with UUID %s already exists.", c.UUID)
		}
		return nil
	},
	get:    (*store.Store).GetVolumeConnector,
	list:   (*store.Store).ListVolumeConnectors,
	create: (*store.Store).CreateVolumeConnector,
	update: (*store.Store).UpdateVolumeConnector,
	delete: (*store.Store).DeleteVolumeConnector,
}

var targetKind = &volumeKind[target]{
	what: "volume target", title: "Volume target", path: "targets", param: "target_uuid",
	res: targetResource, defaults: targetDefaultFields,
	blank: func() *target { return &target{Extra: map[string]any{}, Properties: map[string]any{}} },
	uuid:  func(t *target) *string { return &t.UUID },
	node:  func(t *target) *string { return &t.NodeUUID },
	conflict: func(err error, t *target) error {
		switch {
		case errors.Is(err, store.ErrDuplicateBootIndex):
			return errorf(http.StatusConflict, "A volume target with boot index '%d' for the same node already exists.", t.BootIndex)
		case errors.Is(err, store.ErrDuplicateUUID):
			return errorf(http.StatusConflict, "A volume target with UUID %s already exists.", t.UUID)
		}
		return nil
	},
	get:    (*store.Store).GetVolumeTarget,
	list:   (*store.Store).ListVolumeTargets,
	create: (*store.Store).CreateVolumeTarget,
	update: (*store.Store).UpdateVolumeTarget,
	delete: (*store.Store).DeleteVolumeTarget,
}

// operationNotPermitted is Ironic's answer to a volume object addressed
// below a node (/v1/nodes/{node}/volume/connectors/{uuid}): only lists are
// served there.
func operationNotPermitted() *apiError {
	return errorf(http.StatusForbidden, "Operation not permitted.")
}

// volumeDocument answers GET /v1/volume and /v1/nodes/{node}/volume: links
// to what the route table indexes under the path, the connectors and
// targets (Ironic's volume.py; the node is not looked up).
func (s *server) volumeDocument(c *gin.Context) error {
	base := s.baseURL(c)
	prefix := "volume/"
	if n := c.Param("node"); n != "" {
		prefix = "nodes/" + n + "/volume/"
	}
	mk := func(p string) []link {
		return []link{{Href: base + "/v1/" + prefix + p, Rel: "self"}, {Href: base + "/" + prefix + p, Rel: "bookmark"}}
	}
	doc := map[string]any{"links": mk("")}
	for _, name := range s.indexed(c.FullPath(), ver(c)) {
		doc[name] = mk(name)
	}
	writeJSON(c, http.StatusOK, doc)
	return nil
}

func (k *volumeKind[T]) notFound(id string) *apiError {
	return errorf(http.StatusNotFound, "%s %s could not be found.", k.title, id)
}

// load finds the object /v1/volume/{path}/{uuid} names.
func (k *volumeKind[T]) load(s *server, c *gin.Context) (*T, error) {
	id := c.Param("uuid")
	if !isUUID(id) {
		return nil, badRequest("Expected UUID for %s: %s", k.param, id)
	}
	obj, err := k.get(s.store, c.Request.Context(), id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, k.notFound(id)
	}
	if err != nil {
		return nil, fmt.Errorf("get %s %s: %w", k.what, id, err)
	}
	return obj, nil
}

func (k *volumeKind[T]) show(s *server) handler {
	return func(c *gin.Context) error {
		return showOne(s, c, k.res, func(c *gin.Context) (*T, error) { return k.load(s, c) })
	}
}

// nodeOf finds the node an object is (to be) attached to; a node that does
// not exist is a 400, as Ironic's replace_node_uuid_with_id answers.
func (k *volumeKind[T]) nodeOf(s *server, c *gin.Context, obj *T) (*store.Node, error) {
	n, err := s.store.GetNode(c.Request.Context(), *k.node(obj))
	if errors.Is(err, store.ErrNotFound) {
		return nil, badRequest("Node %s could not be found.", *k.node(obj))
	}
	if err != nil {
		return nil, fmt.Errorf("get node %s: %w", *k.node(obj), err)
	}
	return n, nil
}

func (k *volumeKind[T]) writeError(err error, obj *T) error {
	if e := k.conflict(err, obj); e != nil {
		return e
	}
	if errors.Is(err, store.ErrNotFound) {
		return badRequest("Node %s could not be found.", *k.node(obj))
	}
	return fmt.Errorf("write %s %s: %w", k.what, *k.uuid(obj), err)
}

func (k *volumeKind[T]) createHandler(s *server) handler {
	return func(c *gin.Context) error {
		body, err := decodeObject(c)
		if err != nil {
			return err
		}
		obj := k.blank()
		if _, err := k.res.create(obj, body, ver(c)); err != nil {
			return err
		}
		if _, err := k.nodeOf(s, c, obj); err != nil {
			return err
		}
		if err := k.create(s.store, c.Request.Context(), obj); err != nil {
			return k.writeError(err, obj)
		}
		c.Header("Location", s.baseURL(c)+"/v1/volume/"+k.path+"/"+*k.uuid(obj))
		k.res.writeOne(c, s.baseURL(c), http.StatusCreated, obj, nil)
		return nil
	}
}

// changeable refuses a change to an object of node n unless n is powered
// off and free, as Ironic's conductor does (update_volume_connector and
// its siblings, under the node's lock).
func (k *volumeKind[T]) changeable(s *server, c *gin.Context, n *store.Node, action string) error {
	running, err := s.eng.Running(c.Request.Context(), n.UUID)
	if err != nil {
		return fmt.Errorf("check workflow of node %s: %w", n.UUID, err)
	}
	if running {
		return nodeLocked(n.UUID, lockHolder(n))
	}
	if n.PowerState == nil || *n.PowerState != string(bmc.PowerOff) {
		state := "None"
		if n.PowerState != nil {
			state = *n.PowerState
		}
		return badRequest("The requested action \"%s %s\" can not be performed on node \"%s\" while it is in state \"%s\".", k.what, action, n.UUID, state)
	}
	return nil
}

func (k *volumeKind[T]) patchHandler(s *server) handler {
	return func(c *gin.Context) error {
		if !isUUID(c.Param("uuid")) {
			return badRequest("Expected UUID for %s: %s", k.param, c.Param("uuid"))
		}
		ops, err := k.res.readPatch(c)
		if err != nil {
			return err
		}
		for _, op := range ops {
			if op.Path == "/node_uuid" && op.HasValue {
				if s, ok := op.Value.(string); !ok || !isUUID(s) {
					return badRequest("Expected a UUID for node_uuid, but received %v.", op.Value)
				}
			}
		}
		obj, err := k.load(s, c)
		if err != nil {
			return err
		}
		if err := k.res.applyPatch(obj, ops); err != nil {
			return err
		}
		n, err := k.nodeOf(s, c, obj)
		if err != nil {
			return err
		}
		if err := k.changeable(s, c, n, "update"); err != nil {
			return err
		}
		if err := k.update(s.store, c.Request.Context(), obj); err != nil {
			return k.writeError(err, obj)
		}
		k.res.writeOne(c, s.baseURL(c), http.StatusOK, obj, nil)
		return nil
	}
}

func (k *volumeKind[T]) deleteHandler(s *server) handler {
	return func(c *gin.Context) error {
		obj, err := k.load(s, c)
		if err != nil {
			return err
		}
		n, err := s.store.GetNode(c.Request.Context(), *k.node(obj))
		if err != nil {
			return fmt.Errorf("get node %s: %w", *k.node(obj), err)
		}
		if err := k.changeable(s, c, n, "deletion"); err != nil {
			return err
		}
		if err := k.delete(s.store, c.Request.Context(), *k.uuid(obj)); err != nil {
			if errors.Is(err, store.ErrNotFound) {
				return k.notFound(*k.uuid(obj))
			}
			return fmt.Errorf("delete %s: %w", k.what, err)
		}
		writeEmpty(c, http.StatusNoContent, "")
		return nil
	}
}

// listHandler answers /v1/volume/{path} (underNode false: ?node= filters)
// and /v1/nodes/{node}/volume/{path}.
func (k *volumeKind[T]) listHandler(s *server, underNode bool) handler {
	return func(c *gin.Context) error {
		detail := false
		if v := c.Query("detail"); v != "" {
			b, err := parseBool("detail", v)
			if err != nil {
				return err
			}
			detail = b
		}
		if detail && c.Query("fields") != "" {
			return badRequest("Can't fetch a subset of fields with 'detail' set")
		}
		p, err := s.parseListParams(c, k.res.fieldSince)
		if err != nil {
			return err
		}
		if !k.res.sortable(p.sortKey) {
			return listError(store.ErrInvalidSortKey, p)
		}
		f := store.VolumeFilter{Project: c.GetString(ctxListProject), Limit: p.limit, Marker: p.marker, SortKey: p.sortKey, SortDir: p.sortDir}
		q := url.Values{}
		ident := c.Query("node")
		if underNode {
			ident = c.Param("node")
		}
		if ident != "" {
			n, err := s.loadNode(c, ident)
			if err != nil {
				return err
			}
			f.NodeUUID = n.UUID
			if !underNode {
				q.Set("node", ident)
			}
		}
		if p.marker != "" && !isUUID(p.marker) {
			return badRequest("Expected UUID for marker: %s", p.marker)
		}
		items, err := k.list(s.store, c.Request.Context(), f)
		if errors.Is(err, store.ErrMarkerNotFound) {
			// Ironic loads the marker object first: its not-found message.
			return k.notFound(p.marker)
		}
		if err != nil {
			return listError(err, p)
		}
		fields := p.fields
		if !detail && fields == nil {
			fields = k.defaults
		}
		v := viewCtx{minor: ver(c), base: s.baseURL(c)}
		next := ""
		if len(items) == p.limit && len(items) > 0 {
			path := "volume/" + k.path
			if underNode {
				path = "nodes/" + c.Param("node") + "/volume/" + k.path
			}
			next = nextLink(v.base, path, p, p.fields, q, *k.uuid(items[len(items)-1]), detail)
		}
		writeList(c, k.res, k.path, items, v, fields, next)
		return nil
	}
}

// notUnderNode answers what Ironic refuses below a node.
func notUnderNode(*gin.Context) error { return operationNotPermitted() }
