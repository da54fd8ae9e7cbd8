package vbmc

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/ironflow/ironflow/bmc"
)

// TestHealthThroughRedfish: ironflow's redfish driver reads the system's
// Status.Health from the vbmc (OK until set); Ironflow.SetHealth changes it,
// null makes the system report none, bad bodies are refused with the
// Redfish messages, and the value outlives the service. No QEMU is started.
func TestHealthThroughRedfish(t *testing.T) {
	cfg := newTestConfig(t)
	serve := func() string {
		srv, err := NewServer(cfg, testLogger(t))
		if err != nil {
			t.Fatal(err)
		}
		ts := httptest.NewServer(srv)
		t.Cleanup(func() { ts.Close(); srv.Close() })
		return ts.URL
	}
	url := serve()
	read := func(url string) bmc.Health {
		t.Helper()
		d, err := bmc.New("redfish", map[string]any{"redfish_address": url, "redfish_username": "admin", "redfish_password": "password"})
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		h, err := d.(bmc.HealthReader).Health(context.Background())
		if err != nil {
			t.Fatalf("read health: %v", err)
		}
		return h
	}
	set := func(body string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("POST", url+"/redfish/v1/Systems/vm0/Actions/Oem/Ironflow.SetHealth", strings.NewReader(body))
		req.SetBasicAuth("admin", "password")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if h := read(url); h != bmc.HealthOK {
		t.Errorf("health of a new VM: %q, want OK", h)
	}
	for _, c := range []struct {
		health string
		want   bmc.Health
	}{
		{"Warning", bmc.HealthWarning},
		{"", bmc.HealthUnknown}, // null: the system reports none
		{"Critical", bmc.HealthCritical},
	} {
		if err := SetHealth(context.Background(), url, "admin", "password", "vm0", c.health); err != nil {
			t.Fatal(err)
		}
		if h := read(url); h != c.want {
			t.Errorf("after SetHealth %q: %q, want %q", c.health, h, c.want)
		}
	}
	for _, c := range []struct{ body, want string }{
		{`{"Health": "Degraded"}`, "ActionParameterValueNotInList"},
		{`{"Health": 1}`, "ActionParameterValueNotInList"},
		{`{}`, "ActionParameterMissing"},
		{`{"Health":`, "MalformedJSON"},
	} {
		if code, b := set(c.body); code != http.StatusBadRequest || !strings.Contains(b, c.want) {
			t.Errorf("SetHealth %s: %d %s, want 400 %s", c.body, code, b, c.want)
		}
	}
	if h := read(serve()); h != bmc.HealthCritical {
		t.Errorf("health after a restart of the service: %q, want Critical", h)
	}
}
