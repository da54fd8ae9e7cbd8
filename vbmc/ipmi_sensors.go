package vbmc

import (
	"fmt"
	"strings"
)

// IPMI sensors: ipmi_sim's BMC gets Sensor Data Records (IPMI 2.0, "Full
// Sensor Record") and threshold sensors with fixed readings, so that
// `ipmitool sdr` and ironflow's IPMI sensor reader find what a server's BMC
// has: CPU and inlet temperatures and two fans. The readings do not follow
// the VM (ipmi_sim holds them; chassis_control cannot change them).

type ipmiSensor struct {
	num, entity, sensorType, unit byte
	m                             byte // reading = m × raw
	raw, upperCritical            byte
	name                          string
}

var ipmiSensors = []ipmiSensor{
	{num: 1, entity: 0x03, sensorType: 0x01, unit: 0x01, m: 1, raw: 40, upperCritical: 90, name: "CPU Temp"},
	{num: 2, entity: 0x37, sensorType: 0x01, unit: 0x01, m: 1, raw: 22, upperCritical: 45, name: "Inlet Temp"},
	{num: 3, entity: 0x1d, sensorType: 0x04, unit: 0x12, m: 100, raw: 56, name: "Fan 1"},
	{num: 4, entity: 0x1d, sensorType: 0x04, unit: 0x12, m: 100, raw: 55, name: "Fan 2"},
}

// fullSensorRecord is the SDR of a threshold sensor owned by the BMC at
// 0x20, LUN 0, linear, unsigned, with only the upper critical threshold
// readable.
func (s ipmiSensor) fullSensorRecord() []byte {
	readable := byte(0)
	if s.upperCritical != 0 {
		readable = 0x10 // upper critical
	}
	body := []byte{
		0x20, 0x00, s.num, // owner, LUN, number
		s.entity, 0x01, 0x7f, 0x68, s.sensorType, 0x01, // entity, instance, init, capabilities, type, threshold
		0x00, 0x00, 0x00, 0x00, 0x00, readable, // event masks, settable/readable thresholds
		0x00, s.unit, 0x00, 0x00, // units 1, base, modifier, linear
		s.m, 0x00, 0x00, 0x00, 0x00, 0x00, // M, tolerance, B, accuracy, exponents
		0x00, s.raw, 0x00, 0x00, 0xff, 0x00, // analog flags, nominal, normal max/min, sensor max/min
		0x00, s.upperCritical, 0x00, 0x00, 0x00, 0x00, // thresholds
		0x00, 0x00, 0x00, 0x00, 0x00, // hysteresis, reserved, OEM
		0xc0 | byte(len(s.name)), // 8-bit ASCII id
	}
	body = append(body, s.name...)
	return append([]byte{0x00, 0x00, 0x51, 0x01, byte(len(body))}, body...)
}

// ipmiSensorEmu are the ipmi_sim commands (ipmi_sim_cmd(5)) that add the
// sensors to the BMC at 0x20, scanning on, events off.
func ipmiSensorEmu() string {
	var b strings.Builder
	for _, s := range ipmiSensors {
		fmt.Fprintf(&b, "sensor_add 0x20 0 %d 0x%02x 0x01\n", s.num, s.sensorType)
		fmt.Fprintf(&b, "sensor_set_event_support 0x20 0 %d disable scanning none 000000000000000 000000000000000 000000000000000 000000000000000\n", s.num)
		b.WriteString("main_sdr_add 0x20")
		for _, x := range s.fullSensorRecord() {
			fmt.Fprintf(&b, " 0x%02x", x)
		}
		fmt.Fprintf(&b, "\nsensor_set_value 0x20 0 %d %d 0\n", s.num, s.raw)
	}
	return b.String()
}
