package workflows

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/ironflow/ironflow/hardware"
	"github.com/ironflow/ironflow/provision"
)

func userSteps(t *testing.T, raw string) []UserStep {
	t.Helper()
	u, err := ParseUserSteps(json.RawMessage(raw))
	if err != nil {
		t.Fatalf("ParseUserSteps(%s): %v", raw, err)
	}
	return u
}

func names(steps []provision.Step) string {
	var out []string
	for _, s := range steps {
		out = append(out, s.Name())
	}
	return strings.Join(out, " ")
}

var agentCleanSteps = []provision.Step{
	{StepID: provision.StepEraseDevicesMetadata, Priority: 99, Abortable: true},
	{StepID: provision.StepEraseDevices, Priority: 10, Abortable: true},
	{StepID: provision.StepID{Interface: "deploy", Step: "burnin_cpu"}, ArgsInfo: map[string]provision.ArgInfo{"duration": {Description: "seconds", Required: true}}},
}

var fakeIfaces = map[string]hardware.Interface{"bios": hardware.Fake, "raid": hardware.Fake}

// Automated cleaning: the agent's and the interfaces' steps, priorities
// from configuration (0 disables), those above 0 highest first; at equal
// priority Ironic's interface order decides.
func TestMergeStepsAutomatedPrioritiesAndDisable(t *testing.T) {
	avail := append(InterfaceSteps(provision.StepKindClean, fakeIfaces), agentCleanSteps...)
	avail = append(avail, provision.Step{StepID: provision.StepID{Interface: "raid", Step: "x"}, Priority: 50}, provision.Step{StepID: provision.StepID{Interface: "management", Step: "y"}, Priority: 50})
	got, err := MergeSteps(PlanInput{Kind: provision.StepKindClean, Available: avail, Priorities: map[string]int{"deploy.erase_devices_metadata": 0, "deploy.erase_devices": 60}})
	if err != nil {
		t.Fatal(err)
	}
	if want := "deploy.erase_devices management.y raid.x"; names(got) != want {
		t.Fatalf("plan %q, want %q", names(got), want)
	}
}

// Manual cleaning runs the user's steps in the user's order, each with the
// declared step's priority and abortable, its args the user's.
func TestMergeStepsManualKeepsTheUsersOrder(t *testing.T) {
	avail := append(InterfaceSteps(provision.StepKindClean, fakeIfaces), agentCleanSteps...)
	u := userSteps(t, `[{"interface":"bios","step":"factory_reset"},{"interface":"deploy","step":"erase_devices_metadata"},{"interface":"deploy","step":"burnin_cpu","args":{"duration":30}}]`)
	got, err := MergeSteps(PlanInput{Kind: provision.StepKindClean, Available: avail, User: u, Manual: true})
	if err != nil {
		t.Fatal(err)
	}
	if want := "bios.factory_reset deploy.erase_devices_metadata deploy.burnin_cpu"; names(got) != want {
		t.Fatalf("plan %q, want %q", names(got), want)
	}
	if !got[0].OutOfBand || got[1].OutOfBand || !got[1].Abortable || got[1].Priority != 99 || string(got[2].Args) != `{"duration":30}` {
		t.Fatalf("plan steps lost what their owner declares: %+v", got)
	}
}

// Deploy steps: a user step overrides the declared step of the same
// identity (priority 0 disables it), the core step may only be disabled.
func TestMergeStepsDeployUserOverrides(t *testing.T) {
	u := userSteps(t, `[{"interface":"deploy","step":"tear_down_agent","priority":0},{"interface":"deploy","step":"write_image","priority":90}]`)
	got, err := MergeSteps(PlanInput{Kind: provision.StepKindDeploy, Available: builtinDeploySteps, User: u})
	if err != nil {
		t.Fatal(err)
	}
	if want := "deploy.deploy deploy.write_image deploy.prepare_instance_boot deploy.boot_instance"; names(got) != want {
		t.Fatalf("plan %q, want %q", names(got), want)
	}
	_, err = MergeSteps(PlanInput{Kind: provision.StepKindDeploy, Available: builtinDeploySteps, User: userSteps(t, `[{"interface":"deploy","step":"deploy","priority":5}]`)})
	want := "deploy step deploy on interface deploy is a core step and cannot be overridden by user steps. It may be disabled by setting the priority to 0"
	if err == nil || err.Error() != want {
		t.Fatalf("core step override: %v, want %q", err, want)
	}
}

// Unknown steps, unexpected and missing arguments, and agent steps with
// disable_ramdisk are refused with Ironic's messages, all at once.
func TestMergeStepsRefusesWithIronicsMessages(t *testing.T) {
	avail := append(InterfaceSteps(provision.StepKindClean, fakeIfaces), agentCleanSteps...)
	cases := []struct {
		name, steps string
		disable     bool
		want        string
	}{
		{"unknown", `[{"interface":"deploy","step":"erase_everything"}]`, false,
			"node does not support this clean step: {'interface': 'deploy', 'step': 'erase_everything'}"},
		{"unexpected args", `[{"interface":"bios","step":"factory_reset","args":{"force":true}}]`, false,
			"clean step {'interface': 'bios', 'step': 'factory_reset', 'args': {'force': True}} has these unexpected arguments: force"},
		{"missing args", `[{"interface":"bios","step":"apply_configuration"}]`, false,
			"clean step {'interface': 'bios', 'step': 'apply_configuration'} is missing these required arguments: settings (A list of BIOS settings to be applied)"},
		{"needs the ramdisk", `[{"interface":"deploy","step":"erase_devices_metadata"}]`, true,
			"clean step {'interface': 'deploy', 'step': 'erase_devices_metadata'} requires booting a ramdisk"},
		{"two problems", `[{"interface":"raid","step":"nope"},{"interface":"deploy","step":"burnin_cpu"}]`, false,
			"node does not support this clean step: {'interface': 'raid', 'step': 'nope'}; clean step {'interface': 'deploy', 'step': 'burnin_cpu'} is missing these required arguments: duration (seconds)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := MergeSteps(PlanInput{Kind: provision.StepKindClean, Available: avail, User: userSteps(t, c.steps), Manual: true, DisableRamdisk: c.disable})
			var perr *PlanError
			if !errors.As(err, &perr) || err.Error() != c.want {
				t.Fatalf("error %v, want %q", err, c.want)
			}
		})
	}
}

func cleanRequest(steps string, disableRamdisk bool) provision.Request {
	return decided(provision.Request{NodeUUID: deployRequest().NodeUUID, Verb: provision.VerbClean, FromState: provision.Manageable,
		CleanSteps: json.RawMessage(steps), DisableRamdisk: disableRamdisk})
}

func manualCleanCloud() *fakeCloud {
	f := newFakeCloud()
	f.node.ProvisionState = provision.Manageable
	f.node.BIOSInterface = hardware.Fake
	f.agentSteps = agentCleanSteps
	return f
}

// Manual cleaning boots the agent, checks the plan against its steps, runs
// the interface's step as an activity and the agent's in clean wait, keeps
// the plan and its index in driver_internal_info, and ends manageable.
func TestCleanNodeRunsTheUsersStepsInOrder(t *testing.T) {
	f := manualCleanCloud()
	env := newEnv(t, f)
	heartbeatAfter(env, time.Minute)
	env.ExecuteWorkflow(CleanNode, cleanRequest(`[{"interface":"deploy","step":"erase_devices_metadata"},{"interface":"bios","step":"factory_reset"}]`, false))
	if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
		t.Fatalf("workflow did not complete cleanly: %v", env.GetWorkflowError())
	}
	want := []string{
		"RecordState cleaning", "PrepareBoot agent", "SetBootDevice pxe", "SetPower rebooting", "RecordState clean wait",
		"RecordState cleaning", "GetAgentSteps clean", "RecordState clean wait",
		"RunAgentStep deploy.erase_devices_metadata @" + agentURL, "RecordState cleaning",
		"RunInterfaceStep bios.factory_reset", "AgentPowerOff", "SetPower power off", "CleanBoot", "RecordState manageable",
	}
	if got := f.callList(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("calls:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if len(f.plans) != 4 || names(f.plans[0].Steps) != "deploy.erase_devices_metadata bios.factory_reset" ||
		len(f.plans[0].AgentSteps) != 3 || *f.plans[1].Index != 0 || *f.plans[2].Index != 1 || !f.plans[3].Clear {
		t.Fatalf("driver_internal_info records: %+v", f.plans)
	}
	shown := strings.Join(f.cleanStepsShown(), "\n")
	if !strings.Contains(shown, "RunAgentStep deploy.erase_devices_metadata @"+agentURL+" → deploy.erase_devices_metadata") ||
		!strings.Contains(shown, "RunInterfaceStep bios.factory_reset → bios.factory_reset") ||
		!strings.HasSuffix(shown, "RecordState manageable → ") {
		t.Fatalf("clean_step after each call:\n%s", shown)
	}
}

// With disable_ramdisk, only out-of-band steps run and nothing boots.
func TestCleanNodeWithoutTheRamdisk(t *testing.T) {
	f := manualCleanCloud()
	env := newEnv(t, f)
	env.ExecuteWorkflow(CleanNode, cleanRequest(`[{"interface":"bios","step":"apply_configuration","args":{"settings":[{"name":"a","value":"b"}]}}]`, true))
	if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
		t.Fatalf("workflow did not complete cleanly: %v", env.GetWorkflowError())
	}
	want := "RecordState cleaning\nRunInterfaceStep bios.apply_configuration\nRecordState manageable"
	if got := strings.Join(f.callList(), "\n"); got != want {
		t.Fatalf("calls:\n%s\nwant:\n%s", got, want)
	}
}

// A step the agent does not report, once it is up, fails the cleaning with
// Ironic's message before any step runs; the machine is left off.
func TestCleanNodeRefusesAStepTheAgentLacks(t *testing.T) {
	f := manualCleanCloud()
	f.agentSteps = []provision.Step{{StepID: provision.StepEraseDevices, Priority: 10}}
	env := newEnv(t, f)
	heartbeatAfter(env, time.Minute)
	env.ExecuteWorkflow(CleanNode, cleanRequest(`[{"interface":"deploy","step":"erase_devices_metadata"}]`, false))
	if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
		t.Fatalf("workflow did not complete cleanly: %v", env.GetWorkflowError())
	}
	want := "Cannot clean node " + f.node.UUID + ": node does not support this clean step: {'interface': 'deploy', 'step': 'erase_devices_metadata'}"
	if f.states[len(f.states)-1] != provision.CleanFailed || f.lastErr != want {
		t.Fatalf("ended in %s with %q, want clean failed with %q", f.states[len(f.states)-1], f.lastErr, want)
	}
	calls := strings.Join(f.callList(), "\n")
	if strings.Contains(calls, "RunAgentStep") || !strings.Contains(calls, "SetPower power off") {
		t.Fatalf("a step ran, or the machine was left on:\n%s", calls)
	}
}

// Abort stops an abortable step at once: clean failed with Ironic's
// last_error naming the step.
func TestCleanNodeAbortStopsAnAbortableStep(t *testing.T) {
	f := manualCleanCloud()
	f.agentStep = func(ctx context.Context, in AgentStepInput) (AgentStepResult, error) {
		<-ctx.Done()
		return AgentStepResult{}, temporal.NewCanceledError()
	}
	env := newEnv(t, f)
	heartbeatAfter(env, time.Minute)
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(SignalAbort, nil) }, time.Minute+200*time.Millisecond)
	env.ExecuteWorkflow(CleanNode, cleanRequest(`[{"interface":"deploy","step":"erase_devices"}]`, false))
	if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
		t.Fatalf("workflow did not complete cleanly: %v", env.GetWorkflowError())
	}
	want := `By request, the clean operation was aborted on step "deploy.erase_devices"`
	if f.states[len(f.states)-1] != provision.CleanFailed || f.lastErr != want {
		t.Fatalf("ended in %s with %q, want clean failed with %q", f.states[len(f.states)-1], f.lastErr, want)
	}
}

// A step that is not abortable finishes; the cleaning stops after it, as
// Ironic's abort_after.
func TestCleanNodeAbortWaitsForAStepThatIsNotAbortable(t *testing.T) {
	f := manualCleanCloud()
	var finished bool
	f.agentStep = func(ctx context.Context, in AgentStepInput) (AgentStepResult, error) {
		select {
		case <-ctx.Done():
			return AgentStepResult{}, temporal.NewCanceledError()
		case <-time.After(time.Second):
		}
		finished = true
		return AgentStepResult{Status: "SUCCEEDED"}, nil
	}
	env := newEnv(t, f)
	heartbeatAfter(env, time.Minute)
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(SignalAbort, nil) }, time.Minute+100*time.Millisecond)
	env.ExecuteWorkflow(CleanNode, cleanRequest(`[{"interface":"deploy","step":"burnin_cpu","args":{"duration":1}},{"interface":"bios","step":"factory_reset"}]`, false))
	if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
		t.Fatalf("workflow did not complete cleanly: %v", env.GetWorkflowError())
	}
	want := `By request, the clean operation was aborted after the completion of step "deploy.burnin_cpu"`
	if !finished || f.states[len(f.states)-1] != provision.CleanFailed || f.lastErr != want {
		t.Fatalf("step finished %v; ended in %s with %q, want clean failed with %q", finished, f.states[len(f.states)-1], f.lastErr, want)
	}
	if strings.Contains(strings.Join(f.callList(), "\n"), "RunInterfaceStep") {
		t.Fatal("the step after the aborted one ran")
	}
}

// cleanStepsShown is deployStepsShown for clean_step.
func (f *fakeCloud) cleanStepsShown() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]string, len(f.calls))
	for i, c := range f.calls {
		out[i] = c + " → " + f.shown[i].clean
	}
	return out
}

// The fake firmware interface's update is a clean step only, as Ironic's
// FakeFirmware declares it; redfish's is a clean, service and deploy step.
func TestFakeFirmwareUpdateIsACleanStepOnly(t *testing.T) {
	has := func(kind provision.StepKind, fw hardware.Interface) bool {
		for _, s := range InterfaceSteps(kind, map[string]hardware.Interface{"firmware": fw}) {
			if s.StepID == provision.StepFirmwareUpdate {
				return s.OutOfBand && s.ArgsInfo["settings"].Required
			}
		}
		return false
	}
	for _, c := range []struct {
		kind provision.StepKind
		fw   hardware.Interface
		want bool
	}{
		{provision.StepKindClean, hardware.Fake, true}, {provision.StepKindDeploy, hardware.Fake, false},
		{provision.StepKindService, hardware.Fake, false}, {provision.StepKindClean, hardware.Redfish, true},
		{provision.StepKindDeploy, hardware.Redfish, true}, {provision.StepKindService, hardware.Redfish, true},
		{provision.StepKindClean, hardware.NoFirmware, false},
	} {
		if got := has(c.kind, c.fw); got != c.want {
			t.Errorf("%s steps of firmware interface %s offer update: %v, want %v", c.kind, c.fw, got, c.want)
		}
	}
}
