package apiserver

import (
	"fmt"
	"slices"
	"strings"
	"testing"
)

// Ironic's runbook rules (API 1.92) persona by persona: a runbook of the
// owner project ("own"), of another project ("other"), a public one and a
// system one (neither owner nor public), as policy.py's runbook rules and
// runbook.py's public fallback say.

var rbKinds = []string{"own", "other", "public", "system"}

// rbPersonas: the table's personas and the owner project's manager.
var rbPersonas = []ksPersona{pSA, pSR, pOMgr, pOM, pOR, pLM}

// rbRow is a runbook route; expect gives, for a persona and a runbook
// kind, "" when the policy lets the request through, "404" when the node
// is hidden, or the rule a 403 names.
type rbRow struct {
	method, path string // {rb}: the runbook's UUID; {node}: a node the owner project owns
	body         any
	expect       func(p ksPersona, kind string) string
}

// Who passes each runbook rule, by its composite check string.
func rbReader(p ksPersona, kind string) bool { // RUNBOOK_READER
	return p == pSA || p == pSR || kind == "own" && slices.Contains([]ksPersona{pOMgr, pOM, pOR}, p)
}
func rbAdmin(p ksPersona, kind string) bool { // RUNBOOK_ADMIN
	return p == pSA || kind == "own" && p == pOMgr
}

func rbRule(rule string, ok func(ksPersona, string) bool) func(ksPersona, string) string {
	return func(p ksPersona, kind string) string {
		if ok(p, kind) {
			return ""
		}
		return rule
	}
}

var ksRunbookTable = []rbRow{
	// get_one: runbook:get, else the runbook is public.
	{"GET", "/v1/runbooks/{rb}", nil, rbRule("baremetal:runbook:get", func(p ksPersona, kind string) bool {
		return rbReader(p, kind) || kind == "public"
	})},
	{"PATCH", "/v1/runbooks/{rb}", []map[string]any{{"op": "add", "path": "/extra/k", "value": "v"}}, rbRule("baremetal:runbook:update", rbAdmin)},
	{"PATCH", "/v1/runbooks/{rb}", []map[string]any{{"op": "replace", "path": "/description", "value": "x"}, {"op": "replace", "path": "/owner", "value": "ks-owner-2"}},
		rbRule("baremetal:runbook:update:owner", func(p ksPersona, _ string) bool { return p == pSA })},
	{"PATCH", "/v1/runbooks/{rb}", []map[string]any{{"op": "replace", "path": "/public", "value": false}},
		rbRule("baremetal:runbook:update:public", func(p ksPersona, _ string) bool { return p == pSA })},
	{"DELETE", "/v1/runbooks/{rb}", nil, rbRule("baremetal:runbook:delete", rbAdmin)},
	// The traits sub-resource (API 1.112): runbook:get without the public
	// fallback, runbook:update for the changes.
	{"GET", "/v1/runbooks/{rb}/traits", nil, rbRule("baremetal:runbook:get", rbReader)},
	{"PUT", "/v1/runbooks/{rb}/traits", map[string]any{"traits": []any{"CUSTOM_KS"}}, rbRule("baremetal:runbook:update", rbAdmin)},
	{"DELETE", "/v1/runbooks/{rb}/traits", nil, rbRule("baremetal:runbook:update", rbAdmin)},
	{"PUT", "/v1/runbooks/{rb}/traits/CUSTOM_KS", nil, rbRule("baremetal:runbook:update", rbAdmin)},
	{"DELETE", "/v1/runbooks/{rb}/traits/CUSTOM_KS", nil, rbRule("baremetal:runbook:update", rbAdmin)},
	// A provision request's runbook: the node's rule first
	// (set_provision_state; the lessee member does not see the node),
	// then runbook:use, else the runbook is public.
	{"PUT", "/v1/nodes/{node}/states/provision", map[string]any{"target": "clean", "runbook": "{rb}"}, func(p ksPersona, kind string) string {
		switch {
		case p == pLM:
			return "404"
		case p == pSR || p == pOR:
			return "baremetal:node:set_provision_state"
		case rbAdmin(p, kind) || kind == "public":
			return ""
		}
		return "baremetal:runbook:use"
	}},
}

// runbook creates, as the system admin, a runbook of kind and returns its
// UUID.
func (e *ksEnv) runbook(kind string) string {
	e.t.Helper()
	body := map[string]any{"name": fmt.Sprintf("CUSTOM_KS_RB_%d", e.seq.Add(1)),
		"steps": []any{map[string]any{"interface": "deploy", "step": "erase_devices", "args": map[string]any{}, "order": 1}}}
	switch kind {
	case "own":
		body["owner"] = e.ownerPID
	case "other":
		body["owner"] = "ks-someone-else"
	case "public":
		body["public"] = true
	}
	return e.create("/v1/runbooks", body)
}

func (e *ksEnv) runbookByPersona(t *testing.T) {
	serveUpTo(t, v112RunbookTraits) // "latest" reaches the traits routes
	ids := map[string]string{}
	for _, k := range rbKinds {
		ids[k] = e.runbook(k)
	}
	t.Run("Routes", func(t *testing.T) {
		n := 0
		for _, row := range ksRunbookTable {
			for _, p := range rbPersonas {
				for _, kind := range rbKinds {
					rb := e.runbook(kind)
					node := ""
					if strings.Contains(row.path, "{node}") {
						node = e.fixture(e.ownerPID, "", false).node
					}
					repl := strings.NewReplacer("{rb}", rb, "{node}", node)
					var body any = row.body
					if m, ok := row.body.(map[string]any); ok {
						b := map[string]any{}
						for k, v := range m {
							if s, ok := v.(string); ok {
								v = repl.Replace(s)
							}
							b[k] = v
						}
						body = b
					}
					r := e.req(e.tokens[p], row.method, repl.Replace(row.path), body)
					n++
					name := fmt.Sprintf("%s %s %s %v on a %s runbook", p, row.method, row.path, row.body, kind)
					switch want := row.expect(p, kind); want {
					case "":
						if r.status == 401 || r.status == 403 || r.status == 404 && strings.Contains(r.faultstring(t), node) && node != "" {
							t.Errorf("%s: %d %s, want allowed", name, r.status, r.body)
						}
					case "404":
						if w := fmt.Sprintf("Node %s could not be found.", node); r.status != 404 || r.faultstring(t) != w {
							t.Errorf("%s: %d %s, want 404 %q", name, r.status, r.body, w)
						}
					default:
						if w := "Access was denied to the following resource: " + want; r.status != 403 || r.faultstring(t) != w {
							t.Errorf("%s: %d %s, want 403 %q", name, r.status, r.body, w)
						}
					}
				}
			}
		}
		t.Logf("%d rows, %d requests", len(ksRunbookTable), n)
	})

	// A project-scoped list holds the project's runbooks and the public
	// ones; a system reader's holds all.
	t.Run("List", func(t *testing.T) {
		for _, p := range rbPersonas {
			r := e.req(e.tokens[p], "GET", "/v1/runbooks", nil)
			if r.status != 200 {
				t.Fatalf("%s: list: %d %s", p, r.status, r.body)
			}
			var seen []string
			for _, it := range r.json(t)["runbooks"].([]any) {
				seen = append(seen, it.(map[string]any)["uuid"].(string))
			}
			for _, kind := range rbKinds {
				want := p == pSA || p == pSR || kind == "public" || kind == "own" && p != pLM
				if got := slices.Contains(seen, ids[kind]); got != want {
					t.Errorf("%s: the %s runbook in the list: %v, want %v", p, kind, got, want)
				}
			}
		}
	})

	// post: runbook:create (SYSTEM_MEMBER, role:manager, role:service); a
	// project's runbook is its project's, never public.
	t.Run("Create", func(t *testing.T) {
		body := func(extra map[string]any) map[string]any {
			b := map[string]any{"name": fmt.Sprintf("CUSTOM_KS_RB_%d", e.seq.Add(1)),
				"steps": []any{map[string]any{"interface": "deploy", "step": "erase_devices", "args": map[string]any{}, "order": 1}}}
			for k, v := range extra {
				b[k] = v
			}
			return b
		}
		for _, p := range []ksPersona{pSR, pOM, pOR, pLM} {
			if r := e.req(e.tokens[p], "POST", "/v1/runbooks", body(nil)); r.status != 403 || r.faultstring(t) != "Access was denied to the following resource: baremetal:runbook:create" {
				t.Errorf("%s creates a runbook: %d %s, want 403", p, r.status, r.body)
			}
		}
		r := e.req(e.tokens[pOMgr], "POST", "/v1/runbooks", body(nil))
		if r.status != 201 || r.json(t)["owner"] != e.ownerPID || r.json(t)["public"] != false {
			t.Errorf("owner manager creates a runbook: %d %s, want 201 owned by %s", r.status, r.body, e.ownerPID)
		}
		if r := e.req(e.tokens[pOMgr], "POST", "/v1/runbooks", body(map[string]any{"owner": e.ownerPID})); r.status != 201 {
			t.Errorf("owner manager creates a runbook naming its project: %d %s", r.status, r.body)
		}
		for extra, want := range map[string]string{
			`{"owner": "ks-someone-else"}`: "Cannot create a runbook as a project scoped admin with an owner other than your own project.",
			`{"public": true}`:             "Cannot create a public runbook as a project scoped admin.",
		} {
			m := map[string]any{}
			if strings.Contains(extra, "owner") {
				m["owner"] = "ks-someone-else"
			} else {
				m["public"] = true
			}
			if r := e.req(e.tokens[pOMgr], "POST", "/v1/runbooks", body(m)); r.status != 400 || r.faultstring(t) != want {
				t.Errorf("owner manager creates %s: %d %s, want 400 %q", extra, r.status, r.body, want)
			}
		}
		if r := e.req(e.tokens[pSA], "POST", "/v1/runbooks", body(map[string]any{"public": true})); r.status != 201 || r.json(t)["public"] != true {
			t.Errorf("system admin creates a public runbook: %d %s", r.status, r.body)
		}
	})
}
