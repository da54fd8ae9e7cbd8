package apiserver

import (
	"context"
	"fmt"
	"testing"
)

// GET /v1/nodes/{id}/firmware (1.86) lists the cached components with
// Ironic's default fields, all of them with detail, the chosen ones with
// fields; before 1.86 there is no such resource.
func TestNodeFirmwareList(t *testing.T) {
	e := newEnv(t)
	uuid := e.createNode(map[string]any{"driver": "fake-hardware", "name": "fw-node"})["uuid"].(string)
	ctx := context.Background()
	if err := e.st.SyncFirmwareComponents(ctx, uuid, map[string]string{"bios": "1.0", "bmc": "5.1"}); err != nil {
		t.Fatal(err)
	}
	if err := e.st.SyncFirmwareComponents(ctx, uuid, map[string]string{"bios": "2.0", "bmc": "5.1"}); err != nil {
		t.Fatal(err)
	}
	if r := e.do("GET", "/v1/nodes/"+uuid+"/firmware", "1.85", nil); r.status != 404 {
		t.Fatalf("1.85: %d %s", r.status, r.body)
	}
	r := e.do("GET", "/v1/nodes/fw-node/firmware", "1.86", nil)
	want := `map[firmware:[map[component:bios current_version:2.0 initial_version:1.0 last_version_flashed:2.0] map[component:bmc current_version:5.1 initial_version:5.1 last_version_flashed:<nil>]]]`
	if r.status != 200 || fmt.Sprint(r.json(t)) != want {
		t.Fatalf("1.86: %d %s\nwant %s", r.status, r.body, want)
	}
	r = e.do("GET", "/v1/nodes/"+uuid+"/firmware?detail=True", "1.86", nil)
	list := r.json(t)["firmware"].([]any)
	bios := list[0].(map[string]any)
	if len(bios) != 6 || bios["created_at"] == nil || bios["updated_at"] == nil || list[1].(map[string]any)["updated_at"] != nil {
		t.Fatalf("detail: %s", r.body)
	}
	r = e.do("GET", "/v1/nodes/"+uuid+"/firmware?fields=component,current_version", "1.86", nil)
	if fmt.Sprint(r.json(t)) != `map[firmware:[map[component:bios current_version:2.0] map[component:bmc current_version:5.1]]]` {
		t.Fatalf("fields: %s", r.body)
	}
	r = e.do("GET", "/v1/nodes/"+uuid+"/firmware?fields=version", "1.86", nil)
	if r.status != 400 || r.faultstring(t) != `Field(s) "version" are not valid` {
		t.Fatalf("bad field: %d %s", r.status, r.body)
	}
}
