package workflows

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ironflow/ironflow/provision"
)

// holdAt signals unhold (or abort) once the workflow has waited long in
// its hold state, after noting the state and clean_step it showed.
func holdAt(f *fakeCloud, signal func(), seen *provision.State) func() {
	return func() {
		f.mu.Lock()
		*seen = f.states[len(f.states)-1]
		f.mu.Unlock()
		signal()
	}
}

// A hold step pauses manual cleaning in clean hold, durably (an hour
// here); unhold moves the node back to clean wait and the plan goes on
// with the next step, the node ends manageable.
func TestCleanNodeHoldThenUnholdContinues(t *testing.T) {
	f := manualCleanCloud()
	env := newEnv(t, f)
	heartbeatAfter(env, time.Minute)
	var held provision.State
	var heldStep string
	env.RegisterDelayedCallback(func() {
		f.mu.Lock()
		held, heldStep = f.states[len(f.states)-1], f.shown[len(f.shown)-1].clean
		f.mu.Unlock()
		env.SignalWorkflow(SignalUnhold, nil)
	}, time.Hour)
	env.ExecuteWorkflow(CleanNode, cleanRequest(`[{"interface":"deploy","step":"erase_devices_metadata"},{"interface":"deploy","step":"hold"},{"interface":"bios","step":"factory_reset"}]`, false))
	if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
		t.Fatalf("workflow did not complete cleanly: %v", env.GetWorkflowError())
	}
	if held != provision.CleanHold || heldStep != "deploy.hold" {
		t.Fatalf("after an hour: %s showing clean_step %q, want clean hold showing deploy.hold", held, heldStep)
	}
	want := []string{
		"RecordState cleaning", "PrepareBoot agent", "SetBootDevice pxe", "SetPower rebooting", "RecordState clean wait",
		"RecordState cleaning", "GetAgentSteps clean", "RecordState clean wait",
		"RunAgentStep deploy.erase_devices_metadata @" + agentURL, "RecordState cleaning",
		"RecordState clean hold", "RecordState clean wait", "RecordState cleaning",
		"RunInterfaceStep bios.factory_reset", "AgentPowerOff", "SetPower power off", "CleanBoot", "RecordState manageable",
	}
	if got := f.callList(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("calls:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if names(f.plans[0].Steps) != "deploy.erase_devices_metadata deploy.hold bios.factory_reset" || *f.plans[2].Index != 1 {
		t.Fatalf("driver_internal_info records: %+v", f.plans)
	}
}

// Abort in clean hold is Ironic's clean hold --abort--> clean failed: the
// steps after the hold do not run.
func TestCleanNodeHoldThenAbort(t *testing.T) {
	f := manualCleanCloud()
	env := newEnv(t, f)
	heartbeatAfter(env, time.Minute)
	var held provision.State
	env.RegisterDelayedCallback(holdAt(f, func() { env.SignalWorkflow(SignalAbort, nil) }, &held), 30*time.Minute)
	env.ExecuteWorkflow(CleanNode, cleanRequest(`[{"interface":"deploy","step":"hold"},{"interface":"bios","step":"factory_reset"}]`, false))
	if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
		t.Fatalf("workflow did not complete cleanly: %v", env.GetWorkflowError())
	}
	want := `By request, the clean operation was aborted on step "deploy.hold"`
	if held != provision.CleanHold || lastState(f) != provision.CleanFailed || f.lastErr != want {
		t.Fatalf("held in %s, ended in %s with %q; want clean hold, clean failed with %q", held, lastState(f), f.lastErr, want)
	}
	if calls := strings.Join(f.callList(), "\n"); strings.Contains(calls, "factory_reset") {
		t.Fatalf("a step after the aborted hold ran:\n%s", calls)
	}
}

// Servicing holds in service hold; unhold goes back to service wait and
// on to the next step; the node ends active.
func TestServiceNodeHoldThenUnhold(t *testing.T) {
	f, newServiceEnv := serviceCloud()
	env := newServiceEnv(t)
	heartbeatAfter(env, time.Minute)
	var held provision.State
	env.RegisterDelayedCallback(holdAt(f, func() { env.SignalWorkflow(SignalUnhold, nil) }, &held), 2*time.Hour)
	env.ExecuteWorkflow(ServiceNode, serviceRequest(`[{"interface":"deploy","step":"hold"},{"interface":"deploy","step":"erase_pstore"}]`))
	if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
		t.Fatalf("workflow did not complete cleanly: %v", env.GetWorkflowError())
	}
	calls := strings.Join(f.callList(), "\n")
	if held != provision.ServiceHold || lastState(f) != provision.Active ||
		!strings.Contains(calls, "RecordState service hold\nRecordState service wait\nRecordState servicing\nRecordState service wait\nRunAgentStep deploy.erase_pstore") {
		t.Fatalf("held in %s, ended in %s; calls:\n%s", held, lastState(f), calls)
	}
}

// Abort in service hold ends in service failed (Ironic's service hold
// --abort--> service failed).
func TestServiceNodeHoldThenAbort(t *testing.T) {
	f, newServiceEnv := serviceCloud()
	env := newServiceEnv(t)
	heartbeatAfter(env, time.Minute)
	var held provision.State
	env.RegisterDelayedCallback(holdAt(f, func() { env.SignalWorkflow(SignalAbort, nil) }, &held), 10*time.Minute)
	env.ExecuteWorkflow(ServiceNode, serviceRequest(`[{"interface":"deploy","step":"hold"},{"interface":"deploy","step":"erase_pstore"}]`))
	if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
		t.Fatalf("workflow did not complete cleanly: %v", env.GetWorkflowError())
	}
	if held != provision.ServiceHold || lastState(f) != provision.ServiceFailed || !strings.Contains(f.lastErr, "aborted") {
		t.Fatalf("held in %s, ended in %s with %q", held, lastState(f), f.lastErr)
	}
}

// A deploy step hold (deploy_steps, priority 90: after deploy.deploy)
// pauses in deploy hold; unhold goes back to wait call-back and the deploy
// writes the image and ends active.
func TestDeployNodeHoldThenUnhold(t *testing.T) {
	f := newFakeCloud()
	env := newEnv(t, f)
	heartbeatAfter(env, 2*time.Minute)
	var held provision.State
	env.RegisterDelayedCallback(holdAt(f, func() { env.SignalWorkflow(SignalUnhold, nil) }, &held), time.Hour)
	req := deployRequest()
	req.DeploySteps = json.RawMessage(`[{"interface":"deploy","step":"hold","priority":90}]`)
	env.ExecuteWorkflow(DeployNode, req)
	if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
		t.Fatalf("workflow did not complete cleanly: %v", env.GetWorkflowError())
	}
	calls := strings.Join(f.callList(), "\n")
	if held != provision.DeployHold || lastState(f) != provision.Active ||
		!strings.Contains(calls, "RecordState deploying\nRecordState deploy hold\nRecordState wait call-back\nRecordState deploying\nRunAgentStep deploy.write_image") {
		t.Fatalf("held in %s, ended in %s; calls:\n%s", held, lastState(f), calls)
	}
}

// Abort in deploy hold ends in deploy failed; the image is never written.
func TestDeployNodeHoldThenAbort(t *testing.T) {
	f := newFakeCloud()
	env := newEnv(t, f)
	heartbeatAfter(env, 2*time.Minute)
	var held provision.State
	env.RegisterDelayedCallback(holdAt(f, func() { env.SignalWorkflow(SignalAbort, nil) }, &held), time.Hour)
	req := deployRequest()
	req.DeploySteps = json.RawMessage(`[{"interface":"deploy","step":"hold","priority":90}]`)
	env.ExecuteWorkflow(DeployNode, req)
	if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
		t.Fatalf("workflow did not complete cleanly: %v", env.GetWorkflowError())
	}
	calls := strings.Join(f.callList(), "\n")
	if held != provision.DeployHold || lastState(f) != provision.DeployFailed || strings.Contains(calls, "write_image") {
		t.Fatalf("held in %s, ended in %s; calls:\n%s", held, lastState(f), calls)
	}
}

// The other reserved steps: power_off, power_on and reboot are BMC power
// actions, wait with seconds pauses that long; none needs the agent, so
// they run with disable_ramdisk.
func TestCleanNodeRunsTheReservedPowerAndWaitSteps(t *testing.T) {
	f := manualCleanCloud()
	env := newEnv(t, f)
	start := env.Now()
	var waited time.Duration
	env.ExecuteWorkflow(CleanNode, cleanRequest(`[{"interface":"power","step":"power_off"},{"interface":"deploy","step":"wait","args":{"seconds":20}},{"interface":"power","step":"power_on"},{"interface":"power","step":"reboot"},{"interface":"bios","step":"factory_reset"}]`, true))
	if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
		t.Fatalf("workflow did not complete cleanly: %v", env.GetWorkflowError())
	}
	waited = env.Now().Sub(start)
	want := []string{
		"RecordState cleaning", "SetPower power off", "RecordState cleaning", "SetPower power on", "SetPower rebooting",
		"RunInterfaceStep bios.factory_reset", "RecordState manageable",
	}
	if got := f.callList(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("calls:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if waited < 20*time.Second {
		t.Fatalf("the wait step of 20 s took %s", waited)
	}
	// power_off drops the agent token in cleaning, and the end of the
	// cleaning once more.
	if fmt.Sprint(f.clearedAgent) != "[cleaning manageable]" {
		t.Fatalf("states recorded with the agent token removed: %v, want [cleaning manageable]", f.clearedAgent)
	}
}

// A wait step above Ironic's max_conductor_wait_step_seconds fails the
// step (clean failed, naming the limit) instead of sleeping.
func TestCleanNodeWaitStepAboveTheMaximumFails(t *testing.T) {
	f := manualCleanCloud()
	env := newEnv(t, f)
	var failed provision.State
	var failedErr string
	env.RegisterDelayedCallback(func() {
		failed, failedErr = lastState(f), f.lastErr
		env.SignalWorkflow(SignalAbort, nil)
	}, time.Minute)
	env.ExecuteWorkflow(CleanNode, cleanRequest(`[{"interface":"deploy","step":"wait","args":{"seconds":600}}]`, true))
	if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
		t.Fatalf("workflow did not complete cleanly: %v", env.GetWorkflowError())
	}
	if failed != provision.CleanFailed || !strings.Contains(failedErr, "exceeds the maximum of 30 seconds") {
		t.Fatalf("after the refused wait: %s with %q", failed, failedErr)
	}
}

// A reserved step with an argument it does not declare is refused with
// the plan, as any step's.
func TestFlowStepsDeclareTheirArguments(t *testing.T) {
	user, err := ParseUserSteps(json.RawMessage(`[{"interface":"deploy","step":"hold","args":{"x":1}},{"interface":"deploy","step":"wait","args":{"seconds":3}}]`))
	if err != nil {
		t.Fatal(err)
	}
	_, err = MergeSteps(PlanInput{Kind: provision.StepKindClean, Available: FlowSteps(user), User: user, Manual: true, DisableRamdisk: true})
	if err == nil || !strings.Contains(err.Error(), "clean step {'interface': 'deploy', 'step': 'hold', 'args': {'x': 1}} has these unexpected arguments: x") ||
		strings.Contains(err.Error(), "'wait'") {
		t.Fatalf("plan error: %v", err)
	}
}

// Ironic's state machine for unhold and for abort in the hold states.
func TestHoldStateTransitions(t *testing.T) {
	for _, c := range []struct {
		from      provision.State
		verb      provision.Verb
		next      provision.State
		operation provision.Operation
	}{
		{provision.CleanHold, provision.VerbUnhold, provision.CleanWait, provision.OpUnhold},
		{provision.ServiceHold, provision.VerbUnhold, provision.ServiceWait, provision.OpUnhold},
		{provision.DeployHold, provision.VerbUnhold, provision.DeployWait, provision.OpUnhold},
		{provision.CleanHold, provision.VerbAbort, provision.CleanHold, provision.OpAbort},
		{provision.ServiceHold, provision.VerbAbort, provision.ServiceHold, provision.OpAbort},
		{provision.DeployHold, provision.VerbAbort, provision.DeployHold, provision.OpAbort},
	} {
		tr, ok := provision.Accept(c.from, c.verb)
		if !ok || tr.Next != c.next || tr.Operation != c.operation {
			t.Errorf("%s in %s: %+v %v", c.verb, c.from, tr, ok)
		}
	}
	if _, ok := provision.Accept(provision.CleanWait, provision.VerbUnhold); ok {
		t.Error("unhold accepted in clean wait")
	}
}

// Two hold steps: an unhold sent twice for the first (before the
// workflow recorded the second hold) does not release the second; a
// later unhold does.
func TestCleanNodeSecondHoldIgnoresAStaleUnhold(t *testing.T) {
	f := manualCleanCloud()
	env := newEnv(t, f)
	var afterStale provision.State
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(SignalUnhold, nil)
		env.SignalWorkflow(SignalUnhold, nil)
	}, 10*time.Minute)
	env.RegisterDelayedCallback(holdAt(f, func() { env.SignalWorkflow(SignalUnhold, nil) }, &afterStale), 20*time.Minute)
	env.ExecuteWorkflow(CleanNode, cleanRequest(`[{"interface":"deploy","step":"hold"},{"interface":"deploy","step":"hold"},{"interface":"bios","step":"factory_reset"}]`, true))
	if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
		t.Fatalf("workflow did not complete cleanly: %v", env.GetWorkflowError())
	}
	if afterStale != provision.CleanHold || lastState(f) != provision.Manageable {
		t.Fatalf("after the double unhold: %s (want clean hold); ended in %s", afterStale, lastState(f))
	}
}
