package bmc

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// ErrInvalidInput: the request itself is refused (a BIOS value the
// attribute registry forbids) before anything reached the BMC. Not
// retryable.
var ErrInvalidInput = errors.New("invalid request")

// BIOSSetting is one BIOS attribute with what the BMC's attribute registry
// says of it, in the fields of Ironic's BIOS settings (API 1.74). Value is
// the attribute's value as text, as Ironic stores it.
type BIOSSetting struct {
	Name            string   `json:"name"`
	Value           string   `json:"value"`
	AttributeType   string   `json:"attribute_type,omitempty"`
	AllowableValues []string `json:"allowable_values,omitempty"`
	LowerBound      *int64   `json:"lower_bound,omitempty"`
	UpperBound      *int64   `json:"upper_bound,omitempty"`
	MinLength       *int64   `json:"min_length,omitempty"`
	MaxLength       *int64   `json:"max_length,omitempty"`
	ReadOnly        *bool    `json:"read_only,omitempty"`
	ResetRequired   *bool    `json:"reset_required,omitempty"`
	Unique          *bool    `json:"unique,omitempty"`
}

// BIOSValue is one requested setting of the apply_configuration step
// (Ironic's {"name": ..., "value": ...}).
type BIOSValue struct {
	Name  string `json:"name"`
	Value any    `json:"value"`
}

// BIOSConfigurer is a driver that reads and writes BIOS settings out of
// band (the redfish bios interface). Settings written apply on the
// machine's next reset: the caller reboots and then calls VerifyBIOS.
type BIOSConfigurer interface {
	// BIOSSettings reads the current attributes and their registry
	// entries (none when the BMC publishes no registry).
	BIOSSettings(ctx context.Context) ([]BIOSSetting, error)
	// ApplyBIOS checks the values against the registry and writes them
	// as pending settings; nothing is written when one is refused.
	ApplyBIOS(ctx context.Context, values []BIOSValue) error
	// ResetBIOS asks for the factory defaults on the next reset.
	ResetBIOS(ctx context.Context) error
	// VerifyBIOS reports the values not (yet) in effect, and whether the
	// BMC still holds settings pending.
	VerifyBIOS(ctx context.Context, values []BIOSValue) (mismatch []string, pending bool, err error)
}

// BIOSText is an attribute value as Ironic's BIOS setting stores it: the
// Python str() of the value (True, False, 4, text).
func BIOSText(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case bool:
		if x {
			return "True"
		}
		return "False"
	case float64:
		if x == math.Trunc(x) && math.Abs(x) < 1e15 {
			return strconv.FormatInt(int64(x), 10)
		}
		return strconv.FormatFloat(x, 'g', -1, 64)
	}
	return fmt.Sprint(v)
}

// checkBIOSValues refuses, before anything is written, a value the
// registry forbids: an unknown attribute (when a registry or the current
// attributes are known), a read-only one, an enumeration value not
// allowed, an integer out of bounds, a string of the wrong length. It
// returns the values converted to the attribute's JSON type (a user's "4"
// for an Integer attribute is written as 4).
func checkBIOSValues(current map[string]any, registry map[string]BIOSSetting, values []BIOSValue) (map[string]any, error) {
	if len(values) == 0 {
		return nil, fmt.Errorf("%w: no BIOS settings given", ErrInvalidInput)
	}
	out := make(map[string]any, len(values))
	var problems []string
	for _, v := range values {
		if v.Name == "" {
			problems = append(problems, "a setting has no name")
			continue
		}
		reg, inRegistry := registry[v.Name]
		cur, known := current[v.Name]
		if !inRegistry && !known {
			problems = append(problems, fmt.Sprintf("attribute %s is not a BIOS attribute of this system", v.Name))
			continue
		}
		if reg.ReadOnly != nil && *reg.ReadOnly {
			problems = append(problems, fmt.Sprintf("attribute %s is read-only", v.Name))
			continue
		}
		typ := reg.AttributeType
		if typ == "" { // no registry entry: keep the current value's type
			switch cur.(type) {
			case float64:
				typ = "Integer"
			case bool:
				typ = "Boolean"
			default:
				typ = "String"
			}
		}
		val, err := convertBIOSValue(typ, reg, v.Value)
		if err != nil {
			problems = append(problems, fmt.Sprintf("attribute %s: %v", v.Name, err))
			continue
		}
		out[v.Name] = val
	}
	if len(problems) > 0 {
		return nil, fmt.Errorf("%w: BIOS settings refused: %s", ErrInvalidInput, strings.Join(problems, "; "))
	}
	return out, nil
}

func convertBIOSValue(typ string, reg BIOSSetting, v any) (any, error) {
	text := BIOSText(v)
	switch typ {
	case "Integer":
		var n int64
		switch x := v.(type) {
		case float64:
			if x != math.Trunc(x) {
				return nil, fmt.Errorf("value %v is not an integer", x)
			}
			n = int64(x)
		default:
			p, err := strconv.ParseInt(strings.TrimSpace(text), 10, 64)
			if err != nil {
				return nil, fmt.Errorf("value %q is not an integer", text)
			}
			n = p
		}
		if reg.LowerBound != nil && n < *reg.LowerBound {
			return nil, fmt.Errorf("value %d is below the lower bound %d", n, *reg.LowerBound)
		}
		if reg.UpperBound != nil && n > *reg.UpperBound {
			return nil, fmt.Errorf("value %d is above the upper bound %d", n, *reg.UpperBound)
		}
		return n, nil
	case "Boolean":
		if b, ok := v.(bool); ok {
			return b, nil
		}
		if b, ok := parseBoolWord(text); ok {
			return b, nil
		}
		return nil, fmt.Errorf("value %q is not a boolean", text)
	case "Enumeration":
		if len(reg.AllowableValues) > 0 && !slices.Contains(reg.AllowableValues, text) {
			return nil, fmt.Errorf("value %q is not one of %s", text, strings.Join(reg.AllowableValues, ", "))
		}
		return text, nil
	default: // String, Password
		if reg.MinLength != nil && int64(len(text)) < *reg.MinLength {
			return nil, fmt.Errorf("value is shorter than the minimum length %d", *reg.MinLength)
		}
		if reg.MaxLength != nil && int64(len(text)) > *reg.MaxLength {
			return nil, fmt.Errorf("value is longer than the maximum length %d", *reg.MaxLength)
		}
		return text, nil
	}
}

// biosMismatch lists the values the current attributes do not hold, as
// "Name: wanted X, is Y".
func biosMismatch(current map[string]any, values []BIOSValue) []string {
	var out []string
	for _, v := range values {
		want, got := BIOSText(v.Value), BIOSText(current[v.Name])
		if b, ok := v.Value.(bool); ok {
			want = BIOSText(b)
		} else if cb, ok := current[v.Name].(bool); ok {
			if wb, ok := parseBoolWord(want); ok && wb == cb {
				continue
			}
		}
		if want != got {
			out = append(out, fmt.Sprintf("%s: wanted %q, is %q", v.Name, want, got))
		}
	}
	sort.Strings(out)
	return out
}
