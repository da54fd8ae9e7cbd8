package workflows

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"go.temporal.io/sdk/activity"

	"github.com/ironflow/ironflow/hardware"
)

// TestManageCachesBIOSSettingsOfRedfishBIOSNodes: verifying a node whose
// bios interface is redfish caches its BIOS settings after the power-state
// read, as Ironic's cache_bios_settings; a failure to read them is logged
// and the node still becomes manageable; other nodes read nothing.
func TestManageCachesBIOSSettingsOfRedfishBIOSNodes(t *testing.T) {
	for _, c := range []struct {
		name  string
		iface hardware.Interface
		fail  error
		calls string
	}{
		{"redfish", hardware.Redfish, nil, "GetPowerState,RecordPowerState power off,CacheBIOSSettings,RecordState manageable"},
		{"redfish, BMC fails", hardware.Redfish, errors.New("no Bios resource"), "GetPowerState,RecordPowerState power off,CacheBIOSSettings,RecordState manageable"},
		{"no-bios", hardware.NoBIOS, nil, "GetPowerState,RecordPowerState power off,RecordState manageable"},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFakeCloud()
			f.node.BIOSInterface = c.iface
			f.node.Policy.BMCAttempts = 1
			env := newEnv(t, f)
			env.RegisterActivityWithOptions(func(ctx context.Context, n NodeInfo) error {
				f.appendCall("CacheBIOSSettings")
				return c.fail
			}, activity.RegisterOptions{Name: ActCacheBIOSSettings})
			env.ExecuteWorkflow(ManageNode, ProvisionRequest{NodeUUID: f.node.UUID, Verb: "manage", FromState: string(Enroll)})
			if err := env.GetWorkflowError(); err != nil {
				t.Fatal(err)
			}
			var calls []string
			for _, call := range f.callList() {
				if !strings.HasPrefix(call, "RecordState verifying") {
					calls = append(calls, call)
				}
			}
			if got := strings.Join(calls, ","); got != c.calls {
				t.Errorf("calls %s, want %s", got, c.calls)
			}
			if fmt.Sprint(f.states[len(f.states)-1]) != "manageable" {
				t.Errorf("states %v", f.states)
			}
		})
	}
}

// TestManualCleaningCachesBIOSSettingsOfRedfishBIOSNodes: manual cleaning
// of a redfish-bios node refreshes its cached BIOS settings before its
// plan runs, as Ironic's do_node_clean does for manual and automated
// cleaning; a fake-bios node reads nothing.
func TestManualCleaningCachesBIOSSettingsOfRedfishBIOSNodes(t *testing.T) {
	for _, c := range []struct {
		name   string
		iface  hardware.Interface
		steps  string
		cached bool
	}{
		{"redfish", hardware.Redfish, `[{"interface":"bios","step":"apply_configuration","args":{"settings":[{"name":"ProcCores","value":"2"}]}}]`, true},
		{"fake", hardware.Fake, `[{"interface":"bios","step":"factory_reset"}]`, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := manualCleanCloud()
			f.node.BIOSInterface = c.iface
			env := newEnv(t, f)
			env.RegisterActivityWithOptions(func(ctx context.Context, n NodeInfo) error {
				f.appendCall("CacheBIOSSettings")
				return nil
			}, activity.RegisterOptions{Name: ActCacheBIOSSettings})
			env.ExecuteWorkflow(CleanNode, cleanRequest(c.steps, true))
			if err := env.GetWorkflowError(); err != nil {
				t.Fatal(err)
			}
			calls := f.callList()
			if got := len(calls) > 1 && calls[1] == "CacheBIOSSettings"; got != c.cached {
				t.Fatalf("calls %v: BIOS settings cached right after cleaning started = %v, want %v", calls, got, c.cached)
			}
		})
	}
}

// TestServicingCachesBIOSSettingsOfRedfishBIOSNodes: servicing a
// redfish-bios node refreshes its cached BIOS settings right after it
// enters servicing, before the agent boots; a fake-bios node reads nothing.
func TestServicingCachesBIOSSettingsOfRedfishBIOSNodes(t *testing.T) {
	for _, c := range []struct {
		name   string
		iface  hardware.Interface
		cached bool
	}{
		{"redfish", hardware.Redfish, true},
		{"fake", hardware.Fake, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			f, newServiceEnv := serviceCloud()
			f.node.BIOSInterface = c.iface
			env := newServiceEnv(t)
			env.RegisterActivityWithOptions(func(ctx context.Context, n NodeInfo) error {
				f.appendCall("CacheBIOSSettings")
				return nil
			}, activity.RegisterOptions{Name: ActCacheBIOSSettings})
			env.ExecuteWorkflow(ServiceNode, ProvisionRequest{NodeUUID: f.node.UUID, Verb: string(VerbService), FromState: string(Active),
				DisableRamdisk: true, ServiceSteps: []byte(`[{"interface":"bios","step":"factory_reset"}]`)})
			if err := env.GetWorkflowError(); err != nil {
				t.Fatal(err)
			}
			calls := f.callList()
			if got := len(calls) > 1 && calls[0] == "RecordState servicing" && calls[1] == "CacheBIOSSettings"; got != c.cached {
				t.Fatalf("calls %v: BIOS settings cached right after servicing started = %v, want %v", calls, got, c.cached)
			}
			if lastState(f) != Active {
				t.Fatalf("states %v, want active at the end", f.states)
			}
		})
	}
}
