package apiserver

import (
	"bytes"
	"encoding/json"
	"math"
	"sort"
	"strconv"
	"time"
	"unicode/utf8"
)

// viewCtx is what rendering needs besides the resource: the version and the
// base URL of links.
type viewCtx struct {
	minor int
	base  string
	// ring, when read, picks the conductor a node shows (conductors.go).
	ring *conductorRing
}

func strOrNil(p *string) any {
	if p == nil {
		return nil
	}
	return *p
}

func boolOrNil(p *bool) any {
	if p == nil {
		return nil
	}
	return *p
}

// isoTime formats t as Python's datetime.isoformat() of an aware UTC time,
// which is what Ironic prints: microseconds only when not zero.
func isoTime(t time.Time) string {
	t = t.UTC()
	if t.Nanosecond()/1000 == 0 {
		return t.Format("2006-01-02T15:04:05+00:00")
	}
	return t.Format("2006-01-02T15:04:05.000000+00:00")
}

func timeOrNil(p *time.Time) any {
	if p == nil {
		return nil
	}
	return isoTime(*p)
}

func mapOrEmpty(m map[string]any) any {
	if m == nil {
		return map[string]any{}
	}
	return m
}

// fieldSet selects keys; nil means every key the version allows.
type fieldSet map[string]bool

// newFieldSet is the selection for ?fields=; nil fields selects all.
func newFieldSet(fields []string) fieldSet {
	if fields == nil {
		return nil
	}
	sel := fieldSet{}
	for _, f := range fields {
		sel[f] = true
	}
	return sel
}

// writeValue encodes v, taking a fast path for the scalar types node fields
// hold so that listing thousands of nodes stays cheap.
func writeValue(buf *bytes.Buffer, v any) {
	switch t := v.(type) {
	case nil:
		buf.WriteString("null")
	case string:
		writeJSONString(buf, t)
	case bool:
		if t {
			buf.WriteString("true")
		} else {
			buf.WriteString("false")
		}
	case int:
		buf.WriteString(strconv.Itoa(t))
	case int64:
		buf.WriteString(strconv.FormatInt(t, 10))
	case float64:
		if math.IsInf(t, 0) || math.IsNaN(t) {
			buf.WriteString("null")
			return
		}
		writeMarshal(buf, t)
	case map[string]any:
		// Keys sorted, as encoding/json does, without its reflection.
		keys := make([]string, 0, len(t))
		for k := range t {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		buf.WriteByte('{')
		for i, k := range keys {
			if i > 0 {
				buf.WriteByte(',')
			}
			writeJSONString(buf, k)
			buf.WriteByte(':')
			writeValue(buf, t[k])
		}
		buf.WriteByte('}')
	case []any:
		buf.WriteByte('[')
		for i, e := range t {
			if i > 0 {
				buf.WriteByte(',')
			}
			writeValue(buf, e)
		}
		buf.WriteByte(']')
	default:
		writeMarshal(buf, t)
	}
}

func writeMarshal(buf *bytes.Buffer, v any) {
	enc := json.NewEncoder(buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		buf.WriteString("null")
		return
	}
	// Encode appends a newline.
	buf.Truncate(buf.Len() - 1)
}

// writeJSONString writes s as a JSON string without HTML escaping.
func writeJSONString(buf *bytes.Buffer, s string) {
	buf.WriteByte('"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c < utf8.RuneSelf {
			buf.WriteString(s[start:i])
			switch c {
			case '"':
				buf.WriteString(`\"`)
			case '\\':
				buf.WriteString(`\\`)
			case '\n':
				buf.WriteString(`\n`)
			case '\r':
				buf.WriteString(`\r`)
			case '\t':
				buf.WriteString(`\t`)
			default:
				buf.WriteString(`\u00`)
				buf.WriteByte("0123456789abcdef"[c>>4])
				buf.WriteByte("0123456789abcdef"[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			buf.WriteString(s[start:i])
			buf.WriteString(`\ufffd`)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			buf.WriteString(s[start:i])
			buf.WriteString(`\u202`)
			buf.WriteByte("0123456789abcdef"[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	buf.WriteString(s[start:])
	buf.WriteByte('"')
}
