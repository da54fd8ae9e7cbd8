package apiserver

import (
	"net/http"
	"testing"
)

// TestDisablePowerOff: API 1.95's node field, on create and PATCH, shown
// from 1.95 and 406 below; a node that has it refuses power off and soft
// power off with Ironic's PowerStateFailure (409), and takes power on and
// reboots.
func TestDisablePowerOff(t *testing.T) {
	serveUpTo(t, v95DisablePowerOff)
	e := newEnv(t)
	if r := e.do("POST", "/v1/nodes", "1.94", map[string]any{"driver": "fake-hardware", "disable_power_off": true}); r.status != http.StatusNotAcceptable {
		t.Fatalf("create with disable_power_off at 1.94: %d %s", r.status, r.body)
	}
	r := e.do("POST", "/v1/nodes", "1.95", map[string]any{"driver": "fake-hardware", "name": "ncsi-0", "disable_power_off": "true"})
	if r.status != http.StatusCreated || r.json(t)["disable_power_off"] != true {
		t.Fatalf("create with disable_power_off at 1.95: %d %s", r.status, r.body)
	}
	uuid := r.json(t)["uuid"].(string)
	if _, shown := e.do("GET", "/v1/nodes/"+uuid, "1.94", nil).json(t)["disable_power_off"]; shown {
		t.Fatal("disable_power_off shown at 1.94")
	}
	if r := e.do("GET", "/v1/nodes/"+uuid+"?fields=disable_power_off", "1.94", nil); r.status != http.StatusNotAcceptable {
		t.Fatalf("?fields=disable_power_off at 1.94: %d", r.status)
	}
	if r := e.do("POST", "/v1/nodes", "1.95", map[string]any{"driver": "fake-hardware", "disable_power_off": 3}); r.status != http.StatusBadRequest {
		t.Fatalf("disable_power_off 3: %d %s", r.status, r.body)
	}

	for _, target := range []string{"power off", "soft power off"} {
		for _, version := range []string{"1.93", "1.95"} {
			r := e.do("PUT", "/v1/nodes/"+uuid+"/states/power", version, map[string]any{"target": target})
			if r.status != http.StatusConflict || r.faultstring(t) != "Failed to set node power state to "+target+"." {
				t.Fatalf("%s at %s: %d %s", target, version, r.status, r.body)
			}
		}
	}
	if n := e.node(uuid); n.TargetPowerState != nil || len(e.eng.powers) != 0 {
		t.Fatalf("a refused power off left target %v, workflows %v", n.TargetPowerState, e.eng.powers)
	}
	for _, target := range []string{"power on", "rebooting", "soft rebooting"} {
		if r := e.do("PUT", "/v1/nodes/"+uuid+"/states/power", "1.95", map[string]any{"target": target}); r.status != http.StatusAccepted {
			t.Fatalf("%s: %d %s", target, r.status, r.body)
		}
	}

	if r := e.do("PATCH", "/v1/nodes/"+uuid, "1.94", []map[string]any{{"op": "replace", "path": "/disable_power_off", "value": false}}); r.status != http.StatusNotAcceptable {
		t.Fatalf("PATCH at 1.94: %d %s", r.status, r.body)
	}
	r = e.do("PATCH", "/v1/nodes/"+uuid, "1.95", []map[string]any{{"op": "replace", "path": "/disable_power_off", "value": false}})
	if r.status != http.StatusOK || r.json(t)["disable_power_off"] != false || e.node(uuid).DisablePowerOff {
		t.Fatalf("PATCH at 1.95: %d %s", r.status, r.body)
	}
	if r := e.do("PUT", "/v1/nodes/"+uuid+"/states/power", "1.95", map[string]any{"target": "power off"}); r.status != http.StatusAccepted {
		t.Fatalf("power off once the flag is off: %d %s", r.status, r.body)
	}
}
