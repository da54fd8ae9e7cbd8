package apiserver

import (
	"context"
	"net/http"
	"testing"

	"github.com/ironflow/ironflow/store"
)

// TestNodeHealth: health (1.109) shows what the power sync stored, is
// hidden and 406 in ?fields= below 1.109, null when unknown, and is
// read-only: a PATCH (at any version) or a create that names it is
// refused and writes nothing. Ironic has no list filter for it.
func TestNodeHealth(t *testing.T) {
	serveUpTo(t, v109NodeHealth)
	e := newEnv(t)
	uuid := e.createNode(map[string]any{"driver": "fake-hardware", "name": "h1"})["uuid"].(string)
	if got, ok := e.do("GET", "/v1/nodes/h1", "1.109", nil).json(t)["health"]; !ok || got != nil {
		t.Errorf("health of a node never synced: %v (present %v), want null", got, ok)
	}
	warning := "Warning"
	if _, err := e.st.UpdateNode(context.Background(), uuid, func(n *store.Node) error { n.Health = &warning; return nil }); err != nil {
		t.Fatal(err)
	}
	if got := e.do("GET", "/v1/nodes/h1", "1.109", nil).json(t)["health"]; got != "Warning" {
		t.Errorf("health at 1.109: %v, want Warning", got)
	}
	if got, ok := e.do("GET", "/v1/nodes/h1", "1.108", nil).json(t)["health"]; ok {
		t.Errorf("health shown at 1.108: %v", got)
	}
	if r := e.do("GET", "/v1/nodes/h1?fields=health", "1.108", nil); r.status != http.StatusNotAcceptable {
		t.Errorf("?fields=health at 1.108: %d %s, want 406", r.status, r.body)
	}
	r := e.do("GET", "/v1/nodes?fields=name,health", "1.109", nil)
	nodes, _ := r.json(t)["nodes"].([]any)
	if r.status != http.StatusOK || len(nodes) != 1 || nodes[0].(map[string]any)["health"] != "Warning" {
		t.Errorf("list with fields name,health: %d %s", r.status, r.body)
	}
	if r := e.do("GET", "/v1/nodes/detail", "1.109", nil); r.status != http.StatusOK ||
		r.json(t)["nodes"].([]any)[0].(map[string]any)["health"] != "Warning" {
		t.Errorf("detailed list: %d %s", r.status, r.body)
	}
	patch := []map[string]any{{"op": "replace", "path": "/health", "value": "OK"}}
	if r := e.do("PATCH", "/v1/nodes/h1", "1.109", patch); r.status != http.StatusBadRequest ||
		r.faultstring(t) != "'/health' is an internal attribute and can not be updated" {
		t.Errorf("PATCH health at 1.109: %d %s, want 400 internal attribute", r.status, r.body)
	}
	// A read-only field is refused before the version is looked at, as
	// Ironic's _validate_patch does.
	if r := e.do("PATCH", "/v1/nodes/h1", "1.108", patch); r.status != http.StatusBadRequest {
		t.Errorf("PATCH health at 1.108: %d %s, want 400", r.status, r.body)
	}
	if r := e.do("POST", "/v1/nodes", "1.109", map[string]any{"driver": "fake-hardware", "name": "h2", "health": "OK"}); r.status != http.StatusBadRequest {
		t.Errorf("create with health: %d %s, want 400", r.status, r.body)
	}
	if r := e.do("GET", "/v1/nodes/h2", "1.109", nil); r.status != http.StatusNotFound {
		t.Errorf("a refused create left node h2: %d %s", r.status, r.body)
	}
	if got := e.do("GET", "/v1/nodes/h1", "1.109", nil).json(t)["health"]; got != "Warning" {
		t.Errorf("health after the refused PATCH: %v, want Warning", got)
	}
}
