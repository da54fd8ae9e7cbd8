package rules

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
)

// Subject is what rules read and change: copies the caller made of the
// node (its fields by Ironic's JSON names, traits apart), the node's ports
// (each by Ironic's JSON names, with "uuid"), the inventory and the
// plugin_data. Apply changes these maps in place and nothing else.
type Subject struct {
	NodeUUID   string
	Node       map[string]any
	Traits     []string
	Ports      []map[string]any
	Inventory  map[string]any
	PluginData map[string]any

	// Logs collects the log action's messages for the caller to log.
	Logs []LogEntry

	// Get performs the api-call action's HTTP GET (nil: the action
	// fails).
	Get func(ctx context.Context, req APICall) error

	// MaskSecrets is [inspection_rules]mask_secrets: "always" (the
	// default when empty), "never" or "sensitive" (only rules not marked
	// sensitive see "***").
	MaskSecrets string
}

// LogEntry is one message of the log action.
type LogEntry struct {
	Rule, Level, Message string
}

// APICall is the api-call action's request.
type APICall struct {
	URL           string
	Headers       map[string]string
	TimeoutSecs   float64
	Retries       int
	BackoffFactor float64
}

// Failure is Ironic's HardwareInspectionFailure family: the fail action,
// and actions or conditions that cannot run. Its text is what Ironic
// writes (after "Failed to finish inspection: ") into last_error.
type Failure struct{ msg string }

func (f *Failure) Error() string { return f.msg }

func inspectionFailure(format string, args ...any) error {
	return &Failure{"Failed to inspect hardware. Reason: " + fmt.Sprintf(format, args...)}
}

func actionFailure(format string, args ...any) error {
	return &Failure{"Inspection rule action execution failed. Reason: " + fmt.Sprintf(format, args...)}
}

func conditionFailure(format string, args ...any) error {
	return &Failure{"Inspection rule condition check failed. Reason: " + fmt.Sprintf(format, args...)}
}

func executionFailure(format string, args ...any) error {
	return &Failure{"Inspection rule execution failed. Reason: " + fmt.Sprintf(format, args...)}
}

// readOnlyNodeFields are node fields a rule may not set or delete: the
// workflow that runs the inspection owns them (Ironic sets whatever
// attribute is named; ironflow's states and locks are not the rules' to
// write).
var readOnlyNodeFields = map[string]bool{
	"uuid": true, "id": true, "created_at": true, "updated_at": true, "provision_state": true,
	"target_provision_state": true, "provision_updated_at": true, "power_state": true, "target_power_state": true,
	"reservation": true, "allocation_uuid": true, "driver_internal_info": true, "inspection_started_at": true,
	"inspection_finished_at": true, "traits": true, "last_error": true,
}

// readOnlyPortFields likewise for ports: an inspection writes a port's
// local_link_connection, pxe_enabled, physical_network and extra only.
var readOnlyPortFields = map[string]bool{"uuid": true, "id": true, "node_uuid": true, "created_at": true, "updated_at": true,
	"address": true, "internal_info": true, "is_smartnic": true, "name": true, "portgroup_uuid": true}

// Sort orders rules as Ironic applies them: priority, highest first; equal
// priorities keep their given order (the store's, by creation).
func Sort(rs []Rule) {
	sort.SliceStable(rs, func(i, j int) bool { return rs[i].Priority > rs[j].Priority })
}

// Apply runs the rules of phase main over s, in priority order (Ironic's
// engine.apply_rules): a rule whose conditions all hold has its actions
// run in order. The first error stops everything: a *Failure as it is,
// anything else as "Failed to apply rule <uuid> to node <node>: ...". On an
// error s may be half-changed; the caller drops it.
func Apply(ctx context.Context, rs []Rule, s *Subject) error {
	ordered := make([]Rule, 0, len(rs))
	for _, r := range rs {
		if r.Phase == "" || r.Phase == PhaseMain {
			ordered = append(ordered, r)
		}
	}
	Sort(ordered)
	if s.PluginData == nil {
		s.PluginData = map[string]any{}
	}
	for _, r := range ordered {
		if err := applyRule(ctx, r, s); err != nil {
			var f *Failure
			if errors.As(err, &f) {
				return err
			}
			return fmt.Errorf("Failed to apply rule %s to node %s: %s", r.UUID, s.NodeUUID, err.Error())
		}
	}
	return nil
}

func applyRule(ctx context.Context, r Rule, s *Subject) error {
	mask := true
	switch s.MaskSecrets {
	case "never":
		mask = false
	case "sensitive":
		mask = !r.Sensitive
	}
	base := scope{node: s.Node, inventory: s.Inventory, pluginData: s.PluginData, mask: mask}
	for _, c := range r.Conditions {
		ok, err := checkCondition(c, base)
		if err != nil {
			return err
		}
		if !ok {
			return nil
		}
	}
	for _, a := range r.Actions {
		op, _ := a["op"].(string)
		sig, known := actionArgs[op]
		if !known {
			return fmt.Errorf("Unsupported action: '%s'. Supported actions are: %s.", op, strings.Join(actionOrder, ", "))
		}
		run := func(sc scope) error {
			args, err := processArgs(sig, a, sc, op, actionFormatted[op])
			if err != nil {
				return err
			}
			return runAction(ctx, r, op, args, s)
		}
		switch loop := a["loop"].(type) {
		case []any:
			if len(loop) == 0 {
				if err := run(base); err != nil {
					return err
				}
				continue
			}
			for _, item := range loop {
				sc := base
				sc.item, sc.inLoop = item, true
				if err := run(sc); err != nil {
					return err
				}
			}
		case map[string]any:
			sc := base
			sc.item, sc.inLoop = loop, len(loop) > 0
			if err := run(sc); err != nil {
				return err
			}
		default:
			if err := run(base); err != nil {
				return err
			}
		}
	}
	return nil
}

// Arguments each operator and action formats with "{...}" fields
// (FORMATTED_ARGS in Ironic); inside a loop every argument is formatted.
var operatorFormatted = map[string][]string{
	"eq": {"values"}, "lt": {"values"}, "gt": {"values"}, "is-empty": {"value"}, "in-net": {"address", "subnet"},
	"matches": {"value"}, "contains": {"value"}, "one-of": {"value"}, "is-none": {"value"}, "is-true": {"value"},
	"is-false": {"value"},
}

var actionFormatted = map[string][]string{
	"log": {"msg"}, "set-attribute": {"value"}, "extend-attribute": {"value"}, "set-capability": {"value"},
	"set-plugin-data": {"value"}, "extend-plugin-data": {"value"}, "set-port-attribute": {"value"},
	"extend-port-attribute": {"value"}, "api-call": {"url"},
}

// processArgs is Ironic's _process_args: named arguments, the formatted
// ones (or all, in a loop) interpolated.
func processArgs(sig signature, op map[string]any, sc scope, opName string, formatted []string) (map[string]any, error) {
	named, err := sig.namedArgs(op["args"])
	if err != nil {
		return nil, executionFailure("%s", err)
	}
	out := make(map[string]any, len(named))
	for k, v := range named {
		fmtd := sc.inLoop
		for _, f := range formatted {
			fmtd = fmtd || f == k
		}
		if fmtd {
			v = sc.interpolate(v, opName)
		}
		out[k] = v
	}
	return out, nil
}

func checkCondition(c map[string]any, base scope) (bool, error) {
	rawOp, _ := c["op"].(string)
	op, inverted, err := invertedOperator(rawOp)
	if err != nil {
		return false, err
	}
	sig, known := operatorArgs[op]
	if !known {
		return false, fmt.Errorf("Unsupported operator: '%s'. Supported operators are: %s.", op, strings.Join(operatorOrder, ", "))
	}
	check := func(sc scope) (bool, error) {
		args, err := processArgs(sig, c, sc, op, operatorFormatted[op])
		if err != nil {
			return false, err
		}
		if sc.inLoop && (op == "eq" || op == "lt" || op == "gt") {
			// Formatting in a loop makes numbers strings: Ironic compares
			// everything as strings then.
			args["force_strings"] = true
		}
		ok, err := evaluate(op, args)
		if err != nil {
			return false, err
		}
		return ok != inverted, nil
	}
	multiple, _ := c["multiple"].(string)
	if multiple == "" {
		multiple = "any"
	}
	switch loop := c["loop"].(type) {
	case []any:
		if len(loop) == 0 {
			return check(base)
		}
		var results []bool
		for _, item := range loop {
			sc := base
			sc.item, sc.inLoop = item, true
			ok, err := check(sc)
			if err != nil {
				return false, err
			}
			if multiple == "first" && ok {
				return true, nil
			}
			if multiple == "last" {
				results = results[:0]
			}
			results = append(results, ok)
		}
		return combine(multiple, results), nil
	case map[string]any:
		if len(loop) == 0 {
			return check(base)
		}
		sc := base
		sc.item, sc.inLoop = loop, true
		return check(sc)
	}
	return check(base)
}

// combine is Ironic's check_with_loop verdict over a loop's results.
func combine(multiple string, results []bool) bool {
	switch multiple {
	case "any":
		for _, r := range results {
			if r {
				return true
			}
		}
		return false
	case "all":
		for _, r := range results {
			if !r {
				return false
			}
		}
		return true
	}
	return len(results) > 0 && results[0]
}
