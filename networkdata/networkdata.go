// Package networkdata checks a node's network_data: OpenStack's network
// metadata (the network_data.json of a config drive, Nova's format, which
// Metal3 calls preprovisioningNetworkData) against the schema Ironic's API
// checks it with (links, bonds and VLANs; IPv4 and IPv6 networks and
// routes; DNS services), in the words of the jsonschema library Ironic
// uses, so a client gets Ironic's message for the same mistake. It is a
// pure function of its input: no I/O.
//
// The schema is written here as Go values (schema.go); its keywords are
// checked in the order Ironic's schema lists them (type, then required,
// enum or pattern, then properties or items): jsonschema reports errors
// in that order, and its best match (Best) picks the first of equally
// relevant ones. A $ref is the schema it names: draft 7 ignores a $ref's
// siblings, and the schema's are only annotations.
package networkdata

import (
	"encoding/json"
	"fmt"
	"math"
	"regexp"
	"slices"
	"strings"

	"github.com/ironflow/ironflow/pyliteral"
)

// Error is one schema violation, as jsonschema's ValidationError: its
// message, the keyword that failed, how deep in the checked value it is
// (relative to the value the enclosing oneOf or anyOf checked, for the
// errors of its Context), whether the value had the type of the schema
// that failed, and for oneOf and anyOf the errors of every branch.
type Error struct {
	Message     string
	Keyword     string
	Depth       int
	matchesType bool
	Context     []*Error
}

func (e *Error) Error() string { return e.Message }

// schema is the subset of JSON Schema (draft 7) network_data's schema uses.
type schema struct {
	types      []string
	required   []string
	enum       []string
	pattern    *regexp.Regexp
	min, max   *float64
	properties []property
	items      *schema
	oneOf      []*schema
	anyOf      []*schema
	// noAdditional: additionalProperties false.
	noAdditional bool
}

type property struct {
	name   string
	schema *schema
}

// Validate checks v, a decoded JSON value, against network_data's schema
// and returns every error jsonschema would, in its order; nil when v is
// valid.
func Validate(v any) []*Error { return root().check(v) }

// Message is Ironic's answer to a PATCH of /network_data that its schema
// refuses (its node controller's validate_network_data), "" when v is
// valid.
func Message(v any) string {
	if e := Best(Validate(v)); e != nil {
		return "Invalid network_data: " + e.Message + " "
	}
	return ""
}

// FieldMessage is the schema error of a node's network_data field as
// Ironic's node schema reports it for a create or a patched node
// (Ironic's args.schema): "Schema error for <what>: " and FieldError.
// what is "node" for a create and "patch" for a patch; "" when v is
// valid.
func FieldMessage(what string, v any) string {
	if e := FieldError(v); e != "" {
		return "Schema error for " + what + ": " + e
	}
	return ""
}

// FieldError is what jsonschema says of a node's network_data field, ""
// when it is valid: the field is null, an empty object or network_data,
// and the message adds the root cause jsonschema finds among those
// branches.
func FieldError(v any) string {
	field := &schema{anyOf: []*schema{
		{types: []string{"null"}},
		{types: []string{"object"}, noAdditional: true},
		root(),
	}}
	errs := field.check(v)
	for _, e := range errs {
		e.Depth++ // the node's network_data key
	}
	best := Best(errs)
	if best == nil {
		return ""
	}
	msg := best.Message
	cause := ""
	for cur := best; len(cur.Context) > 0; {
		cur = Best(cur.Context)
		cause = cur.Message
	}
	if cause != "" {
		msg += ". Possible root cause: " + cause
	}
	return msg
}

// Best is jsonschema's best_match: the most relevant error (the least
// deep, a weak oneOf or anyOf last), then, as long as one of its context
// errors is more relevant than the others, that one (the deepest).
func Best(errs []*Error) *Error {
	if len(errs) == 0 {
		return nil
	}
	best := errs[0]
	for _, e := range errs[1:] {
		if compare(relevance(e), relevance(best)) > 0 {
			best = e
		}
	}
	for len(best.Context) > 0 {
		sorted := slices.Clone(best.Context)
		slices.SortStableFunc(sorted, func(a, b *Error) int { return compare(relevance(a), relevance(b)) })
		if len(sorted) >= 2 && relevance(sorted[0]) == relevance(sorted[1]) {
			return best
		}
		best = sorted[0]
	}
	return best
}

// relevance is jsonschema's key: shallower first, then a keyword other
// than oneOf and anyOf, then an error on a value of the schema's own
// type last (so a type mismatch ranks above it).
type rank [3]int

func relevance(e *Error) rank {
	return rank{-e.Depth, b2i(e.Keyword != "oneOf" && e.Keyword != "anyOf"), b2i(!e.matchesType)}
}

func compare(a, b rank) int {
	for i := range a {
		if a[i] != b[i] {
			return a[i] - b[i]
		}
	}
	return 0
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

func (s *schema) check(v any) []*Error {
	var errs []*Error
	add := func(keyword, format string, args ...any) {
		errs = append(errs, &Error{Message: fmt.Sprintf(format, args...), Keyword: keyword, matchesType: s.hasType(v)})
	}
	if len(s.types) > 0 && !s.hasType(v) {
		q := make([]string, len(s.types))
		for i, t := range s.types {
			q[i] = pyliteral.Repr(t)
		}
		add("type", "%s is not of type %s", pyliteral.Repr(v), strings.Join(q, ", "))
	}
	obj, isObj := v.(map[string]any)
	if isObj {
		for _, r := range s.required {
			if _, ok := obj[r]; !ok {
				add("required", "%s is a required property", pyliteral.Repr(r))
			}
		}
	}
	if s.enum != nil {
		if str, ok := v.(string); !ok || !slices.Contains(s.enum, str) {
			add("enum", "%s is not one of %s", pyliteral.Repr(v), reprStrings(s.enum))
		}
	}
	if str, ok := v.(string); ok && s.pattern != nil && !s.pattern.MatchString(str) {
		add("pattern", "%s does not match %s", pyliteral.Repr(str), pyliteral.Repr(s.pattern.String()))
	}
	if n, ok := number(v); ok {
		if s.min != nil && n < *s.min {
			add("minimum", "%s is less than the minimum of %s", pyliteral.Repr(v), pyliteral.Repr(int(*s.min)))
		}
		if s.max != nil && n > *s.max {
			add("maximum", "%s is greater than the maximum of %s", pyliteral.Repr(v), pyliteral.Repr(int(*s.max)))
		}
	}
	if isObj {
		for _, p := range s.properties {
			if pv, ok := obj[p.name]; ok {
				errs = append(errs, deeper(p.schema.check(pv))...)
			}
		}
		if s.noAdditional && len(obj) > 0 {
			keys := make([]string, 0, len(obj))
			for k := range obj {
				if !slices.ContainsFunc(s.properties, func(p property) bool { return p.name == k }) {
					keys = append(keys, k)
				}
			}
			if len(keys) > 0 {
				slices.Sort(keys)
				verb := "was"
				if len(keys) > 1 {
					verb = "were"
				}
				add("additionalProperties", "Additional properties are not allowed (%s %s unexpected)", reprStrings(keys)[1:len(reprStrings(keys))-1], verb)
			}
		}
	}
	if arr, ok := v.([]any); ok && s.items != nil {
		for _, e := range arr {
			errs = append(errs, deeper(s.items.check(e))...)
		}
	}
	// oneOf's second message ("is valid under each of") needs two
	// branches to hold, which network_data's disjoint link and network
	// types never allow.
	for _, branches := range []struct {
		keyword string
		of      []*schema
	}{{"oneOf", s.oneOf}, {"anyOf", s.anyOf}} {
		if len(branches.of) == 0 {
			continue
		}
		var all []*Error
		valid := false
		for _, b := range branches.of {
			e := b.check(v)
			if len(e) == 0 {
				valid = true
				break
			}
			all = append(all, e...)
		}
		if !valid {
			add(branches.keyword, "%s is not valid under any of the given schemas", pyliteral.Repr(v))
			errs[len(errs)-1].Context = all
		}
	}
	return errs
}

// deeper moves errors one level down the checked value (a property or
// an item); the context of a oneOf or anyOf stays relative to it.
func deeper(errs []*Error) []*Error {
	for _, e := range errs {
		e.Depth++
	}
	return errs
}

func reprStrings(s []string) string {
	a := make([]any, len(s))
	for i, x := range s {
		a[i] = x
	}
	return pyliteral.Repr(a)
}

// number is v as a number, as jsonschema's "number" type: not a boolean.
func number(v any) (float64, bool) {
	switch t := v.(type) {
	case float64:
		return t, true
	case int:
		return float64(t), true
	case int64:
		return float64(t), true
	case json.Number:
		f, err := t.Float64()
		return f, err == nil
	}
	return 0, false
}

// hasType says whether v is of one of the schema's types, as jsonschema's
// draft 7 type checker does (an integer may be written 1.0); false when
// the schema names no type.
func (s *schema) hasType(v any) bool {
	for _, t := range s.types {
		ok := false
		switch t {
		case "null":
			ok = v == nil
		case "object":
			_, ok = v.(map[string]any)
		case "array":
			_, ok = v.([]any)
		case "string":
			_, ok = v.(string)
		case "number":
			_, ok = number(v)
		case "integer":
			f, isNum := number(v)
			ok = isNum && f == math.Trunc(f)
		}
		if ok {
			return true
		}
	}
	return false
}
