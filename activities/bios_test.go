package activities_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"go.temporal.io/sdk/temporal"

	"github.com/ironflow/ironflow/activities"
	"github.com/ironflow/ironflow/bmc"
	"github.com/ironflow/ironflow/hardware"
	"github.com/ironflow/ironflow/internal/testkit/storetest"
	"github.com/ironflow/ironflow/provision"
	"github.com/ironflow/ironflow/store"
	"github.com/ironflow/ironflow/workflows"
)

// biosMachine is a BIOS behind a BMC: written settings are pending until
// the next reboot, unless the firmware ignores them.
type biosMachine struct {
	mu               sync.Mutex
	current, pending map[string]any
	ignore           bool
	reboots          int
	// calls are the boot-device and reboot calls, in order.
	calls []string
}

func (d biosDriver) SetBootDevice(ctx context.Context, b bmc.BootSetting) error {
	d.m.mu.Lock()
	d.m.calls = append(d.m.calls, fmt.Sprintf("boot %s persistent=%v", b.Device, b.Persistent))
	d.m.mu.Unlock()
	return d.Driver.SetBootDevice(ctx, b)
}

type biosDriver struct {
	bmc.Driver
	m *biosMachine
}

func (d biosDriver) SetPower(ctx context.Context, a bmc.PowerAction) error {
	d.m.mu.Lock()
	if a == bmc.ActionReboot {
		d.m.reboots++
		d.m.calls = append(d.m.calls, "reboot")
		if !d.m.ignore {
			for k, v := range d.m.pending {
				d.m.current[k] = v
			}
		}
		d.m.pending = map[string]any{}
	}
	d.m.mu.Unlock()
	return d.Driver.SetPower(ctx, a)
}

func (d biosDriver) BIOSSettings(context.Context) ([]bmc.BIOSSetting, error) {
	d.m.mu.Lock()
	defer d.m.mu.Unlock()
	lo, hi, ro := int64(1), int64(8), true
	var out []bmc.BIOSSetting
	for k, v := range d.m.current {
		s := bmc.BIOSSetting{Name: k, Value: bmc.BIOSText(v)}
		if k == "ProcCores" {
			s.AttributeType, s.LowerBound, s.UpperBound = "Integer", &lo, &hi
		}
		if k == "SerialNumber" {
			s.ReadOnly = &ro
		}
		out = append(out, s)
	}
	return out, nil
}

func (d biosDriver) ApplyBIOS(_ context.Context, values []bmc.BIOSValue) error {
	d.m.mu.Lock()
	defer d.m.mu.Unlock()
	for _, v := range values {
		if v.Name == "SerialNumber" {
			return fmt.Errorf("%w: BIOS settings refused: attribute SerialNumber is read-only", bmc.ErrInvalidInput)
		}
		d.m.pending[v.Name] = v.Value
	}
	return nil
}

func (d biosDriver) ResetBIOS(context.Context) error { return nil }

func (d biosDriver) VerifyBIOS(_ context.Context, values []bmc.BIOSValue) ([]string, bool, error) {
	d.m.mu.Lock()
	defer d.m.mu.Unlock()
	var miss []string
	for _, v := range values {
		if bmc.BIOSText(d.m.current[v.Name]) != bmc.BIOSText(v.Value) {
			miss = append(miss, v.Name)
		}
	}
	return miss, len(d.m.pending) > 0, nil
}

func biosLab(t *testing.T, m *biosMachine) (*activities.Activities, *store.Store, workflows.NodeInfo) {
	t.Helper()
	st := storetest.New(t)
	a := activities.New(st, activities.Config{Conductor: "c"}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	n := &store.Node{Driver: "fake-hardware", ProvisionState: "servicing"}
	if err := st.CreateNode(context.Background(), n); err != nil {
		t.Fatal(err)
	}
	a.NewBMC = func(driver string, info map[string]any) (bmc.Driver, error) {
		d, err := bmc.New(driver, info)
		return biosDriver{Driver: d, m: m}, err
	}
	return a, st, workflows.NodeInfo{UUID: n.UUID, Driver: "fake-hardware", BIOSInterface: hardware.Redfish}
}

func biosStep(name string, args any) provision.Step {
	raw, _ := json.Marshal(args)
	return provision.Step{StepID: provision.StepID{Interface: "bios", Step: name}, Args: raw, OutOfBand: true}
}

func TestRedfishBIOSStepAppliesRebootsVerifiesAndCaches(t *testing.T) {
	m := &biosMachine{current: map[string]any{"ProcCores": float64(2), "ProcSMT": "Enabled"}, pending: map[string]any{}}
	a, st, node := biosLab(t, m)
	ctx := context.Background()
	err := a.RunInterfaceStep(ctx, workflows.InterfaceStepInput{Node: node, Kind: provision.StepKindService,
		Step: biosStep("apply_configuration", map[string]any{"settings": []any{map[string]any{"name": "ProcCores", "value": "4"}}})})
	if err != nil {
		t.Fatal(err)
	}
	if m.reboots != 1 {
		t.Errorf("%d reboots, want 1", m.reboots)
	}
	got, err := st.GetBIOSSetting(ctx, node.UUID, "ProcCores")
	if err != nil || got.Value != "4" || got.UpperBound == nil || *got.UpperBound != 8 || *got.AttributeType != "Integer" {
		t.Fatalf("cached ProcCores = %+v, %v", got, err)
	}
}

// TestRedfishBIOSStepRebootsIntoTheAgent: with RebootInto (the agent runs
// on the node) the step points the next boot, once, at the agent's boot
// device before its reboot.
func TestRedfishBIOSStepRebootsIntoTheAgent(t *testing.T) {
	m := &biosMachine{current: map[string]any{"ProcCores": float64(2)}, pending: map[string]any{}}
	a, _, node := biosLab(t, m)
	err := a.RunInterfaceStep(context.Background(), workflows.InterfaceStepInput{Node: node, Kind: provision.StepKindClean, RebootInto: "pxe",
		Step: biosStep("apply_configuration", map[string]any{"settings": []any{map[string]any{"name": "ProcCores", "value": "4"}}})})
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(m.calls, ", "); got != "boot pxe persistent=false, reboot" {
		t.Fatalf("BMC calls %q, want the agent's boot device (next boot only) before the reboot", got)
	}
}

func TestRedfishBIOSStepFailures(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		ignore bool
		args   any
		want   string
	}{
		{"no settings", false, map[string]any{}, "argument settings is required"},
		{"read-only", false, map[string]any{"settings": []any{map[string]any{"name": "SerialNumber", "value": "x"}}}, "attribute SerialNumber is read-only"},
		{"not applied", true, map[string]any{"settings": []any{map[string]any{"name": "ProcSMT", "value": "Disabled"}}}, "were not applied after the reboot: ProcSMT"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &biosMachine{current: map[string]any{"ProcSMT": "Enabled", "SerialNumber": "S1"}, pending: map[string]any{}, ignore: tc.ignore}
			a, _, node := biosLab(t, m)
			err := a.RunInterfaceStep(ctx, workflows.InterfaceStepInput{Node: node, Kind: provision.StepKindClean, Step: biosStep("apply_configuration", tc.args)})
			var app *temporal.ApplicationError
			if !errors.As(err, &app) || !app.NonRetryable() || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want a non-retryable failure naming %q", err, tc.want)
			}
		})
	}
}

// TestBootModeActivities: fake-hardware keeps what was asked, ipmi has no
// secure boot (Ironic's UnsupportedDriverExtension message), and the
// record writes boot_mode and secure_boot, or last_error.
func TestBootModeActivities(t *testing.T) {
	st := storetest.New(t)
	ctx := context.Background()
	a := activities.New(st, activities.Config{Conductor: "c"}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	n := &store.Node{Driver: "fake-hardware", ProvisionState: "manageable"}
	if err := st.CreateNode(ctx, n); err != nil {
		t.Fatal(err)
	}
	on := true
	res, err := a.SetBootMode(ctx, workflows.BootModeInput{Node: workflows.NodeInfo{UUID: n.UUID, Driver: "fake-hardware"}, BootMode: "uefi", SecureBoot: &on})
	if err != nil || res.BootMode != "uefi" || res.SecureBoot == nil || !*res.SecureBoot {
		t.Fatalf("fake: %+v %v", res, err)
	}
	if err := a.RecordBootMode(ctx, workflows.BootModeRecord{NodeUUID: n.UUID, BootMode: res.BootMode, SecureBoot: res.SecureBoot, Event: "Set boot mode uefi"}); err != nil {
		t.Fatal(err)
	}
	got, _ := st.GetNode(ctx, n.UUID)
	if got.BootMode == nil || *got.BootMode != "uefi" || got.SecureBoot == nil || !*got.SecureBoot || got.LastError != nil {
		t.Fatalf("recorded %v %v %v", got.BootMode, got.SecureBoot, got.LastError)
	}
	if err := a.RecordBootMode(ctx, workflows.BootModeRecord{NodeUUID: n.UUID, LastError: "Failed", Event: "Failed", Severity: "ERROR"}); err != nil {
		t.Fatal(err)
	}
	if got, _ := st.GetNode(ctx, n.UUID); *got.BootMode != "uefi" || got.LastError == nil || *got.LastError != "Failed" {
		t.Fatalf("a failure changed the mode or lost the error: %v %v", got.BootMode, got.LastError)
	}

	ip := &store.Node{Driver: "ipmi", ProvisionState: "manageable", DriverInfo: map[string]any{"ipmi_address": "127.0.0.1"}}
	if err := st.CreateNode(ctx, ip); err != nil {
		t.Fatal(err)
	}
	_, err = a.SetBootMode(ctx, workflows.BootModeInput{Node: workflows.NodeInfo{UUID: ip.UUID, Driver: "ipmi"}, SecureBoot: &on})
	var app *temporal.ApplicationError
	if !errors.As(err, &app) || !app.NonRetryable() || !strings.Contains(err.Error(), "Driver ipmi does not support set_secure_boot_state (disabled or not implemented).") {
		t.Fatalf("ipmi secure boot: %v", err)
	}
}

func TestCacheBIOSSettingsActivity(t *testing.T) {
	m := &biosMachine{current: map[string]any{"ProcCores": float64(4), "ProcSMT": true}, pending: map[string]any{}}
	a, st, node := biosLab(t, m)
	ctx := context.Background()
	if err := a.CacheBIOSSettings(ctx, node); err != nil {
		t.Fatal(err)
	}
	list, err := st.ListBIOSSettings(ctx, node.UUID)
	if err != nil || len(list) != 2 || list[0].Name != "ProcCores" || list[0].Value != "4" || list[1].Value != "True" {
		t.Fatalf("cached %+v, %v", list, err)
	}
}

// The fake bios interface's apply_configuration stores the settings, as
// Ironic's FakeBIOS does: a new one is created, a changed one updated, the
// others kept; no BMC call.
func TestFakeBIOSStepStoresTheSettings(t *testing.T) {
	st := storetest.New(t)
	ctx := context.Background()
	a := activities.New(st, activities.Config{Conductor: "c"}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	n := &store.Node{Driver: "fake-hardware", ProvisionState: "cleaning"}
	if err := st.CreateNode(ctx, n); err != nil {
		t.Fatal(err)
	}
	if err := st.ReplaceBIOSSettings(ctx, n.UUID, []store.BIOSSetting{{Name: "ProcSMT", Value: "Enabled"}, {Name: "BootMode", Value: "Uefi"}}); err != nil {
		t.Fatal(err)
	}
	node := workflows.NodeInfo{UUID: n.UUID, Driver: "fake-hardware", BIOSInterface: hardware.Fake}
	err := a.RunInterfaceStep(ctx, workflows.InterfaceStepInput{Node: node, Kind: provision.StepKindClean,
		Step: biosStep("apply_configuration", map[string]any{"settings": []any{
			map[string]any{"name": "ProcSMT", "value": "Disabled"}, map[string]any{"name": "ProcVirtualization", "value": "Enabled"}}})})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := st.ListBIOSSettings(ctx, n.UUID)
	values := map[string]string{}
	for _, b := range got {
		values[b.Name] = b.Value
	}
	if len(values) != 3 || values["ProcSMT"] != "Disabled" || values["ProcVirtualization"] != "Enabled" || values["BootMode"] != "Uefi" {
		t.Fatalf("BIOS settings after the fake apply_configuration: %v", values)
	}
	err = a.RunInterfaceStep(ctx, workflows.InterfaceStepInput{Node: node, Kind: provision.StepKindClean, Step: biosStep("apply_configuration", map[string]any{})})
	var app *temporal.ApplicationError
	if !errors.As(err, &app) || !app.NonRetryable() || !strings.Contains(err.Error(), "argument settings is required") {
		t.Fatalf("no settings: %v", err)
	}
}
