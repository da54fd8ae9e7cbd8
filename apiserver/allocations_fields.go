package apiserver

import (
	"fmt"
	"time"

	"github.com/ironflow/ironflow/pyliteral"
	"github.com/ironflow/ironflow/store"
)

// Allocations (API 1.52): the field table of docs/contributing.md, "Add an
// API resource", with Ironic's ALLOCATION_SCHEMA (allocation.py). A create
// body may also name the node to backfill (1.58), which is no field of the
// view: allocations_crud.go reads it.

// The microversions of Ironic's versions.py that shape allocations
// (v52Allocation is in version.go).
const (
	v57AllocationUpdate   = 57 // MINOR_57_ALLOCATION_UPDATE
	v58AllocationBackfill = 58 // MINOR_58_ALLOCATION_BACKFILL
	v60AllocationOwner    = 60 // MINOR_60_ALLOCATION_OWNER
	v79AllocationNodeName = 79 // MINOR_79_ALLOCATION_NODE_NAME
)

type (
	allocation      = store.Allocation
	allocationQuery = store.AllocationFilter
	allocationField = field[allocation, allocationQuery]
)

var allocationFields = []allocationField{
	{name: "candidate_nodes", since: v52Allocation, value: stringList(func(a *allocation) *[]string { return &a.CandidateNodes }, nil), access: createOnly},
	{name: "created_at", since: v52Allocation, value: timestamp(func(a *allocation) time.Time { return a.CreatedAt }), sortable: true},
	{name: "extra", since: v52Allocation, value: dict(func(a *allocation) *map[string]any { return &a.Extra }), access: writable},
	{name: "last_error", since: v52Allocation, value: optText(func(a *allocation) **string { return &a.LastError }, 0), sortable: true},
	{name: "links", since: v52Allocation, value: links(func(a *allocation) string { return "allocations/" + a.UUID })},
	{name: "name", since: v52Allocation, value: optText(func(a *allocation) **string { return &a.Name }, 0), access: writable, sortable: true},
	{name: "node_uuid", since: v52Allocation, value: optText(func(a *allocation) **string { return &a.NodeUUID }, 0), sortable: true},
	{name: "owner", since: v60AllocationOwner, value: optText(func(a *allocation) **string { return &a.Owner }, 0), access: createOnly, sortable: true,
		filter: textFilter(v60AllocationOwner, func(f *allocationQuery) *string { return &f.Owner })},
	{name: "resource_class", since: v52Allocation, value: optText(func(a *allocation) **string { return &a.ResourceClass }, 80), access: createOnly, sortable: true,
		filter: textFilter(v52Allocation, func(f *allocationQuery) *string { return &f.ResourceClass })},
	{name: "state", since: v52Allocation, value: text(func(a *allocation) *string { return &a.State }), sortable: true,
		filter: textFilter(v52Allocation, func(f *allocationQuery) *string { return &f.State })},
	{name: "traits", since: v52Allocation, value: stringList(func(a *allocation) *[]string { return &a.Traits }, checkTraitItem), access: createOnly},
	{name: "updated_at", since: v52Allocation, value: optTime(func(a *allocation) *time.Time { return a.UpdatedAt }), sortable: true},
	{name: "uuid", since: v52Allocation, value: uuidFor(func(a *allocation) *string { return &a.UUID }), access: createOnly, sortable: true},
}

// allocationResource: the body parameter is "allocation" in Ironic's
// schema errors; a PATCH of anything but name and extra is refused with
// "Cannot patch ..." (PATCH_ALLOWED_FIELDS).
var allocationResource = allowedOnlyPatch(newResource("allocation", allocationFields, nil))

// allocationDefaultFields: every field, as Ironic's allocation list shows
// them all without ?fields=.
var allocationDefaultFields []string

// stringList is a nullable array of strings (null stores an empty one);
// item, when set, checks each element (a jsonschema-style error).
func stringList[T any](p func(*T) *[]string, item func(v any) error) fieldValue[T] {
	view := func(r *T, _ viewCtx) any {
		if *p(r) == nil {
			return []string{}
		}
		return *p(r)
	}
	return fieldValue[T]{
		view: view,
		get:  func(r *T) any { return view(r, viewCtx{}) },
		set: func(r *T, v any) error {
			switch t := v.(type) {
			case nil:
				*p(r) = []string{}
			case []any:
				out := make([]string, 0, len(t))
				for _, e := range t {
					if item != nil {
						if err := item(e); err != nil {
							return err
						}
					}
					s, ok := e.(string)
					if !ok {
						return typeErr(e, "string")
					}
					out = append(out, s)
				}
				*p(r) = out
			default:
				return typeErr(v, "array", "null")
			}
			return nil
		},
	}
}

// checkTraitItem is Ironic's TRAITS_SCHEMA for one trait of a list.
func checkTraitItem(v any) error {
	s, ok := v.(string)
	switch {
	case !ok:
		return typeErr(v, "string")
	case s == "":
		return fmt.Errorf("%s is too short", pyliteral.Repr(s))
	case len(s) > 255:
		return fmt.Errorf("%s is too long", pyliteral.Repr(s))
	case !standardTraits[s] && !customTraitRE.MatchString(s):
		// Ironic's args.schema names the best match of the anyOf.
		return fmt.Errorf("%[1]s is not valid under any of the given schemas. Possible root cause: %[1]s does not match '%[2]s'",
			pyliteral.Repr(s), customTraitRE.String())
	}
	return nil
}
