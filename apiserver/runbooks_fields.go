package apiserver

import (
	"fmt"
	"regexp"
	"time"

	"github.com/ironflow/ironflow/pyliteral"

	"github.com/ironflow/ironflow/store"
)

// Runbooks (API 1.92): the field table, with Ironic's RUNBOOK_SCHEMA
// (runbook.py): a trait as name, steps with an order instead of a
// priority, public, owner and disable_ramdisk; from 1.112 any name,
// description, and traits (read-only here: the traits sub-resource,
// runbooks_traits.go, sets them).

type (
	runbook      = store.Runbook
	runbookField = field[runbook, stepListQuery]
)

var runbookFields = []runbookField{
	{name: "created_at", since: v92Runbooks, value: timestamp(func(r *runbook) time.Time { return r.CreatedAt }), sortable: true},
	{name: "updated_at", since: v92Runbooks, value: optTime(func(r *runbook) *time.Time { return r.UpdatedAt }), sortable: true},
	{name: "uuid", since: v92Runbooks, value: uuidFor(func(r *runbook) *string { return &r.UUID }), access: createOnly, sortable: true},
	{name: "name", since: v92Runbooks, value: text(func(r *runbook) *string { return &r.Name }).setBy(setRunbookName), access: writable, required: true, sortable: true},
	{name: "extra", since: v92Runbooks, value: dict(func(r *runbook) *map[string]any { return &r.Extra }), access: writable},
	{name: "public", since: v92Runbooks, value: flag(func(r *runbook) *bool { return &r.Public }, false), access: writable, sortable: true},
	{name: "owner", since: v92Runbooks, value: optText(func(r *runbook) **string { return &r.Owner }, 255), access: writable, sortable: true},
	{name: "disable_ramdisk", since: v92Runbooks, value: flag(func(r *runbook) *bool { return &r.DisableRamdisk }, false), access: writable, sortable: true},
	{name: "steps", since: v92Runbooks, value: runbookStepList(func(r *runbook) *[]store.RunbookStep { return &r.Steps }), access: writable, required: true},
	{name: "description", since: v112RunbookTraits, value: optText(func(r *runbook) **string { return &r.Description }, 255), access: writable},
	{name: "traits", since: v112RunbookTraits, value: shown(func(r *runbook, _ viewCtx) any { return stringsOrEmpty(r.Traits) })},
	{name: "links", since: v92Runbooks, value: links(func(r *runbook) string { return "runbooks/" + r.UUID })},
}

// runbookResource: the body parameter is "runbook" in Ironic's schema
// errors.
var runbookResource = allowedOnlyPatch(newResource("runbook", runbookFields, nil))

var runbookDefaultFields = []string{"uuid", "name"}

// runbookNameRE is Ironic's runbook name from API 1.112 (RFC 3986
// unreserved characters, so that a name can be a path segment).
var runbookNameRE = regexp.MustCompile(`^[A-Za-z0-9\-._~]+$`)

// setRunbookName takes any name of 1 to 255 unreserved characters, as
// Ironic's runbook schema from 1.112, which its PATCH applies at every
// version; a create below 1.112 also needs a trait (checkRunbookCreate).
func setRunbookName(r *runbook, v any) error {
	s, ok := v.(string)
	switch {
	case !ok:
		return typeErr(v, "string")
	case s == "":
		return fmt.Errorf("%s is too short", pyliteral.Repr(s))
	case len(s) > 255:
		return fmt.Errorf("%s is too long", pyliteral.Repr(s))
	case !runbookNameRE.MatchString(s):
		return fmt.Errorf("%s does not match %s", pyliteral.Repr(s), pyliteral.Repr(runbookNameRE.String()))
	}
	r.Name = s
	return nil
}

// checkRunbookCreate: below 1.112 a runbook's name is a trait (the name
// a node's traits approve it by), as Ironic's RUNBOOK_SCHEMA.
func checkRunbookCreate(minor int, body map[string]any) error {
	if minor >= v112RunbookTraits {
		return nil
	}
	name, ok := body["name"]
	if !ok {
		return nil // the schema's required-property error follows
	}
	var probe runbook
	if err := traitName(func(r *runbook) *string { return &r.Name }).set(&probe, name); err != nil {
		return schemaError("runbook", err)
	}
	return nil
}

func stringsOrEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// runbookStepList is a runbook's steps.
func runbookStepList[T any](p func(*T) *[]store.RunbookStep) fieldValue[T] {
	asList := func(r *T, mask bool) any {
		out := make([]any, 0, len(*p(r)))
		for _, s := range *p(r) {
			var args any = deepCopy(mapOrEmpty(s.Args))
			if mask {
				args = maskSecrets(s.Args, scopeDriverInfo)
			}
			out = append(out, map[string]any{"interface": s.Interface, "step": s.Step, "args": args, "order": int64(s.Order)})
		}
		return out
	}
	return fieldValue[T]{
		view: func(r *T, _ viewCtx) any { return asList(r, true) },
		get:  func(r *T) any { return asList(r, false) },
		set: func(r *T, v any) error {
			steps, err := parseStepList(v, "order")
			if err != nil {
				return err
			}
			out := make([]store.RunbookStep, len(steps))
			for i, s := range steps {
				out[i] = store.RunbookStep{Interface: s.Interface, Step: s.Step, Args: s.Args, Order: s.Rank}
			}
			*p(r) = out
			return nil
		},
	}
}
