package rules

import (
	"fmt"
	"sort"
	"strings"

	"github.com/ironflow/ironflow/pyliteral"
)

// PhaseMain is the only inspection phase Ironic has: rules run after the
// inspection hooks, before the data is stored.
const PhaseMain = "main"

// Priorities a user's rule may have (Ironic's validate_rule).
const (
	MinPriority = 0
	MaxPriority = 9999
)

// Rule is an inspection rule with Ironic's fields. Conditions and actions
// keep the JSON objects the client sent (op, args, loop, multiple and any
// other key: Ironic's schema allows more).
type Rule struct {
	UUID        string
	Description *string
	Phase       string
	Priority    int
	Sensitive   bool
	Conditions  []map[string]any
	Actions     []map[string]any
}

// signature is an operator's or action's arguments, in the order the
// deprecated list form of args gives them (Ironic reads them from the
// plugin's __call__ signature).
type signature struct {
	required, optional []string
}

// Operators are Ironic's condition operators, each usable inverted with a
// leading "!" (ironic/common/inspection_rules/operators.py).
var operatorArgs = map[string]signature{
	"eq":       {[]string{"values"}, []string{"force_strings"}},
	"lt":       {[]string{"values"}, []string{"force_strings"}},
	"gt":       {[]string{"values"}, []string{"force_strings"}},
	"is-empty": {[]string{"value"}, nil},
	"in-net":   {[]string{"address", "subnet"}, nil},
	"matches":  {[]string{"value", "regex"}, nil},
	"contains": {[]string{"value", "regex"}, nil},
	"one-of":   {[]string{"value"}, []string{"values"}},
	"is-none":  {[]string{"value"}, nil},
	"is-true":  {[]string{"value"}, nil},
	"is-false": {[]string{"value"}, nil},
}

// operatorOrder is Ironic's OPERATORS order, for its schema's enum message.
var operatorOrder = []string{"eq", "lt", "gt", "is-empty", "in-net", "matches", "contains", "one-of", "is-none", "is-true", "is-false"}

// actionArgs are Ironic's actions (ironic/common/inspection_rules/actions.py).
var actionArgs = map[string]signature{
	"fail":                  {[]string{"msg"}, nil},
	"log":                   {[]string{"msg"}, []string{"level"}},
	"set-attribute":         {[]string{"path", "value"}, nil},
	"extend-attribute":      {[]string{"path", "value"}, []string{"unique"}},
	"del-attribute":         {[]string{"path"}, nil},
	"set-capability":        {[]string{"name", "value"}, nil},
	"unset-capability":      {[]string{"name"}, nil},
	"add-trait":             {[]string{"name"}, nil},
	"remove-trait":          {[]string{"name"}, nil},
	"set-plugin-data":       {[]string{"path", "value"}, nil},
	"extend-plugin-data":    {[]string{"path", "value"}, []string{"unique"}},
	"unset-plugin-data":     {[]string{"path"}, nil},
	"set-port-attribute":    {[]string{"port_id", "path", "value"}, nil},
	"extend-port-attribute": {[]string{"port_id", "path", "value"}, []string{"unique"}},
	"del-port-attribute":    {[]string{"port_id", "path"}, nil},
	"api-call":              {[]string{"url"}, []string{"headers", "proxies", "timeout", "retries", "backoff_factor"}},
}

// actionOrder is Ironic's ACTIONS order, for its schema's enum message.
var actionOrder = []string{"fail", "log", "set-attribute", "extend-attribute", "del-attribute", "set-capability",
	"unset-capability", "add-trait", "remove-trait", "set-plugin-data", "extend-plugin-data", "unset-plugin-data",
	"set-port-attribute", "extend-port-attribute", "del-port-attribute", "api-call"}

// Operators lists the condition operators, as Ironic orders them.
func Operators() []string { return append([]string(nil), operatorOrder...) }

// Actions lists the actions, as Ironic orders them.
func Actions() []string { return append([]string(nil), actionOrder...) }

// invertedOperator splits "!eq" into ("eq", true), as Ironic's
// parse_inverted_operator: spaces around are ignored, more than one "!" is
// an error.
func invertedOperator(op string) (string, bool, error) {
	op = strings.TrimSpace(op)
	if strings.Count(op, "!") > 1 {
		return "", false, fmt.Errorf("Multiple exclamation marks are not allowed. To apply the invert of an operation, simply add an exclamation mark (with an optional space) before the operator, e.g. eq - !eq.")
	}
	inv := strings.HasPrefix(op, "!")
	return strings.TrimSpace(strings.TrimLeft(op, "!")), inv, nil
}

// namedArgs turns args into named arguments: a dict as it is, the
// deprecated list form by position.
func (s signature) namedArgs(args any) (map[string]any, error) {
	switch a := args.(type) {
	case map[string]any:
		return a, nil
	case []any:
		if len(a) < len(s.required) {
			return nil, fmt.Errorf("Not enough arguments provided. Missing: %s", strings.Join(s.required[len(a):], ", "))
		}
		out := map[string]any{}
		for i, name := range s.required {
			out[name] = a[i]
		}
		for i, v := range a[len(s.required):] {
			if i < len(s.optional) {
				out[s.optional[i]] = v
			}
		}
		return out, nil
	}
	return nil, fmt.Errorf("args must be either a list or dictionary")
}

// check is Ironic's Base.validate: every required argument given, none
// unknown.
func (s signature) check(args any) error {
	named, err := s.namedArgs(args)
	if err != nil {
		return err
	}
	known := map[string]bool{}
	var missing, unexpected []string
	for _, r := range s.required {
		known[r] = true
		if _, ok := named[r]; !ok {
			missing = append(missing, r)
		}
	}
	for _, o := range s.optional {
		known[o] = true
	}
	for k := range named {
		if !known[k] {
			unexpected = append(unexpected, k)
		}
	}
	sort.Strings(unexpected)
	var msg []string
	if len(missing) > 0 {
		msg = append(msg, "missing required argument(s): "+strings.Join(missing, ", "))
	}
	if len(unexpected) > 0 {
		msg = append(msg, "unexpected argument(s): "+strings.Join(unexpected, ", "))
	}
	if len(msg) > 0 {
		return fmt.Errorf("%s", strings.Join(msg, "; "))
	}
	return nil
}

// Body keys of a rule, as Ironic's create_request_body schema allows them.
var bodyKeys = map[string]bool{"actions": true, "conditions": true, "description": true, "phase": true,
	"priority": true, "sensitive": true, "uuid": true}

// ValidateBody checks a rule as the client sent it (POST, or the result of
// a PATCH) against Ironic's schema for it, then its plugins' arguments,
// and returns Ironic's message for the first problem: "Schema error: ..."
// from the schema, then validate_rule's own ("Priority must be between 0
// and 9999 for user-defined rules.", "Invalid parameters for action
// operator set-attribute: missing required argument(s): value"). The
// caller answers it as a 400.
func ValidateBody(body map[string]any) error {
	return validate(body, false)
}

// validate is ValidateBody; a built-in rule (a file's, LoadBuiltIn) may
// have a priority above MaxPriority, as Ironic's validate_rule allows.
func validate(body map[string]any, builtIn bool) error {
	if err := schemaCheck(body); err != nil {
		return fmt.Errorf("Schema error: %s", err.Error())
	}
	var errs []string
	if p, ok := body["phase"].(string); ok && p != PhaseMain {
		errs = append(errs, fmt.Sprintf("Invalid phase: %s. Valid phases are: %s", p, PhaseMain))
	}
	if p, ok := body["priority"].(float64); ok && p > MaxPriority && !builtIn {
		errs = append(errs, "Priority must be between 0 and 9999 for user-defined rules.")
	}
	conds, _ := body["conditions"].([]any)
	for _, c := range conds {
		cm := c.(map[string]any)
		op, _, _ := invertedOperator(cm["op"].(string))
		if err := operatorArgs[op].check(cm["args"]); err != nil {
			errs = append(errs, fmt.Sprintf("Invalid parameters for condition operator %s: %s", op, err))
		}
	}
	for _, a := range body["actions"].([]any) {
		am := a.(map[string]any)
		op := am["op"].(string)
		if err := actionArgs[op].check(am["args"]); err != nil {
			errs = append(errs, fmt.Sprintf("Invalid parameters for action operator %s: %s", op, err))
		}
	}
	switch len(errs) {
	case 0:
		return nil
	case 1:
		return fmt.Errorf("%s", errs[0])
	}
	return fmt.Errorf("Multiple validation errors occurred: %s", strings.Join(errs, "; "))
}

// schemaCheck is Ironic's create_request_body JSON schema, worded as the
// jsonschema library words its first error.
func schemaCheck(body map[string]any) error {
	keys := make([]string, 0, len(body))
	for k := range body {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var extra []string
	for _, k := range keys {
		if !bodyKeys[k] {
			extra = append(extra, "'"+k+"'")
		}
	}
	if len(extra) == 1 {
		return fmt.Errorf("Additional properties are not allowed (%s was unexpected)", extra[0])
	}
	if len(extra) > 1 {
		return fmt.Errorf("Additional properties are not allowed (%s were unexpected)", strings.Join(extra, ", "))
	}
	actions, ok := body["actions"]
	if !ok {
		return fmt.Errorf("'actions' is a required property")
	}
	al, ok := actions.([]any)
	if !ok {
		return fmt.Errorf("%s is not of type 'array'", pyliteral.ReprDecoded(actions))
	}
	if len(al) == 0 {
		return fmt.Errorf("[] should be non-empty")
	}
	inverted := make([]string, 0, 2*len(operatorOrder))
	inverted = append(inverted, operatorOrder...)
	for _, op := range operatorOrder {
		inverted = append(inverted, "!"+op)
	}
	if c, ok := body["conditions"]; ok {
		cl, ok := c.([]any)
		if !ok {
			return fmt.Errorf("%s is not of type 'array'", pyliteral.ReprDecoded(c))
		}
		for _, item := range cl {
			if err := checkItem(item, inverted, true); err != nil {
				return err
			}
		}
	}
	for _, item := range al {
		if err := checkItem(item, actionOrder, false); err != nil {
			return err
		}
	}
	if d, ok := body["description"]; ok && d != nil {
		s, ok := d.(string)
		if !ok {
			return fmt.Errorf("%s is not of type 'string', 'null'", pyliteral.ReprDecoded(d))
		}
		if len([]rune(s)) > 255 {
			return fmt.Errorf("%s is too long", pyliteral.Repr(s))
		}
	}
	if p, ok := body["phase"]; ok && p != nil {
		s, ok := p.(string)
		if !ok {
			return fmt.Errorf("%s is not of type 'string', 'null'", pyliteral.ReprDecoded(p))
		}
		if len([]rune(s)) > 16 {
			return fmt.Errorf("%s is too long", pyliteral.Repr(s))
		}
	}
	if p, ok := body["priority"]; ok {
		f, ok := p.(float64)
		if !ok || f != float64(int64(f)) {
			return fmt.Errorf("%s is not of type 'integer'", pyliteral.ReprDecoded(p))
		}
		if f < MinPriority {
			return fmt.Errorf("%s is less than the minimum of 0", pyliteral.ReprDecoded(p))
		}
	}
	if s, ok := body["sensitive"]; ok && s != nil {
		if _, ok := s.(bool); !ok {
			return fmt.Errorf("%s is not of type 'boolean', 'null'", pyliteral.ReprDecoded(s))
		}
	}
	if u, ok := body["uuid"]; ok && u != nil {
		if _, ok := u.(string); !ok {
			return fmt.Errorf("%s is not of type 'string', 'null'", pyliteral.ReprDecoded(u))
		}
	}
	return nil
}

func checkItem(item any, ops []string, condition bool) error {
	m, ok := item.(map[string]any)
	if !ok {
		return fmt.Errorf("%s is not of type 'object'", pyliteral.ReprDecoded(item))
	}
	for _, k := range []string{"op", "args"} {
		if _, ok := m[k]; !ok {
			return fmt.Errorf("'%s' is a required property", k)
		}
	}
	op, _ := m["op"].(string)
	known := false
	for _, o := range ops {
		known = known || o == op
	}
	if !known {
		return fmt.Errorf("%s is not one of %s", pyliteral.ReprDecoded(m["op"]), pyliteral.List(ops))
	}
	for _, k := range []string{"args", "loop"} {
		if v, ok := m[k]; ok {
			switch v.(type) {
			case []any, map[string]any:
			default:
				return fmt.Errorf("%s is not of type 'array', 'object'", pyliteral.ReprDecoded(v))
			}
		}
	}
	if condition {
		if v, ok := m["multiple"]; ok {
			s, _ := v.(string)
			if s != "any" && s != "all" && s != "first" && s != "last" {
				return fmt.Errorf("%s is not one of ['any', 'all', 'first', 'last']", pyliteral.ReprDecoded(v))
			}
		}
	}
	return nil
}
