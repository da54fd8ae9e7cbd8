package rules

import (
	"fmt"
	"net/netip"
	"reflect"
	"regexp"
	"strings"
)

// evaluate runs one condition operator on its processed arguments, with
// Python's semantics for the comparisons (ironic/common/inspection_rules/
// operators.py).
func evaluate(op string, args map[string]any) (bool, error) {
	switch op {
	case "eq", "lt", "gt":
		values, ok := args["values"].([]any)
		if !ok {
			return false, conditionFailure("Failed to check condition: '%s' on values: %s: Expected list for 'values', got: %s",
				op, str(args["values"]), typeName(args["values"]))
		}
		if len(values) < 2 {
			return true, nil
		}
		if force, _ := args["force_strings"].(bool); force {
			vs := make([]any, len(values))
			for i, v := range values {
				vs[i] = str(v)
			}
			values = vs
		}
		for i := 0; i+1 < len(values); i++ {
			ok, err := compare(op, values[i], values[i+1])
			if err != nil || !ok {
				return false, err
			}
		}
		return true, nil
	case "is-empty":
		switch str(args["value"]) {
		case "", "None", "[]", "{}":
			return true, nil
		}
		return false, nil
	case "in-net":
		return inNet(args["address"], args["subnet"])
	case "matches", "contains":
		regex, ok := args["regex"].(string)
		if !ok {
			return false, executionFailure("invalid regular expression: %s", str(args["regex"]))
		}
		if op == "matches" {
			if !strings.HasSuffix(regex, "$") {
				regex += "$"
			}
			regex = "^(?:" + regex + ")"
		}
		re, err := regexp.Compile(regex)
		if err != nil {
			return false, executionFailure("invalid regular expression: %s", err)
		}
		return re.MatchString(str(args["value"])), nil
	case "one-of":
		switch values := args["values"].(type) {
		case nil:
			return false, nil
		case []any:
			for _, v := range values {
				if equal(args["value"], v) {
					return true, nil
				}
			}
			return false, nil
		case string:
			// Python's "in" on a string is a substring test.
			s, ok := args["value"].(string)
			if !ok {
				return false, fmt.Errorf("'in <string>' requires string as left operand, not %s", typeName(args["value"]))
			}
			return strings.Contains(values, s), nil
		case map[string]any:
			s, ok := args["value"].(string)
			_, in := values[s]
			return ok && in, nil
		default:
			return false, fmt.Errorf("argument of type '%s' is not iterable", typeName(values))
		}
	case "is-none":
		return args["value"] == nil, nil
	case "is-true":
		switch v := args["value"].(type) {
		case bool:
			return v, nil
		case float64:
			return v != 0, nil
		case string:
			l := strings.ToLower(v)
			return l == "yes" || l == "true", nil
		}
		return false, nil
	case "is-false":
		switch v := args["value"].(type) {
		case bool:
			return !v, nil
		case float64:
			return v == 0, nil
		case string:
			l := strings.ToLower(v)
			return l == "no" || l == "false", nil
		}
		return args["value"] == nil, nil
	}
	return false, fmt.Errorf("Unsupported operator '%s'.", op)
}

// equal is Python's == on decoded JSON values (1 == 1.0, True == 1).
func equal(a, b any) bool {
	fa, aNum := number(a)
	fb, bNum := number(b)
	if aNum && bNum {
		return fa == fb
	}
	return reflect.DeepEqual(a, b)
}

func number(v any) (float64, bool) {
	switch t := v.(type) {
	case float64:
		return t, true
	case bool:
		if t {
			return 1, true
		}
		return 0, true
	}
	return 0, false
}

// compare is Python's a == b, a < b or a > b; ordering values of different
// kinds is Python's TypeError.
func compare(op string, a, b any) (bool, error) {
	if op == "eq" {
		return equal(a, b), nil
	}
	sym := map[string]string{"lt": "<", "gt": ">"}[op]
	if fa, ok := number(a); ok {
		if fb, ok := number(b); ok {
			if op == "lt" {
				return fa < fb, nil
			}
			return fa > fb, nil
		}
	}
	sa, aStr := a.(string)
	sb, bStr := b.(string)
	if aStr && bStr {
		if op == "lt" {
			return sa < sb, nil
		}
		return sa > sb, nil
	}
	return false, fmt.Errorf("'%s' not supported between instances of '%s' and '%s'", sym, typeName(a), typeName(b))
}

// inNet is Ironic's in-net: the address in the subnet (a bare address is a
// network of one, as netaddr takes it).
func inNet(address, subnet any) (bool, error) {
	sub, _ := subnet.(string)
	var prefix netip.Prefix
	var err error
	if strings.Contains(sub, "/") {
		prefix, err = netip.ParsePrefix(sub)
	} else {
		var a netip.Addr
		a, err = netip.ParseAddr(sub)
		if err == nil {
			prefix = netip.PrefixFrom(a, a.BitLen())
		}
	}
	if err != nil {
		return false, executionFailure("invalid value: invalid IPNetwork %s", str(subnet))
	}
	s, _ := address.(string)
	a, err := netip.ParseAddr(s)
	if err != nil {
		return false, fmt.Errorf("failed to detect a valid IP address from %s", pyRepr(address))
	}
	return prefix.Masked().Contains(a.Unmap()), nil
}

func pyRepr(v any) string {
	if s, ok := v.(string); ok {
		return "'" + s + "'"
	}
	return str(v)
}
