package apiserver

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/ironflow/ironflow/pyliteral"
)

// patchOp is one RFC 6902 operation of the subset Ironic accepts.
type patchOp struct {
	Op       string
	Path     string
	Value    any
	HasValue bool
}

// patchPathRE is Ironic's JSON-patch path pattern.
var patchPathRE = regexp.MustCompile(`^(/[\w-]+)+$`)

// decodeJSON decodes a request body keeping numbers exact (json.Number), as
// Ironic keeps 10 as 10 and 1.5 as 1.5.
func decodeJSON(body []byte, v any) error {
	if !utf8.Valid(body) {
		// encoding/json would replace the bytes with U+FFFD and store
		// something the client never sent.
		return fmt.Errorf("the body is not valid UTF-8")
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return explainNonFinite(body, err)
	}
	if dec.More() {
		return fmt.Errorf("trailing data after JSON value")
	}
	if p, ok := v.(*any); ok {
		return checkValues(*p)
	}
	return nil
}

// explainNonFinite adds a hint to a syntax error at Infinity, -Infinity or
// NaN. Python's json module writes those for a float it cannot hold, and
// the baremetal CLI parses each KEY=VALUE's value as JSON first, so a
// value such as 1e999 (a hex password can look like one) leaves the client
// as Infinity. RFC 8259 has no such numbers.
func explainNonFinite(body []byte, err error) error {
	var syn *json.SyntaxError
	if !errors.As(err, &syn) || syn.Offset < 1 || syn.Offset > int64(len(body)) {
		return err
	}
	rest := body[syn.Offset-1:]
	for _, word := range []string{"Infinity", "NaN"} {
		if bytes.HasPrefix(rest, []byte(word)) {
			return fmt.Errorf("%w: %s is not a JSON number; a client that parses KEY=VALUE as JSON turns a value such as 1e999 into it: send the value as a string", err, word)
		}
	}
	return err
}

// checkValues refuses what PostgreSQL cannot store: numbers a float64
// cannot hold (JSONB and its readers would disagree on them) and NUL
// characters (neither text nor JSONB accepts them).
func checkValues(v any) error {
	switch t := v.(type) {
	case string:
		if strings.ContainsRune(t, 0) {
			return fmt.Errorf("NUL characters are not allowed")
		}
	case json.Number:
		if _, err := t.Int64(); err == nil {
			return nil
		}
		f, err := t.Float64()
		if err != nil || math.IsInf(f, 0) {
			return fmt.Errorf("number %s is out of range", t.String())
		}
	case map[string]any:
		for k, e := range t {
			if err := checkValues(k); err != nil {
				return err
			}
			if err := checkValues(e); err != nil {
				return err
			}
		}
	case []any:
		for _, e := range t {
			if err := checkValues(e); err != nil {
				return err
			}
		}
	}
	return nil
}

// decodePatch parses and validates a JSON-patch document with Ironic's
// messages ("Schema error for patch: ...").
func decodePatch(body []byte) ([]patchOp, error) {
	var raw any
	if err := decodeJSON(body, &raw); err != nil {
		return nil, badRequest("Invalid JSON in request body: %s", err.Error())
	}
	list, ok := raw.([]any)
	if !ok {
		return nil, badRequest("Schema error for patch: %s is not of type 'array'", pyliteral.Repr(raw))
	}
	ops := make([]patchOp, 0, len(list))
	for _, item := range list {
		m, ok := item.(map[string]any)
		if !ok {
			return nil, badRequest("Schema error for patch: %s is not of type 'object'", pyliteral.Repr(item))
		}
		for k := range m {
			if k != "op" && k != "path" && k != "value" && k != "from" {
				return nil, badRequest("Schema error for patch: Additional properties are not allowed (%s was unexpected)", pyliteral.Repr(k))
			}
		}
		opV, ok := m["op"]
		if !ok {
			return nil, badRequest("Schema error for patch: 'op' is a required property")
		}
		pathV, ok := m["path"]
		if !ok {
			return nil, badRequest("Schema error for patch: 'path' is a required property")
		}
		op, _ := opV.(string)
		if op != "add" && op != "replace" && op != "remove" {
			return nil, badRequest("Schema error for patch: %s is not one of ['add', 'replace', 'remove']", pyliteral.Repr(opV))
		}
		path, ok := pathV.(string)
		if !ok {
			return nil, badRequest("Schema error for patch: %s is not of type 'string'", pyliteral.Repr(pathV))
		}
		if !patchPathRE.MatchString(path) {
			return nil, badRequest("Schema error for patch: %s does not match '^(/[\\\\w-]+)+$'", pyliteral.Repr(path))
		}
		v, has := m["value"]
		if op != "remove" && !has {
			return nil, badRequest("'add' and 'replace' operations need a value")
		}
		ops = append(ops, patchOp{Op: op, Path: path, Value: v, HasValue: has})
	}
	return ops, nil
}

// patchRules are a resource's limits on patching.
type patchRules struct {
	resource string          // "node", "port": for messages
	allowed  map[string]bool // root fields a patch may touch
	internal map[string]bool // root fields that exist but are read-only
	// mandatory root fields may not be removed.
	mandatory map[string]bool
}

func (r patchRules) check(ops []patchOp) error {
	for _, op := range ops {
		root := strings.SplitN(op.Path[1:], "/", 2)[0]
		if r.internal[root] {
			return badRequest("'%s' is an internal attribute and can not be updated", op.Path)
		}
		if op.Op == "remove" && r.mandatory[root] && op.Path == "/"+root {
			return badRequest("'%s' is a mandatory attribute and can not be removed", op.Path)
		}
		if !r.allowed[root] {
			if op.Op == "add" && op.Path == "/"+root {
				return badRequest("Adding a new attribute (%s) to the root of the resource is not allowed", op.Path)
			}
			names := make([]string, 0, len(r.allowed))
			for k := range r.allowed {
				names = append(names, k)
			}
			sort.Strings(names)
			return badRequest("Cannot patch %s. Only the following can be updated: %s", op.Path, strings.Join(names, ", "))
		}
	}
	return nil
}

// applyPatch applies ops to doc one at a time, so that an error names the
// operation that failed, as Ironic's apply_jsonpatch.
func applyPatch(doc map[string]any, ops []patchOp) error {
	for _, op := range ops {
		if err := applyOne(doc, op); err != nil {
			return badRequest("Couldn't apply patch '%s'. Reason: %s", pyliteral.Repr(op.asMap()), err.Error())
		}
	}
	return nil
}

func (op patchOp) asMap() map[string]any {
	m := map[string]any{"op": op.Op, "path": op.Path}
	if op.HasValue {
		m["value"] = op.Value
	}
	return m
}

func unescapePointer(tok string) string {
	return strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
}

func applyOne(doc map[string]any, op patchOp) error {
	toks := strings.Split(op.Path[1:], "/")
	for i := range toks {
		toks[i] = unescapePointer(toks[i])
	}
	// Walk to the parent container.
	var parent any = doc
	for _, t := range toks[:len(toks)-1] {
		switch p := parent.(type) {
		case map[string]any:
			next, ok := p[t]
			if !ok {
				return fmt.Errorf("can't %s to a non-existent object '%s'", op.Op, t)
			}
			parent = next
		case []any:
			i, err := arrayIndex(t, len(p), false)
			if err != nil {
				return err
			}
			parent = p[i]
		default:
			return fmt.Errorf("member '%s' not found in %s", t, pyliteral.Repr(parent))
		}
	}
	last := toks[len(toks)-1]
	switch p := parent.(type) {
	case map[string]any:
		_, exists := p[last]
		switch op.Op {
		case "add":
			p[last] = op.Value
		case "replace":
			if !exists {
				return fmt.Errorf("can't replace a non-existent object '%s'", last)
			}
			p[last] = op.Value
		case "remove":
			if !exists {
				return fmt.Errorf("can't remove a non-existent object '%s'", last)
			}
			delete(p, last)
		}
		return nil
	case []any:
		// Arrays live inside maps; rewrite the slice in its container.
		return patchArray(doc, toks, p, last, op)
	}
	return fmt.Errorf("member '%s' not found in %s", last, pyliteral.Repr(parent))
}

func arrayIndex(tok string, n int, forAdd bool) (int, error) {
	i, err := strconv.Atoi(tok)
	if err != nil || i < 0 {
		return 0, fmt.Errorf("'%s' is not a valid sequence index", tok)
	}
	if i > n || (!forAdd && i == n) {
		return 0, fmt.Errorf("can't access index %d of a list of length %d", i, n)
	}
	return i, nil
}

func patchArray(doc map[string]any, toks []string, arr []any, last string, op patchOp) error {
	i, err := arrayIndex(last, len(arr), op.Op == "add")
	if err != nil {
		return err
	}
	var out []any
	switch op.Op {
	case "add":
		out = make([]any, 0, len(arr)+1)
		out = append(out, arr[:i]...)
		out = append(out, op.Value)
		out = append(out, arr[i:]...)
	case "replace":
		out = append([]any(nil), arr...)
		out[i] = op.Value
	case "remove":
		out = append(append([]any(nil), arr[:i]...), arr[i+1:]...)
	}
	// Set the new slice where the old one was.
	var container any = doc
	for _, t := range toks[:len(toks)-2] {
		switch c := container.(type) {
		case map[string]any:
			container = c[t]
		case []any:
			j, _ := strconv.Atoi(t)
			container = c[j]
		}
	}
	key := toks[len(toks)-2]
	switch c := container.(type) {
	case map[string]any:
		c[key] = out
	case []any:
		j, _ := strconv.Atoi(key)
		c[j] = out
	}
	return nil
}

// patchUpdates reports whether an operation of ops touches path or a path
// below it (Ironic's is_path_updated, which looks at every operation's
// path as its documentation says).
func patchUpdates(ops []patchOp, path string) bool {
	for _, op := range ops {
		if op.Path == path || strings.HasPrefix(op.Path, path+"/") {
			return true
		}
	}
	return false
}
