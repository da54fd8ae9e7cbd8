package apiserver

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/gin-gonic/gin"

	"github.com/ironflow/ironflow/store"
	"github.com/ironflow/ironflow/workflows"
)

// maxBodyBytes bounds request bodies: a config drive is the largest thing a
// client sends (Ironic caps it at 64 MiB).
const maxBodyBytes = 64 << 20

// Provision states a node may be deleted in (outside maintenance), in the
// order Ironic's message prints them.
var deletableStates = []string{workflows.StateManageable, workflows.StateEnroll, workflows.StateAdoptFailed, workflows.StateAvailable}

// knownStates are the provision states a list may filter by.
var knownStates = []string{
	"enroll", "verifying", "manageable", "available", "active", "error",
	"deploying", "wait call-back", "deploy failed", "deleting", "cleaning",
	"clean wait", "clean failed", "inspecting", "inspect wait", "inspect failed",
	"adopting", "adopt failed", "rescuing", "rescue wait", "rescue failed", "rescue",
	"unrescuing", "unrescue failed", "deploy hold", "clean hold",
	"servicing", "service wait", "service failed", "service hold",
}

// validFaults are Ironic's node faults.
var validFaults = []string{"power failure", "clean failure", "rescue abort failure", "service failure"}

func readBody(c *gin.Context) ([]byte, error) {
	body, err := io.ReadAll(io.LimitReader(c.Request.Body, maxBodyBytes+1))
	if err != nil {
		return nil, badRequest("Could not read the request body: %s", err.Error())
	}
	if len(body) > maxBodyBytes {
		return nil, errorf(http.StatusRequestEntityTooLarge, "Request body is larger than %d bytes.", maxBodyBytes)
	}
	return body, nil
}

// decodeObject decodes a JSON object body.
func decodeObject(c *gin.Context) (map[string]any, error) {
	body, err := readBody(c)
	if err != nil {
		return nil, err
	}
	if len(bytes.TrimSpace(body)) == 0 {
		return map[string]any{}, nil
	}
	var v any
	if err := decodeJSON(body, &v); err != nil {
		return nil, badRequest("Invalid JSON in request body: %s", err.Error())
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, badRequest("Invalid request body: expected a JSON object, got %s", pyRepr(v))
	}
	return m, nil
}

// loadNode finds a node by UUID or name as Ironic's get_rpc_node does.
func (s *server) loadNode(c *gin.Context, ident string) (*store.Node, error) {
	if !isUUID(ident) {
		if ver(c) < v5NodeName {
			return nil, nodeNotFound(ident)
		}
		if !nodeNameRE.MatchString(ident) {
			return nil, badRequest("Expected a logical name or UUID but received %s.", ident)
		}
	}
	n, err := s.store.GetNode(c.Request.Context(), ident)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nodeNotFound(ident)
	}
	if err != nil {
		return nil, fmt.Errorf("get node %s: %w", ident, err)
	}
	return n, nil
}

func nodeLocked(uuid, holder string) *apiError {
	return errorf(http.StatusConflict, "Node %s is locked by host %s, please retry after the current operation is completed.", uuid, holder)
}

// lockHolder is the "host" a NodeLocked message names: the node's
// reservation when a worker recorded one, else the workflow that holds it.
func lockHolder(n *store.Node) string {
	if n.Reservation != nil && *n.Reservation != "" {
		return *n.Reservation
	}
	return workflows.WorkflowID(n.UUID)
}

// listParams are the pagination parameters shared by every list.
type listParams struct {
	limit   int
	marker  string
	sortKey string
	sortDir string
	fields  []string
	detail  bool
}

func (s *server) parseListParams(c *gin.Context, known map[string]bool, since func(string) int) (listParams, error) {
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
			if !known[f] {
				bad = append(bad, f)
				continue
			}
			if since != nil && since(f) > ver(c) {
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

var nodeKnownFields = func() map[string]bool {
	m := map[string]bool{}
	for _, f := range nodeFields {
		m[f.name] = true
	}
	return m
}()

func nodeFieldSince(name string) int {
	if f := nodeFieldByName[name]; f != nil {
		return f.since
	}
	return 1
}

func queryBool(c *gin.Context, name string) (*bool, error) {
	v, ok := c.GetQuery(name)
	if !ok || v == "" {
		return nil, nil
	}
	b, err := parseBool(name, v)
	if err != nil {
		return nil, err
	}
	return &b, nil
}

// nodeFilter reads a list's filters, with Ironic's version gates.
func nodeFilter(c *gin.Context) (store.NodeFilter, url.Values, error) {
	var f store.NodeFilter
	q := url.Values{}
	gate := func(name string, since int) (string, bool, error) {
		v, ok := c.GetQuery(name)
		if !ok || v == "" {
			return "", false, nil
		}
		if ver(c) < since {
			return "", false, notAcceptable()
		}
		q.Set(name, v)
		return v, true, nil
	}
	if v, ok, err := gate("provision_state", v9ProvisionFilter); err != nil {
		return f, q, err
	} else if ok {
		if !slices.Contains(knownStates, v) {
			return f, q, badRequest("Provision state \"%s\" is not valid", v)
		}
		f.ProvisionState = v
	}
	if v, ok, err := gate("driver", v16DriverFilter); err != nil {
		return f, q, err
	} else if ok {
		f.Driver = v
	}
	if v, ok, err := gate("resource_class", v21ResourceClass); err != nil {
		return f, q, err
	} else if ok {
		f.ResourceClass = v
	}
	if v, ok, err := gate("fault", v42Fault); err != nil {
		return f, q, err
	} else if ok {
		if !slices.Contains(validFaults, v) {
			return f, q, badRequest("Unrecognized fault \"%s\" is specified, allowed faults are %s", v, pyList(validFaults))
		}
		f.Fault = v
	}
	if v, ok := c.GetQuery("conductor_group"); ok {
		if ver(c) < v46ConductorGroup {
			return f, q, notAcceptable()
		}
		g := strings.ToLower(v)
		f.ConductorGroup = &g
		q.Set("conductor_group", v)
	}
	if v, ok, err := gate("owner", v50Owner); err != nil {
		return f, q, err
	} else if ok {
		f.Owner = v
	}
	if v, ok, err := gate("lessee", v65Lessee); err != nil {
		return f, q, err
	} else if ok {
		f.Lessee = v
	}
	if v, ok, err := gate("instance_uuid", 1); err != nil {
		return f, q, err
	} else if ok {
		f.InstanceUUID = v
	}
	for _, b := range []struct {
		name string
		dst  **bool
	}{{"maintenance", &f.Maintenance}, {"associated", &f.Associated}, {"retired", &f.Retired}} {
		v, err := queryBool(c, b.name)
		if err != nil {
			return f, q, err
		}
		if v != nil {
			*b.dst = v
			q.Set(b.name, strconv.FormatBool(*v))
		}
	}
	return f, q, nil
}

func (s *server) listNodes(c *gin.Context) error {
	return s.writeNodeList(c, "nodes", false)
}

func (s *server) listNodesDetail(c *gin.Context) error {
	return s.writeNodeList(c, "nodes/detail", true)
}

func (s *server) writeNodeList(c *gin.Context, path string, detailPath bool) error {
	p, err := s.parseListParams(c, nodeKnownFields, nodeFieldSince)
	if err != nil {
		return err
	}
	if c.Query("detail") != "" && !detailPath {
		if ver(c) < v43NodeDetail {
			return notAcceptable()
		}
	}
	f, q, err := nodeFilter(c)
	if err != nil {
		return err
	}
	detail := detailPath || p.detail
	fields := p.fields
	if !detail && fields == nil {
		fields = nodeDefaultFields
	}
	f.Limit, f.Marker, f.SortKey, f.SortDir = p.limit, p.marker, p.sortKey, p.sortDir
	if fields != nil {
		f.Fields = storeColumns(fields)
	}
	nodes, err := s.store.ListNodes(c.Request.Context(), f)
	if err != nil {
		return listError(err, p)
	}
	sel := newFieldSet(fields)
	v := viewCtx{minor: ver(c), base: s.baseURL(c)}
	var buf bytes.Buffer
	buf.Grow(len(nodes) * 512)
	buf.WriteString(`{"nodes":[`)
	for i, n := range nodes {
		if i > 0 {
			buf.WriteByte(',')
		}
		writeNode(&buf, n, v, sel)
	}
	buf.WriteByte(']')
	if len(nodes) == p.limit && len(nodes) > 0 {
		next := nextLink(v.base, path, p, fields, q, nodes[len(nodes)-1].UUID, !detailPath && p.detail)
		buf.WriteString(`,"next":`)
		writeJSONString(&buf, next)
	}
	buf.WriteByte('}')
	writeRawBytes(c, http.StatusOK, buf.Bytes())
	return nil
}

// derivedNodeFields are node keys the API makes up rather than reads.
var derivedNodeFields = map[string]bool{
	"links": true, "ports": true, "states": true, "portgroups": true, "volume": true,
	"conductor": true, "allocation_uuid": true,
}

// storeColumns are the columns a view of fields needs, so that a list
// without detail does not read (and decode) the JSON columns.
func storeColumns(fields []string) []string {
	cols := make([]string, 0, len(fields))
	for _, f := range fields {
		if !derivedNodeFields[f] {
			cols = append(cols, f)
		}
	}
	return cols
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

// writeOneNode answers a single node with the fields the request asked.
func (s *server) writeOneNode(c *gin.Context, status int, n *store.Node, fields []string) {
	sel := newFieldSet(fields)
	var buf bytes.Buffer
	writeNode(&buf, n, viewCtx{minor: ver(c), base: s.baseURL(c)}, sel)
	writeRawBytes(c, status, buf.Bytes())
}

func (s *server) showNode(c *gin.Context) error {
	p, err := s.parseListParams(c, nodeKnownFields, nodeFieldSince)
	if err != nil {
		return err
	}
	n, err := s.loadNode(c, c.Param("node"))
	if err != nil {
		return err
	}
	s.writeOneNode(c, http.StatusOK, n, p.fields)
	return nil
}

// schemaError prefixes a field error the way Ironic's schema validation
// does; *apiError values are Ironic's own messages and pass unchanged.
func schemaError(what string, err error) error {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae
	}
	return badRequest("Schema error for %s: %s", what, err.Error())
}

func additionalProps(keys []string) error {
	sort.Strings(keys)
	q := make([]string, len(keys))
	for i, k := range keys {
		q[i] = pyRepr(k)
	}
	verb := "was"
	if len(keys) > 1 {
		verb = "were"
	}
	return fmt.Errorf("Additional properties are not allowed (%s %s unexpected)", strings.Join(q, ", "), verb)
}

func (s *server) createNode(c *gin.Context) error {
	body, err := decodeObject(c)
	if err != nil {
		return err
	}
	var unknown []string
	for k := range body {
		if _, ok := nodeWritable[k]; !ok && !nodeCreateOnly[k] {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		return schemaError("node", additionalProps(unknown))
	}
	if _, ok := body["driver"]; !ok {
		return schemaError("node", errors.New("'driver' is a required property"))
	}
	n := &store.Node{
		DriverInfo: map[string]any{}, DriverInternalInfo: map[string]any{}, InstanceInfo: map[string]any{},
		Properties: map[string]any{}, Extra: map[string]any{}, CleanStep: map[string]any{},
		DeployStep: map[string]any{}, NetworkData: map[string]any{}, RAIDConfig: map[string]any{},
		TargetRAIDConfig: map[string]any{}, Traits: []string{},
	}
	explicit := map[string]bool{}
	keys := make([]string, 0, len(body))
	for k := range body {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := normalizeNumbers(body[k])
		switch k {
		case "uuid":
			if v == nil {
				continue
			}
			u, ok := v.(string)
			if !ok || !isUUID(u) {
				return badRequest("Expected UUID for uuid: %v", v)
			}
			n.UUID = strings.ToLower(u)
			continue
		case "console_enabled":
			if v == nil {
				continue
			}
			b, err := boolValue(v)
			if err != nil {
				return schemaError("node", err)
			}
			n.ConsoleEnabled = b
			continue
		}
		f := nodeWritable[k]
		if f.since > ver(c) && !(k == "name" && v == nil) {
			if !isEmptyValue(v) {
				return notAcceptable()
			}
			continue
		}
		if err := f.set(n, v); err != nil {
			return schemaError("node", err)
		}
		if strings.HasSuffix(k, "_interface") && v != nil {
			explicit[strings.TrimSuffix(k, "_interface")] = true
		}
	}
	n.ProvisionState = workflows.StateEnroll
	if ver(c) < v11EnrollState {
		n.ProvisionState = workflows.StateAvailable
	}
	if err := s.applyInterfaces(n, explicit); err != nil {
		return err
	}
	if err := s.store.CreateNode(c.Request.Context(), n); err != nil {
		return nodeWriteError(err, n)
	}
	c.Header("Location", s.baseURL(c)+"/v1/nodes/"+n.UUID)
	s.writeOneNode(c, http.StatusCreated, n, nil)
	return nil
}

func isEmptyValue(v any) bool {
	switch t := v.(type) {
	case nil:
		return true
	case string:
		return t == ""
	case map[string]any:
		return len(t) == 0
	}
	return false
}

func nodeWriteError(err error, n *store.Node) error {
	switch {
	case errors.Is(err, store.ErrDuplicateName):
		name := ""
		if n.Name != nil {
			name = *n.Name
		}
		return errorf(http.StatusConflict, "A node with name %s already exists.", name)
	case errors.Is(err, store.ErrDuplicateUUID):
		return errorf(http.StatusConflict, "A node with UUID %s already exists.", n.UUID)
	case errors.Is(err, store.ErrInstanceAssociated):
		inst := ""
		if n.InstanceUUID != nil {
			inst = *n.InstanceUUID
		}
		return errorf(http.StatusConflict, "Instance %s is already associated with a node, it cannot be associated with this other node %s", inst, n.UUID)
	case errors.Is(err, store.ErrNotFound):
		return nodeNotFound(n.UUID)
	case errors.Is(err, store.ErrInvalidInput):
		return badRequest("Invalid node: %s", strings.TrimPrefix(err.Error(), store.ErrInvalidInput.Error()+": "))
	}
	return fmt.Errorf("write node %s: %w", n.UUID, err)
}

func (s *server) patchNode(c *gin.Context) error {
	n, err := s.loadNode(c, c.Param("node"))
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
	if err := nodePatchRules.check(ops); err != nil {
		return err
	}
	explicit := map[string]bool{}
	for _, op := range ops {
		root := strings.SplitN(op.Path[1:], "/", 2)[0]
		if nodeWritable[root].since > ver(c) {
			return notAcceptable()
		}
		if strings.HasSuffix(root, "_interface") && op.Op != "remove" {
			explicit[strings.TrimSuffix(root, "_interface")] = true
		}
	}
	attempted := *n
	updated, err := s.store.UpdateNode(c.Request.Context(), n.UUID, func(cur *store.Node) error {
		defer func() { attempted = *cur }()
		doc := nodeToDoc(cur)
		if err := applyPatch(doc, ops); err != nil {
			return err
		}
		wasMaintenance := cur.Maintenance
		for k, f := range nodeWritable {
			v, ok := doc[k]
			if !ok {
				v = nil
			}
			if err := f.set(cur, normalizeNumbers(v)); err != nil {
				return schemaError("patch", err)
			}
		}
		if wasMaintenance && !cur.Maintenance {
			cur.MaintenanceReason, cur.Fault = nil, nil
		}
		return s.applyInterfaces(cur, explicit)
	})
	// A patch refused by the callback is an *apiError inside the store's
	// wrapping; nodeWriteError wraps it again and the adapter finds it.
	if err != nil {
		return nodeWriteError(err, &attempted)
	}
	s.writeOneNode(c, http.StatusOK, updated, nil)
	return nil
}

func (s *server) deleteNode(c *gin.Context) error {
	n, err := s.loadNode(c, c.Param("node"))
	if err != nil {
		return err
	}
	if n.Protected {
		return errorf(http.StatusForbidden, "Node %s is protected and cannot be undeployed, rebuilt or deleted", n.UUID)
	}
	if !n.Maintenance && !slices.Contains(deletableStates, n.ProvisionState) {
		q := make([]string, len(deletableStates))
		for i, st := range deletableStates {
			q[i] = "'" + st + "'"
		}
		return errorf(http.StatusConflict,
			"Can not delete node \"%s\" while it is in provision state \"%s\". Valid provision states to perform deletion are: \"(%s)\", or set the node into maintenance mode",
			n.UUID, n.ProvisionState, strings.Join(q, ", "))
	}
	running, err := s.eng.Running(c.Request.Context(), n.UUID)
	if err != nil {
		return fmt.Errorf("check workflow of node %s: %w", n.UUID, err)
	}
	if running {
		return nodeLocked(n.UUID, lockHolder(n))
	}
	if err := s.store.DeleteNode(c.Request.Context(), n.UUID); err != nil {
		if errors.Is(err, store.ErrNotFound) {
			return nodeNotFound(c.Param("node"))
		}
		return fmt.Errorf("delete node %s: %w", n.UUID, err)
	}
	writeEmpty(c, http.StatusNoContent, "")
	return nil
}

func (s *server) validate(c *gin.Context) error {
	n, err := s.loadNode(c, c.Param("node"))
	if err != nil {
		return err
	}
	writeJSON(c, http.StatusOK, validateNode(n))
	return nil
}

func (s *server) states(c *gin.Context) error {
	n, err := s.loadNode(c, c.Param("node"))
	if err != nil {
		return err
	}
	st := map[string]any{
		"console_enabled":        n.ConsoleEnabled,
		"last_error":             strOrNil(n.LastError),
		"power_state":            strOrNil(n.PowerState),
		"provision_state":        provisionStateAt(n.ProvisionState, ver(c)),
		"provision_updated_at":   timeOrNil(n.ProvisionUpdatedAt),
		"target_power_state":     strOrNil(n.TargetPowerState),
		"target_provision_state": nil,
	}
	if n.TargetProvisionState != nil {
		st["target_provision_state"] = provisionStateAt(*n.TargetProvisionState, ver(c))
	}
	if ver(c) >= v12RAIDConfig {
		st["raid_config"] = mapOrEmpty(n.RAIDConfig)
		st["target_raid_config"] = mapOrEmpty(n.TargetRAIDConfig)
	}
	if ver(c) >= v75BootMode {
		st["boot_mode"] = strOrNil(n.BootMode)
		st["secure_boot"] = boolOrNil(n.SecureBoot)
	}
	writeJSON(c, http.StatusOK, st)
	return nil
}

func (s *server) setMaintenance(c *gin.Context) error {
	n, err := s.loadNode(c, c.Param("node"))
	if err != nil {
		return err
	}
	body, err := decodeObject(c)
	if err != nil {
		return err
	}
	var reason *string
	if r, ok := body["reason"]; ok && r != nil {
		rs, ok := r.(string)
		if !ok {
			return badRequest("Invalid reason: %s is not a string", pyRepr(r))
		}
		reason = &rs
	} else if r := c.Query("reason"); r != "" {
		reason = &r
	}
	_, err = s.store.UpdateNode(c.Request.Context(), n.UUID, func(cur *store.Node) error {
		cur.Maintenance = true
		cur.MaintenanceReason = reason
		return nil
	})
	if err != nil {
		return nodeWriteError(err, n)
	}
	s.addHistory(c, n.UUID, store.SeverityInfo, "maintenance", "Node set into maintenance"+reasonSuffix(reason))
	writeEmpty(c, http.StatusAccepted, "")
	return nil
}

func reasonSuffix(r *string) string {
	if r == nil || *r == "" {
		return ""
	}
	return ": " + *r
}

func (s *server) unsetMaintenance(c *gin.Context) error {
	n, err := s.loadNode(c, c.Param("node"))
	if err != nil {
		return err
	}
	_, err = s.store.UpdateNode(c.Request.Context(), n.UUID, func(cur *store.Node) error {
		cur.Maintenance = false
		cur.MaintenanceReason = nil
		cur.Fault = nil
		return nil
	})
	if err != nil {
		return nodeWriteError(err, n)
	}
	s.addHistory(c, n.UUID, store.SeverityInfo, "maintenance", "Node taken out of maintenance")
	writeEmpty(c, http.StatusAccepted, "")
	return nil
}

// bootDeviceKey is where the API records the last boot device it set, in
// driver_internal_info, so that GET .../boot_device can answer without a BMC
// round trip (the API never talks to a BMC).
const bootDeviceKey = "last_boot_device"

func (s *server) getBootDevice(c *gin.Context) error {
	n, err := s.loadNode(c, c.Param("node"))
	if err != nil {
		return err
	}
	out := map[string]any{"boot_device": nil, "persistent": nil}
	if m, ok := n.DriverInternalInfo[bootDeviceKey].(map[string]any); ok {
		out["boot_device"] = m["boot_device"]
		out["persistent"] = m["persistent"]
	}
	writeJSON(c, http.StatusOK, out)
	return nil
}

func (s *server) supportedBootDevices(c *gin.Context) error {
	n, err := s.loadNode(c, c.Param("node"))
	if err != nil {
		return err
	}
	devices := []string{}
	if ht, ok := hardwareTypes[n.Driver]; ok {
		devices = ht.bootDevices
	}
	writeJSON(c, http.StatusOK, map[string]any{"supported_boot_devices": devices})
	return nil
}

func (s *server) setBootDevice(c *gin.Context) error {
	n, err := s.loadNode(c, c.Param("node"))
	if err != nil {
		return err
	}
	body, err := decodeObject(c)
	if err != nil {
		return err
	}
	dev, ok := body["boot_device"].(string)
	if !ok {
		return badRequest("Missing argument: \"boot_device\"")
	}
	persistent := false
	if p, ok := body["persistent"]; ok && p != nil {
		if persistent, err = boolValue(p); err != nil {
			return badRequest("Invalid value for persistent: %s", err.Error())
		}
	}
	ht, ok := hardwareTypes[n.Driver]
	if !ok || !slices.Contains(ht.bootDevices, dev) {
		return badRequest("Invalid boot device %s specified.", dev)
	}
	err = s.eng.SetBootDevice(c.Request.Context(), workflows.BootDeviceRequest{
		NodeUUID: n.UUID, BootDevice: dev, Persistent: persistent, ConductorGroup: n.ConductorGroup,
	})
	if errors.Is(err, ErrNodeLocked) {
		return nodeLocked(n.UUID, lockHolder(n))
	}
	if err != nil {
		return fmt.Errorf("set boot device %s on node %s: %w", dev, n.UUID, err)
	}
	if err := s.store.MergeDriverInternalInfo(c.Request.Context(), n.UUID, map[string]any{
		bootDeviceKey: map[string]any{"boot_device": dev, "persistent": persistent},
	}); err != nil {
		s.log.Warn("record boot device", "node", n.UUID, "err", err)
	}
	writeEmpty(c, http.StatusNoContent, "")
	return nil
}

// historyFieldsDefault are a history list's keys without detail.
var historyFieldsDefault = []string{"uuid", "created_at", "severity", "event"}

func (s *server) historyBody(c *gin.Context, nodeUUID string, e store.HistoryEvent, detail bool) map[string]any {
	m := map[string]any{
		"uuid":       e.UUID,
		"created_at": isoTime(e.CreatedAt),
		"severity":   e.Severity,
		"event":      e.Event,
		"links":      selfLinks(s.baseURL(c), "nodes/"+nodeUUID+"/history/"+e.UUID),
	}
	if detail {
		m["event_type"] = e.EventType
		m["conductor"] = e.Conductor
		m["user"] = nilIfEmpty(e.User)
	}
	return m
}

func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

func (s *server) listHistory(c *gin.Context) error {
	if ver(c) < v78History {
		return resourceNotFound()
	}
	n, err := s.loadNode(c, c.Param("node"))
	if err != nil {
		return err
	}
	// `baremetal node history list --long` asks for /history/detail.
	detail := c.Param("event") == "detail"
	if v := c.Query("detail"); v != "" {
		if detail, err = parseBool("detail", v); err != nil {
			return err
		}
	}
	events, err := s.store.ListHistory(c.Request.Context(), n.UUID)
	if err != nil {
		return fmt.Errorf("list history of node %s: %w", n.UUID, err)
	}
	out := make([]any, 0, len(events))
	for _, e := range events {
		out = append(out, s.historyBody(c, n.UUID, e, detail))
	}
	writeJSON(c, http.StatusOK, map[string]any{"history": out})
	return nil
}

func (s *server) showHistory(c *gin.Context) error {
	if ver(c) < v78History {
		return resourceNotFound()
	}
	n, err := s.loadNode(c, c.Param("node"))
	if err != nil {
		return err
	}
	ev := c.Param("event")
	if ev == "detail" {
		return s.listHistory(c)
	}
	if !isUUID(ev) {
		return badRequest("Expected a UUID but received %s.", ev)
	}
	e, err := s.store.GetHistoryEvent(c.Request.Context(), n.UUID, ev)
	if errors.Is(err, store.ErrNotFound) {
		return errorf(http.StatusNotFound, "Node history record %s could not be found.", ev)
	}
	if err != nil {
		return fmt.Errorf("get history event %s of node %s: %w", ev, n.UUID, err)
	}
	writeJSON(c, http.StatusOK, s.historyBody(c, n.UUID, *e, true))
	return nil
}

// addHistory records an API-side event; a failure to record it does not
// fail the request it describes.
func (s *server) addHistory(c *gin.Context, nodeUUID, severity, eventType, event string) {
	err := s.store.AddHistory(c.Request.Context(), nodeUUID, store.HistoryEvent{
		Severity: severity, EventType: eventType, Event: event,
		Conductor: s.cfg.ConductorName, User: c.GetString(ctxUser),
	})
	if err != nil {
		s.log.Warn("record node history", "node", nodeUUID, "event_type", eventType, "err", err)
	}
}

func (s *server) inventory(c *gin.Context) error {
	if ver(c) < v81Inventory {
		return resourceNotFound()
	}
	n, err := s.loadNode(c, c.Param("node"))
	if err != nil {
		return err
	}
	inv, err := s.store.GetInventory(c.Request.Context(), n.UUID)
	if errors.Is(err, store.ErrNotFound) {
		return errorf(http.StatusNotFound, "Node inventory for node %s could not be found.", n.UUID)
	}
	if err != nil {
		return fmt.Errorf("get inventory of node %s: %w", n.UUID, err)
	}
	writeJSON(c, http.StatusOK, map[string]any{"inventory": mapOrEmpty(inv.Inventory), "plugin_data": mapOrEmpty(inv.PluginData)})
	return nil
}
