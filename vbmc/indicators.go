package vbmc

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
)

// Indicator LEDs: the system and its chassis show IndicatorLED (Lit,
// Off, Blinking), as DMTF's and HPE's recorded services do; each drive
// shows LocationIndicatorActive (true, false), the property that
// replaced IndicatorLED in Drive 1.14. Both are writable with PATCH. A VM
// has no light: the state is kept in state_dir/NAME/indicators.json,
// so that it survives the service and reads back what was set.

// indicatorLEDs are IndicatorLED's values a PATCH may set.
var indicatorLEDs = []string{"Lit", "Off", "Blinking"}

func (m *Machine) indicatorsFile() string { return filepath.Join(m.dir, "indicators.json") }

// indicators are the VM's indicator states by resource ("system",
// "chassis", "drive/<Id>"): IndicatorLED values, or "Lit"/"Off" for a
// drive's LocationIndicatorActive. Every light is off until set.
func (m *Machine) indicators() map[string]string {
	out := map[string]string{}
	_, _ = readJSON(m.indicatorsFile(), &out)
	return out
}

// indicator is one resource's state.
func (m *Machine) indicator(resource string) string {
	if v := m.indicators()[resource]; v != "" {
		return v
	}
	return "Off"
}

// setIndicator records one resource's state under the VM's lock.
func (m *Machine) setIndicator(ctx context.Context, resource, led string) error {
	unlock, err := m.lock(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	all := m.indicators()
	all[resource] = led
	if err := writeJSON(m.indicatorsFile(), all); err != nil {
		return fmt.Errorf("record indicator %s of %s: %w", resource, m.vm.Name, err)
	}
	m.log.Info("indicator set", "resource", resource, "state", led)
	return nil
}

// patchIndicatorLED applies a PATCH body's IndicatorLED to resource and
// reports whether the body had it; a bad value is answered here.
func (s *Server) patchIndicatorLED(w http.ResponseWriter, m *Machine, resource string, raw json.RawMessage) bool {
	var led string
	if err := json.Unmarshal(raw, &led); err != nil || !slices.Contains(indicatorLEDs, led) {
		writeError(w, http.StatusBadRequest, "PropertyValueNotInList",
			fmt.Sprintf("The value %s for the property IndicatorLED is not in the list of acceptable values.", string(raw)))
		return false
	}
	ctx, cancel := s.actionContext()
	defer cancel()
	if err := m.setIndicator(ctx, resource, led); err != nil {
		writeError(w, http.StatusInternalServerError, "InternalError", err.Error())
		return false
	}
	return true
}

// handlePatchChassis sets the chassis' IndicatorLED, its one writable
// property.
func (s *Server) handlePatchChassis(w http.ResponseWriter, r *http.Request, m *Machine) {
	var body map[string]json.RawMessage
	if !decodeBody(w, r, &body) {
		return
	}
	for k := range body {
		if k != "IndicatorLED" {
			writeError(w, http.StatusBadRequest, "PropertyNotWritable", fmt.Sprintf("The property %s is a read only property and cannot be assigned a value.", k))
			return
		}
	}
	if raw, ok := body["IndicatorLED"]; ok && !s.patchIndicatorLED(w, m, "chassis", raw) {
		return
	}
	s.handleChassis(w, r, m)
}

// handlePatchDrive sets a drive's LocationIndicatorActive.
func (s *Server) handlePatchDrive(w http.ResponseWriter, r *http.Request, m *Machine) {
	id := r.PathValue("drive")
	if !s.driveExists(m, id) {
		writeError(w, http.StatusNotFound, "ResourceMissingAtURI", "No such drive "+id+".")
		return
	}
	var body map[string]json.RawMessage
	if !decodeBody(w, r, &body) {
		return
	}
	var active *bool
	for k, raw := range body {
		if k != "LocationIndicatorActive" {
			writeError(w, http.StatusBadRequest, "PropertyNotWritable", fmt.Sprintf("The property %s is a read only property and cannot be assigned a value.", k))
			return
		}
		if err := json.Unmarshal(raw, &active); err != nil || active == nil {
			writeError(w, http.StatusBadRequest, "PropertyValueTypeError",
				fmt.Sprintf("The value %s for the property LocationIndicatorActive is of a different type than the property can accept.", string(raw)))
			return
		}
	}
	if active != nil {
		led := "Off"
		if *active {
			led = "Lit"
		}
		ctx, cancel := s.actionContext()
		defer cancel()
		if err := m.setIndicator(ctx, "drive/"+id, led); err != nil {
			writeError(w, http.StatusInternalServerError, "InternalError", err.Error())
			return
		}
	}
	s.handleDrive(w, r, m)
}
