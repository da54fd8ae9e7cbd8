package rules

import (
	"encoding/json"
	"fmt"
	"os"

	"gopkg.in/yaml.v3"
)

// LoadBuiltIn reads a built-in rules file (Ironic's
// [inspection_rules]built_in_rules, engine.get_built_in_rules): a YAML list
// of rules in the API's shape. A rule without a uuid gets a synthetic one
// (00000000-0000-0000-0000-000000000000, ...01, ... in the file's order);
// priority defaults to 0 and may exceed MaxPriority; each is validated as
// the API validates a rule. Built-in rules are not in the database and not
// listed by the API; they run with the stored rules, by priority (stored
// first where priorities are equal). The first invalid rule fails the
// whole file, with its place in the file.
func LoadBuiltIn(path string) ([]Rule, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("built-in inspection rules: %w", err)
	}
	var doc any
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("built-in inspection rules file %s: %w", path, err)
	}
	// The API's validation reads JSON values (float64 numbers, string
	// keys): a JSON round trip gives exactly those.
	j, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("built-in inspection rules file %s: %w", path, err)
	}
	var list []any
	if err := json.Unmarshal(j, &list); err != nil || doc == nil {
		return nil, fmt.Errorf("built-in rules file (%s) should contain a list of rules", path)
	}
	var out []Rule
	synthetic := 0
	for i, item := range list {
		body, ok := item.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("built-in inspection rules file %s: rule %d is not a mapping", path, i+1)
		}
		if err := validate(body, true); err != nil {
			return nil, fmt.Errorf("built-in inspection rules file %s: rule %d: %w", path, i+1, err)
		}
		r := Rule{Phase: PhaseMain}
		if u, ok := body["uuid"].(string); ok && u != "" {
			r.UUID = u
		} else {
			r.UUID = fmt.Sprintf("00000000-0000-0000-0000-%012x", synthetic)
			synthetic++
		}
		if d, ok := body["description"].(string); ok {
			r.Description = &d
		}
		if p, ok := body["phase"].(string); ok && p != "" {
			r.Phase = p
		}
		if p, ok := body["priority"].(float64); ok {
			r.Priority = int(p)
		}
		r.Sensitive, _ = body["sensitive"].(bool)
		for _, c := range asList(body["conditions"]) {
			r.Conditions = append(r.Conditions, c.(map[string]any))
		}
		for _, a := range asList(body["actions"]) {
			r.Actions = append(r.Actions, a.(map[string]any))
		}
		out = append(out, r)
	}
	return out, nil
}

func asList(v any) []any {
	l, _ := v.([]any)
	return l
}
