package vbmc

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ironflow/ironflow/bmc"
)

// TestBIOSThroughIronflowsRedfishDriver: ironflow's redfish BIOS driver
// against the vbmc: the registry refuses a value out of range before
// anything is written and the vbmc itself refuses one too; a ProcCores
// setting and a switch to UEFI with secure boot are pending until the VM
// starts, which then runs QEMU with -smp 2 and OVMF's secure-boot build.
func TestBIOSThroughIronflowsRedfishDriver(t *testing.T) {
	requireTools(t, DefaultQEMUBinary, "qemu-img", "pgrep")
	for _, f := range []string{OVMFCode, OVMFVars, OVMFSecureCode, OVMFSecureVars} {
		if _, err := os.Stat(f); err != nil {
			t.Skipf("SKIP: %s missing (Debian package ovmf): %v", f, err)
		}
	}
	cfg := newTestConfig(t)
	srv, err := NewServer(cfg, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Close() })
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	m := srv.machines["vm0"]
	d, err := bmc.New("redfish", map[string]any{
		"redfish_address": ts.URL, "redfish_username": "admin", "redfish_password": "password",
		"redfish_system_id": "/redfish/v1/Systems/vm0", bmc.KeyPowerPollInterval: "100ms",
	})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	ctx := context.Background()
	bc := d.(bmc.BIOSConfigurer)

	list, err := bc.BIOSSettings(ctx)
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]bmc.BIOSSetting{}
	for _, s := range list {
		found[s.Name] = s
	}
	if s := found["ProcCores"]; s.Value != "1" || s.AttributeType != "Integer" || s.UpperBound == nil || *s.UpperBound != 16 {
		t.Fatalf("ProcCores %+v", s)
	}
	if s := found["SerialNumber"]; s.ReadOnly == nil || !*s.ReadOnly {
		t.Fatalf("SerialNumber %+v", s)
	}
	if err := bc.ApplyBIOS(ctx, []bmc.BIOSValue{{Name: "ProcCores", Value: 64}}); !errors.Is(err, bmc.ErrInvalidInput) {
		t.Fatalf("ProcCores 64: %v, want refused before writing", err)
	}
	req, _ := http.NewRequest(http.MethodPatch, ts.URL+"/redfish/v1/Systems/vm0/Bios/Settings", strings.NewReader(`{"Attributes":{"SerialNumber":"x"}}`))
	req.SetBasicAuth("admin", "password")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("PATCH of a read-only attribute: %v %v, want 400", resp, err)
	}

	if err := bc.ApplyBIOS(ctx, []bmc.BIOSValue{{Name: "ProcCores", Value: "2"}}); err != nil {
		t.Fatal(err)
	}
	if err := d.(bmc.BootModeSetter).SetBootMode(ctx, bmc.BootModeUEFI); err != nil {
		t.Fatal(err)
	}
	if err := d.(bmc.SecureBooter).SetSecureBoot(ctx, true); err != nil {
		t.Fatal(err)
	}
	want := []bmc.BIOSValue{{Name: "ProcCores", Value: "2"}, {Name: "BootMode", Value: "Uefi"}}
	if miss, pending, err := bc.VerifyBIOS(ctx, want); err != nil || len(miss) != 2 || !pending {
		t.Fatalf("before the start: %v %v %v, want both pending", miss, pending, err)
	}
	if err := d.SetPower(ctx, bmc.ActionPowerOn); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = m.ForceOff(context.Background()) })
	if miss, pending, err := bc.VerifyBIOS(ctx, want); err != nil || len(miss) != 0 || pending {
		t.Fatalf("after the start: %v %v %v", miss, pending, err)
	}
	log, _ := os.ReadFile(filepath.Join(m.dir, "qemu.log"))
	for _, arg := range []string{"-smp 2", "file=" + OVMFSecureCode, "q35,smm=on", "OVMF_VARS_SB.fd"} {
		if !strings.Contains(string(log), arg) {
			t.Errorf("QEMU started without %q:\n%s", arg, log)
		}
	}
	if mode, err := d.(bmc.BootModeSetter).BootMode(ctx); err != nil || mode != bmc.BootModeUEFI {
		t.Errorf("boot mode %q %v", mode, err)
	}
	st, _ := m.loadBIOS()
	if !st.SecureBootCurrent {
		t.Errorf("SecureBootCurrentBoot off after starting with secure boot enabled")
	}
}
