package metrics

import (
	"net/http"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Hardware sensors (docs/metrics.md, "Hardware sensors"): per node by
// nature, so they live in a registry of their own, SensorRegistry, served
// at /metrics/sensors beside /metrics, never mixed with the fleet's
// bounded series. Names and labels are ironic-prometheus-exporter's
// (its redfish parser): baremetal_temp_<context>_celsius,
// baremetal_fan_status, baremetal_power_status and baremetal_drive_status
// (0 when the part's health is OK, 1 otherwise), each with node_name,
// node_uuid, instance_uuid, entity_id and sensor_id; ironflow adds the
// readings the exporter's IPMI side has and its redfish side lacks:
// baremetal_fan_speed_rpm and baremetal_power_consumed_watts.

// SensorRegistry holds the sensors' series, apart from Registry.
var SensorRegistry = prometheus.NewRegistry()

// SensorsPath is where Serve serves SensorRegistry.
const SensorsPath = "/metrics/sensors"

// SensorSample is one sensor reading of a node, as the sensor poller hands
// it over (package bmc's Sensor, without importing it).
type SensorSample struct {
	// Kind is temperature, fan, power_supply, power or drive.
	Kind string
	ID   string
	// Context is the Redfish PhysicalContext ("CPU", "Intake"), "" for
	// none.
	Context  string
	Value    float64
	HasValue bool
	Units    string // a fan's: RPM or Percent
	Health   string // OK, Warning, Critical; "" when the BMC says none
}

// NodeSensors are the readings of one node's last successful read.
type NodeSensors struct {
	UUID, Name, InstanceUUID string
	Samples                  []SensorSample
}

// SensorCollector exports the nodes' last readings.
type SensorCollector struct {
	mu    sync.Mutex
	nodes map[string]NodeSensors
}

// Sensors is the process's collector, registered with SensorRegistry.
var Sensors = &SensorCollector{nodes: map[string]NodeSensors{}}

// SensorReads counts the sensor poller's reads of a node's BMC, by outcome
// (ok, the BMC outcomes of ironflow_bmc_calls_total, skipped_over_cap: a
// node beyond --sensors-max-nodes), on the fleet's registry.
var SensorReads = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "ironflow_sensor_reads_total",
	Help: "Reads of nodes' hardware sensors by the worker's sensor poller, by outcome (ok, unreachable, auth, busy, unsupported, invalid_config, error; skipped_over_cap: a node beyond --sensors-max-nodes).",
}, []string{"outcome"})

func init() {
	SensorRegistry.MustRegister(Sensors)
	Registry.MustRegister(SensorReads)
}

// Set replaces a node's readings.
func (c *SensorCollector) Set(n NodeSensors) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.nodes[n.UUID] = n
}

// Keep forgets every node not in uuids (deleted, moved to another group,
// in maintenance, or beyond the cap).
func (c *SensorCollector) Keep(uuids map[string]bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for u := range c.nodes {
		if !uuids[u] {
			delete(c.nodes, u)
		}
	}
}

var sensorLabels = []string{"node_name", "node_uuid", "instance_uuid", "entity_id", "sensor_id"}

var (
	fanStatusDesc = prometheus.NewDesc("baremetal_fan_status",
		"Fan health as the node's BMC reports it: 0 OK, 1 Warning or Critical.", sensorLabels, nil)
	fanSpeedDesc = prometheus.NewDesc("baremetal_fan_speed_rpm",
		"Fan speed in revolutions per minute (fans the BMC reads in RPM).", sensorLabels, nil)
	psuStatusDesc = prometheus.NewDesc("baremetal_power_status",
		"Power supply health as the node's BMC reports it: 0 OK, 1 Warning or Critical.", sensorLabels, nil)
	driveStatusDesc = prometheus.NewDesc("baremetal_drive_status",
		"Drive health as the node's BMC reports it: 0 OK, 1 Warning or Critical.", sensorLabels, nil)
	powerDesc = prometheus.NewDesc("baremetal_power_consumed_watts",
		"Power the node's chassis consumes, in watts, as its BMC measures it.", sensorLabels, nil)
)

// tempDescs are the temperature series by physical context, made once.
var tempDescs sync.Map

// tempDesc is baremetal_temp_<context>_celsius, as
// ironic-prometheus-exporter names it (the context in lower case, here
// kept to Prometheus's name alphabet; "unknown" for none).
func tempDesc(context string) *prometheus.Desc {
	ctx := metricWord(context)
	if d, ok := tempDescs.Load(ctx); ok {
		return d.(*prometheus.Desc)
	}
	d := prometheus.NewDesc("baremetal_temp_"+ctx+"_celsius",
		"Temperature in degrees Celsius of the sensors whose physical context is "+ctx+", as the node's BMC reads it.", sensorLabels, nil)
	actual, _ := tempDescs.LoadOrStore(ctx, d)
	return actual.(*prometheus.Desc)
}

// metricWord is s in lower case with only [a-z0-9_], at most 32 long;
// "unknown" when nothing is left.
func metricWord(s string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(s) {
		if b.Len() >= 32 {
			break
		}
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '_' {
			b.WriteRune(r)
		}
	}
	if b.Len() == 0 {
		return "unknown"
	}
	return b.String()
}

// Describe sends nothing: the temperature series depend on what the BMCs
// report (an unchecked collector).
func (c *SensorCollector) Describe(chan<- *prometheus.Desc) {}

// Collect exports the last readings.
func (c *SensorCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	nodes := make([]NodeSensors, 0, len(c.nodes))
	for _, n := range c.nodes {
		nodes = append(nodes, n)
	}
	c.mu.Unlock()
	status := func(h string) float64 {
		if h == "OK" {
			return 0
		}
		return 1
	}
	for _, n := range nodes {
		seen := map[string]bool{}
		for _, s := range n.Samples {
			key := s.Kind + "/" + s.ID
			if seen[key] {
				continue // a BMC that lists a sensor twice
			}
			seen[key] = true
			lv := func(entity string) []string { return []string{n.Name, n.UUID, n.InstanceUUID, entity, s.ID} }
			switch s.Kind {
			case "temperature":
				if s.HasValue {
					ch <- prometheus.MustNewConstMetric(tempDesc(s.Context), prometheus.GaugeValue, s.Value, lv(s.Context)...)
				}
			case "fan":
				if s.Health != "" {
					ch <- prometheus.MustNewConstMetric(fanStatusDesc, prometheus.GaugeValue, status(s.Health), lv(s.Context)...)
				}
				if s.HasValue && s.Units == "RPM" {
					ch <- prometheus.MustNewConstMetric(fanSpeedDesc, prometheus.GaugeValue, s.Value, lv(s.Context)...)
				}
			case "power_supply":
				if s.Health != "" {
					ch <- prometheus.MustNewConstMetric(psuStatusDesc, prometheus.GaugeValue, status(s.Health), lv("PSU")...)
				}
			case "power":
				if s.HasValue {
					ch <- prometheus.MustNewConstMetric(powerDesc, prometheus.GaugeValue, s.Value, lv("Chassis")...)
				}
			case "drive":
				if s.Health != "" {
					ch <- prometheus.MustNewConstMetric(driveStatusDesc, prometheus.GaugeValue, status(s.Health), lv("HDD")...)
				}
			}
		}
	}
}

// SensorsHandler serves SensorRegistry.
func SensorsHandler() http.Handler {
	return promhttp.HandlerFor(SensorRegistry, promhttp.HandlerOpts{ErrorLog: slogErrors{}})
}
