package rules

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeRules(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// A built-in rules file as an operator writes it: rules without a uuid
// get Ironic's synthetic ones in order, a priority above the API's 9999
// is allowed, defaults are Ironic's; a bad file is refused with the rule's
// place and the API's message.
func TestLoadBuiltIn(t *testing.T) {
	rs, err := LoadBuiltIn(writeRules(t, `
- description: every x86 machine is a compute node
  priority: 20000
  conditions:
    - op: eq
      args: {values: ["{inventory[cpu][architecture]}", "x86_64"]}
  actions:
    - op: set-attribute
      args: {path: /resource_class, value: compute}
- uuid: 7a0d6d2e-5bd4-4a8a-9a4e-7a0c6e1f0b11
  sensitive: true
  actions:
    - op: add-trait
      args: {name: CUSTOM_INSPECTED}
- actions:
    - op: log
      args: {msg: inspected}
`))
	if err != nil {
		t.Fatal(err)
	}
	if len(rs) != 3 || rs[0].UUID != "00000000-0000-0000-0000-000000000000" || rs[2].UUID != "00000000-0000-0000-0000-000000000001" ||
		rs[1].UUID != "7a0d6d2e-5bd4-4a8a-9a4e-7a0c6e1f0b11" || !rs[1].Sensitive || rs[0].Priority != 20000 || rs[2].Priority != 0 ||
		rs[0].Phase != PhaseMain || rs[0].Description == nil || len(rs[0].Conditions) != 1 || len(rs[0].Actions) != 1 {
		t.Fatalf("rules %+v", rs)
	}
	for body, want := range map[string]string{
		"actions: []": "should contain a list of rules",
		"- actions:\n    - op: frobnicate\n      args: {}":                  "rule 1: Schema error",
		"- priority: -1\n  actions:\n    - op: log\n      args: {msg: x}":   "rule 1:",
		"- actions:\n    - op: set-attribute\n      args: {path: /extra/x}": "Invalid parameters for action operator set-attribute",
		"- [not, a, rule]": "rule 1 is not a mapping",
		"{":                "built-in inspection rules file",
	} {
		if _, err := LoadBuiltIn(writeRules(t, body)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v; want an error saying %q", body, err, want)
		}
	}
	if _, err := LoadBuiltIn(filepath.Join(t.TempDir(), "missing.yaml")); err == nil {
		t.Error("a missing file was accepted")
	}
}
