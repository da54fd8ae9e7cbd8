package workflows

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"
)

// newRescueEnv is newEnv with the rescue workflows and their activities on
// a deployed node whose rescue interface is agent.
func newRescueEnv(t *testing.T, f *fakeCloud) *testsuite.TestWorkflowEnvironment {
	t.Helper()
	env := newEnv(t, f)
	env.RegisterWorkflow(RescueNode)
	env.RegisterWorkflow(UnrescueNode)
	env.RegisterActivityWithOptions(func(ctx context.Context, in AgentInput) error {
		return f.log("FinalizeRescue @" + in.CallbackURL)
	}, activity.RegisterOptions{Name: ActFinalizeRescue})
	env.RegisterActivityWithOptions(func(ctx context.Context, uuid string) error {
		return f.log("ForgetRescuePassword")
	}, activity.RegisterOptions{Name: ActForgetRescuePassword})
	f.node.ProvisionState, f.node.RescueInterface = Active, "agent"
	f.node.Policy.RescueCallbackTimeout = 10 * time.Minute
	return env
}

func rescueRequest(from State, verb Verb) ProvisionRequest {
	return ProvisionRequest{NodeUUID: "1be26c0b-03f2-4d2e-ae87-c02d7f33c123", Verb: string(verb), FromState: string(from)}
}

func assertCalls(t *testing.T, f *fakeCloud, want []string) {
	t.Helper()
	if got := f.callList(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("calls:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestRescueNodeBootsTheAgentAndFinalizesTheRescue(t *testing.T) {
	f := newFakeCloud()
	env := newRescueEnv(t, f)
	heartbeatAfter(env, 2*time.Minute)
	env.ExecuteWorkflow(RescueNode, rescueRequest(Active, VerbRescue))
	if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
		t.Fatalf("workflow did not complete cleanly: %v", env.GetWorkflowError())
	}
	assertCalls(t, f, []string{
		"RecordState rescuing",
		"SetPower power off", "PrepareBoot rescue", "SetBootDevice pxe", "SetPower rebooting",
		"RecordState rescue wait",
		"RecordState rescuing",
		"FinalizeRescue @" + agentURL,
		"CleanBoot",
		"ForgetRescuePassword",
		"RecordState rescue",
	})
}

func TestRescueWaitTimesOutAfterTheRescueCallbackTimeout(t *testing.T) {
	f := newFakeCloud()
	env := newRescueEnv(t, f)
	env.ExecuteWorkflow(RescueNode, rescueRequest(Active, VerbRescue))
	if env.GetWorkflowError() != nil {
		t.Fatal(env.GetWorkflowError())
	}
	if last := f.states[len(f.states)-1]; last != RescueFailed {
		t.Fatalf("final state %q, want rescue failed (%v)", last, f.states)
	}
	if !strings.Contains(f.lastErr, "Timeout reached while waiting for rescue ramdisk callback") || !strings.Contains(f.lastErr, "10m0s") {
		t.Fatalf("last_error %q does not name the rescue callback timeout", f.lastErr)
	}
	// After the operator wait: boot removed, power off, no password kept.
	calls := strings.Join(f.callList(), "\n")
	if !strings.Contains(calls, "ForgetRescuePassword\nCleanBoot\nSetPower power off\nRecordState rescue failed") {
		t.Fatalf("a failed rescue did not clean up:\n%s", calls)
	}
}

func TestAbortInRescueWaitEndsInRescueFailed(t *testing.T) {
	f := newFakeCloud()
	env := newRescueEnv(t, f)
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(SignalAbort, nil) }, 3*time.Minute)
	env.ExecuteWorkflow(RescueNode, rescueRequest(Active, VerbRescue))
	if env.GetWorkflowError() != nil {
		t.Fatal(env.GetWorkflowError())
	}
	if last := f.states[len(f.states)-1]; last != RescueFailed {
		t.Fatalf("final state %q, want rescue failed (%v)", last, f.states)
	}
	if !strings.Contains(f.lastErr, "aborted by operator") || !strings.Contains(f.lastErr, "wait for agent") {
		t.Fatalf("last_error %q", f.lastErr)
	}
	if calls := strings.Join(f.callList(), "\n"); !strings.HasSuffix(calls, "RecordState rescue wait\nForgetRescuePassword\nCleanBoot\nSetPower power off\nRecordState rescue failed") {
		t.Fatalf("abort in rescue wait:\n%s", calls)
	}
}

func TestFinalizeRescueFailureRecordsRescueFailedWithTheCause(t *testing.T) {
	f := newFakeCloud()
	env := newRescueEnv(t, f)
	heartbeatAfter(env, time.Minute)
	f.failures["FinalizeRescue @"+agentURL] = []error{temporal.NewNonRetryableApplicationError("agent command failed: no space left", ErrTypeAgentStepFailed, nil)}
	var during string
	env.RegisterDelayedCallback(func() {
		f.mu.Lock()
		during = f.lastErr
		f.mu.Unlock()
		env.SignalWorkflow(SignalRetry, nil)
	}, 10*time.Minute)
	env.ExecuteWorkflow(RescueNode, rescueRequest(Active, VerbRescue))
	if env.GetWorkflowError() != nil {
		t.Fatal(env.GetWorkflowError())
	}
	if !strings.Contains(during, "Rescue failed at step finalize rescue") || !strings.Contains(during, "no space left") {
		t.Fatalf("last_error while failed: %q", during)
	}
	if last := f.states[len(f.states)-1]; last != Rescue {
		t.Fatalf("after retry: %q, want rescue (%v)", last, f.states)
	}
}

func TestUnrescueNodeBootsTheInstanceFromDisk(t *testing.T) {
	f := newFakeCloud()
	env := newRescueEnv(t, f)
	f.node.ProvisionState = Rescue
	env.ExecuteWorkflow(UnrescueNode, rescueRequest(Rescue, VerbUnrescue))
	if env.GetWorkflowError() != nil {
		t.Fatal(env.GetWorkflowError())
	}
	assertCalls(t, f, []string{
		"RecordState unrescuing",
		"SetPower power off", "CleanBoot", "SetBootDevice disk", "SetPower power on",
		"ForgetRescuePassword",
		"RecordState active",
	})
}

func TestUnrescueOfARamdiskDeployBootsItsRamdiskAgain(t *testing.T) {
	f := newFakeCloud()
	env := newRescueEnv(t, f)
	f.node.DeployInterface = "ramdisk"
	env.ExecuteWorkflow(UnrescueNode, rescueRequest(RescueFailed, VerbUnrescue))
	if env.GetWorkflowError() != nil {
		t.Fatal(env.GetWorkflowError())
	}
	calls := strings.Join(f.callList(), "\n")
	if !strings.Contains(calls, "CleanBoot\nPrepareBoot ramdisk\nSetBootDevice pxe\nSetPower rebooting") || f.states[len(f.states)-1] != Active {
		t.Fatalf("unrescue of a ramdisk deploy:\n%s", calls)
	}
}

func TestUnrescueFailureRecordsUnrescueFailed(t *testing.T) {
	f := newFakeCloud()
	env := newRescueEnv(t, f)
	f.failures["SetBootDevice disk"] = []error{temporal.NewNonRetryableApplicationError("BMC refused", ErrTypeBMCUnsupported, nil)}
	env.ExecuteWorkflow(UnrescueNode, rescueRequest(Rescue, VerbUnrescue))
	if env.GetWorkflowError() != nil {
		t.Fatal(env.GetWorkflowError())
	}
	if !containsState(f.states, UnrescueFailed) || f.states[len(f.states)-1] != UnrescueFailed {
		t.Fatalf("states %v, want unrescue failed", f.states)
	}
	if !strings.Contains(f.lastErr, "Unrescue") || !strings.Contains(f.lastErr, "boot instance") {
		t.Fatalf("last_error %q", f.lastErr)
	}
}

// fake-hardware's fake rescue interface rescues and unrescues at once, as
// Ironic's does: nothing is powered or booted.
func TestFakeRescueInterfaceRescuesAtOnce(t *testing.T) {
	for _, c := range []struct {
		wf   func(workflow.Context, ProvisionRequest) error
		req  ProvisionRequest
		want []string
	}{
		{RescueNode, rescueRequest(Active, VerbRescue), []string{"RecordState rescuing", "ForgetRescuePassword", "RecordState rescue"}},
		{UnrescueNode, rescueRequest(Rescue, VerbUnrescue), []string{"RecordState unrescuing", "ForgetRescuePassword", "RecordState active"}},
	} {
		f := newFakeCloud()
		env := newRescueEnv(t, f)
		f.node.RescueInterface = "fake"
		env.ExecuteWorkflow(c.wf, c.req)
		if env.GetWorkflowError() != nil {
			t.Fatal(env.GetWorkflowError())
		}
		assertCalls(t, f, c.want)
	}
}

func TestAcceptRescueVerbsFollowIronicStateMachine(t *testing.T) {
	for _, c := range []struct {
		state State
		verb  Verb
		next  State
		ok    bool
	}{
		{Active, VerbRescue, Rescuing, true},
		{Rescue, VerbRescue, Rescuing, true},
		{RescueFailed, VerbRescue, Rescuing, true},
		{UnrescueFailed, VerbRescue, Rescuing, true},
		{Rescue, VerbUnrescue, Unrescuing, true},
		{RescueFailed, VerbUnrescue, Unrescuing, true},
		{UnrescueFailed, VerbUnrescue, Unrescuing, true},
		{RescueWait, VerbAbort, RescueWait, true},
		{Rescue, VerbDeleted, Deleting, true},
		{Available, VerbRescue, "", false},
		{Active, VerbUnrescue, "", false},
		{RescueWait, VerbRescue, "", false},
		{Rescuing, VerbAbort, "", false},
	} {
		tr, ok := Accept(string(c.state), string(c.verb))
		if ok != c.ok || State(tr.Next) != c.next {
			t.Errorf("Accept(%q, %q) = %+v, %v; want next %q, %v", c.state, c.verb, tr, ok, c.next, c.ok)
		}
		if ok && c.verb == VerbRescue && tr.Target != string(Rescue) || ok && c.verb == VerbUnrescue && tr.Target != string(Active) {
			t.Errorf("Accept(%q, %q): target %q", c.state, c.verb, tr.Target)
		}
	}
}
