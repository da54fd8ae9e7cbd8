package bmc

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// biosBMC adds to a recorded service what its recording lacks for BIOS
// work: an attribute registry published under Registries, PATCH of the
// settings object, Bios.ResetBios, and pending settings that take effect
// on the system's next reset, as a real BIOS applies them during POST.
// Paths are matched without regard to case, as iLO does (its system links
// /redfish/v1/systems/1/bios).
type biosBMC struct {
	*recordedBMC
	biosPath, settingsPath string
	// faults
	rejectPatch   bool // 400 on PATCH of the settings object
	dropOnPatch   bool // 200 on PATCH, nothing kept
	ignoreOnReset bool // pending settings never applied
	failedMessage bool // after a reset, @Redfish.Settings reports SettingsFailed
	resetAsked    bool
	// rejectSecureBoot: 400 on PATCH of SecureBoot
	rejectSecureBoot bool
}

func startBIOSBMC(t *testing.T, dir, biosPath, settingsPath, registry string) *biosBMC {
	t.Helper()
	b := &biosBMC{biosPath: biosPath, settingsPath: settingsPath}
	b.recordedBMC = startBMC(t, dir, func(rb *recordedBMC) {
		raw, err := os.ReadFile(filepath.Join("testdata", "redfish", "attribute-registries", registry+".json"))
		if err != nil {
			t.Fatal(err)
		}
		var reg map[string]any
		if err := json.Unmarshal(raw, &reg); err != nil {
			t.Fatal(err)
		}
		regURI := "/redfish/v1/Registries/" + registry + "/" + registry
		fileURI := "/redfish/v1/Registries/" + registry
		rb.docs[regURI] = reg
		rb.docs[fileURI] = map[string]any{
			"@odata.id": fileURI, "@odata.type": "#MessageRegistryFile.v1_1_0.MessageRegistryFile",
			"Id": registry, "Registry": registry,
			"Languages": []any{"en"},
			"Location":  []any{map[string]any{"Language": "en", "Uri": regURI}},
		}
		col, ok := rb.docs["/redfish/v1/Registries"]
		if !ok {
			col = map[string]any{"@odata.id": "/redfish/v1/Registries", "Members": []any{}}
			rb.docs["/redfish/v1/Registries"] = col
		}
		col["Members"] = append(col["Members"].([]any), map[string]any{"@odata.id": fileURI})
	})
	b.srv.Config.Handler = b
	return b
}

func (b *biosBMC) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	p := strings.TrimSuffix(r.URL.Path, "/")
	b.mu.Lock()
	for k := range b.docs {
		if k != p && strings.EqualFold(k, p) {
			p = k
		}
	}
	b.mu.Unlock()
	r.URL.Path = p
	if !b.authorized(r) || (r.Method != http.MethodPatch && r.Method != http.MethodPost) {
		b.recordedBMC.ServeHTTP(w, r)
		return
	}
	var body map[string]any
	_ = json.NewDecoder(r.Body).Decode(&body)
	b.mu.Lock()
	defer b.mu.Unlock()
	switch {
	case r.Method == http.MethodPatch && p == b.settingsPath:
		if b.rejectPatch {
			redfishErr(w, http.StatusBadRequest, "Base.1.8.PropertyValueNotInList", "The value for the property Attributes is not in the list of acceptable values.")
			return
		}
		b.actions = append(b.actions, "PATCH BIOS settings")
		if b.dropOnPatch {
			w.WriteHeader(http.StatusOK)
			return
		}
		attrs := b.docs[p]["Attributes"].(map[string]any)
		for k, v := range body["Attributes"].(map[string]any) {
			attrs[k] = v
		}
		if at, ok := body["@Redfish.SettingsApplyTime"]; ok {
			b.actions = append(b.actions, "ApplyTime "+at.(map[string]any)["ApplyTime"].(string))
		}
		w.WriteHeader(http.StatusNoContent)
	case r.Method == http.MethodPatch && strings.HasSuffix(p, "/SecureBoot"):
		if b.rejectSecureBoot {
			redfishErr(w, http.StatusBadRequest, "Base.1.8.PropertyNotWritable", "The property SecureBootEnable is a read only property and cannot be assigned a value.")
			return
		}
		b.docs[p]["SecureBootEnable"] = body["SecureBootEnable"]
		b.actions = append(b.actions, "SecureBootEnable "+BIOSText(body["SecureBootEnable"]))
		w.WriteHeader(http.StatusNoContent)
	case r.Method == http.MethodPost && strings.HasSuffix(strings.ToLower(p), "/actions/bios.resetbios"):
		b.actions = append(b.actions, "ResetBios")
		b.resetAsked = true
		w.WriteHeader(http.StatusNoContent)
	default:
		b.mu.Unlock()
		// The body was read; the recorded BMC reads it again from a copy.
		raw, _ := json.Marshal(body)
		r.Body = readCloser(string(raw))
		b.recordedBMC.ServeHTTP(w, r)
		b.mu.Lock()
		if strings.HasSuffix(p, "/Actions/ComputerSystem.Reset") {
			b.applyPendingLocked()
		}
	}
}

// applyPendingLocked is the BIOS's POST: the settings object's values
// become the current ones.
func (b *biosBMC) applyPendingLocked() {
	if b.ignoreOnReset {
		return
	}
	cur := b.docs[b.biosPath]["Attributes"].(map[string]any)
	if b.failedMessage {
		b.docs[b.biosPath]["@Redfish.Settings"].(map[string]any)["Messages"] = []any{map[string]any{
			"MessageId": "Base.1.0.SettingsFailed", "RelatedProperties": []any{"/Attributes/ProcTurboMode"}}}
		return
	}
	if b.resetAsked {
		cur["ProcTurboMode"] = "Enabled"
		b.resetAsked = false
	}
	for k, v := range b.docs[b.settingsPath]["Attributes"].(map[string]any) {
		cur[k] = v
	}
}

type stringReadCloser struct{ *strings.Reader }

func (stringReadCloser) Close() error { return nil }

func readCloser(s string) stringReadCloser { return stringReadCloser{strings.NewReader(s)} }

const (
	dmtfBios     = "/redfish/v1/Systems/437XR1138R2/Bios"
	dmtfSettings = "/redfish/v1/Systems/437XR1138R2/Bios/Settings"
	hpeBios      = "/redfish/v1/Systems/1/bios"
	hpeSettings  = "/redfish/v1/Systems/1/bios/settings"
)

func biosDriver(t *testing.T, b *biosBMC) BIOSConfigurer {
	t.Helper()
	d, err := New("redfish", b.info(nil))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	bc, ok := d.(BIOSConfigurer)
	if !ok {
		t.Fatal("redfish driver is not a BIOSConfigurer")
	}
	return bc
}

func settingByName(t *testing.T, list []BIOSSetting, name string) BIOSSetting {
	t.Helper()
	for _, s := range list {
		if s.Name == name {
			return s
		}
	}
	t.Fatalf("no BIOS setting %s among %d", name, len(list))
	return BIOSSetting{}
}

func TestRedfishBIOSSettingsReadWithRegistry(t *testing.T) {
	for _, tc := range []struct {
		dir, bios, settings, registry string
		count                         int
		check                         func(t *testing.T, list []BIOSSetting)
	}{
		{"dmtf-public-rackmount1", dmtfBios, dmtfSettings, "BiosAttributeRegistryP89.v1_0_0", 10, func(t *testing.T, list []BIOSSetting) {
			s := settingByName(t, list, "ProcCoreDisable")
			if s.Value != "0" || s.AttributeType != "Integer" || s.LowerBound == nil || *s.LowerBound != 0 || *s.UpperBound != 16 {
				t.Errorf("ProcCoreDisable = %+v", s)
			}
			s = settingByName(t, list, "EmbeddedSata")
			if s.ReadOnly == nil || !*s.ReadOnly || strings.Join(s.AllowableValues, ",") != "Raid,Ahci" {
				t.Errorf("EmbeddedSata = %+v", s)
			}
			if s := settingByName(t, list, "AdminPhone"); s.MaxLength == nil || *s.MaxLength != 20 {
				t.Errorf("AdminPhone = %+v", s)
			}
		}},
		{"hpe-ilo-dl325", hpeBios, hpeSettings, "BiosAttributeRegistryA43.v1_2_52", 236, func(t *testing.T, list []BIOSSetting) {
			if s := settingByName(t, list, "WorkloadProfile"); s.Value != "GeneralPowerEfficientCompute" || len(s.AllowableValues) != 3 {
				t.Errorf("WorkloadProfile = %+v", s)
			}
			// An attribute the (partial) registry does not describe keeps
			// its value without registry fields.
			if s := settingByName(t, list, "AcpiHpet"); s.Value != "Enabled" || s.AttributeType != "" {
				t.Errorf("AcpiHpet = %+v", s)
			}
		}},
	} {
		t.Run(tc.dir, func(t *testing.T) {
			b := startBIOSBMC(t, tc.dir, tc.bios, tc.settings, tc.registry)
			list, err := biosDriver(t, b).BIOSSettings(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			if len(list) != tc.count {
				t.Errorf("%d settings, want %d", len(list), tc.count)
			}
			tc.check(t, list)
		})
	}
}

func TestRedfishBIOSApplyOnResetAndVerify(t *testing.T) {
	b := startBIOSBMC(t, "hpe-ilo-dl325", hpeBios, hpeSettings, "BiosAttributeRegistryA43.v1_2_52")
	d := biosDriver(t, b)
	ctx := context.Background()
	want := []BIOSValue{{Name: "Sriov", Value: "Disabled"}, {Name: "WorkloadProfile", Value: "Virtualization-MaxPerformance"}}
	if err := d.ApplyBIOS(ctx, want); err != nil {
		t.Fatal(err)
	}
	miss, pending, err := d.VerifyBIOS(ctx, want)
	if err != nil || len(miss) != 2 || !pending {
		t.Fatalf("before the reset: mismatch %v pending %v err %v; want both pending", miss, pending, err)
	}
	if err := d.(Driver).SetPower(ctx, ActionReboot); err != nil {
		t.Fatal(err)
	}
	if miss, pending, err := d.VerifyBIOS(ctx, want); err != nil || len(miss) != 0 || pending {
		t.Fatalf("after the reset: mismatch %v pending %v err %v", miss, pending, err)
	}
	if got := b.doc(hpeBios)["Attributes"].(map[string]any)["Sriov"]; got != "Disabled" {
		t.Errorf("Sriov = %v", got)
	}
}

func TestRedfishBIOSApplyRefusedBeforeWriting(t *testing.T) {
	for _, tc := range []struct {
		name   string
		values []BIOSValue
		want   string
	}{
		{"read-only", []BIOSValue{{Name: "EmbeddedSata", Value: "Ahci"}}, "attribute EmbeddedSata is read-only"},
		{"out of range", []BIOSValue{{Name: "ProcCoreDisable", Value: "17"}}, "attribute ProcCoreDisable: value 17 is above the upper bound 16"},
		{"not an integer", []BIOSValue{{Name: "ProcCoreDisable", Value: "many"}}, `attribute ProcCoreDisable: value "many" is not an integer`},
		{"not in the enumeration", []BIOSValue{{Name: "PowerProfile", Value: "Turbo"}}, `attribute PowerProfile: value "Turbo" is not one of MaxPerf, Balanced, PowerSaver`},
		{"too long", []BIOSValue{{Name: "AdminPhone", Value: "+1 404 555 1212 extension 99"}}, "attribute AdminPhone: value is longer than the maximum length 20"},
		{"unknown", []BIOSValue{{Name: "NoSuchThing", Value: "x"}}, "attribute NoSuchThing is not a BIOS attribute of this system"},
		{"one bad among good", []BIOSValue{{Name: "PowerProfile", Value: "Balanced"}, {Name: "EmbeddedSata", Value: "Ahci"}}, "EmbeddedSata is read-only"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := startBIOSBMC(t, "dmtf-public-rackmount1", dmtfBios, dmtfSettings, "BiosAttributeRegistryP89.v1_0_0")
			err := biosDriver(t, b).ApplyBIOS(context.Background(), tc.values)
			if !errors.Is(err, ErrInvalidInput) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want ErrInvalidInput naming %q", err, tc.want)
			}
			for _, a := range b.actionLog() {
				if strings.Contains(a, "PATCH") {
					t.Errorf("the BMC was written to: %v", b.actionLog())
				}
			}
		})
	}
}

func TestRedfishBIOSApplyConvertsToTheRegistryType(t *testing.T) {
	b := startBIOSBMC(t, "dmtf-public-rackmount1", dmtfBios, dmtfSettings, "BiosAttributeRegistryP89.v1_0_0")
	if err := biosDriver(t, b).ApplyBIOS(context.Background(), []BIOSValue{{Name: "ProcCoreDisable", Value: "4"}}); err != nil {
		t.Fatal(err)
	}
	if got := b.doc(dmtfSettings)["Attributes"].(map[string]any)["ProcCoreDisable"]; got != float64(4) {
		t.Errorf("pending ProcCoreDisable = %#v, want the number 4", got)
	}
}

func TestRedfishBIOSFaults(t *testing.T) {
	ctx := context.Background()
	t.Run("settings rejected by the BMC", func(t *testing.T) {
		b := startBIOSBMC(t, "dmtf-public-rackmount1", dmtfBios, dmtfSettings, "BiosAttributeRegistryP89.v1_0_0")
		b.rejectPatch = true
		err := biosDriver(t, b).ApplyBIOS(ctx, []BIOSValue{{Name: "PowerProfile", Value: "Balanced"}})
		if !errors.Is(err, ErrUnsupported) || !strings.Contains(err.Error(), "not in the list of acceptable values") {
			t.Fatalf("err = %v, want the BMC's refusal", err)
		}
	})
	t.Run("accepted but not kept", func(t *testing.T) {
		b := startBIOSBMC(t, "dmtf-public-rackmount1", dmtfBios, dmtfSettings, "BiosAttributeRegistryP89.v1_0_0")
		b.dropOnPatch = true
		err := biosDriver(t, b).ApplyBIOS(ctx, []BIOSValue{{Name: "PowerProfile", Value: "Balanced"}})
		if err == nil || !strings.Contains(err.Error(), `PowerProfile: wanted "Balanced", is "MaxPerf"`) {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("not applied on reset, failure reported", func(t *testing.T) {
		b := startBIOSBMC(t, "dmtf-public-rackmount1", dmtfBios, dmtfSettings, "BiosAttributeRegistryP89.v1_0_0")
		b.failedMessage = true
		d := biosDriver(t, b)
		want := []BIOSValue{{Name: "ProcTurboMode", Value: "Disabled"}}
		if err := d.ApplyBIOS(ctx, want); err != nil {
			t.Fatal(err)
		}
		if err := d.(Driver).SetPower(ctx, ActionReboot); err != nil {
			t.Fatal(err)
		}
		miss, _, err := d.VerifyBIOS(ctx, want)
		if err != nil || len(miss) != 2 || !strings.Contains(strings.Join(miss, "; "), "BMC reports Base.1.0.SettingsFailed (/Attributes/ProcTurboMode)") {
			t.Fatalf("mismatch %v err %v", miss, err)
		}
	})
}

func TestRedfishBIOSFactoryReset(t *testing.T) {
	b := startBIOSBMC(t, "dmtf-public-rackmount1", dmtfBios, dmtfSettings, "BiosAttributeRegistryP89.v1_0_0")
	if err := biosDriver(t, b).ResetBIOS(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(b.actionLog(), ","); got != "ResetBios" {
		t.Errorf("actions %s", got)
	}
}
