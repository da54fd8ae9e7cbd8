package vbmc

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"slices"
)

// Hardware health: the system's Status.Health (DMTF's Resource.Status) is
// what ironflow's power sync reads as the node's health (API 1.109). A VM
// has no sensors, so the value is set from outside with the OEM action
// Ironflow.SetHealth on the system, standing for whatever a real server's
// BMC would have noticed (a failed fan, a degraded DIMM):
//
//	POST /redfish/v1/Systems/NAME/Actions/Oem/Ironflow.SetHealth
//	{"Health": "Warning"}
//
// Health is OK, Warning or Critical, or null for a system that reports no
// health (Status without Health). It is kept in state_dir/NAME/health.json,
// so that it survives the service; a VM is OK until set.

// healths are the Redfish Health values SetHealth takes.
var healths = []string{"OK", "Warning", "Critical"}

const setHealthAction = "Ironflow.SetHealth"

func (m *Machine) healthFile() string { return filepath.Join(m.dir, "health.json") }

// health is the VM's Status.Health; "" when set to report none.
func (m *Machine) health() string {
	var h struct{ Health *string }
	if ok, _ := readJSON(m.healthFile(), &h); !ok {
		return "OK"
	}
	if h.Health == nil {
		return ""
	}
	return *h.Health
}

// setHealth records the health under the VM's lock; nil reports none.
func (m *Machine) setHealth(ctx context.Context, health *string) error {
	unlock, err := m.lock(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	if err := writeJSON(m.healthFile(), map[string]any{"Health": health}); err != nil {
		return fmt.Errorf("record health of %s: %w", m.vm.Name, err)
	}
	m.log.Info("health set", "health", health)
	return nil
}

// systemStatus is the system's Status: its health and the rollup (a VM
// has no components of its own health to roll up).
func (m *Machine) systemStatus() map[string]any {
	st := map[string]any{"State": "Enabled"}
	if h := m.health(); h != "" {
		st["Health"], st["HealthRollup"] = h, h
	}
	return st
}

// healthActions is the system's Actions.Oem entry.
func healthActions(systemPath string) map[string]any {
	return map[string]any{"#" + setHealthAction: map[string]any{
		"target":                         systemPath + "/Actions/Oem/" + setHealthAction,
		"Health@Redfish.AllowableValues": healths,
	}}
}

func (s *Server) handleSetHealth(w http.ResponseWriter, r *http.Request, m *Machine) {
	var body map[string]json.RawMessage
	if !decodeBody(w, r, &body) {
		return
	}
	raw, ok := body["Health"]
	if !ok {
		writeError(w, http.StatusBadRequest, "ActionParameterMissing",
			fmt.Sprintf("The action %s requires the parameter Health to be present in the request body.", setHealthAction))
		return
	}
	var h *string
	if err := json.Unmarshal(raw, &h); err != nil || h != nil && !slices.Contains(healths, *h) {
		writeError(w, http.StatusBadRequest, "ActionParameterValueNotInList",
			fmt.Sprintf("The value %s for the parameter Health in the action %s is not in the list of acceptable values.", string(raw), setHealthAction))
		return
	}
	ctx, cancel := s.actionContext()
	defer cancel()
	if err := m.setHealth(ctx, h); err != nil {
		writeError(w, http.StatusInternalServerError, "InternalError", err.Error())
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

// SetHealth calls Ironflow.SetHealth on the vbmc at baseURL (its Redfish
// service) for the VM's system, as an operator's curl would: health is
// "OK", "Warning", "Critical", or "" for a system that reports none.
func SetHealth(ctx context.Context, baseURL, user, password, vm, health string) error {
	var h any
	if health != "" {
		h = health
	}
	body, _ := json.Marshal(map[string]any{"Health": h})
	url := baseURL + redfishRoot + "/Systems/" + vm + "/Actions/Oem/" + setHealthAction
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.SetBasicAuth(user, password)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("set health of %s: %w", vm, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusNoContent {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("set health of %s: HTTP %d: %s", vm, resp.StatusCode, b)
	}
	return nil
}
