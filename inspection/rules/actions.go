package rules

import (
	"context"
	"fmt"
	"strings"

	"github.com/ironflow/ironflow/pyliteral"
)

// maxTraits is Ironic's limit of traits per node.
const maxTraits = 50

// normalizePath is Ironic's normalize_path: "/a/b" or "a.b" into parts.
func normalizePath(path string) []string {
	if strings.Contains(path, "/") {
		return strings.Split(strings.Trim(path, "/"), "/")
	}
	return strings.Split(path, ".")
}

func argString(args map[string]any, name string) string {
	return str(args[name])
}

// runAction runs one action on its processed arguments
// (ironic/common/inspection_rules/actions.py).
func runAction(ctx context.Context, r Rule, op string, args map[string]any, s *Subject) error {
	switch op {
	case "fail":
		return inspectionFailure("%s", str(args["msg"]))
	case "log":
		level := "info"
		if l, ok := args["level"]; ok {
			level = strings.ToLower(str(l))
		}
		switch level {
		case "debug", "info", "warning", "error", "critical":
		default:
			return executionFailure("Invalid log level: %s. Choose from {'debug', 'info', 'warning', 'error', 'critical'}", level)
		}
		s.Logs = append(s.Logs, LogEntry{Rule: r.UUID, Level: level, Message: str(args["msg"])})
		return nil
	case "set-attribute", "extend-attribute", "del-attribute":
		path := argString(args, "path")
		var err error
		switch op {
		case "set-attribute":
			err = setPath(s.Node, normalizePath(path), args["value"], readOnlyNodeFields, "Node")
			if err != nil {
				return actionFailure("Failed to set attribute %s with value %s: %s", path, str(args["value"]), err)
			}
		case "extend-attribute":
			err = extendPath(s.Node, normalizePath(path), args["value"], pyliteral.Truthy(args["unique"]), readOnlyNodeFields, "Node")
			if err != nil {
				return actionFailure("Failed to extend attribute %s: %s", path, err)
			}
		default:
			err = deletePath(s.Node, normalizePath(path), readOnlyNodeFields, "Node")
			if err != nil {
				return actionFailure("Failed to delete attribute at %s: %s", path, err)
			}
		}
		return nil
	case "set-capability", "unset-capability":
		name := argString(args, "name")
		props, ok := s.Node["properties"].(map[string]any)
		if !ok {
			props = map[string]any{}
			s.Node["properties"] = props
		}
		caps, _ := props["capabilities"].(string)
		if op == "set-capability" {
			value, ok := args["value"].(string)
			if !ok {
				return actionFailure("Failed to set capability %s: sequence item 1: expected str instance, %s found", name, typeName(args["value"]))
			}
			// Ironic's add_node_capability appends, even when the name is
			// there already.
			if caps != "" {
				caps += ","
			}
			props["capabilities"] = caps + name + ":" + value
			return nil
		}
		var kept []string
		for _, c := range strings.Split(caps, ",") {
			if !strings.HasPrefix(c, name+":") {
				kept = append(kept, c)
			}
		}
		props["capabilities"] = strings.Join(kept, ",")
		return nil
	case "add-trait":
		name, ok := args["name"].(string)
		if !ok || name == "" || len(name) > 255 {
			return actionFailure("Failed to add new trait %s: invalid trait name", str(args["name"]))
		}
		for _, t := range s.Traits {
			if t == name {
				return nil // Ironic ignores a trait the node has
			}
		}
		if len(s.Traits) >= maxTraits {
			return actionFailure("Failed to add new trait %s: Could not modify traits for node %s: would exceed the maximum of %d", name, s.NodeUUID, maxTraits)
		}
		s.Traits = append(s.Traits, name)
		return nil
	case "remove-trait":
		name := argString(args, "name")
		kept := s.Traits[:0]
		for _, t := range s.Traits {
			if t != name {
				kept = append(kept, t)
			}
		}
		s.Traits = kept // a missing trait is only a warning in Ironic
		return nil
	case "set-plugin-data":
		path := argString(args, "path")
		if err := setPath(s.PluginData, strings.Split(path, "."), args["value"], nil, ""); err != nil {
			return actionFailure("Failed to set plugin data at %s: %s", path, err)
		}
		return nil
	case "extend-plugin-data":
		path := argString(args, "path")
		if err := extendPluginData(s.PluginData, strings.Split(path, "."), args["value"], pyliteral.Truthy(args["unique"])); err != nil {
			return actionFailure("Failed to extend plugin data at %s: %s", path, err)
		}
		return nil
	case "unset-plugin-data":
		unsetPluginData(s.PluginData, strings.Split(argString(args, "path"), "."))
		return nil
	case "set-port-attribute", "extend-port-attribute", "del-port-attribute":
		id := argString(args, "port_id")
		var port map[string]any
		for _, p := range s.Ports {
			if p["uuid"] == id {
				port = p
			}
		}
		if port == nil {
			return fmt.Errorf("Port %s could not be found.", id)
		}
		path := argString(args, "path")
		switch op {
		case "set-port-attribute":
			if err := setPath(port, normalizePath(path), args["value"], readOnlyPortFields, "Port"); err != nil {
				return actionFailure("Failed to set attribute %s for port %s: %s", path, id, err)
			}
		case "extend-port-attribute":
			if err := extendPath(port, normalizePath(path), args["value"], pyliteral.Truthy(args["unique"]), readOnlyPortFields, "Port"); err != nil {
				return actionFailure("Failed to extend attribute %s for port %s: %s", path, id, err)
			}
		default:
			if err := deletePath(port, normalizePath(path), readOnlyPortFields, "Port"); err != nil {
				return actionFailure("Failed to delete attribute %s for port %s: %s", path, id, err)
			}
		}
		return nil
	case "api-call":
		return apiCall(ctx, args, s)
	}
	return fmt.Errorf("Unsupported action '%s'.", op)
}

// walk returns the dict that holds the last part of parts, creating dicts
// on the way as Python's setdefault(part, {}) does. In an object (kind
// "Node" or "Port"), the first part is a field that must exist.
func walk(root map[string]any, parts []string, readOnly map[string]bool, kind string, create bool) (map[string]any, error) {
	if kind != "" {
		if _, ok := root[parts[0]]; !ok {
			return nil, fmt.Errorf("'%s' object has no attribute '%s'", kind, parts[0])
		}
		if readOnly[parts[0]] {
			return nil, fmt.Errorf("field %s is read-only for inspection rules", parts[0])
		}
	}
	cur := root
	for i, p := range parts[:len(parts)-1] {
		next, ok := cur[p]
		if !ok || next == nil {
			if !create || (kind != "" && i == 0) {
				if next == nil && ok {
					return nil, fmt.Errorf("'NoneType' object has no attribute 'setdefault'")
				}
				return nil, fmt.Errorf("'%s'", p)
			}
			m := map[string]any{}
			cur[p] = m
			cur = m
			continue
		}
		m, isMap := next.(map[string]any)
		if !isMap {
			return nil, fmt.Errorf("'%s' object has no attribute 'setdefault'", typeName(next))
		}
		cur = m
	}
	return cur, nil
}

func setPath(root map[string]any, parts []string, value any, readOnly map[string]bool, kind string) error {
	parent, err := walk(root, parts, readOnly, kind, true)
	if err != nil {
		return err
	}
	parent[parts[len(parts)-1]] = value
	return nil
}

func extendPath(root map[string]any, parts []string, value any, unique bool, readOnly map[string]bool, kind string) error {
	parent, err := walk(root, parts, readOnly, kind, true)
	if err != nil {
		return err
	}
	last := parts[len(parts)-1]
	cur, ok := parent[last]
	if !ok || (cur == nil && len(parts) == 1) {
		cur = []any{}
	}
	list, isList := cur.([]any)
	if !isList {
		return fmt.Errorf("Cannot extend non-list attribute %s with value %s", strings.Join(parts, "/"), str(value))
	}
	if !unique || !contains(list, value) {
		list = append(list, value)
	}
	parent[last] = list
	return nil
}

func deletePath(root map[string]any, parts []string, readOnly map[string]bool, kind string) error {
	parent, err := walk(root, parts, readOnly, kind, false)
	if err != nil {
		return err
	}
	last := parts[len(parts)-1]
	if len(parts) == 1 {
		// Deleting a field of an object resets it to its default.
		parent[last] = nil
		return nil
	}
	if _, ok := parent[last]; !ok {
		return fmt.Errorf("'%s'", last)
	}
	delete(parent, last)
	return nil
}

func contains(list []any, v any) bool {
	for _, x := range list {
		if equal(x, v) {
			return true
		}
	}
	return false
}

// extendPluginData is Ironic's extend-plugin-data: the list at path (an
// absent or empty value starts one) gets value appended.
func extendPluginData(root map[string]any, parts []string, value any, unique bool) error {
	var cur any = root
	for _, p := range parts {
		m, ok := cur.(map[string]any)
		if !ok {
			cur = nil
			break
		}
		cur = m[p]
	}
	if !pyliteral.Truthy(cur) {
		cur = []any{}
	}
	list, ok := cur.([]any)
	if !ok {
		return fmt.Errorf("'%s' object has no attribute 'append'", typeName(cur))
	}
	if !unique || !contains(list, value) {
		list = append(list, value)
	}
	return setPath(root, parts, list, nil, "")
}

// unsetPluginData removes the key at path; a dict left empty by it is
// removed from its parent (one level up, as Ironic's _unset_nested_dict).
func unsetPluginData(root map[string]any, parts []string) {
	var parents []map[string]any
	cur := root
	for _, p := range parts[:len(parts)-1] {
		next, ok := cur[p].(map[string]any)
		if !ok {
			return // Ironic only warns: path not found
		}
		parents = append(parents, cur)
		cur = next
	}
	last := parts[len(parts)-1]
	if _, ok := cur[last]; !ok {
		return
	}
	delete(cur, last)
	if len(cur) == 0 && len(parents) > 0 {
		delete(parents[len(parents)-1], parts[len(parts)-2])
	}
}

// apiCall is the api-call action: a GET of the formatted URL, retried on
// 429 and 5xx answers by the caller's Get.
func apiCall(ctx context.Context, args map[string]any, s *Subject) error {
	url := argString(args, "url")
	req := APICall{URL: url, TimeoutSecs: 5, Retries: 3, BackoffFactor: 0.3}
	if v, ok := args["timeout"]; ok {
		f, isNum := v.(float64)
		if !isNum || f <= 0 {
			return actionFailure("Invalid parameter: timeout must be greater than zero")
		}
		req.TimeoutSecs = f
	}
	if v, ok := args["retries"].(float64); ok {
		req.Retries = int(v)
	}
	if v, ok := args["backoff_factor"].(float64); ok {
		req.BackoffFactor = v
	}
	if h, ok := args["headers"].(map[string]any); ok {
		req.Headers = map[string]string{}
		for k, v := range h {
			req.Headers[k] = str(v)
		}
	}
	if s.Get == nil {
		return actionFailure("Request to %s failed: api-call is not enabled", url)
	}
	if err := s.Get(ctx, req); err != nil {
		return actionFailure("Request to %s failed: %s", url, err)
	}
	return nil
}
