package apiserver

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/ironflow/ironflow/workflows"
)

// TestInjectNMIAndIndicators: PUT .../management/inject_nmi (1.29) and
// the indicators (1.63) answer as Debian's Ironic 21.4 does: 404 below
// their versions, 204 for an NMI, Ironic's refusals of arguments, of a
// malformed or unknown indicator and of a management interface that
// cannot (UnsupportedDriverExtension), 409 on a locked node, and the
// management interface's words for a BMC failure; a refused request never
// reaches the engine.
func TestInjectNMIAndIndicators(t *testing.T) {
	e := newEnv(t)
	ipmi := e.createNode(map[string]any{"driver": "ipmi", "name": "nmi-ipmi"})["uuid"].(string)
	rf := e.createNode(map[string]any{"driver": "redfish", "name": "nmi-rf", "driver_info": map[string]any{"redfish_address": "http://127.0.0.1:1"}})["uuid"].(string)
	fake := e.createNode(map[string]any{"driver": "fake-hardware", "name": "nmi-fake"})["uuid"].(string)
	nmi := func(node, v string, body any) resp {
		return e.do("PUT", "/v1/nodes/"+node+"/management/inject_nmi", v, body)
	}
	fault := func(r resp, status int, want string) {
		t.Helper()
		if r.status != status || r.faultstring(t) != want {
			t.Errorf("got %d %s, want %d %q", r.status, r.body, status, want)
		}
	}

	if r := nmi(ipmi, "1.28", map[string]any{}); r.status != http.StatusNotFound {
		t.Errorf("inject_nmi at 1.28: %d %s", r.status, r.body)
	}
	for _, n := range []string{ipmi, "nmi-rf"} {
		if r := nmi(n, "1.29", map[string]any{}); r.status != http.StatusNoContent {
			t.Errorf("inject_nmi %s: %d %s", n, r.status, r.body)
		}
	}
	fault(nmi(ipmi, "1.29", map[string]any{"x": 1}), 400, "Unexpected arguments: x")
	fault(nmi(fake, "1.29", map[string]any{}), 400, "Driver fake-hardware does not support inject_nmi (disabled or not implemented).")
	fault(nmi("no-such-node", "1.29", map[string]any{}), 404, "Node no-such-node could not be found.")
	if len(e.eng.manages) != 2 || e.eng.manages[0].Action != workflows.ManagementInjectNMI || e.eng.manages[0].NodeUUID != ipmi || e.eng.manages[1].NodeUUID != rf {
		t.Fatalf("engine asked %+v", e.eng.manages)
	}
	e.eng.hold(ipmi, true)
	if r := nmi(ipmi, "1.29", map[string]any{}); r.status != http.StatusConflict || !strings.Contains(r.faultstring(t), "is locked by host") {
		t.Errorf("inject_nmi on a locked node: %d %s", r.status, r.body)
	}
	e.eng.hold(ipmi, false)
	e.eng.manageErr = fmt.Errorf("%w: %w", ErrHardware, errors.New("chassis control: completion code 0xcc"))
	fault(nmi(ipmi, "1.29", map[string]any{}), 500, "IPMI call failed: power diag.")
	fault(nmi(rf, "1.29", map[string]any{}), 500, "Redfish exception occurred. Error: Redfish inject NMI failed for node "+rf+". Error: chassis control: completion code 0xcc")
	e.eng.manageErr = nil

	// Indicators.
	e.eng.indicators = []workflows.Indicator{
		{Component: "chassis", Name: "c1", States: []string{"blinking", "off", "on"}, State: "off"},
		{Component: "system", Name: "s1", States: []string{"blinking", "off", "on"}, State: "on"},
		{Component: "disk", Name: "1:Disk0", States: []string{"off", "on"}, State: "off"},
	}
	ind := "/v1/nodes/nmi-rf/management/indicators"
	// Served at every version, as Ironic's indicator controller does.
	if r := e.do("GET", ind, "1.62", nil); r.status != http.StatusOK {
		t.Errorf("indicators at 1.62: %d %s, want 200 as Ironic", r.status, r.body)
	}
	r := e.do("GET", ind, "1.63", nil)
	list, _ := r.json(t)["indicators"].([]any)
	if r.status != http.StatusOK || len(list) != 3 {
		t.Fatalf("list: %d %s", r.status, r.body)
	}
	first := list[0].(map[string]any)
	links := first["links"].([]any)
	if first["name"] != "c1@chassis" || first["component"] != "chassis" || first["readonly"] != false ||
		!strings.HasSuffix(links[0].(map[string]any)["href"].(string), "/v1/nodes/nmi-rf/management/indicators/c1@chassis") {
		t.Errorf("first indicator: %v", first)
	}
	if r := e.do("GET", ind+"/s1@system", "1.63", nil); r.status != http.StatusOK || r.json(t)["state"] != "on" {
		t.Errorf("get s1@system: %d %s", r.status, r.body)
	}
	fault(e.do("GET", ind+"/nope@system", "1.63", nil), 400, "Unknown indicator nope for component system of node "+rf)
	fault(e.do("GET", ind+"/s1system", "1.63", nil), 400, `Malformed indicator name "s1system"`)
	fault(e.do("GET", ind+"/s1@system?x=1", "1.63", nil), 400, "Unexpected arguments: x")
	fault(e.do("GET", "/v1/nodes/nmi-ipmi/management/indicators", "1.63", nil), 400, "Driver ipmi does not support get_supported_indicators (disabled or not implemented).")
	// Ironic's fake management: its own words for what it lacks.
	fault(e.do("GET", "/v1/nodes/nmi-fake/management/indicators/led@power", "1.63", nil), 400, "Invalid component power specified.")

	before := len(e.eng.manages)
	if r := e.do("PUT", ind+"/s1@system", "1.63", map[string]any{"state": "blinking"}); r.status != http.StatusNoContent {
		t.Fatalf("set s1@system: %d %s", r.status, r.body)
	}
	if last := e.eng.manages[len(e.eng.manages)-1]; last.Action != workflows.ManagementSetIndicator || last.Component != "system" || last.Indicator != "s1" || last.State != "blinking" {
		t.Errorf("set asked %+v", last)
	}
	if r := e.do("PUT", ind+"/s1@system?state=OFF", "1.63", nil); r.status != http.StatusNoContent || e.eng.manages[len(e.eng.manages)-1].State != "off" {
		t.Errorf("set with ?state=OFF: %d %s", r.status, r.body)
	}
	before = len(e.eng.manages)
	fault(e.do("PUT", ind+"/s1@system", "1.63", map[string]any{}), 400, "Missing mandatory parameter: state")
	fault(e.do("PUT", ind+"/s1@system", "1.63", map[string]any{"state": 5}), 400, "Expected string for state: 5")
	fault(e.do("PUT", ind+"/s1@system", "1.63", map[string]any{"state": "on", "x": 1}), 400, "Unexpected arguments: x")
	fault(e.do("PUT", ind+"/s1system", "1.63", map[string]any{"state": "on"}), 400, `Malformed indicator name "s1system"`)
	fault(e.do("PUT", ind+"/s1@system", "1.63", map[string]any{"state": "purple"}), 400, "Indicator s1 for component system of node "+rf+" cannot be set to purple")
	fault(e.do("PUT", "/v1/nodes/nmi-fake/management/indicators/led@system", "1.63", map[string]any{"state": "on"}), 400, "Driver fake-hardware does not support set_indicator_state (disabled or not implemented).")
	if len(e.eng.manages) != before {
		t.Errorf("refused requests reached the engine: %+v", e.eng.manages[before:])
	}
	e.eng.manageErr = fmt.Errorf("%w: Unknown indicator x for component disk of node %s", ErrInvalidParameter, rf)
	fault(e.do("PUT", ind+"/x@disk", "1.63", map[string]any{"state": "on"}), 400, "Unknown indicator x for component disk of node "+rf)
	e.eng.manageErr = fmt.Errorf("%w: %w", ErrHardware, errors.New("PATCH refused"))
	fault(e.do("PUT", ind+"/s1@system", "1.63", map[string]any{"state": "on"}), 500,
		"Redfish exception occurred. Error: Redfish set system indicator s1 state on failed for node "+rf+". Error: PATCH refused")
	e.eng.manageErr = nil
	e.eng.hold(rf, true)
	for _, r := range []resp{e.do("GET", ind, "1.63", nil), e.do("GET", ind+"/s1@system", "1.63", nil), e.do("PUT", ind+"/s1@system", "1.63", map[string]any{"state": "on"})} {
		if r.status != http.StatusConflict {
			t.Errorf("on a locked node: %d %s", r.status, r.body)
		}
	}
}
