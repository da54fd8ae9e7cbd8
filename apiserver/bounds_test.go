package apiserver

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/ironflow/ironflow/store"
)

// A maintenance reason beyond what Ironic's column holds is refused with 400,
// by the maintenance verb and by PATCH, and nothing is stored.
func TestMaintenanceReasonIsBounded(t *testing.T) {
	e := newEnv(t)
	uuid := e.createNode(map[string]any{"driver": "fake-hardware", "name": "mr"})["uuid"].(string)
	long := strings.Repeat("x", 1<<20)
	if r := e.do("PUT", "/v1/nodes/mr/maintenance", "1.78", map[string]any{"reason": long}); r.status != 400 {
		t.Errorf("PUT maintenance with a 1 MB reason: %d %s", r.status, r.body)
	}
	if r := e.do("PATCH", "/v1/nodes/mr", "1.78", []any{map[string]any{"op": "add", "path": "/maintenance_reason", "value": long}}); r.status != 400 {
		t.Errorf("PATCH a 1 MB maintenance_reason: %d", r.status)
	}
	if n := e.node(uuid); n.Maintenance || n.MaintenanceReason != nil {
		t.Errorf("stored: %v %v", n.Maintenance, n.MaintenanceReason)
	}
	ok := strings.Repeat("y", maxMaintenanceReason)
	if r := e.do("PUT", "/v1/nodes/mr/maintenance", "1.78", map[string]any{"reason": ok}); r.status != 202 {
		t.Errorf("PUT maintenance with a reason at the bound: %d %s", r.status, r.body)
	}
}

// A body that is not valid UTF-8 is refused with 400 rather than stored with
// replacement characters, and a non-JSON content type is refused with 415.
func TestBodiesMustBeUTF8JSON(t *testing.T) {
	e := newEnv(t)
	bad := []byte("{\"driver\": \"fake-hardware\", \"name\": \"u\xff\xfe\"}")
	if r := e.do("POST", "/v1/nodes", "1.78", bad); r.status != 400 {
		t.Errorf("invalid UTF-8 create: %d %s", r.status, r.body)
	}
	e.createNode(map[string]any{"driver": "fake-hardware", "name": "u8"})
	if r := e.do("PATCH", "/v1/nodes/u8", "1.78", []byte("[{\"op\": \"add\", \"path\": \"/extra/x\", \"value\": \"\xff\"}]")); r.status != 400 {
		t.Errorf("invalid UTF-8 patch: %d %s", r.status, r.body)
	}
	req, err := http.NewRequest("POST", e.srv.URL+"/v1/nodes", strings.NewReader(`{"driver": "fake-hardware", "name": "plain"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set(headerVersion, "1.78")
	req.Header.Set("Content-Type", "text/plain")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	if res.StatusCode != http.StatusUnsupportedMediaType {
		t.Errorf("text/plain create: %d", res.StatusCode)
	}
	if r := e.do("GET", "/v1/nodes/plain", "1.78", nil); r.status != 404 {
		t.Errorf("text/plain node created: %d", r.status)
	}
}

// The node history list honours limit and marker as Ironic's (API 1.78):
// pages follow one another through "next" and an unknown marker is a 400.
func TestHistoryHonoursLimitAndMarker(t *testing.T) {
	e := newEnv(t)
	uuid := e.createNode(map[string]any{"driver": "fake-hardware", "name": "hp"})["uuid"].(string)
	for i := range 5 {
		if err := e.st.AddHistory(context.Background(), uuid, store.HistoryEvent{Severity: store.SeverityInfo, EventType: "test", Event: fmt.Sprintf("event %d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	all := e.do("GET", "/v1/nodes/hp/history", "1.78", nil).json(t)["history"].([]any)
	var seen []any
	path := "/v1/nodes/hp/history?limit=2"
	for pages := 0; path != ""; pages++ {
		if pages > len(all) {
			t.Fatalf("paging does not end: %s", path)
		}
		page := e.do("GET", path, "1.78", nil).json(t)
		items := page["history"].([]any)
		if len(items) > 2 {
			t.Fatalf("page of %d with limit=2", len(items))
		}
		seen = append(seen, items...)
		path = ""
		if next, ok := page["next"].(string); ok {
			path = next[strings.Index(next, "/v1/"):]
		}
	}
	if len(seen) != len(all) {
		t.Fatalf("paged %d events, listed %d", len(seen), len(all))
	}
	for i := range all {
		if seen[i].(map[string]any)["uuid"] != all[i].(map[string]any)["uuid"] {
			t.Errorf("event %d differs when paged", i)
		}
	}
	if r := e.do("GET", "/v1/nodes/hp/history?marker=4b1c0a5e-0000-4000-8000-000000000000", "1.78", nil); r.status != 400 {
		t.Errorf("unknown marker: %d", r.status)
	}
	if r := e.do("GET", "/v1/nodes/hp/history?limit=0", "1.78", nil); r.status != 400 {
		t.Errorf("limit=0: %d", r.status)
	}
}
