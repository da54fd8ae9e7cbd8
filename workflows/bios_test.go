package workflows

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/testsuite"

	"github.com/ironflow/ironflow/hardware"
	"github.com/ironflow/ironflow/provision"
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
			env.ExecuteWorkflow(ManageNode, decided(provision.Request{NodeUUID: f.node.UUID, Verb: "manage", FromState: provision.Enroll}))
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
			env.ExecuteWorkflow(ServiceNode, decided(provision.Request{NodeUUID: f.node.UUID, Verb: provision.VerbService, FromState: provision.Active,
				DisableRamdisk: true, ServiceSteps: []byte(`[{"interface":"bios","step":"factory_reset"}]`)}))
			if err := env.GetWorkflowError(); err != nil {
				t.Fatal(err)
			}
			calls := f.callList()
			if got := len(calls) > 1 && calls[0] == "RecordState servicing" && calls[1] == "CacheBIOSSettings"; got != c.cached {
				t.Fatalf("calls %v: BIOS settings cached right after servicing started = %v, want %v", calls, got, c.cached)
			}
			if lastState(f) != provision.Active {
				t.Fatalf("states %v, want active at the end", f.states)
			}
		})
	}
}

// A redfish bios step while the agent is up reboots the node (the
// firmware applies the settings at the reboot): the agent token goes, the
// agent's boot is prepared again and the step reboots into it, and the
// next in-band step runs only once the agent called back from that boot,
// as Ironic's reboot_to_finish_step (change bios-step-waits-for-agent).
func TestBIOSStepUnderTheAgentWaitsForItsCallBack(t *testing.T) {
	const bios = `{"interface":"bios","step":"apply_configuration","args":{"settings":[{"name":"ProcCores","value":"2"}]}}`
	for _, c := range []struct {
		name    string
		service bool
		next    string
		active  provision.State
		wait    provision.State
	}{
		{name: "cleaning", next: "deploy.erase_devices_metadata", active: provision.Cleaning, wait: provision.CleanWait},
		{name: "servicing", service: true, next: "deploy.erase_pstore", active: provision.Servicing, wait: provision.ServiceWait},
	} {
		t.Run(c.name, func(t *testing.T) {
			var f *fakeCloud
			var env *testsuite.TestWorkflowEnvironment
			req := cleanRequest(`[`+bios+`,{"interface":"deploy","step":"erase_devices_metadata"}]`, false)
			if c.service {
				var newServiceEnv func(*testing.T) *testsuite.TestWorkflowEnvironment
				f, newServiceEnv = serviceCloud()
				f.node.BIOSInterface = hardware.Redfish
				env = newServiceEnv(t)
				req = serviceRequest(`[` + bios + `,{"interface":"deploy","step":"erase_pstore"}]`)
			} else {
				f = manualCleanCloud()
				f.node.BIOSInterface = hardware.Redfish
				env = newEnv(t, f)
			}
			env.RegisterActivityWithOptions(func(ctx context.Context, n NodeInfo) error { return nil },
				activity.RegisterOptions{Name: ActCacheBIOSSettings})
			start := env.Now()
			var nextAt time.Time
			f.agentStep = func(ctx context.Context, in AgentStepInput) (AgentStepResult, error) {
				if in.Step.Name() == c.next {
					nextAt = env.Now()
				}
				return AgentStepResult{Status: "SUCCEEDED"}, nil
			}
			heartbeatAfter(env, time.Minute)
			heartbeatAfter(env, 20*time.Minute) // the agent's call-back after the BIOS reboot
			env.ExecuteWorkflow(map[bool]any{false: CleanNode, true: ServiceNode}[c.service], req)
			if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
				t.Fatalf("workflow did not complete cleanly: %v", env.GetWorkflowError())
			}
			calls := f.callList()
			i := slices.Index(calls, "RunInterfaceStep bios.apply_configuration reboot into pxe")
			if i < 2 {
				t.Fatalf("the bios step did not reboot into the agent: %v", calls)
			}
			want := []string{
				"RecordState " + string(c.active), "PrepareBoot agent", "RunInterfaceStep bios.apply_configuration reboot into pxe",
				"RecordState " + string(c.wait), "RecordState " + string(c.active),
			}
			if got := calls[i-2 : i+3]; strings.Join(got, "\n") != strings.Join(want, "\n") {
				t.Fatalf("around the bios step:\n%s\nwant:\n%s\n(all: %v)", strings.Join(got, "\n"), strings.Join(want, "\n"), calls)
			}
			if nextAt.IsZero() || nextAt.Sub(start) < 20*time.Minute {
				t.Fatalf("step %s ran %s after the start, before the agent's call-back at 20m", c.next, nextAt.Sub(start))
			}
			if !slices.Contains(f.clearedAgent, c.active) {
				t.Fatalf("states recorded with the agent token removed: %v, want %s (before the BIOS reboot)", f.clearedAgent, c.active)
			}
			if lastState(f) != map[bool]provision.State{false: provision.Manageable, true: provision.Active}[c.service] {
				t.Fatalf("states %v", f.states)
			}
		})
	}
}

// Without the agent's call-back after the BIOS reboot the wait times out:
// the operation fails naming the bios step, and the next in-band step never
// runs.
func TestBIOSStepUnderTheAgentFailsWhenTheAgentDoesNotReturn(t *testing.T) {
	f := manualCleanCloud()
	f.node.BIOSInterface = hardware.Redfish
	env := newEnv(t, f)
	env.RegisterActivityWithOptions(func(ctx context.Context, n NodeInfo) error { return nil },
		activity.RegisterOptions{Name: ActCacheBIOSSettings})
	heartbeatAfter(env, time.Minute)
	env.ExecuteWorkflow(CleanNode, cleanRequest(`[{"interface":"bios","step":"factory_reset"},{"interface":"deploy","step":"erase_devices_metadata"}]`, false))
	if !env.IsWorkflowCompleted() {
		t.Fatal("workflow did not complete")
	}
	for _, call := range f.callList() {
		if strings.Contains(call, "erase_devices_metadata") {
			t.Fatalf("the next step ran without the agent's call-back: %v", f.callList())
		}
	}
	if !slices.Contains(f.states, provision.CleanFailed) ||
		!strings.Contains(f.lastErr, "wait call-back after bios.factory_reset: Timeout reached while waiting for callback for node "+f.node.UUID) {
		t.Fatalf("states %v, last_error %q: want clean failed on the callback timeout after the bios step", f.states, f.lastErr)
	}
}

// With disable_ramdisk no agent runs: the bios step reboots without
// pointing the boot anywhere and nothing waits for a call-back.
func TestBIOSStepWithoutTheAgentDoesNotWait(t *testing.T) {
	f := manualCleanCloud()
	f.node.BIOSInterface = hardware.Redfish
	env := newEnv(t, f)
	env.RegisterActivityWithOptions(func(ctx context.Context, n NodeInfo) error { return nil },
		activity.RegisterOptions{Name: ActCacheBIOSSettings})
	env.ExecuteWorkflow(CleanNode, cleanRequest(`[{"interface":"bios","step":"factory_reset"}]`, true))
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	want := "RecordState cleaning\nRunInterfaceStep bios.factory_reset\nRecordState manageable"
	if got := strings.Join(f.callList(), "\n"); got != want {
		t.Fatalf("calls:\n%s\nwant:\n%s", got, want)
	}
}

// The bios steps are deploy steps too (Ironic's bios interfaces): named by
// a deploy template above deploy.deploy's priority the step runs through
// the BMC before the agent boots; below it, while the agent runs, it
// reboots into the agent and write_image runs only after the agent's
// call-back (changes deploy-interface-steps, bios-step-waits-for-agent).
func TestBIOSStepAsADeployStep(t *testing.T) {
	const bios = `[{"interface":"bios","step":"apply_configuration","priority":%d,"args":{"settings":[{"name":"ProcCores","value":"2"}]}}]`
	for _, c := range []struct {
		priority int
		call     string
	}{
		{110, "RunInterfaceStep bios.apply_configuration"},
		{90, "RunInterfaceStep bios.apply_configuration reboot into pxe"},
	} {
		t.Run(fmt.Sprint(c.priority), func(t *testing.T) {
			f := newFakeCloud()
			f.node.BIOSInterface = hardware.Redfish
			env := newEnv(t, f)
			start := env.Now()
			var writeAt time.Time
			f.agentStep = func(ctx context.Context, in AgentStepInput) (AgentStepResult, error) {
				if in.Step.StepID == provision.StepWriteImage {
					writeAt = env.Now()
				}
				return AgentStepResult{Status: "SUCCEEDED"}, nil
			}
			heartbeatAfter(env, 2*time.Minute)
			heartbeatAfter(env, 20*time.Minute)
			req := deployRequest()
			req.DeploySteps = []byte(fmt.Sprintf(bios, c.priority))
			env.ExecuteWorkflow(DeployNode, req)
			if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
				t.Fatalf("workflow did not complete cleanly: %v", env.GetWorkflowError())
			}
			requireActive(t, f)
			calls := f.callList()
			step, boot := slices.Index(calls, c.call), slices.Index(calls, "PrepareBoot agent")
			if step < 0 || boot < 0 {
				t.Fatalf("no %q in the deploy: %v", c.call, calls)
			}
			if c.priority > 100 {
				if step > boot {
					t.Fatalf("the step ran after the agent's boot: %v", calls)
				}
				return
			}
			want := []string{"RecordState deploying", "PrepareBoot agent", c.call, "RecordState wait call-back", "RecordState deploying"}
			if step < 2 || strings.Join(calls[step-2:step+3], "\n") != strings.Join(want, "\n") {
				t.Fatalf("around the bios step:\n%s\nwant:\n%s", strings.Join(calls, "\n"), strings.Join(want, "\n"))
			}
			if writeAt.Sub(start) < 20*time.Minute {
				t.Fatalf("write_image ran %s after the start, before the agent's call-back at 20m", writeAt.Sub(start))
			}
		})
	}
}

// An operator's abort while the plan waits for the agent after a BIOS
// step (clean wait) ends the cleaning in clean failed with Ironic's abort
// message; the next step never runs.
func TestBIOSStepUnderTheAgentAbortWhileWaiting(t *testing.T) {
	f := manualCleanCloud()
	f.node.BIOSInterface = hardware.Redfish
	env := newEnv(t, f)
	env.RegisterActivityWithOptions(func(ctx context.Context, n NodeInfo) error { return nil },
		activity.RegisterOptions{Name: ActCacheBIOSSettings})
	heartbeatAfter(env, time.Minute)
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(SignalAbort, nil) }, 10*time.Minute)
	env.ExecuteWorkflow(CleanNode, cleanRequest(`[{"interface":"bios","step":"factory_reset"},{"interface":"deploy","step":"erase_devices_metadata"}]`, false))
	if !env.IsWorkflowCompleted() {
		t.Fatal("workflow did not complete")
	}
	for _, call := range f.callList() {
		if strings.Contains(call, "erase_devices_metadata") {
			t.Fatalf("the next step ran after the abort: %v", f.callList())
		}
	}
	if lastState(f) != provision.CleanFailed || !strings.Contains(f.lastErr, "By request, the clean operation was aborted") {
		t.Fatalf("states %v, last_error %q: want clean failed with the abort message", f.states, f.lastErr)
	}
}
