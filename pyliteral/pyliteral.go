// Package pyliteral writes values as Python writes them. Ironic is Python:
// its messages quote what a client sent with repr(), str() or a list's
// repr, and its error bodies are json.dumps; ironflow answers in Ironic's
// words, so it writes those literals the same way. Pure functions of their
// input, no I/O.
package pyliteral

import (
	"encoding/json"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
)

// Repr renders a decoded JSON value as Python's repr() does: None, True,
// 'text', 1, 1.0, {'a': 1} (keys sorted, for a stable message), [1, 2].
// A json.Number keeps the kind the client wrote (1 or 1.0); a float64 is a
// Python float.
func Repr(v any) string { return repr(v, false) }

// ReprDecoded is Repr of a value json.Unmarshal decoded into any, whose
// numbers are all float64: a whole number is written as the int the JSON
// most likely held (1, not 1.0), as Ironic's step messages show a step's
// args.
func ReprDecoded(v any) string { return repr(v, true) }

func repr(v any, wholeAsInt bool) string {
	switch t := v.(type) {
	case nil:
		return "None"
	case bool:
		if t {
			return "True"
		}
		return "False"
	case string:
		if strings.Contains(t, "'") && !strings.Contains(t, `"`) {
			return `"` + t + `"`
		}
		return "'" + strings.ReplaceAll(strings.ReplaceAll(t, `\`, `\\`), "'", `\'`) + "'"
	case json.Number:
		if i, err := t.Int64(); err == nil {
			return strconv.FormatInt(i, 10)
		}
		if f, err := t.Float64(); err == nil {
			return Float(f)
		}
		return t.String()
	case float64:
		if wholeAsInt {
			if t == math.Trunc(t) && math.Abs(t) < 1e15 {
				return strconv.FormatInt(int64(t), 10)
			}
			return strconv.FormatFloat(t, 'g', -1, 64)
		}
		return Float(t)
	case int:
		return strconv.Itoa(t)
	case map[string]any:
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		parts := make([]string, len(keys))
		for i, k := range keys {
			parts[i] = repr(k, wholeAsInt) + ": " + repr(t[k], wholeAsInt)
		}
		return "{" + strings.Join(parts, ", ") + "}"
	case []any:
		parts := make([]string, len(t))
		for i, e := range t {
			parts[i] = repr(e, wholeAsInt)
		}
		return "[" + strings.Join(parts, ", ") + "]"
	}
	return fmt.Sprint(v)
}

// Float is Python's repr of a float: a whole number keeps its ".0".
func Float(f float64) string {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return strconv.FormatFloat(f, 'g', -1, 64)
	}
	if f == math.Trunc(f) && math.Abs(f) < 1e16 {
		return strconv.FormatFloat(f, 'f', 1, 64)
	}
	return strconv.FormatFloat(f, 'g', -1, 64)
}

// Str is Python's str() of a decoded JSON value: a string as it is,
// anything else as Repr.
func Str(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	return Repr(v)
}

// List is the repr of a list of plain names (driver and interface names,
// field names): ['a', 'b'].
func List(items []string) string {
	q := make([]string, len(items))
	for i, it := range items {
		q[i] = "'" + it + "'"
	}
	return "[" + strings.Join(q, ", ") + "]"
}

// Truthy is Python's truth value of a JSON value.
func Truthy(v any) bool {
	switch x := v.(type) {
	case nil:
		return false
	case bool:
		return x
	case string:
		return x != ""
	case float64:
		return x != 0
	case json.Number:
		f, err := x.Float64()
		return err != nil || f != 0
	case []any:
		return len(x) > 0
	case map[string]any:
		return len(x) > 0
	}
	return true
}

// JSONString encodes s as a JSON string the way Python's json.dumps does with
// ensure_ascii: no HTML escaping, every non-ASCII rune as \uXXXX (surrogate
// pairs above the BMP). Invalid UTF-8 becomes U+FFFD.
func JSONString(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('"')
	for _, r := range s {
		switch r {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		default:
			switch {
			case r < 0x20 || (r >= 0x7f && r <= 0xffff):
				writeU(&b, r)
			case r > 0xffff:
				r -= 0x10000
				writeU(&b, 0xd800+(r>>10))
				writeU(&b, 0xdc00+(r&0x3ff))
			default:
				b.WriteRune(r)
			}
		}
	}
	b.WriteByte('"')
	return b.String()
}

// writeU writes r as JSON's \\uXXXX escape.
func writeU(b *strings.Builder, r rune) {
	h := strconv.FormatInt(int64(r), 16)
	b.WriteString(`\u`)
	b.WriteString(strings.Repeat("0", 4-len(h)))
	b.WriteString(h)
}
