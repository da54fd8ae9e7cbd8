package bmo

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"testing"
)

// TestRegisterCreateBody: the node create BMO v0.13.2 sends for each BMC
// kind (its pkg/hardwareutils/bmc access details and enrollNode), against
// a fake API that knows no node yet.
func TestRegisterCreateBody(t *testing.T) {
	for _, tc := range []struct {
		address string
		want    map[string]any
	}{
		{"ipmi://192.0.2.10:6230", map[string]any{
			"driver": "ipmi", "boot_interface": "ipxe", "raid_interface": "no-raid", "inspect_interface": "agent",
			"driver_info": map[string]any{"ipmi_address": "192.0.2.10", "ipmi_port": "6230", "ipmi_username": "u", "ipmi_password": "p", "ipmi_priv_level": "ADMINISTRATOR"}}},
		{"redfish+http://192.0.2.11:8000/redfish/v1/Systems/vm0", map[string]any{
			"driver": "redfish", "boot_interface": "ipxe", "raid_interface": "redfish", "firmware_interface": "redfish", "inspect_interface": "agent",
			"driver_info": map[string]any{"redfish_address": "http://192.0.2.11:8000", "redfish_system_id": "/redfish/v1/Systems/vm0", "redfish_username": "u", "redfish_password": "p"}}},
		{"redfish-virtualmedia+http://192.0.2.12:8000/redfish/v1/Systems/vm1", map[string]any{
			"driver": "redfish", "boot_interface": "redfish-virtual-media", "raid_interface": "redfish", "firmware_interface": "redfish", "inspect_interface": "agent",
			"driver_info": map[string]any{"redfish_address": "http://192.0.2.12:8000", "redfish_system_id": "/redfish/v1/Systems/vm1", "redfish_username": "u", "redfish_password": "p"}}},
		{"redfish://192.0.2.13/redfish/v1/", map[string]any{
			"driver": "redfish", "boot_interface": "ipxe", "raid_interface": "redfish", "firmware_interface": "redfish", "inspect_interface": "agent",
			"driver_info": map[string]any{"redfish_address": "https://192.0.2.13", "redfish_username": "u", "redfish_password": "p"}}},
		{"ipmi://192.0.2.14", map[string]any{
			"driver": "ipmi", "boot_interface": "ipxe", "raid_interface": "no-raid", "inspect_interface": "agent",
			"driver_info": map[string]any{"ipmi_address": "192.0.2.14", "ipmi_port": "623", "ipmi_username": "u", "ipmi_password": "p", "ipmi_priv_level": "ADMINISTRATOR"}}},
	} {
		var create map[string]any
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			switch {
			case r.Method == "GET" && r.URL.Path == "/v1/ports":
				w.Write([]byte(`{"ports": []}`))
			case r.Method == "GET":
				w.WriteHeader(404)
				w.Write([]byte(`{"error_message": "{\"faultstring\": \"not found\"}"}`))
			case r.Method == "POST" && r.URL.Path == "/v1/nodes":
				_ = json.NewDecoder(r.Body).Decode(&create)
				w.WriteHeader(201)
				w.Write([]byte(`{"uuid": "11111111-2222-3333-4444-555555555555", "provision_state": "enroll"}`))
			case r.Method == "POST" && r.URL.Path == "/v1/ports":
				w.WriteHeader(201)
				w.Write([]byte(`{"uuid": "p"}`))
			case r.Method == "PUT":
				w.WriteHeader(202)
			}
		}))
		h := &Host{Namespace: "ns", Name: "h0", BMCAddress: tc.address, BMCUsername: "u", BMCPassword: "p",
			BootMACAddress: "52:54:00:00:00:01", CPUArchitecture: "x86_64"}
		p, err := New(Config{Endpoint: srv.URL + "/v1"}, h)
		if err != nil {
			t.Fatal(err)
		}
		p.client.Microversion, p.MaxVersion = "1.93", 93
		r, err := p.Register(context.Background(), false)
		srv.Close()
		if err != nil || !r.Dirty || h.ProvisioningID == "" {
			t.Errorf("%s: %+v, %v, ID %q", tc.address, r, err, h.ProvisioningID)
			continue
		}
		want := map[string]any{"name": "ns~h0", "disable_power_off": false,
			"properties": map[string]any{"capabilities": "boot_mode:uefi", "cpu_arch": "x86_64"}}
		for k, v := range tc.want {
			want[k] = v
		}
		if !reflect.DeepEqual(create, want) {
			t.Errorf("%s: create body\n%v\nwant\n%v", tc.address, create, want)
		}
	}
	if _, err := ParseBMCAddress("idrac://x"); err == nil || !strings.Contains(err.Error(), "unknown BMC type") {
		t.Errorf("an unknown kind: %v", err)
	}
}
