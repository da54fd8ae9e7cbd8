package apiserver

import (
	"context"
	"strings"
	"testing"

	"github.com/ironflow/ironflow/store"
)

func ptrTo[T any](v T) *T { return &v }

// TestBIOSSettingsEndpoints: GET /v1/nodes/{id}/bios (1.40) lists the
// cached settings as name and value; from 1.74 ?detail=True and ?fields=
// add the registry's fields, which GET .../bios/{name} always shows, as
// Ironic's bios controller does.
func TestBIOSSettingsEndpoints(t *testing.T) {
	e := newEnv(t)
	uuid := e.createNode(map[string]any{"driver": "fake-hardware", "name": "bios-api"})["uuid"].(string)
	enum := "Enumeration"
	if err := e.st.ReplaceBIOSSettings(context.Background(), uuid, []store.BIOSSetting{
		{Name: "ProcSMT", Value: "Enabled", AttributeType: &enum, AllowableValues: []string{"Enabled", "Disabled"},
			ReadOnly: ptrTo(false), ResetRequired: ptrTo(true)},
		{Name: "ProcCores", Value: "2", LowerBound: ptrTo(int64(1)), UpperBound: ptrTo(int64(8))},
	}); err != nil {
		t.Fatal(err)
	}
	base := "/v1/nodes/" + uuid + "/bios"

	if r := e.do("GET", base, "1.39", nil); r.status != 404 {
		t.Errorf("below 1.40: %d", r.status)
	}
	r := e.do("GET", base, "1.40", nil)
	list := r.json(t)["bios"].([]any)
	if r.status != 200 || len(list) != 2 {
		t.Fatalf("1.40 list: %d %s", r.status, r.body)
	}
	first := list[0].(map[string]any)
	if first["name"] != "ProcCores" || first["value"] != "2" || first["created_at"] == nil || first["links"] == nil {
		t.Errorf("1.40 entry %v", first)
	}
	if _, ok := first["attribute_type"]; ok {
		t.Errorf("registry fields below 1.74: %v", first)
	}
	if r := e.do("GET", base+"?detail=True", "1.73", nil); r.status != 400 || r.faultstring(t) != "Invalid query parameter ?detail=True received." {
		t.Errorf("detail below 1.74: %d %s", r.status, r.body)
	}

	detail := e.do("GET", base+"?detail=True", "1.74", nil).json(t)["bios"].([]any)
	smt := detail[1].(map[string]any)
	if smt["attribute_type"] != "Enumeration" || len(smt["allowable_values"].([]any)) != 2 || smt["read_only"] != false ||
		smt["reset_required"] != true || smt["lower_bound"] != nil {
		t.Errorf("detail entry %v", smt)
	}
	if cores := detail[0].(map[string]any); cores["upper_bound"] != float64(8) {
		t.Errorf("detail entry %v", cores)
	}
	sel := e.do("GET", base+"?fields=name,upper_bound", "1.74", nil).json(t)["bios"].([]any)[0].(map[string]any)
	if sel["upper_bound"] != float64(8) || sel["value"] != nil {
		t.Errorf("fields entry %v", sel)
	}
	if r := e.do("GET", base+"?fields=name&detail=True", "1.74", nil); r.status != 400 || !strings.Contains(r.faultstring(t), "Can not specify ?detail=True and fields") {
		t.Errorf("detail and fields: %d %s", r.status, r.body)
	}
	if r := e.do("GET", base+"?fields=colour", "1.74", nil); r.status != 400 {
		t.Errorf("unknown field: %d %s", r.status, r.body)
	}

	one := e.do("GET", base+"/ProcSMT", "1.74", nil).json(t)["ProcSMT"].(map[string]any)
	if one["value"] != "Enabled" || one["attribute_type"] != "Enumeration" {
		t.Errorf("show at 1.74: %v", one)
	}
	if one := e.do("GET", base+"/ProcSMT", "1.40", nil).json(t)["ProcSMT"].(map[string]any); one["attribute_type"] != nil {
		t.Errorf("show at 1.40 has registry fields: %v", one)
	}
	r = e.do("GET", base+"/NoSuch", "1.74", nil)
	if want := "Node " + uuid + " doesn't have a BIOS setting 'NoSuch'"; r.status != 404 || r.faultstring(t) != want {
		t.Errorf("missing setting: %d %s, want %s", r.status, r.body, want)
	}
}

// TestServiceWithRedfishBIOSStep: a node whose bios interface is redfish
// accepts bios.apply_configuration as a service step.
func TestServiceWithRedfishBIOSStep(t *testing.T) {
	e := newEnv(t)
	uuid := e.createNode(map[string]any{"driver": "redfish", "name": "bios-svc", "bios_interface": "redfish",
		"driver_info": map[string]any{"redfish_address": "http://127.0.0.1:1"}})["uuid"].(string)
	e.setState(uuid, "active")
	steps := []any{map[string]any{"interface": "bios", "step": "apply_configuration",
		"args": map[string]any{"settings": []any{map[string]any{"name": "ProcSMT", "value": "Disabled"}}}}}
	r := e.do("PUT", "/v1/nodes/"+uuid+"/states/provision", "1.87", map[string]any{"target": "service", "service_steps": steps})
	if r.status != 202 {
		t.Fatalf("service: %d %s", r.status, r.body)
	}
	if last := e.eng.provisions[len(e.eng.provisions)-1]; !strings.Contains(string(last.ServiceSteps), "apply_configuration") {
		t.Errorf("request %+v", last)
	}
}
