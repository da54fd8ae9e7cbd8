package bmc

import (
	"context"
	"testing"
)

// The sensors of the two recorded vendor services, as their BMCs report
// them: HPE's iLO 5 (27 of its 35 temperatures and 6 of its 8 fans, the
// others Absent and left out; fans in percent; two power supplies; the
// chassis's consumption) and DMTF's rackmount
// (a disabled CPU temperature without a reading, RPM fans, a power supply
// in Warning).
func TestRedfishSensorsOfTheRecordedServices(t *testing.T) {
	ctx := context.Background()
	type key struct {
		kind SensorKind
		id   string
	}
	for _, c := range []struct {
		dir    string
		counts map[SensorKind]int
		want   map[key]Sensor
	}{
		{"hpe-ilo-dl325", map[SensorKind]int{SensorTemperature: 27, SensorFan: 6, SensorPowerSupply: 2, SensorPower: 1},
			map[key]Sensor{
				{SensorTemperature, "1@1"}: {Context: "CPU", Value: 40, HasValue: true, Health: "OK"},
				{SensorFan, "0@1"}:         {Value: 35, HasValue: true, Units: "Percent", Health: "OK"},
				{SensorPowerSupply, "1@1"}: {Context: "PowerSupply", Value: 46, HasValue: true, Health: "OK"},
				{SensorPower, "0@1"}:       {Value: 97, HasValue: true},
			}},
		{"dmtf-public-rackmount1", map[SensorKind]int{SensorTemperature: 3, SensorFan: 2, SensorPowerSupply: 1, SensorPower: 1},
			map[key]Sensor{
				{SensorTemperature, "0@1U"}: {Context: "CPU", Value: 41, HasValue: true, Health: "OK"},
				{SensorTemperature, "1@1U"}: {Context: "CPU"},
				{SensorFan, "1@1U"}:         {Context: "Backplane", Value: 2050, HasValue: true, Units: "RPM", Health: "OK"},
				{SensorPowerSupply, "0@1U"}: {Context: "PowerSupply", Value: 325, HasValue: true, Health: "Warning"},
				{SensorPower, "0@1U"}:       {Value: 344, HasValue: true, Health: "OK"},
			}},
	} {
		t.Run(c.dir, func(t *testing.T) {
			b := startBMC(t, c.dir, nil)
			d := newTestRedfish(t, b.info(nil))
			sr, ok := d.(SensorReader)
			if !ok {
				t.Fatal("the redfish driver is not a SensorReader")
			}
			got, err := sr.Sensors(ctx)
			if err != nil {
				t.Fatalf("Sensors: %v", err)
			}
			counts := map[SensorKind]int{}
			byKey := map[key]Sensor{}
			for _, s := range got {
				counts[s.Kind]++
				byKey[key{s.Kind, s.ID}] = s
			}
			for k, n := range c.counts {
				if counts[k] != n {
					t.Errorf("%d %s sensors, want %d (all: %v)", counts[k], k, n, counts)
				}
			}
			for k, w := range c.want {
				w.Kind, w.ID = k.kind, k.id
				if s, ok := byKey[k]; !ok || s != w {
					t.Errorf("sensor %v = %+v, want %+v", k, s, w)
				}
			}
		})
	}
}
