package apiserver

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ironflow/ironflow/internal/testkit/storetest"
	"github.com/ironflow/ironflow/store"
	"github.com/ironflow/ironflow/workflows"
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

// bootModeEngine is the fake engine with the boot mode change.
type bootModeEngine struct {
	*fakeEngine
	reqs []workflows.BootModeRequest
	err  error
}

func (e *bootModeEngine) StartBootMode(_ context.Context, req workflows.BootModeRequest) error {
	if e.err != nil {
		return e.err
	}
	e.reqs = append(e.reqs, req)
	return nil
}

// TestBootModeAndSecureBootStates: PUT states/boot_mode and
// states/secure_boot (1.76) check the target as Ironic does, answer 202
// with the node's states as Location and start ChangeBootMode; ipmi has no
// secure boot; a node held by another operation is 409.
func TestBootModeAndSecureBootStates(t *testing.T) {
	st := storetest.New(t)
	eng := &bootModeEngine{fakeEngine: newFakeEngine(st)}
	h, err := New(DefaultConfig(), st, eng, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	defer srv.Close()
	e := &env{t: t, st: st, eng: eng.fakeEngine, h: h, srv: srv}
	rf := e.createNode(map[string]any{"driver": "redfish", "name": "bm-rf", "driver_info": map[string]any{"redfish_address": "http://127.0.0.1:1"}})["uuid"].(string)
	ipmi := e.createNode(map[string]any{"driver": "ipmi", "name": "bm-ipmi", "driver_info": map[string]any{"ipmi_address": "127.0.0.1"}})["uuid"].(string)

	for _, c := range []struct {
		name, node, path, ver string
		body                  any
		status                int
		msg                   string
	}{
		{"below 1.76", rf, "boot_mode", "1.75", map[string]any{"target": "uefi"}, 404, ""},
		{"bad mode", rf, "boot_mode", "1.76", map[string]any{"target": "efi"}, 400, "Invalid boot mode efi requested for node."},
		{"no mode", rf, "boot_mode", "1.76", map[string]any{}, 400, "Invalid boot mode None requested for node."},
		{"bad secure boot", rf, "secure_boot", "1.76", map[string]any{"target": "on"}, 400, "Invalid secure boot state on requested for node."},
		{"ipmi secure boot", ipmi, "secure_boot", "1.76", map[string]any{"target": true}, 400, "Driver ipmi does not support set_secure_boot_state (disabled or not implemented)."},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := e.do("PUT", "/v1/nodes/"+c.node+"/states/"+c.path, c.ver, c.body)
			if r.status != c.status || (c.msg != "" && r.faultstring(t) != c.msg) {
				t.Errorf("%d %s, want %d %s", r.status, r.body, c.status, c.msg)
			}
		})
	}
	if len(eng.reqs) != 0 {
		t.Fatalf("refused requests started workflows: %+v", eng.reqs)
	}

	r := e.do("PUT", "/v1/nodes/bm-rf/states/boot_mode", "1.76", map[string]any{"target": "uefi"})
	if r.status != 202 || !strings.HasSuffix(r.header.Get("Location"), "/v1/nodes/bm-rf/states") {
		t.Fatalf("boot mode: %d %s %v", r.status, r.body, r.header)
	}
	if r := e.do("PUT", "/v1/nodes/"+rf+"/states/secure_boot", "1.76", map[string]any{"target": false}); r.status != 202 {
		t.Fatalf("secure boot: %d %s", r.status, r.body)
	}
	if r := e.do("PUT", "/v1/nodes/"+ipmi+"/states/boot_mode", "1.76", map[string]any{"target": "bios"}); r.status != 202 {
		t.Fatalf("ipmi boot mode: %d %s", r.status, r.body)
	}
	if len(eng.reqs) != 3 || eng.reqs[0].BootMode != "uefi" || eng.reqs[0].NodeUUID != rf ||
		eng.reqs[1].SecureBoot == nil || *eng.reqs[1].SecureBoot || eng.reqs[2].BootMode != "bios" {
		t.Fatalf("requests %+v", eng.reqs)
	}
	eng.err = ErrNodeLocked
	if r := e.do("PUT", "/v1/nodes/"+rf+"/states/boot_mode", "1.76", map[string]any{"target": "bios"}); r.status != 409 {
		t.Errorf("locked node: %d %s", r.status, r.body)
	}
}
