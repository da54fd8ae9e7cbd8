package rules

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/ironflow/ironflow/pyliteral"
)

// sensitiveKeys are the inventory and plugin_data keys whose values rules
// see as "***" (Ironic's SENSITIVE_FIELDS with [inspection_rules]
// mask_secrets = always, its default).
var sensitiveKeys = map[string]bool{"password": true, "auth_token": true, "bmc_password": true}

const masked = "***"

// errMissing is Python's KeyError while formatting: Ironic's is-empty
// treats such a field as None.
var errMissing = errors.New("missing field")

// scope is what a rule's "{...}" fields may name: node (attributes with
// "."), inventory, plugin_data and, inside a loop, item.
type scope struct {
	node       map[string]any
	inventory  map[string]any
	pluginData map[string]any
	item       any
	inLoop     bool
	mask       bool
}

// format is Python's str.format(**scope) as Ironic's safe_format uses it:
// on any error the string comes back as it was, except that a missing field
// under is-empty gives nil (the second result false).
func (sc scope) format(s string, op string) (any, bool) {
	out, err := sc.formatString(s)
	if err != nil {
		if errors.Is(err, errMissing) && op == "is-empty" {
			return nil, false
		}
		return s, true
	}
	return out, true
}

func (sc scope) formatString(s string) (string, error) {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch c {
		case '{':
			if i+1 < len(s) && s[i+1] == '{' {
				b.WriteByte('{')
				i++
				continue
			}
			end := strings.IndexByte(s[i:], '}')
			if end < 0 {
				return "", fmt.Errorf("Single '{' encountered in format string")
			}
			v, err := sc.field(s[i+1 : i+end])
			if err != nil {
				return "", err
			}
			b.WriteString(v)
			i += end
		case '}':
			if i+1 < len(s) && s[i+1] == '}' {
				b.WriteByte('}')
				i++
				continue
			}
			return "", fmt.Errorf("Single '}' encountered in format string")
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), nil
}

// field renders one replacement field: name, then .attr and [key] parts,
// then an optional !s or !r conversion. Format specs are not supported (an
// error, so the string stays as written).
func (sc scope) field(f string) (string, error) {
	conv := ""
	if i := strings.IndexByte(f, '!'); i >= 0 {
		f, conv = f[:i], f[i+1:]
	}
	if strings.ContainsRune(f, ':') || strings.ContainsRune(conv, ':') {
		return "", fmt.Errorf("format specs are not supported")
	}
	v, err := sc.lookup(f)
	if err != nil {
		return "", err
	}
	switch conv {
	case "", "s":
		return str(v), nil
	case "r":
		return pyliteral.ReprDecoded(v), nil
	}
	return "", fmt.Errorf("Unknown conversion specifier %s", conv)
}

// lookup resolves a field name such as inventory[interfaces][0][name] or
// node.driver_info[ipmi_address].
func (sc scope) lookup(f string) (any, error) {
	end := strings.IndexAny(f, ".[")
	if end < 0 {
		end = len(f)
	}
	name, rest := f[:end], f[end:]
	var cur any
	isNode := false
	// Only the inventory and plugin_data are masked (Ironic wraps those
	// two in ShallowMaskDict); the node and loop items are seen as they are.
	mask := sc.mask && (name == "inventory" || name == "plugin_data")
	switch {
	case name == "node":
		cur, isNode = sc.node, true
	case name == "inventory":
		cur = sc.inventory
	case name == "plugin_data":
		cur = sc.pluginData
	case name == "item" && sc.inLoop:
		cur = sc.item
	case name == "":
		return nil, fmt.Errorf("Replacement index 0 out of range for positional args tuple")
	default:
		return nil, fmt.Errorf("%w: %s", errMissing, name)
	}
	for rest != "" {
		switch rest[0] {
		case '.':
			end := strings.IndexAny(rest[1:], ".[")
			if end < 0 {
				end = len(rest) - 1
			}
			attr := rest[1 : 1+end]
			rest = rest[1+end:]
			m, ok := cur.(map[string]any)
			if !isNode || !ok {
				return nil, fmt.Errorf("object has no attribute %s", attr)
			}
			v, ok := m[attr]
			if !ok {
				return nil, fmt.Errorf("'Node' object has no attribute '%s'", attr)
			}
			cur, isNode = v, false
		case '[':
			end := strings.IndexByte(rest, ']')
			if end < 0 {
				return nil, fmt.Errorf("Missing ']' in format string")
			}
			key := rest[1:end]
			rest = rest[end+1:]
			if isNode {
				return nil, fmt.Errorf("'Node' object is not subscriptable")
			}
			v, err := index(cur, key, mask)
			if err != nil {
				return nil, err
			}
			cur = v
		default:
			return nil, fmt.Errorf("Only '.' or '[' may follow ']' in format field specifier")
		}
	}
	return cur, nil
}

// index is Python's value[key] in a format field: a key of digits is an
// int (a list index; a JSON dict has no int keys), anything else a string.
func index(v any, key string, mask bool) (any, error) {
	n, numErr := strconv.Atoi(key)
	isInt := numErr == nil && key != "" && strings.Trim(key, "0123456789") == ""
	switch t := v.(type) {
	case map[string]any:
		if isInt {
			return nil, fmt.Errorf("%w: %d", errMissing, n)
		}
		x, ok := t[key]
		if !ok {
			return nil, fmt.Errorf("%w: '%s'", errMissing, key)
		}
		if mask && sensitiveKeys[key] {
			return masked, nil
		}
		return x, nil
	case []any:
		if !isInt {
			return nil, fmt.Errorf("list indices must be integers or slices, not str")
		}
		if n >= len(t) {
			return nil, fmt.Errorf("list index out of range")
		}
		return t[n], nil
	}
	return nil, fmt.Errorf("'%s' object is not subscriptable", typeName(v))
}

// str is Python's str() of a decoded JSON value.
func str(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	return pyliteral.ReprDecoded(v)
}

// typeName is Python's type(v).__name__ of a decoded JSON value.
func typeName(v any) string {
	switch t := v.(type) {
	case nil:
		return "NoneType"
	case bool:
		return "bool"
	case string:
		return "str"
	case float64:
		if t == float64(int64(t)) {
			return "int"
		}
		return "float"
	case []any:
		return "list"
	case map[string]any:
		return "dict"
	}
	return fmt.Sprintf("%T", v)
}

// interpolate is Ironic's Base.interpolate_variables: strings formatted,
// dicts (keys and values) and lists formatted deeply, anything else as it
// is. Inside a loop a string is formatted twice, so that an item may itself
// hold "{inventory[...]}".
func (sc scope) interpolate(v any, op string) any {
	switch t := v.(type) {
	case string:
		out, ok := sc.format(t, op)
		if !ok {
			return nil
		}
		if s, isStr := out.(string); isStr && sc.inLoop {
			out, ok = sc.format(s, op)
			if !ok {
				return nil
			}
		}
		return out
	case map[string]any:
		m := make(map[string]any, len(t))
		for k, x := range t {
			key := k
			if f, ok := sc.format(k, op); ok {
				key, _ = f.(string)
			}
			m[key] = sc.interpolate(x, op)
		}
		return m
	case []any:
		l := make([]any, len(t))
		for i, x := range t {
			l[i] = sc.interpolate(x, op)
		}
		return l
	}
	return v
}
