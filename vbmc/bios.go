package vbmc

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
)

// BIOS settings, boot mode and secure boot of a VM, laid out as real BMCs
// lay them out (DMTF's Bios, AttributeRegistry and SecureBoot schemas):
// the current attributes at Systems/{id}/Bios, pending ones PATCHed to its
// settings object Bios/Settings and applied when the VM next starts (as a
// BIOS applies them during POST), the attribute registry under
// Registries. Two attributes map onto QEMU: ProcCores is -smp and
// BootMode the firmware (SeaBIOS or OVMF). The state is the file bios.json
// in the VM's state directory.

const (
	biosRegistryID = "BiosAttributeRegistryVBMC.v1_0_0"
	registriesPath = redfishRoot + "/Registries"
)

// OVMF's secure-boot build and variables with Microsoft's keys enrolled
// (Debian's ovmf package), used while secure boot is enabled.
var (
	OVMFSecureCode = "/usr/share/OVMF/OVMF_CODE_4M.secboot.fd"
	OVMFSecureVars = "/usr/share/OVMF/OVMF_VARS_4M.ms.fd"
)

// biosAttr is one registry entry.
type biosAttr struct {
	Name          string
	Type          string // Enumeration, Integer, String
	Values        []string
	Lower, Upper  int64
	MaxLength     int
	ReadOnly      bool
	ResetRequired bool
}

func biosRegistry() []biosAttr {
	return []biosAttr{
		{Name: "BootMode", Type: "Enumeration", Values: []string{"Uefi", "LegacyBios"}, ResetRequired: true},
		{Name: "ProcCores", Type: "Integer", Lower: 1, Upper: 16, ResetRequired: true},
		{Name: "ProcVirtualization", Type: "Enumeration", Values: []string{"Enabled", "Disabled"}, ResetRequired: true},
		{Name: "PowerProfile", Type: "Enumeration", Values: []string{"MaxPerf", "Balanced", "PowerSaver"}, ResetRequired: true},
		{Name: "AdminPhone", Type: "String", MaxLength: 20},
		{Name: "SerialNumber", Type: "String", MaxLength: 32, ReadOnly: true},
	}
}

// biosState is bios.json.
type biosState struct {
	Current map[string]any `json:"current"`
	Pending map[string]any `json:"pending,omitempty"`
	// ResetPending: Bios.ResetBios was asked; the defaults apply at the
	// next start.
	ResetPending bool `json:"reset_pending,omitempty"`
	// SecureBoot is SecureBootEnable (the next boot's); SecureBootCurrent
	// what the running VM booted with.
	SecureBoot        bool `json:"secure_boot"`
	SecureBootCurrent bool `json:"secure_boot_current"`
}

func (m *Machine) biosFile() string { return filepath.Join(m.dir, "bios.json") }

// biosDefaults are the configured VM's: its firmware and CPUs as the
// configuration file gives them.
func (m *Machine) biosDefaults() map[string]any {
	vm, ok := m.cfg.vm(m.vm.Name)
	if !ok {
		vm = m.vm
	}
	mode := "LegacyBios"
	if vm.Firmware == FirmwareUEFI {
		mode = "Uefi"
	}
	return map[string]any{
		"BootMode": mode, "ProcCores": float64(vm.CPUs), "ProcVirtualization": "Enabled",
		"PowerProfile": "MaxPerf", "AdminPhone": "", "SerialNumber": m.vm.Name,
	}
}

// loadBIOS reads bios.json (the defaults when there is none).
func (m *Machine) loadBIOS() (biosState, error) {
	var st biosState
	if _, err := readJSON(m.biosFile(), &st); err != nil {
		return st, fmt.Errorf("read BIOS state of %s: %w", m.vm.Name, err)
	}
	if st.Current == nil {
		st.Current = m.biosDefaults()
	}
	return st, nil
}

func (m *Machine) saveBIOS(st biosState) error {
	if err := os.MkdirAll(m.dir, 0o755); err != nil {
		return err
	}
	return writeJSON(m.biosFile(), st)
}

// applyBIOS is POST: pending settings become current, and the VM's CPUs
// and firmware follow ProcCores and BootMode for this start. The caller
// holds the lock.
func (m *Machine) applyBIOS() error {
	st, err := m.loadBIOS()
	if err != nil {
		return err
	}
	if st.ResetPending {
		st.Current, st.ResetPending = m.biosDefaults(), false
	}
	for k, v := range st.Pending {
		st.Current[k] = v
	}
	if len(st.Pending) > 0 {
		m.log.Info("BIOS settings applied", "settings", st.Pending)
	}
	st.Pending = nil
	if n, ok := st.Current["ProcCores"].(float64); ok && n >= 1 {
		m.vm.CPUs = int(n)
	}
	if st.Current["BootMode"] == "Uefi" {
		m.vm.Firmware = FirmwareUEFI
	} else {
		m.vm.Firmware = FirmwareBIOS
	}
	st.SecureBootCurrent = st.SecureBoot && m.vm.Firmware == FirmwareUEFI
	if st.SecureBoot && !st.SecureBootCurrent {
		m.log.Warn("secure boot is enabled but the firmware is SeaBIOS: booting without it")
	}
	return m.saveBIOS(st)
}

// biosPending reports whether settings wait for the next start.
func (m *Machine) biosPending() bool {
	st, err := m.loadBIOS()
	if err != nil {
		return false
	}
	for k, v := range st.Pending {
		if st.Current[k] != v {
			return true
		}
	}
	return st.ResetPending || (st.SecureBoot && !st.SecureBootCurrent && st.Current["BootMode"] == "Uefi") ||
		(!st.SecureBoot && st.SecureBootCurrent)
}

// nextBootMode is the Redfish BootSourceOverrideMode of the next boot.
func (m *Machine) nextBootMode() string {
	st, err := m.loadBIOS()
	if err != nil {
		return firmwareMode[m.vm.Firmware]
	}
	mode := st.Current["BootMode"]
	if p, ok := st.Pending["BootMode"]; ok {
		mode = p
	}
	if mode == "Uefi" {
		return "UEFI"
	}
	return "Legacy"
}

// setNextBootMode records a BootSourceOverrideMode change as the pending
// BootMode attribute.
func (m *Machine) setNextBootMode(ctx context.Context, mode string) error {
	attr := map[string]string{"UEFI": "Uefi", "Legacy": "LegacyBios"}[mode]
	if attr == "" {
		return fmt.Errorf("boot mode %q is neither UEFI nor Legacy", mode)
	}
	return m.updateBIOS(ctx, func(st *biosState) error {
		if st.Current["BootMode"] == attr {
			delete(st.Pending, "BootMode")
			return nil
		}
		if st.Pending == nil {
			st.Pending = map[string]any{}
		}
		st.Pending["BootMode"] = attr
		return nil
	})
}

func (m *Machine) updateBIOS(ctx context.Context, fn func(st *biosState) error) error {
	unlock, err := m.lock(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	st, err := m.loadBIOS()
	if err != nil {
		return err
	}
	if err := fn(&st); err != nil {
		return err
	}
	return m.saveBIOS(st)
}

// secureBootFirmware is the OVMF code and the variable store the VM boots
// with: the secure-boot build with Microsoft's keys while secure boot is
// on (the store copied once into the state directory), else the plain one.
func (m *Machine) secureBootFirmware() (code, vars string, secure bool) {
	if m.vm.Arch == ArchAArch64 {
		// AAVMF's secure-boot builds are not emulated: secure boot stays off.
		return AAVMFCode, filepath.Join(m.dir, "AAVMF_VARS.fd"), false
	}
	st, err := m.loadBIOS()
	if err == nil && st.SecureBootCurrent {
		return OVMFSecureCode, filepath.Join(m.dir, "OVMF_VARS_SB.fd"), true
	}
	return OVMFCode, filepath.Join(m.dir, "OVMF_VARS.fd"), false
}

// checkBIOSAttribute refuses a value the registry forbids, with the
// Base message registry's id.
func checkBIOSAttribute(name string, v any) (any, string, string) {
	for _, a := range biosRegistry() {
		if a.Name != name {
			continue
		}
		if a.ReadOnly {
			return nil, "PropertyNotWritable", fmt.Sprintf("The property %s is a read only property and cannot be assigned a value.", name)
		}
		switch a.Type {
		case "Integer":
			var n float64
			switch x := v.(type) {
			case float64:
				n = x
			case string:
				p, err := strconv.ParseFloat(x, 64)
				if err != nil {
					return nil, "PropertyValueTypeError", fmt.Sprintf("The value %v for the property %s is of a different type than the property can accept.", v, name)
				}
				n = p
			default:
				return nil, "PropertyValueTypeError", fmt.Sprintf("The value %v for the property %s is of a different type than the property can accept.", v, name)
			}
			if n != math.Trunc(n) || int64(n) < a.Lower || int64(n) > a.Upper {
				return nil, "PropertyValueOutOfRange", fmt.Sprintf("The value %v for the property %s is not in the supported range of acceptable values.", v, name)
			}
			return n, "", ""
		case "Enumeration":
			s, _ := v.(string)
			if !slices.Contains(a.Values, s) {
				return nil, "PropertyValueNotInList", fmt.Sprintf("The value %v for the property %s is not in the list of acceptable values.", v, name)
			}
			return s, "", ""
		default:
			s, ok := v.(string)
			if !ok || len(s) > a.MaxLength {
				return nil, "PropertyValueFormatError", fmt.Sprintf("The value %v for the property %s is of a different format than the property can accept.", v, name)
			}
			return s, "", ""
		}
	}
	return nil, "PropertyUnknown", fmt.Sprintf("The property %s is not in the list of valid properties for the resource.", name)
}

func biosPath(m *Machine) string { return redfishRoot + "/Systems/" + m.vm.Name + "/Bios" }

func (s *Server) biosRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET "+redfishRoot+"/Systems/{id}/Bios", s.withMachine(s.handleBios))
	mux.HandleFunc("GET "+redfishRoot+"/Systems/{id}/Bios/Settings", s.withMachine(s.handleBiosSettings))
	mux.HandleFunc("PATCH "+redfishRoot+"/Systems/{id}/Bios/Settings", s.withMachine(s.handlePatchBiosSettings))
	mux.HandleFunc("POST "+redfishRoot+"/Systems/{id}/Bios/Actions/Bios.ResetBios", s.withMachine(s.handleResetBios))
	mux.HandleFunc("GET "+redfishRoot+"/Systems/{id}/SecureBoot", s.withMachine(s.handleSecureBoot))
	mux.HandleFunc("PATCH "+redfishRoot+"/Systems/{id}/SecureBoot", s.withMachine(s.handlePatchSecureBoot))
	mux.HandleFunc("GET "+registriesPath, s.handleRegistries)
	mux.HandleFunc("GET "+registriesPath+"/"+biosRegistryID, s.handleRegistryFile)
	mux.HandleFunc("GET "+registriesPath+"/"+biosRegistryID+"/Registry", s.handleBiosRegistry)
}

func (s *Server) handleBios(w http.ResponseWriter, r *http.Request, m *Machine) {
	st, err := m.loadBIOS()
	if err != nil {
		writeError(w, http.StatusInternalServerError, "InternalError", err.Error())
		return
	}
	p := biosPath(m)
	writeJSONResponse(w, http.StatusOK, map[string]any{
		odataID: p, odataType: "#Bios.v1_2_0.Bios", "Id": "Bios", "Name": "BIOS Configuration Current Settings",
		"AttributeRegistry": biosRegistryID,
		"Attributes":        st.Current,
		"@Redfish.Settings": map[string]any{
			odataType:             "#Settings.v1_3_5.Settings",
			"SettingsObject":      link(p + "/Settings"),
			"SupportedApplyTimes": []string{"OnReset"},
		},
		"Actions": map[string]any{"#Bios.ResetBios": map[string]any{"target": p + "/Actions/Bios.ResetBios"}},
	})
}

func (s *Server) handleBiosSettings(w http.ResponseWriter, r *http.Request, m *Machine) {
	st, err := m.loadBIOS()
	if err != nil {
		writeError(w, http.StatusInternalServerError, "InternalError", err.Error())
		return
	}
	attrs := map[string]any{}
	for k, v := range st.Current {
		attrs[k] = v
	}
	for k, v := range st.Pending {
		attrs[k] = v
	}
	writeJSONResponse(w, http.StatusOK, map[string]any{
		odataID: biosPath(m) + "/Settings", odataType: "#Bios.v1_2_0.Bios", "Id": "Settings",
		"Name": "BIOS Configuration Pending Settings", "AttributeRegistry": biosRegistryID, "Attributes": attrs,
	})
}

func (s *Server) handlePatchBiosSettings(w http.ResponseWriter, r *http.Request, m *Machine) {
	var body struct {
		Attributes map[string]any
		ApplyTime  *struct{ ApplyTime string } `json:"@Redfish.SettingsApplyTime"`
	}
	if !decodeBody(w, r, &body) {
		return
	}
	if body.ApplyTime != nil && body.ApplyTime.ApplyTime != "OnReset" {
		writeError(w, http.StatusBadRequest, "PropertyValueNotInList",
			fmt.Sprintf("The value %s for the property ApplyTime is not in the list of acceptable values.", body.ApplyTime.ApplyTime))
		return
	}
	checked := map[string]any{}
	for k, v := range body.Attributes {
		val, id, msg := checkBIOSAttribute(k, v)
		if id != "" {
			writeError(w, http.StatusBadRequest, id, msg)
			return
		}
		checked[k] = val
	}
	ctx, cancel := s.actionContext()
	defer cancel()
	err := m.updateBIOS(ctx, func(st *biosState) error {
		if st.Pending == nil {
			st.Pending = map[string]any{}
		}
		for k, v := range checked {
			st.Pending[k] = v
		}
		return nil
	})
	if err != nil {
		writeError(w, http.StatusInternalServerError, "InternalError", err.Error())
		return
	}
	s.log.Info("BIOS settings pending until the next reset", "vm", m.vm.Name, "settings", checked, "user", r.Context().Value(userKey{}))
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) handleResetBios(w http.ResponseWriter, r *http.Request, m *Machine) {
	ctx, cancel := s.actionContext()
	defer cancel()
	if err := m.updateBIOS(ctx, func(st *biosState) error { st.ResetPending, st.Pending = true, nil; return nil }); err != nil {
		writeError(w, http.StatusInternalServerError, "InternalError", err.Error())
		return
	}
	s.log.Info("BIOS reset to defaults pending until the next reset", "vm", m.vm.Name)
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) handleSecureBoot(w http.ResponseWriter, r *http.Request, m *Machine) {
	st, err := m.loadBIOS()
	if err != nil {
		writeError(w, http.StatusInternalServerError, "InternalError", err.Error())
		return
	}
	current := "Disabled"
	if st.SecureBootCurrent {
		current = "Enabled"
	}
	writeJSONResponse(w, http.StatusOK, map[string]any{
		odataID: redfishRoot + "/Systems/" + m.vm.Name + "/SecureBoot", odataType: "#SecureBoot.v1_1_0.SecureBoot",
		"Id": "SecureBoot", "Name": "UEFI Secure Boot",
		"SecureBootEnable": st.SecureBoot, "SecureBootCurrentBoot": current, "SecureBootMode": "UserMode",
	})
}

func (s *Server) handlePatchSecureBoot(w http.ResponseWriter, r *http.Request, m *Machine) {
	var body map[string]any
	if !decodeBody(w, r, &body) {
		return
	}
	on, ok := body["SecureBootEnable"].(bool)
	if !ok || len(body) != 1 {
		writeError(w, http.StatusBadRequest, "PropertyNotWritable", "Only SecureBootEnable (a boolean) may be written.")
		return
	}
	if on {
		for _, f := range []string{OVMFSecureCode, OVMFSecureVars} {
			if _, err := os.Stat(f); err != nil {
				writeError(w, http.StatusBadRequest, "ActionNotSupported", fmt.Sprintf("Secure boot needs %s (Debian's ovmf package): %v", f, err))
				return
			}
		}
	}
	ctx, cancel := s.actionContext()
	defer cancel()
	if err := m.updateBIOS(ctx, func(st *biosState) error { st.SecureBoot = on; return nil }); err != nil {
		writeError(w, http.StatusInternalServerError, "InternalError", err.Error())
		return
	}
	s.log.Info("secure boot set for the next boot", "vm", m.vm.Name, "enable", on)
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) handleRegistries(w http.ResponseWriter, r *http.Request) {
	writeJSONResponse(w, http.StatusOK, collection(registriesPath, "#MessageRegistryFileCollection.MessageRegistryFileCollection",
		"Registry File Collection", []string{registriesPath + "/" + biosRegistryID}))
}

func (s *Server) handleRegistryFile(w http.ResponseWriter, r *http.Request) {
	p := registriesPath + "/" + biosRegistryID
	writeJSONResponse(w, http.StatusOK, map[string]any{
		odataID: p, odataType: "#MessageRegistryFile.v1_1_0.MessageRegistryFile", "Id": biosRegistryID,
		"Name": "BIOS Attribute Registry File", "Registry": biosRegistryID, "Languages": []string{"en"},
		"Location": []any{map[string]any{"Language": "en", "Uri": p + "/Registry"}},
	})
}

func (s *Server) handleBiosRegistry(w http.ResponseWriter, r *http.Request) {
	var attrs []any
	for _, a := range biosRegistry() {
		e := map[string]any{"AttributeName": a.Name, "Type": a.Type, "ReadOnly": a.ReadOnly, "ResetRequired": a.ResetRequired}
		switch a.Type {
		case "Integer":
			e["LowerBound"], e["UpperBound"] = a.Lower, a.Upper
		case "Enumeration":
			var vals []any
			for _, v := range a.Values {
				vals = append(vals, map[string]any{"ValueName": v})
			}
			e["Value"] = vals
		default:
			e["MaxLength"], e["MinLength"] = a.MaxLength, 0
		}
		attrs = append(attrs, e)
	}
	writeJSONResponse(w, http.StatusOK, map[string]any{
		odataID: registriesPath + "/" + biosRegistryID + "/Registry", odataType: "#AttributeRegistry.v1_3_0.AttributeRegistry",
		"Id": biosRegistryID, "Name": "ironflow vbmc BIOS Attribute Registry", "Language": "en",
		"OwningEntity": "ironflow", "RegistryVersion": "1.0.0",
		"RegistryEntries": map[string]any{"Attributes": attrs},
	})
}
