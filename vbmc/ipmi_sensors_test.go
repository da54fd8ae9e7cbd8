package vbmc

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/ironflow/ironflow/bmc"
)

// TestIPMISensorsThroughIpmiSim: ipmi_sim's BMC has the SDRs and readings
// of the emulated sensors; `ipmitool sdr` lists them as a server's, and
// ironflow's IPMI driver reads them (temperatures in degrees C, fans in
// RPM, all OK). The VM is never powered on.
func TestIPMISensorsThroughIpmiSim(t *testing.T) {
	requireTools(t, "ipmi_sim", "ipmitool")
	cfg := newTestConfig(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	port := freeUDPPort(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	stop, err := StartIPMISim(ctx, cfg, "vm0", "127.0.0.1:"+strconv.Itoa(port), "admin", "password",
		[]string{"env", chassisControlEnv + "=1", exe, "--config", cfg.Path, "--vm", "vm0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("stop ipmi_sim: %v", err)
		}
	})
	out, err := exec.Command("ipmitool", "-I", "lanplus", "-C", "3", "-H", "127.0.0.1", "-p", strconv.Itoa(port),
		"-U", "admin", "-P", "password", "-N", "5", "-R", "3", "sdr", "list", "full").CombinedOutput()
	if err != nil {
		t.Fatalf("ipmitool sdr: %v: %s", err, out)
	}
	for _, want := range []string{"CPU Temp         | 40 degrees C      | ok", "Inlet Temp       | 22 degrees C      | ok",
		"Fan 1            | 5600 RPM          | ok", "Fan 2            | 5500 RPM          | ok"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("ipmitool sdr lacks %q:\n%s", want, out)
		}
	}

	d, err := bmc.New("ipmi", map[string]any{"ipmi_address": "127.0.0.1", "ipmi_port": port, "ipmi_username": "admin", "ipmi_password": "password"})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	ss, err := d.(bmc.SensorReader).Sensors(ctx)
	if err != nil {
		t.Fatalf("read sensors: %v", err)
	}
	got := map[string]bmc.Sensor{}
	for _, s := range ss {
		got[s.ID] = s
	}
	for id, want := range map[string]bmc.Sensor{
		"CPU Temp":   {Kind: bmc.SensorTemperature, ID: "CPU Temp", Context: "CPU", Value: 40, HasValue: true, Health: "OK"},
		"Inlet Temp": {Kind: bmc.SensorTemperature, ID: "Inlet Temp", Context: "Intake", Value: 22, HasValue: true, Health: "OK"},
		"Fan 1":      {Kind: bmc.SensorFan, ID: "Fan 1", Context: "Fan", Value: 5600, HasValue: true, Units: "RPM", Health: "OK"},
		"Fan 2":      {Kind: bmc.SensorFan, ID: "Fan 2", Context: "Fan", Value: 5500, HasValue: true, Units: "RPM", Health: "OK"},
	} {
		if got[id] != want {
			t.Errorf("sensor %s = %+v, want %+v", id, got[id], want)
		}
	}
	if len(ss) != 4 {
		t.Errorf("%d sensors, want 4: %+v", len(ss), ss)
	}
}
