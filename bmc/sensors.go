package bmc

import (
	"context"
	"fmt"
	"strconv"
	"strings"
)

// Hardware sensors, as Ironic's management interface get_sensors_data
// reads them for ironic-prometheus-exporter: the temperatures, fans and
// power supplies of the system's chassis, its power consumption, and the
// health of its drives.

// SensorKind is what a sensor measures.
type SensorKind string

const (
	SensorTemperature SensorKind = "temperature"  // Value in degrees Celsius
	SensorFan         SensorKind = "fan"          // Value in RPM (or percent: Units says)
	SensorPowerSupply SensorKind = "power_supply" // Value: its last output in watts, 0 when unknown
	SensorPower       SensorKind = "power"        // Value: the power the chassis consumes, in watts
	SensorDrive       SensorKind = "drive"        // no Value; Health only
)

// Sensor is one reading.
type Sensor struct {
	Kind SensorKind
	// ID names the sensor within the machine (the BMC's MemberId or Id,
	// with the chassis or storage it belongs to): stable across reads.
	ID string
	// Context is where the sensor sits (Redfish PhysicalContext: CPU,
	// SystemBoard, Intake, PowerSupply, ...), "" when the BMC says none.
	Context  string
	Value    float64
	HasValue bool
	// Units of a fan's Value: "RPM" or "Percent".
	Units string
	// Health is the sensor's Status.Health (OK, Warning, Critical), ""
	// when the BMC reports none; a sensor whose Status.State is Absent is
	// not reported at all.
	Health string
}

// SensorReader is a Driver that reads the machine's sensors.
type SensorReader interface {
	Sensors(ctx context.Context) ([]Sensor, error)
}

// sensorStatus is a Redfish Resource.Status.
type sensorStatus struct{ State, Health string }

func (s sensorStatus) absent() bool { return s.State == "Absent" }

type rfLink struct {
	ID string `json:"@odata.id"`
}

// Sensors reads the sensors of the system's chassis (Links.Chassis: the
// Thermal and Power resources, Redfish's deprecated but universal layout,
// which Ironic reads too) and the drives of its Storage.
func (d *redfishDriver) Sensors(ctx context.Context) ([]Sensor, error) {
	c, err := d.call(ctx)
	if err != nil {
		return nil, err
	}
	uri, err := d.resolveSystem(c)
	if err != nil {
		return nil, err
	}
	var sys struct {
		Links   struct{ Chassis []rfLink }
		Storage rfLink
	}
	if err := getJSON(c, uri, &sys); err != nil {
		return nil, fmt.Errorf("read system %s: %w", uri, err)
	}
	var out []Sensor
	for _, ch := range sys.Links.Chassis {
		s, err := chassisSensors(c, ch.ID)
		if err != nil {
			return nil, err
		}
		out = append(out, s...)
	}
	if sys.Storage.ID != "" {
		s, err := driveSensors(c, sys.Storage.ID)
		if err != nil {
			return nil, err
		}
		out = append(out, s...)
	}
	return out, nil
}

// lastSegment is the Id at the end of a Redfish URI.
func lastSegment(uri string) string {
	uri = strings.TrimSuffix(uri, "/")
	return uri[strings.LastIndexByte(uri, '/')+1:]
}

// memberID is a sensor's own name within its resource: MemberId, else its
// Name, else its index.
func memberID(id, name string, i int) string {
	switch {
	case id != "":
		return id
	case name != "":
		return name
	}
	return strconv.Itoa(i)
}

func chassisSensors(c *rfCall, uri string) ([]Sensor, error) {
	var ch struct {
		Thermal, Power rfLink
	}
	if err := getJSON(c, uri, &ch); err != nil {
		return nil, fmt.Errorf("read chassis %s: %w", uri, err)
	}
	chassis := lastSegment(uri)
	var out []Sensor
	if ch.Thermal.ID != "" {
		var th struct {
			Temperatures []struct {
				MemberID        string `json:"MemberId"`
				Name            string
				PhysicalContext string
				ReadingCelsius  *float64
				Status          sensorStatus
			}
			Fans []struct {
				MemberID        string `json:"MemberId"`
				Name            string
				PhysicalContext string
				Reading         *float64
				ReadingUnits    string
				Status          sensorStatus
			}
		}
		if err := getJSON(c, ch.Thermal.ID, &th); err != nil {
			return nil, fmt.Errorf("read thermal %s: %w", ch.Thermal.ID, err)
		}
		for i, t := range th.Temperatures {
			if t.Status.absent() {
				continue
			}
			s := Sensor{Kind: SensorTemperature, ID: memberID(t.MemberID, t.Name, i) + "@" + chassis,
				Context: t.PhysicalContext, Health: t.Status.Health}
			if t.ReadingCelsius != nil {
				s.Value, s.HasValue = *t.ReadingCelsius, true
			}
			out = append(out, s)
		}
		for i, f := range th.Fans {
			if f.Status.absent() {
				continue
			}
			units := f.ReadingUnits
			if units == "" {
				units = "RPM"
			}
			s := Sensor{Kind: SensorFan, ID: memberID(f.MemberID, f.Name, i) + "@" + chassis,
				Context: f.PhysicalContext, Units: units, Health: f.Status.Health}
			if f.Reading != nil {
				s.Value, s.HasValue = *f.Reading, true
			}
			out = append(out, s)
		}
	}
	if ch.Power.ID != "" {
		var pw struct {
			PowerControl []struct {
				MemberID           string `json:"MemberId"`
				Name               string
				PowerConsumedWatts *float64
				Status             sensorStatus
			}
			PowerSupplies []struct {
				MemberID             string `json:"MemberId"`
				Name                 string
				LastPowerOutputWatts *float64
				Status               sensorStatus
			}
		}
		if err := getJSON(c, ch.Power.ID, &pw); err != nil {
			return nil, fmt.Errorf("read power %s: %w", ch.Power.ID, err)
		}
		for i, p := range pw.PowerControl {
			if p.Status.absent() || p.PowerConsumedWatts == nil {
				continue
			}
			out = append(out, Sensor{Kind: SensorPower, ID: memberID(p.MemberID, p.Name, i) + "@" + chassis,
				Value: *p.PowerConsumedWatts, HasValue: true, Health: p.Status.Health})
		}
		for i, p := range pw.PowerSupplies {
			if p.Status.absent() {
				continue
			}
			s := Sensor{Kind: SensorPowerSupply, ID: memberID(p.MemberID, p.Name, i) + "@" + chassis,
				Context: "PowerSupply", Health: p.Status.Health}
			if p.LastPowerOutputWatts != nil {
				s.Value, s.HasValue = *p.LastPowerOutputWatts, true
			}
			out = append(out, s)
		}
	}
	return out, nil
}

// driveSensors reads the health of each drive of the system's storage
// subsystems.
func driveSensors(c *rfCall, uri string) ([]Sensor, error) {
	var col struct{ Members []rfLink }
	if err := getJSON(c, uri, &col); err != nil {
		return nil, fmt.Errorf("read storage %s: %w", uri, err)
	}
	var out []Sensor
	for _, m := range col.Members {
		var st struct{ Drives []rfLink }
		if err := getJSON(c, m.ID, &st); err != nil {
			return nil, fmt.Errorf("read storage %s: %w", m.ID, err)
		}
		for _, dl := range st.Drives {
			var dr struct {
				ID     string `json:"Id"`
				Status sensorStatus
			}
			if err := getJSON(c, dl.ID, &dr); err != nil {
				return nil, fmt.Errorf("read drive %s: %w", dl.ID, err)
			}
			if dr.Status.absent() {
				continue
			}
			out = append(out, Sensor{Kind: SensorDrive, ID: memberID(dr.ID, "", 0) + "@" + lastSegment(m.ID),
				Context: "Drive", Health: dr.Status.Health})
		}
	}
	return out, nil
}
