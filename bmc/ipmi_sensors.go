package bmc

import (
	"context"
	"fmt"
	"strings"

	"github.com/bougou/go-ipmi/pkg/client"
	"github.com/bougou/go-ipmi/pkg/types"
)

// Sensors reads the BMC's Sensor Data Records and each sensor's reading,
// as `ipmitool sdr` does and Ironic's ipmitool management interface
// (get_sensors_data) reports them: temperatures, fans, power supplies and
// drive slots. A threshold sensor's health is its threshold state (ok: OK;
// a non-critical threshold crossed: Warning; a critical or non-recoverable
// one: Critical); a sensor that is absent, not scanned or without a valid
// reading is left out.
func (d *ipmiDriver) Sensors(ctx context.Context) ([]Sensor, error) {
	var out []Sensor
	err := d.session(ctx, "get sensors", func(c *client.Client) error {
		ss, err := c.GetSensors(ctx)
		if err != nil {
			return err
		}
		for _, s := range ss {
			if s == nil || s.NotPresent || s.ScanningDisabled || !s.IsReadingValid() {
				continue
			}
			r := Sensor{ID: strings.TrimSpace(s.Name), Context: ipmiEntityContext[uint8(s.EntityID)], Health: ipmiHealth(s)}
			if r.ID == "" {
				r.ID = fmt.Sprintf("sensor %d", s.Number)
			}
			switch s.SensorType {
			case types.SensorTypeTemperature:
				r.Kind = SensorTemperature
				r.Value, r.HasValue = s.Value, s.HasAnalogReading
			case types.SensorTypeFan:
				r.Kind = SensorFan
				r.Value, r.HasValue = s.Value, s.HasAnalogReading
				r.Units = "RPM"
				if s.SensorUnit.BaseUnit != types.SensorUnitType_RPM {
					r.Units = "Percent"
				}
			case types.SensorTypePowerSupply:
				r.Kind, r.Context = SensorPowerSupply, "PowerSupply"
			case types.SensorTypeDriveSlot:
				r.Kind, r.Context = SensorDrive, "Drive"
			default:
				continue
			}
			out = append(out, r)
		}
		return nil
	})
	return out, err
}

// ipmiEntityContext names an IPMI entity (IPMI 2.0, "Entity ID Codes") as
// Redfish's PhysicalContext does.
var ipmiEntityContext = map[uint8]string{
	0x03: "CPU", 0x07: "SystemBoard", 0x0a: "PowerSupply", 0x04: "StorageDevice",
	0x1d: "Fan", 0x37: "Intake", 0x40: "Intake", 0x17: "Chassis",
}

// ipmiHealth is a threshold sensor's health; "" for a discrete sensor
// (whose state bits mean a different thing per sensor type).
func ipmiHealth(s *types.Sensor) string {
	if !s.IsThreshold() {
		return ""
	}
	switch s.Threshold.ThresholdStatus {
	case types.SensorThresholdStatus_OK:
		return "OK"
	case types.SensorThresholdStatus_LNC, types.SensorThresholdStatus_UNC:
		return "Warning"
	case types.SensorThresholdStatus_LCR, types.SensorThresholdStatus_UCR,
		types.SensorThresholdStatus_LNR, types.SensorThresholdStatus_UNR:
		return "Critical"
	}
	return ""
}
