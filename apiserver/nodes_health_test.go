package apiserver

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/ironflow/ironflow/activities"
	"github.com/ironflow/ironflow/provision"
	"github.com/ironflow/ironflow/store"
	"github.com/ironflow/ironflow/vbmc"
	"github.com/ironflow/ironflow/workflows"
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

// TestNodeHealthFromVBMCThroughPowerSync: a redfish node driven by
// ironflow's own virtual BMC (vbmc's Redfish service) gets the health the
// BMC reports from the power sync activity (the real redfish driver and
// PostgreSQL), and the API at 1.109 shows it and its history: OK at the
// first read, Critical after the BMC says so, unknown (null) when the BMC
// stops reporting health. No QEMU is started: a powered-off VM answers.
func TestNodeHealthFromVBMCThroughPowerSync(t *testing.T) {
	serveUpTo(t, v109NodeHealth)
	e := newEnv(t)
	dir := t.TempDir()
	cfg, _ := json.Marshal(map[string]any{
		"state_dir": filepath.Join(dir, "state"), "username": "admin", "password": "password",
		"vms": []map[string]any{{"name": "hv0", "mac": "52:54:00:dd:01:09", "memory_mb": 128, "firmware": "bios", "netdev": "none"}},
	})
	cfgPath := filepath.Join(dir, "vms.json")
	if err := os.WriteFile(cfgPath, cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	vc, err := vbmc.LoadConfig(cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	vs, err := vbmc.NewServer(vc, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	bmcSrv := httptest.NewServer(vs)
	t.Cleanup(func() { bmcSrv.Close(); vs.Close() })

	r := e.do("POST", "/v1/nodes", "1.109", map[string]any{"name": "hv0", "driver": "redfish", "driver_info": map[string]any{
		"redfish_address": bmcSrv.URL, "redfish_system_id": "/redfish/v1/Systems/hv0",
		"redfish_username": "admin", "redfish_password": "password",
	}})
	if r.status != http.StatusCreated {
		t.Fatalf("create node: %d %s", r.status, r.body)
	}
	uuid := r.json(t)["uuid"].(string)
	// The sync leaves enroll alone: the node is managed.
	if _, err := e.st.UpdateNode(context.Background(), uuid, func(n *store.Node) error {
		n.ProvisionState = provision.Manageable
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	ps := &activities.PowerSync{
		Activities: activities.New(e.st, activities.Config{Conductor: "health-test"}, quietLogger()),
		Held:       func(context.Context, []string) (map[string]bool, error) { return nil, nil },
	}
	sync := func() {
		t.Helper()
		if _, err := ps.SyncPowerStates(context.Background(), workflows.PowerSyncBatch{MaxRetries: 3, Workers: 1, NodeTimeout: 10 * time.Second}); err != nil {
			t.Fatalf("power sync: %v", err)
		}
	}
	setHealth := func(health string) {
		t.Helper()
		if err := vbmc.SetHealth(context.Background(), bmcSrv.URL, "admin", "password", "hv0", health); err != nil {
			t.Fatal(err)
		}
	}
	var wantHistory []string
	check := func(step string, want any) {
		t.Helper()
		n := e.do("GET", "/v1/nodes/hv0?fields=health,power_state", "1.109", nil).json(t)
		if n["health"] != want || n["power_state"] != "power off" {
			t.Errorf("%s: node %v, want health %v, power off", step, n, want)
		}
		h := e.do("GET", "/v1/nodes/hv0/history?detail=True", "1.109", nil).json(t)["history"].([]any)
		var got []string
		for _, ev := range h {
			ev := ev.(map[string]any)
			if ev["event_type"] == "monitoring" {
				if ev["severity"] != "INFO" {
					t.Errorf("%s: history event %v, want INFO", step, ev)
				}
				got = append(got, ev["event"].(string))
			}
		}
		if !slices.Equal(got, wantHistory) {
			t.Errorf("%s: monitoring history %q, want %q", step, got, wantHistory)
		}
	}

	sync()
	wantHistory = append(wantHistory, "Node health status changed: health='OK' (previously 'None')")
	check("first sync", "OK")
	sync()
	check("second sync", "OK")

	setHealth("Critical")
	sync()
	wantHistory = append(wantHistory, "Node health status changed: health='Critical' (previously 'OK')")
	check("critical", "Critical")

	setHealth("")
	sync()
	wantHistory = append(wantHistory, "Node health status changed: health='None' (previously 'Critical')")
	check("no health reported", nil)
}
