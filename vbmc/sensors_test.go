package vbmc

import (
	"context"
	"net/http/httptest"
	"testing"

	"github.com/ironflow/ironflow/bmc"
)

// TestSensorsThroughRedfish: ironflow's redfish driver reads the VM's
// sensors from the vbmc's chassis (Thermal, Power) and its drives' health
// from its storage: a VM that is off is at room temperature with its fans
// still and draws standby power; set to Warning, its first fan reports
// Warning. No QEMU is started (the readings of a running VM are read in
// tests/TestRealBMCsThroughTheCLI).
func TestSensorsThroughRedfish(t *testing.T) {
	cfg := newTestConfig(t)
	srv, err := NewServer(cfg, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(func() { ts.Close(); srv.Close() })
	read := func() map[string]bmc.Sensor {
		t.Helper()
		d, err := bmc.New("redfish", map[string]any{"redfish_address": ts.URL, "redfish_system_id": "/redfish/v1/Systems/vm0",
			"redfish_username": "admin", "redfish_password": "password"})
		if err != nil {
			t.Fatal(err)
		}
		defer d.Close()
		ss, err := d.(bmc.SensorReader).Sensors(context.Background())
		if err != nil {
			t.Fatalf("read sensors: %v", err)
		}
		out := map[string]bmc.Sensor{}
		for _, s := range ss {
			out[string(s.Kind)+"/"+s.ID] = s
		}
		return out
	}
	got := read()
	for k, want := range map[string]bmc.Sensor{
		"temperature/0@vm0":  {Context: "CPU", Value: cpuTempOff, HasValue: true, Health: "OK"},
		"temperature/1@vm0":  {Context: "Intake", Value: inletTemp, HasValue: true, Health: "OK"},
		"fan/0@vm0":          {Context: "SystemBoard", Value: fanRPMOff, HasValue: true, Units: "RPM", Health: "OK"},
		"power/0@vm0":        {Value: powerWattsOff, HasValue: true, Health: "OK"},
		"power_supply/0@vm0": {Context: "PowerSupply", Value: psuOutputOff, HasValue: true, Health: "OK"},
	} {
		s := got[k]
		s.Kind, s.ID = "", ""
		if s != want {
			t.Errorf("%s = %+v, want %+v", k, got[k], want)
		}
	}
	drives := 0
	for _, s := range got {
		if s.Kind == bmc.SensorDrive {
			drives++
			if s.Health != "OK" {
				t.Errorf("drive %s health %q", s.ID, s.Health)
			}
		}
	}
	if drives == 0 {
		t.Errorf("no drive among the sensors: %v", got)
	}
	if err := SetHealth(context.Background(), ts.URL, "admin", "password", "vm0", "Warning"); err != nil {
		t.Fatal(err)
	}
	got = read()
	if got["fan/0@vm0"].Health != "Warning" || got["fan/1@vm0"].Health != "OK" {
		t.Errorf("after SetHealth Warning: fan 1 %+v, fan 2 %+v", got["fan/0@vm0"], got["fan/1@vm0"])
	}
}
