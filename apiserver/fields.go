package apiserver

import (
	"bytes"
	"errors"
	"fmt"
	"net/url"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/gin-gonic/gin"

	"github.com/ironflow/ironflow/pyliteral"
)

// A resource's field table (nodes_fields.go, ports_fields.go) is the one
// place a field of Ironic's object is described: its JSON name, the
// microversion that shows it, how it is read and written, whether a create
// or PATCH may set it, whether it is required, a sort key or a list filter.
// Everything else — the JSON view, ?fields=, PATCH rules and errors, create
// validation, list filters, sort keys and the store columns a view needs —
// is derived here from the table. See docs/contributing.md, "Add an API
// field".

// access says who may set a field.
type access int

const (
	readOnly   access = iota // shown only; PATCH refuses it as internal
	writable                 // set by create, changed by PATCH
	createOnly               // set by create only; PATCH refuses it as internal
)

// fieldValue is how a field of T is shown, read into a patch document and
// set from a decoded JSON value. set errors are jsonschema-style messages
// that the caller prefixes ("Schema error for node: ..."); an *apiError is
// Ironic's own message and passes unchanged.
type fieldValue[T any] struct {
	view func(r *T, v viewCtx) any // the JSON view, secrets masked
	get  func(r *T) any            // the unmasked value a patch applies to
	set  func(r *T, v any) error   // nil value: removed or null
	// computed fields are made up by the API (links, ...): no store column.
	computed bool
}

// setBy replaces how the value is set (a field with its own validation).
func (fv fieldValue[T]) setBy(set func(r *T, v any) error) fieldValue[T] {
	fv.set = set
	return fv
}

// listFilter is a list query parameter that filters on a field.
type listFilter[F any] struct {
	since int  // the version that accepts the filter (not the field's)
	empty bool // an empty value filters too (otherwise it is ignored)
	// apply validates v and records it in the store filter; it returns
	// the value the "next" link repeats.
	apply func(f *F, name, v string) (string, error)
}

// field is one row of a field table: T is the store's resource, F the
// store's list filter.
type field[T, F any] struct {
	name   string
	since  int
	value  fieldValue[T]
	access access
	// required fields must be given to create and may not be removed by
	// PATCH.
	required bool
	// keep fields may be omitted by create but not removed by PATCH: their
	// setter refuses null with the resource's own message (a port group's
	// mode).
	keep bool
	// sortable fields are sort_key values (the store maps each to its SQL:
	// store.NodeSortKeys, store.PortSortKeys).
	sortable bool
	filter   *listFilter[F]
}

// resource is a field table with what is derived from it.
type resource[T, F any] struct {
	name    string // "node", "port": for messages
	fields  []field[T, F]
	byName  map[string]*field[T, F]
	patch   patchRules
	filters []namedFilter[F]
}

type namedFilter[F any] struct {
	name string
	*listFilter[F]
}

// newResource derives a resource from its table. internalOnly are names
// PATCH refuses as internal that are no field of the view ("id" always).
// listOnly are list filters on no field, applied after the table's.
func newResource[T, F any](name string, fields []field[T, F], internalOnly []string, listOnly ...namedFilter[F]) *resource[T, F] {
	r := &resource[T, F]{name: name, fields: fields, byName: map[string]*field[T, F]{},
		patch: patchRules{resource: name, allowed: map[string]bool{}, internal: map[string]bool{"id": true}, mandatory: map[string]bool{}}}
	for i := range fields {
		f := &fields[i]
		if r.byName[f.name] != nil {
			panic(fmt.Sprintf("apiserver: %s field %q listed twice", name, f.name))
		}
		r.byName[f.name] = f
		if f.access != readOnly && (f.value.set == nil || f.value.get == nil) {
			panic(fmt.Sprintf("apiserver: %s field %q can be set but its value kind has no setter", name, f.name))
		}
		if f.access == writable {
			r.patch.allowed[f.name] = true
		} else {
			r.patch.internal[f.name] = true
		}
		if f.required {
			r.patch.mandatory[f.name] = true
		}
		if f.filter != nil {
			r.filters = append(r.filters, namedFilter[F]{f.name, f.filter})
		}
	}
	for _, n := range internalOnly {
		r.patch.internal[n] = true
	}
	r.filters = append(r.filters, listOnly...)
	return r
}

// fieldSince is the ?fields= check of parseListParams: whether name is a
// field and the version that shows it.
func (r *resource[T, F]) fieldSince(name string) (int, bool) {
	f := r.byName[name]
	if f == nil {
		return 0, false
	}
	return f.since, true
}

// sortable reports whether key is a sort_key of the resource.
func (r *resource[T, F]) sortable(key string) bool {
	if key == "id" {
		return true
	}
	f := r.byName[key]
	return f != nil && f.sortable
}

// columns are the stored fields among names, so that a list without detail
// does not read (and decode) the JSON columns.
func (r *resource[T, F]) columns(names []string) []string {
	cols := make([]string, 0, len(names))
	for _, n := range names {
		if f := r.byName[n]; f == nil || !f.value.computed {
			cols = append(cols, n)
		}
	}
	return cols
}

// write appends the JSON object of obj to buf: the keys the version shows,
// in the table's order, limited to fields (links always).
func (r *resource[T, F]) write(buf *bytes.Buffer, obj *T, v viewCtx, fields fieldSet) {
	buf.WriteByte('{')
	first := true
	for i := range r.fields {
		f := &r.fields[i]
		if f.since > v.minor || (fields != nil && !fields[f.name] && f.name != "links") {
			continue
		}
		if !first {
			buf.WriteByte(',')
		}
		first = false
		writeJSONString(buf, f.name)
		buf.WriteByte(':')
		writeValue(buf, f.value.view(obj, v))
	}
	buf.WriteByte('}')
}

// writeOne answers one object with the fields the request asked.
func (r *resource[T, F]) writeOne(c *gin.Context, base string, status int, obj *T, fields []string) {
	var buf bytes.Buffer
	r.write(&buf, obj, viewCtx{minor: ver(c), base: base}, newFieldSet(fields))
	writeRawBytes(c, status, buf.Bytes())
}

// create sets obj's fields from a create body as Ironic's schema does:
// unknown keys, then missing required ones, then each key in sorted order
// (a key below its version is refused unless empty). It returns the keys
// it set to a non-null value.
func (r *resource[T, F]) create(obj *T, body map[string]any, minor int) (map[string]bool, error) {
	if err := r.checkUnknown(body, nil); err != nil {
		return nil, err
	}
	for i := range r.fields {
		if f := &r.fields[i]; f.required {
			if _, ok := body[f.name]; !ok {
				return nil, schemaError(r.name, fmt.Errorf("'%s' is a required property", f.name))
			}
		}
	}
	keys := make([]string, 0, len(body))
	for k := range body {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	set := map[string]bool{}
	for _, k := range keys {
		f, v := r.byName[k], normalizeNumbers(body[k])
		if f.since > minor {
			if !isEmptyValue(v) {
				return nil, notAcceptable()
			}
			continue
		}
		if err := f.value.set(obj, v); err != nil {
			return nil, schemaError(r.name, err)
		}
		if v != nil {
			set[k] = true
		}
	}
	return set, nil
}

// checkUnknown refuses the keys of a create body that are not fields a
// create may set, nor among extra (keys the handler reads itself), with
// Ironic's additionalProperties message.
func (r *resource[T, F]) checkUnknown(body map[string]any, extra []string) error {
	var unknown []string
	for k := range body {
		if f := r.byName[k]; (f == nil || f.access == readOnly) && !slices.Contains(extra, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		return schemaError(r.name, additionalProps(unknown))
	}
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

// readPatch reads a PATCH body and refuses what may not be patched.
func (r *resource[T, F]) readPatch(c *gin.Context) ([]patchOp, error) {
	body, err := readBody(c)
	if err != nil {
		return nil, err
	}
	ops, err := decodePatch(body)
	if err != nil {
		return nil, err
	}
	if err := r.checkPatch(ops, ver(c)); err != nil {
		return nil, err
	}
	return ops, nil
}

// checkPatch refuses what a PATCH may not touch: internal, unknown and
// mandatory fields (patchRules), and fields above the request's version.
func (r *resource[T, F]) checkPatch(ops []patchOp, minor int) error {
	if err := r.patch.check(ops); err != nil {
		return err
	}
	for _, op := range ops {
		if r.byName[patchRoot(op)].since > minor {
			return notAcceptable()
		}
	}
	return nil
}

func patchRoot(op patchOp) string {
	return strings.SplitN(op.Path[1:], "/", 2)[0]
}

// applyPatch applies ops to obj: its writable fields as an unmasked
// document, patched, then set back field by field (a field the patch
// removed is set to null).
func (r *resource[T, F]) applyPatch(obj *T, ops []patchOp) error {
	doc := make(map[string]any, len(r.patch.allowed))
	for i := range r.fields {
		if f := &r.fields[i]; f.access == writable {
			doc[f.name] = f.value.get(obj)
		}
	}
	if err := applyPatch(doc, ops); err != nil {
		return err
	}
	for i := range r.fields {
		if f := &r.fields[i]; f.access == writable {
			if err := f.value.set(obj, normalizeNumbers(doc[f.name])); err != nil {
				return schemaError("patch", err)
			}
		}
	}
	return nil
}

// listFilters reads the list filters of the request into f, with their
// version gates; the values it returns are what the "next" link repeats.
func (r *resource[T, F]) listFilters(c *gin.Context, f *F) (url.Values, error) {
	q := url.Values{}
	for _, lf := range r.filters {
		v, ok := c.GetQuery(lf.name)
		if !ok || (v == "" && !lf.empty) {
			continue
		}
		if ver(c) < lf.since {
			return q, notAcceptable()
		}
		repeat, err := lf.apply(f, lf.name, v)
		if err != nil {
			return q, err
		}
		q.Set(lf.name, repeat)
	}
	return q, nil
}

// Value kinds of field tables. Each takes the accessor of the store field.

// text is a string field; set accepts only a string.
func text[T any](p func(*T) *string) fieldValue[T] {
	return fieldValue[T]{
		view: func(r *T, _ viewCtx) any { return *p(r) },
		get:  func(r *T) any { return *p(r) },
		set: func(r *T, v any) error {
			s, ok := v.(string)
			if !ok {
				return typeErr(v, "string")
			}
			*p(r) = s
			return nil
		},
	}
}

// optText is a nullable string, at most maxLen bytes (0: no limit).
func optText[T any](p func(*T) **string, maxLen int) fieldValue[T] {
	return fieldValue[T]{
		view: func(r *T, _ viewCtx) any { return strOrNil(*p(r)) },
		get:  func(r *T) any { return strOrNil(*p(r)) },
		set: func(r *T, v any) error {
			switch t := v.(type) {
			case nil:
				*p(r) = nil
			case string:
				if maxLen > 0 && len(t) > maxLen {
					return fmt.Errorf("%s is too long", pyliteral.Repr(t))
				}
				s := t
				*p(r) = &s
			default:
				return typeErr(v, "string", "null")
			}
			return nil
		},
	}
}

// ifaceName is an interface name: null resets it to the driver's default.
func ifaceName[T any](p func(*T) *string) fieldValue[T] {
	return fieldValue[T]{
		view: func(r *T, _ viewCtx) any { return *p(r) },
		get:  func(r *T) any { return *p(r) },
		set: func(r *T, v any) error {
			switch t := v.(type) {
			case nil:
				*p(r) = ""
			case string:
				*p(r) = t
			default:
				return typeErr(v, "string", "null")
			}
			return nil
		},
	}
}

// dict is a JSON object (null stores an empty one).
func dict[T any](p func(*T) *map[string]any) fieldValue[T] {
	return fieldValue[T]{
		view: func(r *T, _ viewCtx) any { return mapOrEmpty(*p(r)) },
		get:  func(r *T) any { return deepCopy(mapOrEmpty(*p(r))) },
		set: func(r *T, v any) error {
			switch t := v.(type) {
			case nil:
				*p(r) = map[string]any{}
			case map[string]any:
				*p(r) = t
			default:
				return typeErr(v, "object", "null")
			}
			return nil
		},
	}
}

// secretDict is a dict whose view masks the secrets of its scope (mask.go).
func secretDict[T any](p func(*T) *map[string]any, scope secretScope) fieldValue[T] {
	fv := dict(p)
	fv.view = func(r *T, _ viewCtx) any { return maskSecrets(*p(r), scope) }
	return fv
}

// flag is a boolean; null sets it to whenNull.
func flag[T any](p func(*T) *bool, whenNull bool) fieldValue[T] {
	return fieldValue[T]{
		view: func(r *T, _ viewCtx) any { return *p(r) },
		get:  func(r *T) any { return *p(r) },
		set: func(r *T, v any) error {
			if v == nil {
				*p(r) = whenNull
				return nil
			}
			b, err := boolValue(v)
			*p(r) = b
			return err
		},
	}
}

// strictFlag is a boolean that, as Ironic's schema {'type': 'boolean'},
// takes only JSON booleans; null (a PATCH remove) sets it to true, the
// default of the fields that use it (a port's
// available_for_dynamic_portgroup).
func strictFlag[T any](p func(*T) *bool) fieldValue[T] {
	return fieldValue[T]{
		view: func(r *T, _ viewCtx) any { return *p(r) },
		get:  func(r *T) any { return *p(r) },
		set: func(r *T, v any) error {
			switch t := v.(type) {
			case nil:
				*p(r) = true
			case bool:
				*p(r) = t
			default:
				return typeErr(v, "boolean")
			}
			return nil
		},
	}
}

// optFlag is a nullable boolean.
func optFlag[T any](p func(*T) **bool) fieldValue[T] {
	return fieldValue[T]{
		view: func(r *T, _ viewCtx) any { return boolOrNil(*p(r)) },
		get:  func(r *T) any { return boolOrNil(*p(r)) },
		set: func(r *T, v any) error {
			if v == nil {
				*p(r) = nil
				return nil
			}
			b, err := boolValue(v)
			*p(r) = &b
			return err
		},
	}
}

// timestamp and optTime are read-only times in Ironic's format.
func timestamp[T any](p func(*T) time.Time) fieldValue[T] {
	return shown(func(r *T, _ viewCtx) any { return isoTime(p(r)) })
}

func optTime[T any](p func(*T) *time.Time) fieldValue[T] {
	return shown(func(r *T, _ viewCtx) any { return timeOrNil(p(r)) })
}

// shown is a read-only stored value with its own view.
func shown[T any](view func(r *T, v viewCtx) any) fieldValue[T] {
	return fieldValue[T]{view: view}
}

// computed is a value the API makes up (links, ...): read-only, no column.
func computed[T any](view func(r *T, v viewCtx) any) fieldValue[T] {
	return fieldValue[T]{view: view, computed: true}
}

// links is a computed field of self and bookmark links to path.
func links[T any](path func(r *T) string) fieldValue[T] {
	return computed(func(r *T, v viewCtx) any { return selfLinks(v.base, path(r)) })
}

// Filter kinds.

// textFilter records the value as given.
func textFilter[F any](since int, p func(*F) *string) *listFilter[F] {
	return &listFilter[F]{since: since, apply: func(f *F, _, v string) (string, error) {
		*p(f) = v
		return v, nil
	}}
}

// oneOfFilter accepts only allowed values; refused builds the error.
func oneOfFilter[F any, V ~string](since int, p func(*F) *V, allowed []V, refused func(v string) error) *listFilter[F] {
	return &listFilter[F]{since: since, apply: func(f *F, _, v string) (string, error) {
		for _, a := range allowed {
			if string(a) == v {
				*p(f) = a
				return v, nil
			}
		}
		return "", refused(v)
	}}
}

// boolFilter parses the value as a boolean.
func boolFilter[F any](p func(*F) **bool) *listFilter[F] {
	return &listFilter[F]{since: 1, apply: func(f *F, name, v string) (string, error) {
		b, err := parseBool(name, v)
		if err != nil {
			return "", err
		}
		*p(f) = &b
		return strconv.FormatBool(b), nil
	}}
}

// typeErr is jsonschema's type message.
func typeErr(v any, types ...string) error {
	q := make([]string, len(types))
	for i, t := range types {
		q[i] = "'" + t + "'"
	}
	return fmt.Errorf("%s is not of type %s", pyliteral.Repr(v), strings.Join(q, ", "))
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
			return false, fmt.Errorf("Invalid boolean value: %s", pyliteral.Repr(t))
		}
		return b, nil
	}
	return false, typeErr(v, "string", "boolean", "null")
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
		q[i] = pyliteral.Repr(k)
	}
	verb := "was"
	if len(keys) > 1 {
		verb = "were"
	}
	return fmt.Errorf("Additional properties are not allowed (%s %s unexpected)", strings.Join(q, ", "), verb)
}

// uuidFor validates an optional UUID given for a resource's own uuid.
func uuidFor[T any](p func(*T) *string) fieldValue[T] {
	return text(p).setBy(func(r *T, v any) error {
		if v == nil {
			return nil
		}
		u, ok := v.(string)
		if !ok || !isUUID(u) {
			return badRequest("Expected UUID for uuid: %v", v)
		}
		*p(r) = strings.ToLower(u)
		return nil
	})
}
