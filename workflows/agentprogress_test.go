package workflows

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/ironflow/ironflow/provision"
)

// burninSteps are agent clean steps whose burn-in takes a checkpoint, as
// the agent's argsinfo declares (agent/stepargs.go).
var burninSteps = []provision.Step{
	{StepID: provision.StepID{Interface: "deploy", Step: "burnin_cpu"}, Abortable: true,
		ArgsInfo: map[string]provision.ArgInfo{"timeout": {Description: "seconds"}, "checkpoint": {Description: "resume"}}},
	{StepID: provision.StepID{Interface: "deploy", Step: "burnin_disk"}, Abortable: true,
		ArgsInfo: map[string]provision.ArgInfo{"runtime": {Description: "seconds"}}},
}

func lostAfter(elapsed float64, checkpoint string) error {
	return temporal.NewNonRetryableApplicationError("burnin_cpu: the agent no longer knows command c1 (the machine rebooted)",
		ErrTypeAgentCommandLost, nil, AgentCommandLost{CommandID: "c1", Progress: &StepProgress{
			Stage: "burnin_cpu: 2 CPUs", Fraction: elapsed / 60, ElapsedSeconds: elapsed, Checkpoint: json.RawMessage(checkpoint)}})
}

func (f *fakeCloud) eventList() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return strings.Join(f.events, "\n")
}

// The machine reboots under a burn-in (the fresh agent does not know the
// command): the workflow runs the same step again with the last checkpoint
// as its "checkpoint" argument, the user's arguments kept, says so in the
// history, and records the step's result when it finishes.
func TestCleanNodeResumesABurninFromItsCheckpointAfterAReboot(t *testing.T) {
	f := manualCleanCloud()
	f.agentSteps = burninSteps
	const cp = `{"elapsed_seconds":21.5,"errors":0,"ops":1234,"step":"burnin_cpu"}`
	var args []map[string]any
	f.agentStep = func(ctx context.Context, in AgentStepInput) (AgentStepResult, error) {
		var a map[string]any
		_ = json.Unmarshal(in.Step.Args, &a)
		args = append(args, a)
		if len(args) == 1 {
			return AgentStepResult{}, lostAfter(21.5, cp)
		}
		return AgentStepResult{Status: "SUCCEEDED", Result: `{"clean_result":{"cpus":2,"errors":0,"ops":2900,"seconds":60},` +
			`"clean_step":{"interface":"deploy","step":"burnin_cpu","args":{"timeout":60,"checkpoint":` + cp + `}}}`}, nil
	}
	env := newEnv(t, f)
	heartbeatAfter(env, time.Minute)
	env.ExecuteWorkflow(CleanNode, cleanRequest(`[{"interface":"deploy","step":"burnin_cpu","args":{"timeout":60}}]`, false))
	if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
		t.Fatalf("workflow did not complete cleanly: %v", env.GetWorkflowError())
	}
	if got := f.states[len(f.states)-1]; got != provision.Manageable {
		t.Fatalf("ended in %s (%s), want manageable", got, f.lastErr)
	}
	if len(args) != 2 {
		t.Fatalf("the step ran %d times, want 2 (once, then resumed)", len(args))
	}
	if _, ok := args[0]["checkpoint"]; ok || args[0]["timeout"] != 60.0 {
		t.Fatalf("first run's args %v", args[0])
	}
	got, _ := json.Marshal(args[1]["checkpoint"])
	if string(got) != cp || args[1]["timeout"] != 60.0 {
		t.Fatalf("resumed run's args %v, want timeout 60 and checkpoint %s", args[1], cp)
	}
	events := f.eventList()
	for _, want := range []string{
		"The agent lost step deploy.burnin_cpu (the machine rebooted): running it again from its checkpoint (22s done)",
		`Step deploy.burnin_cpu finished: {"cpus":2,"errors":0,"ops":2900,"seconds":60}`,
	} {
		if !strings.Contains(events, want) {
			t.Fatalf("history lacks %q:\n%s", want, events)
		}
	}
	if strings.Contains(events, `"clean_step"`) {
		t.Fatalf("history quotes the step's arguments:\n%s", events)
	}
	calls := strings.Join(f.callList(), "\n")
	if strings.Count(calls, "RunAgentStep deploy.burnin_cpu") != 2 || strings.Count(calls, "PrepareBoot") != 1 {
		t.Fatalf("calls:\n%s", calls)
	}
}

// A step that keeps its checkpoint itself (burnin_disk, on its disks: no
// "checkpoint" in its argsinfo) runs again with its arguments unchanged.
func TestCleanNodeRerunsAStepThatKeepsItsOwnCheckpoint(t *testing.T) {
	f := manualCleanCloud()
	f.agentSteps = burninSteps
	var runs []string
	f.agentStep = func(ctx context.Context, in AgentStepInput) (AgentStepResult, error) {
		runs = append(runs, string(in.Step.Args))
		if len(runs) == 1 {
			return AgentStepResult{}, lostAfter(12, `{"step":"burnin_disk","elapsed_seconds":12}`)
		}
		return AgentStepResult{Status: "SUCCEEDED"}, nil
	}
	env := newEnv(t, f)
	heartbeatAfter(env, time.Minute)
	env.ExecuteWorkflow(CleanNode, cleanRequest(`[{"interface":"deploy","step":"burnin_disk","args":{"runtime":30}}]`, false))
	if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
		t.Fatalf("workflow did not complete cleanly: %v", env.GetWorkflowError())
	}
	if len(runs) != 2 || runs[0] != runs[1] || f.states[len(f.states)-1] != provision.Manageable {
		t.Fatalf("runs %q, ended in %s", runs, f.states[len(f.states)-1])
	}
	if !strings.Contains(f.eventList(), "running it again from its checkpoint (12s done, kept by the step)") {
		t.Fatalf("history:\n%s", f.eventList())
	}
}

// A machine that keeps rebooting under the step fails it after
// maxStepResumes re-runs, with the agent's words, instead of looping.
func TestCleanNodeFailsAStepTheMachineKeepsRebootingUnder(t *testing.T) {
	f := manualCleanCloud()
	f.agentSteps = burninSteps
	var runs int
	f.agentStep = func(ctx context.Context, in AgentStepInput) (AgentStepResult, error) {
		runs++
		return AgentStepResult{}, lostAfter(float64(runs), `{"step":"burnin_cpu"}`)
	}
	env := newEnv(t, f)
	heartbeatAfter(env, time.Minute)
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(SignalAbort, nil) }, 2*time.Hour)
	env.ExecuteWorkflow(CleanNode, cleanRequest(`[{"interface":"deploy","step":"burnin_cpu","args":{"timeout":60}}]`, false))
	if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
		t.Fatalf("workflow did not complete cleanly: %v", env.GetWorkflowError())
	}
	if runs != 1+maxStepResumes {
		t.Fatalf("the step ran %d times, want %d", runs, 1+maxStepResumes)
	}
	if !strings.Contains(f.eventList(), "the agent no longer knows command c1") || !slicesContain(f.states, provision.CleanFailed) {
		t.Fatalf("states %v, history:\n%s", f.states, f.eventList())
	}
}

func slicesContain(states []provision.State, s provision.State) bool {
	for _, x := range states {
		if x == s {
			return true
		}
	}
	return false
}

// Servicing resumes a burn-in too, in service wait, and records its result.
func TestServiceNodeResumesABurninAfterAReboot(t *testing.T) {
	f := manualCleanCloud()
	f.node.ProvisionState = provision.Active
	f.agentSteps = burninSteps[:1]
	var runs int
	f.agentStep = func(ctx context.Context, in AgentStepInput) (AgentStepResult, error) {
		runs++
		if runs == 1 {
			return AgentStepResult{}, lostAfter(5, `{"step":"burnin_cpu","elapsed_seconds":5}`)
		}
		if !strings.Contains(string(in.Step.Args), `"checkpoint":{"step":"burnin_cpu","elapsed_seconds":5}`) {
			t.Errorf("resumed with args %s", in.Step.Args)
		}
		return AgentStepResult{Status: "SUCCEEDED", Result: `{"service_result":{"ops":7},"service_step":{}}`}, nil
	}
	env := newEnv(t, f)
	env.RegisterWorkflow(ServiceNode)
	heartbeatAfter(env, time.Minute)
	env.ExecuteWorkflow(ServiceNode, decided(provision.Request{NodeUUID: f.node.UUID, Verb: provision.VerbService, FromState: provision.Active,
		ServiceSteps: json.RawMessage(`[{"interface":"deploy","step":"burnin_cpu","args":{"timeout":10}}]`)}))
	if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
		t.Fatalf("workflow did not complete cleanly: %v", env.GetWorkflowError())
	}
	if runs != 2 || f.states[len(f.states)-1] != provision.Active {
		t.Fatalf("runs %d, ended in %s (%s)", runs, f.states[len(f.states)-1], f.lastErr)
	}
	if !strings.Contains(f.eventList(), `Step deploy.burnin_cpu finished: {"ops":7}`) {
		t.Fatalf("history:\n%s", f.eventList())
	}
}

// A history event quotes the step's own result, bounded, never its
// arguments; nothing when the agent reported none.
func TestStepFinishedQuotesTheResultOnly(t *testing.T) {
	s := provision.Step{StepID: provision.StepID{Interface: "deploy", Step: "erase_devices"}}
	if got := stepFinished(s, provision.StepKindClean, ""); got != "Step deploy.erase_devices finished" {
		t.Fatal(got)
	}
	if got := stepFinished(s, provision.StepKindClean, `{"clean_result":null,"clean_step":{"args":{"secret":"x"}}}`); got != "Step deploy.erase_devices finished" {
		t.Fatal(got)
	}
	long := `{"clean_result":"` + strings.Repeat("a", 3*maxResultInHistory) + `"}`
	if got := stepFinished(s, provision.StepKindClean, long); len(got) > maxResultInHistory+64 || !strings.HasSuffix(got, "…") {
		t.Fatalf("%d bytes: %.80s", len(got), got)
	}
}
