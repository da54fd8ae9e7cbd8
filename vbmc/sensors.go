package vbmc

import (
	"net/http"
)

// Sensors: the chassis links Thermal and Power (Redfish's Thermal and
// Power resources, which ironflow's sensor reader and Ironic's
// get_sensors_data read). A VM has no sensors of its own, so the readings
// follow its power state (a running machine is warm, spins its fans and
// draws power; one that is off is at room temperature) and its health
// (health.go): a system set to Warning or Critical has a failing fan, which
// reports that health and slows down, standing for the part a real BMC
// would have noticed.

// Readings of a VM, on and off.
const (
	cpuTempOn, cpuTempOff       = 45, 21
	inletTemp                   = 22
	fanRPMOn, fanRPMOff         = 5600, 0
	failingFanRPM               = 900
	powerWattsOn, powerWattsOff = 120, 9
	psuOutputOn, psuOutputOff   = 110, 6
)

func (s *Server) routeSensors(mux *http.ServeMux) {
	mux.HandleFunc("GET "+redfishRoot+"/Chassis/{id}/Thermal", s.withMachine(s.handleThermal))
	mux.HandleFunc("GET "+redfishRoot+"/Chassis/{id}/Power", s.withMachine(s.handlePower))
}

// sensorLinks are the chassis's links to its sensors.
func sensorLinks(chassisPath string) map[string]any {
	return map[string]any{"Thermal": link(chassisPath + "/Thermal"), "Power": link(chassisPath + "/Power")}
}

func (s *Server) poweredOn(w http.ResponseWriter, r *http.Request, m *Machine) (bool, bool) {
	power, err := m.PowerState(r.Context())
	if err != nil {
		writeError(w, http.StatusInternalServerError, "InternalError", err.Error())
		return false, false
	}
	return power == PowerOn, true
}

func (s *Server) handleThermal(w http.ResponseWriter, r *http.Request, m *Machine) {
	on, ok := s.poweredOn(w, r, m)
	if !ok {
		return
	}
	cpu, rpm := cpuTempOff, fanRPMOff
	if on {
		cpu, rpm = cpuTempOn, fanRPMOn
	}
	fan1 := map[string]any{"State": "Enabled", "Health": "OK"}
	rpm1 := rpm
	if h := m.health(); h == "Warning" || h == "Critical" {
		fan1["Health"] = h
		if on {
			rpm1 = failingFanRPM
		}
	}
	p := redfishRoot + "/Chassis/" + m.vm.Name + "/Thermal"
	writeJSONResponse(w, http.StatusOK, map[string]any{
		odataID: p, odataType: "#Thermal.v1_7_0.Thermal", "Id": "Thermal", "Name": "Thermal",
		"Temperatures": []any{
			map[string]any{odataID: p + "#/Temperatures/0", "MemberId": "0", "Name": "CPU Temp", "PhysicalContext": "CPU",
				"SensorNumber": 1, "ReadingCelsius": cpu, "UpperThresholdCritical": 90, "Status": okStatus()},
			map[string]any{odataID: p + "#/Temperatures/1", "MemberId": "1", "Name": "Inlet Temp", "PhysicalContext": "Intake",
				"SensorNumber": 2, "ReadingCelsius": inletTemp, "UpperThresholdCritical": 45, "Status": okStatus()},
		},
		"Fans": []any{
			map[string]any{odataID: p + "#/Fans/0", "MemberId": "0", "Name": "Fan 1", "PhysicalContext": "SystemBoard",
				"Reading": rpm1, "ReadingUnits": "RPM", "Status": fan1},
			map[string]any{odataID: p + "#/Fans/1", "MemberId": "1", "Name": "Fan 2", "PhysicalContext": "SystemBoard",
				"Reading": rpm, "ReadingUnits": "RPM", "Status": okStatus()},
		},
	})
}

func (s *Server) handlePower(w http.ResponseWriter, r *http.Request, m *Machine) {
	on, ok := s.poweredOn(w, r, m)
	if !ok {
		return
	}
	watts, out := powerWattsOff, psuOutputOff
	if on {
		watts, out = powerWattsOn, psuOutputOn
	}
	p := redfishRoot + "/Chassis/" + m.vm.Name + "/Power"
	writeJSONResponse(w, http.StatusOK, map[string]any{
		odataID: p, odataType: "#Power.v1_7_0.Power", "Id": "Power", "Name": "Power",
		"PowerControl": []any{
			map[string]any{odataID: p + "#/PowerControl/0", "MemberId": "0", "Name": "System Input Power",
				"PowerConsumedWatts": watts, "Status": okStatus()},
		},
		"PowerSupplies": []any{
			map[string]any{odataID: p + "#/PowerSupplies/0", "MemberId": "0", "Name": "PSU 1",
				"LastPowerOutputWatts": out, "PowerCapacityWatts": 500, "Status": okStatus()},
		},
	})
}
