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

	"github.com/ironflow/ironflow/provision"
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
	f.node.ProvisionState, f.node.RescueInterface = provision.Active, "agent"
	f.node.Policy.RescueCallbackTimeout = 10 * time.Minute
	return env
}

func rescueRequest(from provision.State, verb provision.Verb) provision.Request {
	return decided(provision.Request{NodeUUID: "1be26c0b-03f2-4d2e-ae87-c02d7f33c123", Verb: verb, FromState: from})
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
	env.ExecuteWorkflow(RescueNode, rescueRequest(provision.Active, provision.VerbRescue))
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
	env.ExecuteWorkflow(RescueNode, rescueRequest(provision.Active, provision.VerbRescue))
	if env.GetWorkflowError() != nil {
		t.Fatal(env.GetWorkflowError())
	}
	// After the operator wait: boot removed, power off, no password kept.
	f.requireTimedOut(t, provision.RescueFailed, "Timeout reached while waiting for rescue ramdisk callback", "10m0s",
		"ForgetRescuePassword\nCleanBoot\nSetPower power off\nRecordState rescue failed")
}

func TestAbortInRescueWaitEndsInRescueFailed(t *testing.T) {
	f := newFakeCloud()
	env := newRescueEnv(t, f)
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(SignalAbort, nil) }, 3*time.Minute)
	env.ExecuteWorkflow(RescueNode, rescueRequest(provision.Active, provision.VerbRescue))
	if env.GetWorkflowError() != nil {
		t.Fatal(env.GetWorkflowError())
	}
	if last := f.states[len(f.states)-1]; last != provision.RescueFailed {
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
	env.ExecuteWorkflow(RescueNode, rescueRequest(provision.Active, provision.VerbRescue))
	if env.GetWorkflowError() != nil {
		t.Fatal(env.GetWorkflowError())
	}
	if !strings.Contains(during, "Rescue failed at step finalize rescue") || !strings.Contains(during, "no space left") {
		t.Fatalf("last_error while failed: %q", during)
	}
	if last := f.states[len(f.states)-1]; last != provision.Rescue {
		t.Fatalf("after retry: %q, want rescue (%v)", last, f.states)
	}
}

func TestUnrescueNodeBootsTheInstanceFromDisk(t *testing.T) {
	f := newFakeCloud()
	env := newRescueEnv(t, f)
	f.node.ProvisionState = provision.Rescue
	env.ExecuteWorkflow(UnrescueNode, rescueRequest(provision.Rescue, provision.VerbUnrescue))
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
	env.ExecuteWorkflow(UnrescueNode, rescueRequest(provision.RescueFailed, provision.VerbUnrescue))
	if env.GetWorkflowError() != nil {
		t.Fatal(env.GetWorkflowError())
	}
	calls := strings.Join(f.callList(), "\n")
	if !strings.Contains(calls, "CleanBoot\nPrepareBoot ramdisk\nSetBootDevice pxe\nSetPower rebooting") || f.states[len(f.states)-1] != provision.Active {
		t.Fatalf("unrescue of a ramdisk deploy:\n%s", calls)
	}
}

func TestUnrescueFailureRecordsUnrescueFailed(t *testing.T) {
	f := newFakeCloud()
	env := newRescueEnv(t, f)
	f.failures["SetBootDevice disk"] = []error{temporal.NewNonRetryableApplicationError("BMC refused", ErrTypeBMCUnsupported, nil)}
	env.ExecuteWorkflow(UnrescueNode, rescueRequest(provision.Rescue, provision.VerbUnrescue))
	if env.GetWorkflowError() != nil {
		t.Fatal(env.GetWorkflowError())
	}
	if !containsState(f.states, provision.UnrescueFailed) || f.states[len(f.states)-1] != provision.UnrescueFailed {
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
		wf   func(workflow.Context, provision.Request) error
		req  provision.Request
		want []string
	}{
		{RescueNode, rescueRequest(provision.Active, provision.VerbRescue), []string{"RecordState rescuing", "ForgetRescuePassword", "RecordState rescue"}},
		{UnrescueNode, rescueRequest(provision.Rescue, provision.VerbUnrescue), []string{"RecordState unrescuing", "ForgetRescuePassword", "RecordState active"}},
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
		state provision.State
		verb  provision.Verb
		next  provision.State
		ok    bool
	}{
		{provision.Active, provision.VerbRescue, provision.Rescuing, true},
		{provision.Rescue, provision.VerbRescue, provision.Rescuing, true},
		{provision.RescueFailed, provision.VerbRescue, provision.Rescuing, true},
		{provision.UnrescueFailed, provision.VerbRescue, provision.Rescuing, true},
		{provision.Rescue, provision.VerbUnrescue, provision.Unrescuing, true},
		{provision.RescueFailed, provision.VerbUnrescue, provision.Unrescuing, true},
		{provision.UnrescueFailed, provision.VerbUnrescue, provision.Unrescuing, true},
		{provision.RescueWait, provision.VerbAbort, provision.RescueWait, true},
		{provision.Rescue, provision.VerbDeleted, provision.Deleting, true},
		{provision.Available, provision.VerbRescue, "", false},
		{provision.Active, provision.VerbUnrescue, "", false},
		{provision.RescueWait, provision.VerbRescue, "", false},
		{provision.Rescuing, provision.VerbAbort, "", false},
	} {
		tr, ok := provision.Accept(c.state, c.verb)
		if ok != c.ok || tr.Next != c.next {
			t.Errorf("Accept(%q, %q) = %+v, %v; want next %q, %v", c.state, c.verb, tr, ok, c.next, c.ok)
		}
		if ok && c.verb == provision.VerbRescue && tr.Target != provision.Rescue || ok && c.verb == provision.VerbUnrescue && tr.Target != provision.Active {
			t.Errorf("Accept(%q, %q): target %q", c.state, c.verb, tr.Target)
		}
	}
}
