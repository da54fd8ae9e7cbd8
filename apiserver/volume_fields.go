package apiserver

import (
	"math"
	"strings"
	"time"

	"github.com/ironflow/ironflow/store"
)

// Volume connectors and targets (API 1.32): the field tables of
// docs/contributing.md, "Add an API resource". Ironic's schemas
// (volume_connector.py, volume_target.py) accept any string as a
// connector's type and a target's volume_type: the client offers iqn, ip,
// mac, wwnn, wwpn, port and portgroup, and only the cinder storage
// interface, which ironflow does not enable, reads them.

type (
	connector      = store.VolumeConnector
	target         = store.VolumeTarget
	volumeQuery    = store.VolumeFilter
	connectorField = field[connector, volumeQuery]
	targetField    = field[target, volumeQuery]
)

var connectorFields = []connectorField{
	{name: "created_at", since: v32Volume, value: timestamp(func(c *connector) time.Time { return c.CreatedAt }), sortable: true},
	{name: "updated_at", since: v32Volume, value: optTime(func(c *connector) *time.Time { return c.UpdatedAt }), sortable: true},
	{name: "uuid", since: v32Volume, value: uuidFor(func(c *connector) *string { return &c.UUID }), access: createOnly, sortable: true},
	{name: "connector_id", since: v32Volume, value: text(func(c *connector) *string { return &c.ConnectorID }), access: writable, required: true, sortable: true},
	{name: "extra", since: v32Volume, value: dict(func(c *connector) *map[string]any { return &c.Extra }), access: writable},
	{name: "type", since: v32Volume, value: text(func(c *connector) *string { return &c.Type }), access: writable, required: true, sortable: true},
	{name: "links", since: v32Volume, value: links(func(c *connector) string { return "volume/connectors/" + c.UUID })},
	{name: "node_uuid", since: v32Volume, value: text(func(c *connector) *string { return &c.NodeUUID }).setBy(setVolumeNode(func(c *connector) *string { return &c.NodeUUID })),
		access: writable, required: true},
}

var targetFields = []targetField{
	{name: "created_at", since: v32Volume, value: timestamp(func(t *target) time.Time { return t.CreatedAt }), sortable: true},
	{name: "updated_at", since: v32Volume, value: optTime(func(t *target) *time.Time { return t.UpdatedAt }), sortable: true},
	{name: "uuid", since: v32Volume, value: uuidFor(func(t *target) *string { return &t.UUID }), access: createOnly, sortable: true},
	{name: "boot_index", since: v32Volume, value: integer(func(t *target) *int64 { return &t.BootIndex }), access: writable, required: true, sortable: true},
	{name: "extra", since: v32Volume, value: dict(func(t *target) *map[string]any { return &t.Extra }), access: writable},
	{name: "properties", since: v32Volume, value: dict(func(t *target) *map[string]any { return &t.Properties }), access: writable},
	{name: "volume_id", since: v32Volume, value: text(func(t *target) *string { return &t.VolumeID }), access: writable, required: true, sortable: true},
	{name: "volume_type", since: v32Volume, value: text(func(t *target) *string { return &t.VolumeType }), access: writable, required: true, sortable: true},
	{name: "links", since: v32Volume, value: links(func(t *target) string { return "volume/targets/" + t.UUID })},
	{name: "node_uuid", since: v32Volume, value: text(func(t *target) *string { return &t.NodeUUID }).setBy(setVolumeNode(func(t *target) *string { return &t.NodeUUID })),
		access: writable, required: true},
}

// The resources; the body parameter names are what Ironic's schema errors
// name ("Schema error for connector: ..."). Ironic refuses a PATCH of any
// other field with "Cannot patch ... Only the following can be updated"
// (patch_validate_allowed_fields), so no field is "internal" here.
var (
	connectorResource = allowedOnlyPatch(newResource("connector", connectorFields, nil))
	targetResource    = allowedOnlyPatch(newResource("target", targetFields, nil))
)

// The fields of a list without detail, as Ironic's _DEFAULT_RETURN_FIELDS.
var (
	connectorDefaultFields = []string{"uuid", "node_uuid", "type", "connector_id"}
	targetDefaultFields    = []string{"uuid", "node_uuid", "volume_type", "boot_index", "volume_id"}
)

// allowedOnlyPatch makes r refuse every non-writable field as Ironic's
// patch_validate_allowed_fields does.
func allowedOnlyPatch[T, F any](r *resource[T, F]) *resource[T, F] {
	r.patch.internal = map[string]bool{}
	return r
}

// setVolumeNode: Ironic's args.uuid on node_uuid. The node itself is looked
// up by the handler (a 400 when it does not exist).
func setVolumeNode[T any](p func(*T) *string) func(*T, any) error {
	return func(r *T, v any) error {
		s, ok := v.(string)
		if !ok {
			return typeErr(v, "string")
		}
		if !isUUID(s) {
			return badRequest("Expected UUID for node_uuid: %s", s)
		}
		*p(r) = strings.ToLower(s)
		return nil
	}
}

// integer is a JSON integer (jsonschema "integer": a number without a
// fraction).
func integer[T any](p func(*T) *int64) fieldValue[T] {
	return fieldValue[T]{
		view: func(r *T, _ viewCtx) any { return *p(r) },
		get:  func(r *T) any { return *p(r) },
		set: func(r *T, v any) error {
			switch t := v.(type) {
			case int64:
				*p(r) = t
				return nil
			case float64:
				if t == math.Trunc(t) && math.Abs(t) < 1<<53 {
					*p(r) = int64(t)
					return nil
				}
			}
			return typeErr(v, "integer")
		},
	}
}
