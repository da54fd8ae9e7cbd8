package metrics

import (
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

// The sensors of a node under ironic-prometheus-exporter's names and
// labels: a temperature per physical context, a fan's status and RPM (a
// fan in percent has no RPM series), a power supply's status, the drives'
// status, the consumption; a sensor without health has no status series;
// a node left out of a round is forgotten. The exposition passes promtool.
func TestSensorCollectorExportsIronicPrometheusExporterSeries(t *testing.T) {
	c := &SensorCollector{nodes: map[string]NodeSensors{}}
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	c.Set(NodeSensors{UUID: "u1", Name: "n1", InstanceUUID: "i1", Samples: []SensorSample{
		{Kind: "temperature", ID: "0@1U", Context: "CPU", Value: 41, HasValue: true, Health: "OK"},
		{Kind: "temperature", ID: "1@1U", Context: "CPU"}, // no reading: no series
		{Kind: "temperature", ID: "2@1U", Context: "Intake", Value: 25, HasValue: true},
		{Kind: "fan", ID: "0@1U", Context: "Backplane", Value: 2100, HasValue: true, Units: "RPM", Health: "OK"},
		{Kind: "fan", ID: "1@1U", Context: "Backplane", Value: 35, HasValue: true, Units: "Percent", Health: "Critical"},
		{Kind: "power_supply", ID: "0@1U", Context: "PowerSupply", Value: 325, HasValue: true, Health: "Warning"},
		{Kind: "power", ID: "0@1U", Value: 344, HasValue: true},
		{Kind: "drive", ID: "d0@1", Context: "Drive", Health: "OK"},
		{Kind: "drive", ID: "d1@1", Context: "Drive"}, // no health: no series
	}})
	c.Set(NodeSensors{UUID: "u2", Name: "n2", Samples: []SensorSample{
		{Kind: "temperature", ID: "0@x", Context: "Weird Context!", Value: 30, HasValue: true},
	}})
	want := `
# HELP baremetal_drive_status Drive health as the node's BMC reports it: 0 OK, 1 Warning or Critical.
# TYPE baremetal_drive_status gauge
baremetal_drive_status{entity_id="HDD",instance_uuid="i1",node_name="n1",node_uuid="u1",sensor_id="d0@1"} 0
# HELP baremetal_fan_speed_rpm Fan speed in revolutions per minute (fans the BMC reads in RPM).
# TYPE baremetal_fan_speed_rpm gauge
baremetal_fan_speed_rpm{entity_id="Backplane",instance_uuid="i1",node_name="n1",node_uuid="u1",sensor_id="0@1U"} 2100
# HELP baremetal_fan_status Fan health as the node's BMC reports it: 0 OK, 1 Warning or Critical.
# TYPE baremetal_fan_status gauge
baremetal_fan_status{entity_id="Backplane",instance_uuid="i1",node_name="n1",node_uuid="u1",sensor_id="0@1U"} 0
baremetal_fan_status{entity_id="Backplane",instance_uuid="i1",node_name="n1",node_uuid="u1",sensor_id="1@1U"} 1
# HELP baremetal_power_consumed_watts Power the node's chassis consumes, in watts, as its BMC measures it.
# TYPE baremetal_power_consumed_watts gauge
baremetal_power_consumed_watts{entity_id="Chassis",instance_uuid="i1",node_name="n1",node_uuid="u1",sensor_id="0@1U"} 344
# HELP baremetal_power_status Power supply health as the node's BMC reports it: 0 OK, 1 Warning or Critical.
# TYPE baremetal_power_status gauge
baremetal_power_status{entity_id="PSU",instance_uuid="i1",node_name="n1",node_uuid="u1",sensor_id="0@1U"} 1
# HELP baremetal_temp_cpu_celsius Temperature in degrees Celsius of the sensors whose physical context is cpu, as the node's BMC reads it.
# TYPE baremetal_temp_cpu_celsius gauge
baremetal_temp_cpu_celsius{entity_id="CPU",instance_uuid="i1",node_name="n1",node_uuid="u1",sensor_id="0@1U"} 41
# HELP baremetal_temp_intake_celsius Temperature in degrees Celsius of the sensors whose physical context is intake, as the node's BMC reads it.
# TYPE baremetal_temp_intake_celsius gauge
baremetal_temp_intake_celsius{entity_id="Intake",instance_uuid="i1",node_name="n1",node_uuid="u1",sensor_id="2@1U"} 25
# HELP baremetal_temp_weirdcontext_celsius Temperature in degrees Celsius of the sensors whose physical context is weirdcontext, as the node's BMC reads it.
# TYPE baremetal_temp_weirdcontext_celsius gauge
baremetal_temp_weirdcontext_celsius{entity_id="Weird Context!",instance_uuid="",node_name="n2",node_uuid="u2",sensor_id="0@x"} 30
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want)); err != nil {
		t.Error(err)
	}
	promtoolCheck(t, reg)
	c.Keep(map[string]bool{"u2": true})
	if n := testutil.CollectAndCount(c); n != 1 {
		t.Errorf("after keeping u2 only: %d series, want 1", n)
	}
}
