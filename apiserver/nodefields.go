package apiserver

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strings"

	"github.com/google/uuid"

	"github.com/ironflow/ironflow/store"
)

// A writable node field: the version that introduced it, how to set it from
// a decoded JSON value (nil: the field is removed or null) and how to read it
// into a patch document. Set errors are jsonschema-style messages; callers
// prefix them with "Schema error for node: " or "... for patch: ".
type writableField struct {
	since int
	set   func(n *store.Node, v any) error
	get   func(n *store.Node) any
}

func typeErr(v any, types ...string) error {
	q := make([]string, len(types))
	for i, t := range types {
		q[i] = "'" + t + "'"
	}
	return fmt.Errorf("%s is not of type %s", pyRepr(v), strings.Join(q, ", "))
}

// nullableString and its siblings build the writableField of one kind of
// node field.
func nullableString(field func(*store.Node) **string, maxLen int) writableField {
	return writableField{
		set: func(n *store.Node, v any) error {
			p := field(n)
			switch t := v.(type) {
			case nil:
				*p = nil
			case string:
				if maxLen > 0 && len(t) > maxLen {
					return fmt.Errorf("%s is too long", pyRepr(t))
				}
				s := t
				*p = &s
			default:
				return typeErr(v, "string", "null")
			}
			return nil
		},
		get: func(n *store.Node) any { return strOrNil(*field(n)) },
	}
}

func ifaceString(field func(*store.Node) *string) writableField {
	return writableField{
		set: func(n *store.Node, v any) error {
			switch t := v.(type) {
			case nil:
				*field(n) = "" // reset to the driver's default
			case string:
				*field(n) = t
			default:
				return typeErr(v, "string", "null")
			}
			return nil
		},
		get: func(n *store.Node) any { return *field(n) },
	}
}

func dictField(field func(*store.Node) *map[string]any) writableField {
	return writableField{
		set: func(n *store.Node, v any) error {
			switch t := v.(type) {
			case nil:
				*field(n) = map[string]any{}
			case map[string]any:
				*field(n) = t
			default:
				return typeErr(v, "object", "null")
			}
			return nil
		},
		get: func(n *store.Node) any { return deepCopy(mapOrEmpty(*field(n))) },
	}
}

// boolValue accepts what Ironic's args.boolean accepts: JSON booleans and
// their string spellings.
func boolValue(v any) (bool, error) {
	switch t := v.(type) {
	case bool:
		return t, nil
	case string:
		b, err := parseBool("value", t)
		if err != nil {
			return false, fmt.Errorf("Invalid boolean value: %s", pyRepr(t))
		}
		return b, nil
	}
	return false, typeErr(v, "string", "boolean", "null")
}

func boolField(field func(*store.Node) *bool) writableField {
	return writableField{
		set: func(n *store.Node, v any) error {
			if v == nil {
				*field(n) = false
				return nil
			}
			b, err := boolValue(v)
			*field(n) = b
			return err
		},
		get: func(n *store.Node) any { return *field(n) },
	}
}

// deepCopy copies a decoded JSON value so that patching never aliases the
// node read from the store.
func deepCopy(v any) any {
	switch t := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(t))
		for k, e := range t {
			out[k] = deepCopy(e)
		}
		return out
	case []any:
		out := make([]any, len(t))
		for i, e := range t {
			out[i] = deepCopy(e)
		}
		return out
	}
	return v
}

// nodeWritable are the fields a node create may set and a patch may change
// (Ironic's node schema and PATCH_ALLOWED_FIELDS).
var nodeWritable = map[string]writableField{
	"automated_clean": {since: v47AutomatedClean,
		set: func(n *store.Node, v any) error {
			if v == nil {
				n.AutomatedClean = nil
				return nil
			}
			b, err := boolValue(v)
			n.AutomatedClean = &b
			return err
		},
		get: func(n *store.Node) any { return boolOrNil(n.AutomatedClean) }},
	"bios_interface":       withSince(v40BIOSIface, ifaceString(func(n *store.Node) *string { return &n.BIOSInterface })),
	"boot_interface":       withSince(v31DynamicIfaces, ifaceString(func(n *store.Node) *string { return &n.BootInterface })),
	"console_interface":    withSince(v31DynamicIfaces, ifaceString(func(n *store.Node) *string { return &n.ConsoleInterface })),
	"deploy_interface":     withSince(v31DynamicIfaces, ifaceString(func(n *store.Node) *string { return &n.DeployInterface })),
	"inspect_interface":    withSince(v31DynamicIfaces, ifaceString(func(n *store.Node) *string { return &n.InspectInterface })),
	"management_interface": withSince(v31DynamicIfaces, ifaceString(func(n *store.Node) *string { return &n.ManagementInterface })),
	"network_interface":    withSince(v20NetworkIface, ifaceString(func(n *store.Node) *string { return &n.NetworkInterface })),
	"power_interface":      withSince(v31DynamicIfaces, ifaceString(func(n *store.Node) *string { return &n.PowerInterface })),
	"raid_interface":       withSince(v31DynamicIfaces, ifaceString(func(n *store.Node) *string { return &n.RAIDInterface })),
	"rescue_interface":     withSince(v38RescueIface, ifaceString(func(n *store.Node) *string { return &n.RescueInterface })),
	"storage_interface":    withSince(v33StorageIface, ifaceString(func(n *store.Node) *string { return &n.StorageInterface })),
	"vendor_interface":     withSince(v31DynamicIfaces, ifaceString(func(n *store.Node) *string { return &n.VendorInterface })),
	"chassis_uuid":         withSince(1, nullableString(func(n *store.Node) **string { return &n.ChassisUUID }, 0)),
	"conductor_group": {since: v46ConductorGroup,
		set: func(n *store.Node, v any) error {
			switch t := v.(type) {
			case nil:
				n.ConductorGroup = ""
			case string:
				if !conductorGroupRE.MatchString(t) {
					return badRequest("Invalid conductor_group %s: it may only contain letters, digits, '_', '-' and '.', up to 255 characters", pyRepr(t))
				}
				n.ConductorGroup = strings.ToLower(t)
			default:
				return typeErr(v, "string", "null")
			}
			return nil
		},
		get: func(n *store.Node) any { return n.ConductorGroup }},
	"description": withSince(v51Description, nullableString(func(n *store.Node) **string { return &n.Description }, 4096)),
	"driver": {since: 1,
		set: func(n *store.Node, v any) error {
			s, ok := v.(string)
			if !ok {
				return typeErr(v, "string")
			}
			n.Driver = s
			return nil
		},
		get: func(n *store.Node) any { return n.Driver }},
	"driver_info":   withSince(1, dictField(func(n *store.Node) *map[string]any { return &n.DriverInfo })),
	"extra":         withSince(1, dictField(func(n *store.Node) *map[string]any { return &n.Extra })),
	"instance_info": withSince(1, dictField(func(n *store.Node) *map[string]any { return &n.InstanceInfo })),
	"properties":    withSince(1, dictField(func(n *store.Node) *map[string]any { return &n.Properties })),
	"network_data":  withSince(v66NetworkData, dictField(func(n *store.Node) *map[string]any { return &n.NetworkData })),
	"instance_uuid": {since: 1,
		set: func(n *store.Node, v any) error {
			switch t := v.(type) {
			case nil:
				n.InstanceUUID = nil
			case string:
				if _, err := uuid.Parse(t); err != nil || len(t) < 32 {
					return badRequest("Expected UUID for instance_uuid: %s", t)
				}
				s := strings.ToLower(t)
				n.InstanceUUID = &s
			default:
				return typeErr(v, "string", "null")
			}
			return nil
		},
		get: func(n *store.Node) any { return strOrNil(n.InstanceUUID) }},
	"lessee":      withSince(v65Lessee, nullableString(func(n *store.Node) **string { return &n.Lessee }, 255)),
	"owner":       withSince(v50Owner, nullableString(func(n *store.Node) **string { return &n.Owner }, 255)),
	"maintenance": withSince(1, boolField(func(n *store.Node) *bool { return &n.Maintenance })),
	"name": {since: v5NodeName,
		set: func(n *store.Node, v any) error {
			switch t := v.(type) {
			case nil:
				n.Name = nil
			case string:
				if !validNodeName(t) {
					return badRequest("Cannot create node with invalid name '%s'", t)
				}
				s := t
				n.Name = &s
			default:
				return typeErr(v, "string", "null")
			}
			return nil
		},
		get: func(n *store.Node) any { return strOrNil(n.Name) }},
	"protected":        withSince(v48Protected, boolField(func(n *store.Node) *bool { return &n.Protected })),
	"protected_reason": withSince(v48Protected, nullableString(func(n *store.Node) **string { return &n.ProtectedReason }, 255)),
	"resource_class":   withSince(v21ResourceClass, nullableString(func(n *store.Node) **string { return &n.ResourceClass }, 80)),
	"retired":          withSince(v61Retired, boolField(func(n *store.Node) *bool { return &n.Retired })),
	"retired_reason":   withSince(v61Retired, nullableString(func(n *store.Node) **string { return &n.RetiredReason }, 255)),
	"shard":            withSince(v82Shard, nullableString(func(n *store.Node) **string { return &n.Shard }, 255)),
}

// nodeCreateOnly are accepted on create but not on patch.
var nodeCreateOnly = map[string]bool{"uuid": true, "console_enabled": true}

func withSince(since int, f writableField) writableField {
	f.since = since
	return f
}

var conductorGroupRE = regexp.MustCompile(`^[a-zA-Z0-9_\-\.]{0,255}$`)

// nodeNameRE is RFC 3986's unreserved characters, Ironic's logical names.
var nodeNameRE = regexp.MustCompile(`^[A-Za-z0-9\-._~]{1,255}$`)

func validNodeName(name string) bool {
	if !nodeNameRE.MatchString(name) {
		return false
	}
	_, err := uuid.Parse(name)
	return err != nil
}

// isUUID reports whether s looks like a UUID as Ironic's is_uuid_like does.
func isUUID(s string) bool {
	if len(s) != 36 && len(s) != 32 {
		return false
	}
	_, err := uuid.Parse(s)
	return err == nil
}

// nodePatchRules: what PATCH /v1/nodes/{id} may touch.
var nodePatchRules = func() patchRules {
	r := patchRules{resource: "node", allowed: map[string]bool{}, mandatory: map[string]bool{"driver": true},
		internal: map[string]bool{}}
	for k := range nodeWritable {
		r.allowed[k] = true
	}
	for _, f := range nodeFields {
		if !r.allowed[f.name] {
			r.internal[f.name] = true
		}
	}
	r.internal["id"] = true
	r.internal["firmware_interface"] = true
	return r
}()

// nodeToDoc is the unmasked patch document of a node: its writable fields.
func nodeToDoc(n *store.Node) map[string]any {
	doc := make(map[string]any, len(nodeWritable))
	for k, f := range nodeWritable {
		doc[k] = f.get(n)
	}
	return doc
}

// normalizeNumbers turns json.Number into int64 or float64 so that values
// stored in JSONB are plain numbers.
func normalizeNumbers(v any) any {
	switch t := v.(type) {
	case json.Number:
		if i, err := t.Int64(); err == nil {
			return i
		}
		f, _ := t.Float64() // decodeJSON refused what does not fit
		return f
	case map[string]any:
		for k, e := range t {
			t[k] = normalizeNumbers(e)
		}
		return t
	case []any:
		for i, e := range t {
			t[i] = normalizeNumbers(e)
		}
		return t
	}
	return v
}
