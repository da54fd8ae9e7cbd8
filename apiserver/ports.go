package apiserver

import (
	"bytes"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/ironflow/ironflow/store"
)

// macRE is what oslo's is_valid_mac accepts (after lowercasing).
var macRE = regexp.MustCompile(`^([0-9a-f]{2}[:-]){5}[0-9a-f]{2}$`)

// normalizeMAC validates a MAC address and returns it lowercase with ':'
// separators, as stored.
func normalizeMAC(s string) (string, bool) {
	l := strings.ToLower(strings.TrimSpace(s))
	if !macRE.MatchString(l) {
		return "", false
	}
	return strings.ReplaceAll(l, "-", ":"), true
}

func invalidMAC(v any) *apiError {
	if s, ok := v.(string); ok {
		return badRequest("Expected a MAC address but received %s.", s)
	}
	return badRequest("Expected a MAC address but received %s.", pyRepr(v))
}

// portField is one key of Ironic's port object.
type portField struct {
	name  string
	since int
	get   func(p *store.Port, v viewCtx) any
}

var portFields = []portField{
	{"uuid", 1, func(p *store.Port, _ viewCtx) any { return p.UUID }},
	{"created_at", 1, func(p *store.Port, _ viewCtx) any { return isoTime(p.CreatedAt) }},
	{"updated_at", 1, func(p *store.Port, _ viewCtx) any { return timeOrNil(p.UpdatedAt) }},
	{"address", 1, func(p *store.Port, _ viewCtx) any { return p.Address }},
	{"extra", 1, func(p *store.Port, _ viewCtx) any { return mapOrEmpty(p.Extra) }},
	{"internal_info", v18PortInternalInfo, func(p *store.Port, _ viewCtx) any { return mapOrEmpty(p.InternalInfo) }},
	{"is_smartnic", v53SmartNIC, func(p *store.Port, _ viewCtx) any { return p.IsSmartNIC }},
	{"local_link_connection", v19PortAdvanced, func(p *store.Port, _ viewCtx) any { return mapOrEmpty(p.LocalLinkConnection) }},
	{"physical_network", v34PhysicalNetwork, func(p *store.Port, _ viewCtx) any { return strOrNil(p.PhysicalNetwork) }},
	{"pxe_enabled", v19PortAdvanced, func(p *store.Port, _ viewCtx) any { return p.PXEEnabled }},
	{"node_uuid", 1, func(p *store.Port, _ viewCtx) any { return p.NodeUUID }},
	{"links", 1, func(p *store.Port, v viewCtx) any { return selfLinks(v.base, "ports/"+p.UUID) }},
	{"portgroup_uuid", v24PortgroupSub, func(p *store.Port, _ viewCtx) any { return strOrNil(p.PortgroupUUID) }},
}

var portKnownFields = func() map[string]bool {
	m := map[string]bool{}
	for _, f := range portFields {
		m[f.name] = true
	}
	return m
}()

func portFieldSince(name string) int {
	for _, f := range portFields {
		if f.name == name {
			return f.since
		}
	}
	return 1
}

var portDefaultFields = []string{"uuid", "address"}

func writePort(buf *bytes.Buffer, p *store.Port, v viewCtx, fields fieldSet) {
	buf.WriteByte('{')
	first := true
	for _, f := range portFields {
		if f.since > v.minor || (fields != nil && !fields[f.name] && f.name != "links") {
			continue
		}
		if !first {
			buf.WriteByte(',')
		}
		first = false
		writeJSONString(buf, f.name)
		buf.WriteByte(':')
		writeValue(buf, f.get(p, v))
	}
	buf.WriteByte('}')
}

// portWritable are the fields a port create may set and a patch may change.
var portWritable = map[string]struct {
	since int
	set   func(p *store.Port, v any) error
	get   func(p *store.Port) any
}{
	"address": {1, func(p *store.Port, v any) error {
		s, ok := v.(string)
		mac, valid := normalizeMAC(s)
		if !ok || !valid {
			return invalidMAC(v)
		}
		p.Address = mac
		return nil
	}, func(p *store.Port) any { return p.Address }},
	"node_uuid": {1, func(p *store.Port, v any) error {
		s, ok := v.(string)
		if !ok || !isUUID(s) {
			return badRequest("Expected UUID for node_uuid: %v", v)
		}
		p.NodeUUID = strings.ToLower(s)
		return nil
	}, func(p *store.Port) any { return p.NodeUUID }},
	"extra": {1, func(p *store.Port, v any) error {
		m, ok := v.(map[string]any)
		if v != nil && !ok {
			return typeErr(v, "object", "null")
		}
		p.Extra = m
		return nil
	}, func(p *store.Port) any { return deepCopy(mapOrEmpty(p.Extra)) }},
	"local_link_connection": {v19PortAdvanced, func(p *store.Port, v any) error {
		m, ok := v.(map[string]any)
		if v != nil && !ok {
			return typeErr(v, "object", "null")
		}
		p.LocalLinkConnection = m
		return nil
	}, func(p *store.Port) any { return deepCopy(mapOrEmpty(p.LocalLinkConnection)) }},
	"pxe_enabled": {v19PortAdvanced, func(p *store.Port, v any) error {
		if v == nil {
			p.PXEEnabled = true
			return nil
		}
		b, err := boolValue(v)
		p.PXEEnabled = b
		return err
	}, func(p *store.Port) any { return p.PXEEnabled }},
	"physical_network": {v34PhysicalNetwork, func(p *store.Port, v any) error {
		switch t := v.(type) {
		case nil:
			p.PhysicalNetwork = nil
		case string:
			s := t
			p.PhysicalNetwork = &s
		default:
			return typeErr(v, "string", "null")
		}
		return nil
	}, func(p *store.Port) any { return strOrNil(p.PhysicalNetwork) }},
	"is_smartnic": {v53SmartNIC, func(p *store.Port, v any) error {
		if v == nil {
			p.IsSmartNIC = false
			return nil
		}
		b, err := boolValue(v)
		p.IsSmartNIC = b
		return err
	}, func(p *store.Port) any { return p.IsSmartNIC }},
	"portgroup_uuid": {v24PortgroupSub, func(p *store.Port, v any) error {
		if v != nil {
			// ironflow has no port groups.
			return errorf(http.StatusNotFound, "Portgroup %v could not be found.", v)
		}
		p.PortgroupUUID = nil
		return nil
	}, func(p *store.Port) any { return strOrNil(p.PortgroupUUID) }},
}

var portPatchRules = patchRules{
	resource: "port",
	allowed: func() map[string]bool {
		m := map[string]bool{}
		for k := range portWritable {
			m[k] = true
		}
		return m
	}(),
	internal:  map[string]bool{"uuid": true, "id": true, "created_at": true, "updated_at": true, "links": true, "internal_info": true},
	mandatory: map[string]bool{"address": true, "node_uuid": true},
}

func (s *server) loadPort(c *gin.Context) (*store.Port, error) {
	id := c.Param("port")
	if !isUUID(id) {
		return nil, badRequest("Expected a UUID but received %s.", id)
	}
	p, err := s.store.GetPort(c.Request.Context(), id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, errorf(http.StatusNotFound, "Port %s could not be found.", id)
	}
	if err != nil {
		return nil, fmt.Errorf("get port %s: %w", id, err)
	}
	return p, nil
}

func (s *server) listPorts(c *gin.Context) error { return s.writePortList(c, "ports", false, "") }
func (s *server) listPortsDetail(c *gin.Context) error {
	return s.writePortList(c, "ports/detail", true, "")
}

func (s *server) listNodePorts(c *gin.Context) error {
	n, err := s.loadNode(c, c.Param("node"))
	if err != nil {
		return err
	}
	return s.writePortList(c, "nodes/"+n.UUID+"/ports", false, n.UUID)
}

func (s *server) listNodePortsDetail(c *gin.Context) error {
	n, err := s.loadNode(c, c.Param("node"))
	if err != nil {
		return err
	}
	return s.writePortList(c, "nodes/"+n.UUID+"/ports/detail", true, n.UUID)
}

func (s *server) writePortList(c *gin.Context, path string, detailPath bool, nodeUUID string) error {
	p, err := s.parseListParams(c, portKnownFields, portFieldSince)
	if err != nil {
		return err
	}
	f := store.PortFilter{NodeUUID: nodeUUID, Limit: p.limit, Marker: p.marker, SortKey: p.sortKey, SortDir: p.sortDir}
	q := url.Values{}
	if nodeUUID == "" {
		ident := c.Query("node")
		if ident == "" {
			ident = c.Query("node_uuid")
		}
		if ident != "" {
			n, err := s.loadNode(c, ident)
			if err != nil {
				return err
			}
			f.NodeUUID = n.UUID
			q.Set("node", n.UUID)
		}
	}
	if a := c.Query("address"); a != "" {
		mac, ok := normalizeMAC(a)
		if !ok {
			return invalidMAC(a)
		}
		f.Address = mac
		q.Set("address", mac)
	}
	ports, err := s.store.ListPorts(c.Request.Context(), f)
	if err != nil {
		return listError(err, p)
	}
	detail := detailPath || p.detail
	fields := p.fields
	if !detail && fields == nil {
		fields = portDefaultFields
	}
	sel := newFieldSet(fields)
	v := viewCtx{minor: ver(c), base: s.baseURL(c)}
	var buf bytes.Buffer
	buf.WriteString(`{"ports":[`)
	for i, port := range ports {
		if i > 0 {
			buf.WriteByte(',')
		}
		writePort(&buf, port, v, sel)
	}
	buf.WriteByte(']')
	if len(ports) == p.limit && len(ports) > 0 {
		buf.WriteString(`,"next":`)
		writeJSONString(&buf, nextLink(v.base, path, p, p.fields, q, ports[len(ports)-1].UUID, !detailPath && p.detail))
	}
	buf.WriteByte('}')
	writeRawBytes(c, http.StatusOK, buf.Bytes())
	return nil
}

func (s *server) writeOnePort(c *gin.Context, status int, p *store.Port, fields []string) {
	sel := newFieldSet(fields)
	var buf bytes.Buffer
	writePort(&buf, p, viewCtx{minor: ver(c), base: s.baseURL(c)}, sel)
	writeRawBytes(c, status, buf.Bytes())
}

func (s *server) showPort(c *gin.Context) error {
	lp, err := s.parseListParams(c, portKnownFields, portFieldSince)
	if err != nil {
		return err
	}
	p, err := s.loadPort(c)
	if err != nil {
		return err
	}
	s.writeOnePort(c, http.StatusOK, p, lp.fields)
	return nil
}

func portWriteError(err error, p *store.Port) error {
	switch {
	case errors.Is(err, store.ErrDuplicateMAC):
		return errorf(http.StatusConflict, "A port with MAC address %s already exists.", p.Address)
	case errors.Is(err, store.ErrDuplicateUUID):
		return errorf(http.StatusConflict, "A port with UUID %s already exists.", p.UUID)
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
	var unknown []string
	for k := range body {
		if _, ok := portWritable[k]; !ok && k != "uuid" {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		return schemaError("port", additionalProps(unknown))
	}
	for _, req := range []string{"address", "node_uuid"} {
		if _, ok := body[req]; !ok {
			return schemaError("port", fmt.Errorf("'%s' is a required property", req))
		}
	}
	p := &store.Port{PXEEnabled: true, Extra: map[string]any{}, LocalLinkConnection: map[string]any{}, InternalInfo: map[string]any{}}
	keys := make([]string, 0, len(body))
	for k := range body {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := normalizeNumbers(body[k])
		if k == "uuid" {
			if v == nil {
				continue
			}
			u, ok := v.(string)
			if !ok || !isUUID(u) {
				return badRequest("Expected UUID for uuid: %v", v)
			}
			p.UUID = strings.ToLower(u)
			continue
		}
		f := portWritable[k]
		if f.since > ver(c) {
			if !isEmptyValue(v) {
				return notAcceptable()
			}
			continue
		}
		if err := f.set(p, v); err != nil {
			return schemaError("port", err)
		}
	}
	if err := s.store.CreatePort(c.Request.Context(), p); err != nil {
		return portWriteError(err, p)
	}
	c.Header("Location", s.baseURL(c)+"/v1/ports/"+p.UUID)
	s.writeOnePort(c, http.StatusCreated, p, nil)
	return nil
}

func (s *server) patchPort(c *gin.Context) error {
	p, err := s.loadPort(c)
	if err != nil {
		return err
	}
	body, err := readBody(c)
	if err != nil {
		return err
	}
	ops, err := decodePatch(body)
	if err != nil {
		return err
	}
	if err := portPatchRules.check(ops); err != nil {
		return err
	}
	for _, op := range ops {
		root := strings.SplitN(op.Path[1:], "/", 2)[0]
		if portWritable[root].since > ver(c) {
			return notAcceptable()
		}
	}
	var attempted store.Port
	updated, err := s.store.UpdatePort(c.Request.Context(), p.UUID, func(cur *store.Port) error {
		doc := map[string]any{}
		for k, f := range portWritable {
			doc[k] = f.get(cur)
		}
		if err := applyPatch(doc, ops); err != nil {
			return err
		}
		for k, f := range portWritable {
			if err := f.set(cur, normalizeNumbers(doc[k])); err != nil {
				return schemaError("patch", err)
			}
		}
		attempted = *cur
		return nil
	})
	// A patch refused by the callback is an *apiError inside the store's
	// wrapping; portWriteError wraps it again and the adapter finds it.
	if err != nil {
		return portWriteError(err, &attempted)
	}
	s.writeOnePort(c, http.StatusOK, updated, nil)
	return nil
}

func (s *server) deletePort(c *gin.Context) error {
	p, err := s.loadPort(c)
	if err != nil {
		return err
	}
	if err := s.store.DeletePort(c.Request.Context(), p.UUID); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return errorf(http.StatusNotFound, "Port %s could not be found.", p.UUID)
		}
		return fmt.Errorf("delete port %s: %w", p.UUID, err)
	}
	writeEmpty(c, http.StatusNoContent, "")
	return nil
}
