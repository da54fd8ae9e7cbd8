package workflows

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/ironflow/ironflow/provision"
)

var agentServiceSteps = []provision.Step{
	{StepID: provision.StepID{Interface: "deploy", Step: "erase_pstore"}, Abortable: true},
	{StepID: provision.StepID{Interface: "deploy", Step: "burnin_cpu"}, Abortable: true},
}

func serviceRequest(steps string) provision.Request {
	return decided(provision.Request{NodeUUID: deployRequest().NodeUUID, Verb: provision.VerbService, FromState: provision.Active,
		ServiceSteps: json.RawMessage(steps)})
}

func serviceCloud() (*fakeCloud, func(t *testing.T) *testsuite.TestWorkflowEnvironment) {
	f := newFakeCloud()
	f.node.ProvisionState = provision.Active
	f.agentSteps = agentServiceSteps
	return f, func(t *testing.T) *testsuite.TestWorkflowEnvironment {
		env := newEnv(t, f)
		env.RegisterWorkflow(ServiceNode)
		return env
	}
}

func lastState(f *fakeCloud) provision.State { return f.states[len(f.states)-1] }

// Servicing boots the agent on the active node, runs the agent's service
// step in service wait, and boots the instance again from disk: active.
func TestServiceNodeRunsTheStepsAndBootsTheInstanceAgain(t *testing.T) {
	f, newServiceEnv := serviceCloud()
	env := newServiceEnv(t)
	heartbeatAfter(env, time.Minute)
	env.ExecuteWorkflow(ServiceNode, serviceRequest(`[{"interface":"deploy","step":"erase_pstore"}]`))
	if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
		t.Fatalf("workflow did not complete cleanly: %v", env.GetWorkflowError())
	}
	want := []string{
		"RecordState servicing", "PrepareBoot agent", "SetBootDevice pxe", "SetPower rebooting", "RecordState service wait",
		"RecordState servicing", "GetAgentSteps service", "RecordState service wait",
		"RunAgentStep deploy.erase_pstore @" + agentURL, "RecordState servicing",
		"AgentPowerOff", "SetPower power off", "CleanBoot", "SetBootDevice disk", "SetPower power on", "RecordState active",
	}
	if got := f.callList(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("calls:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if len(f.plans) != 3 || f.plans[0].Kind != provision.StepKindService || names(f.plans[0].Steps) != "deploy.erase_pstore" ||
		*f.plans[1].Index != 0 || !f.plans[2].Clear {
		t.Fatalf("driver_internal_info records: %+v", f.plans)
	}
}

func failFirstPstore(f *fakeCloud) *int {
	runs := 0
	f.agentStep = func(ctx context.Context, in AgentStepInput) (AgentStepResult, error) {
		runs++
		if in.Kind != provision.StepKindService {
			return AgentStepResult{}, temporal.NewNonRetryableApplicationError("wrong kind "+string(in.Kind), ErrTypeAgentStepFailed, nil)
		}
		if runs == 1 {
			return AgentStepResult{}, temporal.NewNonRetryableApplicationError("agent command failed: pstore busy", ErrTypeAgentStepFailed, nil)
		}
		return AgentStepResult{Status: "SUCCEEDED"}, nil
	}
	return &runs
}

// A failed step waits in service failed with a last_error naming it;
// retry runs it again and servicing ends active.
func TestServiceNodeFailedStepThenRetry(t *testing.T) {
	f, newServiceEnv := serviceCloud()
	runs := failFirstPstore(f)
	env := newServiceEnv(t)
	heartbeatAfter(env, time.Minute)
	var failed provision.State
	var failedErr string
	env.RegisterDelayedCallback(func() {
		failed, failedErr = lastState(f), f.lastErr
		env.SignalWorkflow(SignalRetry, nil)
	}, 10*time.Minute)
	env.ExecuteWorkflow(ServiceNode, serviceRequest(`[{"interface":"deploy","step":"erase_pstore"}]`))
	if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
		t.Fatalf("workflow did not complete cleanly: %v", env.GetWorkflowError())
	}
	if failed != provision.ServiceFailed || !strings.Contains(failedErr, "Service failed at step deploy.erase_pstore") || !strings.Contains(failedErr, "pstore busy") {
		t.Fatalf("while failed: %s with %q", failed, failedErr)
	}
	if lastState(f) != provision.Active || *runs != 2 {
		t.Fatalf("ended in %s after %d runs, want active after 2", lastState(f), *runs)
	}
}

// Abort in service failed is Ironic's service failed --abort--> active:
// the agent's boot goes and the instance boots again.
func TestServiceNodeAbortInServiceFailedReturnsToActive(t *testing.T) {
	f, newServiceEnv := serviceCloud()
	failFirstPstore(f)
	env := newServiceEnv(t)
	heartbeatAfter(env, time.Minute)
	var failed provision.State
	env.RegisterDelayedCallback(func() {
		failed = lastState(f)
		env.SignalWorkflow(SignalAbort, nil)
	}, 10*time.Minute)
	env.ExecuteWorkflow(ServiceNode, serviceRequest(`[{"interface":"deploy","step":"erase_pstore"}]`))
	if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
		t.Fatalf("workflow did not complete cleanly: %v", env.GetWorkflowError())
	}
	calls := strings.Join(f.callList(), "\n")
	if failed != provision.ServiceFailed || lastState(f) != provision.Active ||
		!strings.HasSuffix(calls, "CleanBoot\nSetBootDevice disk\nSetPower power on\nRecordState active") {
		t.Fatalf("failed state %s, ended in %s; calls:\n%s", failed, lastState(f), calls)
	}
}

// Abort in service wait is Ironic's service wait --abort--> service failed.
func TestServiceNodeAbortInServiceWait(t *testing.T) {
	f, newServiceEnv := serviceCloud()
	f.agentStep = func(ctx context.Context, in AgentStepInput) (AgentStepResult, error) {
		<-ctx.Done()
		return AgentStepResult{}, temporal.NewCanceledError()
	}
	env := newServiceEnv(t)
	heartbeatAfter(env, time.Minute)
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(SignalAbort, nil) }, time.Minute+200*time.Millisecond)
	env.ExecuteWorkflow(ServiceNode, serviceRequest(`[{"interface":"deploy","step":"burnin_cpu"}]`))
	if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
		t.Fatalf("workflow did not complete cleanly: %v", env.GetWorkflowError())
	}
	want := `By request, the service operation was aborted on step "deploy.burnin_cpu"`
	if lastState(f) != provision.ServiceFailed || f.lastErr != want {
		t.Fatalf("ended in %s with %q, want service failed with %q", lastState(f), f.lastErr, want)
	}
}

// Ironic's state machine for the service verb.
func TestServiceVerbTransitions(t *testing.T) {
	for _, from := range []provision.State{provision.Active, provision.ServiceFailed} {
		if tr, ok := provision.Accept(from, "service"); !ok || tr.Operation != provision.OpService || tr.Next != provision.Servicing || tr.Target != provision.Active {
			t.Fatalf("service from %s: %+v %v", from, tr, ok)
		}
	}
	for _, from := range []provision.State{provision.Available, provision.Manageable, provision.DeployFailed, provision.Servicing} {
		if _, ok := provision.Accept(from, "service"); ok {
			t.Fatalf("service accepted from %s", from)
		}
	}
	for _, from := range []provision.State{provision.ServiceWait, provision.ServiceFailed} {
		if tr, ok := provision.Accept(from, "abort"); !ok || tr.Operation != provision.OpAbort {
			t.Fatalf("abort from %s: %+v %v", from, tr, ok)
		}
	}
	if tr, ok := provision.Accept(provision.ServiceFailed, "rescue"); !ok || tr.Operation != provision.OpRescue {
		t.Fatalf("rescue from service failed: %+v %v", tr, ok)
	}
}
