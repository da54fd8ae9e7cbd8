package workflows

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/ironflow/ironflow/provision"
)

// inBandDeploy is an agent deploy step with a priority of its own (as
// IPA's hardware managers offer them), between write_image (80) and
// prepare_instance_boot (60).
var inBandDeploy = provision.Step{StepID: provision.StepID{Interface: "deploy", Step: "apply_firmware_settings"}, Priority: 70,
	ArgsInfo: map[string]provision.ArgInfo{"profile": {Description: "the settings profile", Required: true}}}

// agentDeploySteps are the agent's deploy steps with inBandDeploy.
func agentDeploySteps() []provision.Step {
	return []provision.Step{{StepID: provision.StepWriteImage, Priority: 80, ArgsInfo: map[string]provision.ArgInfo{"image_info": {}, "configdrive": {}}},
		{StepID: provision.StepEraseDevicesMetadata}, inBandDeploy}
}

// runDeploy runs DeployNode with user deploy_steps (JSON, "" for none)
// and the agent's steps agent (nil: the fake's default).
func runDeploy(t *testing.T, user string, agent []provision.Step) *fakeCloud {
	t.Helper()
	f := newFakeCloud()
	f.agentSteps = agent
	env := newEnv(t, f)
	heartbeatAfter(env, 2*time.Minute)
	req := deployRequest()
	if user != "" {
		req.DeploySteps = json.RawMessage(user)
	}
	env.ExecuteWorkflow(DeployNode, req)
	if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
		t.Fatalf("workflow did not complete cleanly: %v", env.GetWorkflowError())
	}
	return f
}

// agentStepsRun are the RunAgentStep calls, interface.step each.
func (f *fakeCloud) agentStepsRun() []string {
	var out []string
	for _, c := range f.callList() {
		if strings.HasPrefix(c, "RunAgentStep ") {
			out = append(out, strings.Fields(c)[1])
		}
	}
	return out
}

func requireActive(t *testing.T, f *fakeCloud) {
	t.Helper()
	if last := f.states[len(f.states)-1]; last != provision.Active {
		t.Fatalf("final state %q (last_error %q), want active", last, f.lastErr)
	}
}

// The direct deploy asks the agent for its deploy steps once it called
// back, before any other step; the plan and the running step's index are
// in driver_internal_info as Ironic keeps them (deploy_steps,
// deploy_step_index), removed once the node is active.
func TestDeployNodeAsksTheAgentForItsDeploySteps(t *testing.T) {
	f := runDeploy(t, "", nil)
	want := []string{
		"RecordState deploying",
		"PrepareBoot agent", "SetBootDevice pxe", "SetPower rebooting",
		"RecordState wait call-back",
		"RecordState deploying",
		"GetAgentSteps deploy",
		"RecordState deploying", // the plan, in the node's history
		"RunAgentStep deploy.write_image @" + agentURL,
		"RunAgentStep deploy.prepare_instance_boot @" + agentURL,
		"SetBootDevice disk",
		"AgentPowerOff", "SetPower power off",
		"CleanBoot", "SetPower power on",
		"RecordState active",
	}
	if got := f.callList(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("calls:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	var final *StepPlanRecord
	var indexes []int
	for i, p := range f.plans {
		if p.Kind != provision.StepKindDeploy {
			t.Fatalf("plan record of kind %q", p.Kind)
		}
		if p.Index != nil {
			indexes = append(indexes, *p.Index)
		}
		if !p.OnlyIndex && !p.Clear && p.AgentSteps != nil {
			final = &f.plans[i]
		}
	}
	if final == nil || names(final.Steps) != "deploy.deploy deploy.write_image deploy.prepare_instance_boot deploy.tear_down_agent deploy.boot_instance" {
		t.Fatalf("deploy_steps recorded after the agent's steps: %+v", final)
	}
	if got := names(final.AgentSteps); got != "deploy.write_image deploy.erase_devices_metadata" {
		t.Fatalf("agent_cached_deploy_steps %q", got)
	}
	if got, want := indexes, []int{0, 1, 2, 3, 4}; len(got) != len(want) || got[4] != 4 || got[0] != 0 {
		t.Fatalf("deploy_step_index recorded %v, want %v", got, want)
	}
	if last := f.plans[len(f.plans)-1]; !last.Clear {
		t.Fatalf("deploy_steps not cleared at the end: %+v", last)
	}
}

// While the agent's own step runs, the node's deploy_step is that step.
func TestDeployNodeAgentStepRunsAtItsPriority(t *testing.T) {
	f := newFakeCloud()
	f.agentSteps = agentDeploySteps()
	env := newEnv(t, f)
	heartbeatAfter(env, 2*time.Minute)
	req := deployRequest()
	// The agent's step needs its argument; a user step gives it without
	// touching the priority.
	req.DeploySteps = json.RawMessage(`[{"interface":"deploy","step":"apply_firmware_settings","args":{"profile":"fast"}}]`)
	env.ExecuteWorkflow(DeployNode, req)
	if env.GetWorkflowError() != nil {
		t.Fatal(env.GetWorkflowError())
	}
	requireActive(t, f)
	if got, want := strings.Join(f.agentStepsRun(), " "), "deploy.write_image deploy.apply_firmware_settings deploy.prepare_instance_boot"; got != want {
		t.Fatalf("agent steps ran %q, want %q (the agent's step at its priority 70)", got, want)
	}
	events := strings.Join(f.events, "\n")
	for _, want := range []string{
		"Deploy steps: deploy.deploy (100), deploy.write_image (80), deploy.apply_firmware_settings (70), deploy.prepare_instance_boot (60), deploy.tear_down_agent (40), deploy.boot_instance (20)",
		"Running deploy step deploy.apply_firmware_settings (priority 70) on the agent\nDeploy step deploy.apply_firmware_settings finished",
	} {
		if !strings.Contains(events, want) {
			t.Fatalf("node history lacks %q:\n%s", want, events)
		}
	}
	shown := f.deployStepsShown()
	if !strings.Contains(strings.Join(shown, "\n"), "RunAgentStep deploy.apply_firmware_settings @"+agentURL+" → deploy.apply_firmware_settings") {
		t.Fatalf("deploy_step while the agent's step ran:\n%s", strings.Join(shown, "\n"))
	}
}

// A user's priority moves a step; priority 0 disables one, the agent's as
// a built-in one.
func TestDeployNodeUserPriorityOverridesAndZeroDisables(t *testing.T) {
	agent := agentDeploySteps()
	agent[2].ArgsInfo = nil
	f := runDeploy(t, `[{"interface":"deploy","step":"erase_devices_metadata","priority":90},{"interface":"deploy","step":"apply_firmware_settings","priority":0}]`, agent)
	requireActive(t, f)
	if got, want := strings.Join(f.agentStepsRun(), " "), "deploy.erase_devices_metadata deploy.write_image deploy.prepare_instance_boot"; got != want {
		t.Fatalf("agent steps ran %q, want %q", got, want)
	}

	f = runDeploy(t, `[{"interface":"deploy","step":"apply_firmware_settings","priority":50},{"interface":"deploy","step":"tear_down_agent","priority":0}]`, agent)
	requireActive(t, f)
	if got, want := strings.Join(f.agentStepsRun(), " "), "deploy.write_image deploy.prepare_instance_boot deploy.apply_firmware_settings"; got != want {
		t.Fatalf("agent steps ran %q, want %q", got, want)
	}
	if n := countCalls(f.callList(), "AgentPowerOff"); n != 0 {
		t.Fatalf("tear_down_agent disabled by priority 0 ran anyway")
	}
}

// requireRefused checks a deploy whose plan was refused: deploy failed with
// msg as last_error, no agent step ran, the machine left with boot
// configuration removed and power off.
func requireRefused(t *testing.T, f *fakeCloud, msg string, agentAsked bool) {
	t.Helper()
	if last := f.states[len(f.states)-1]; last != provision.DeployFailed {
		t.Fatalf("final state %q, want deploy failed", last)
	}
	if f.lastErr != msg {
		t.Fatalf("last_error\n%q\nwant\n%q", f.lastErr, msg)
	}
	if ran := f.agentStepsRun(); len(ran) > 0 {
		t.Fatalf("steps ran although the plan was refused: %v", ran)
	}
	calls := strings.Join(f.callList(), "\n")
	if asked := strings.Contains(calls, "GetAgentSteps deploy"); asked != agentAsked {
		t.Fatalf("agent asked for its steps: %v, want %v:\n%s", asked, agentAsked, calls)
	}
	if !strings.HasSuffix(calls, "CleanBoot\nSetPower power off\nRecordState deploy failed") {
		t.Fatalf("a refused deploy did not clean up:\n%s", calls)
	}
}

// A step neither ironflow nor the agent offers is refused once the agent
// has reported its steps, before any of them runs, with Ironic's messages.
func TestDeployNodeUnknownStepRefusedBeforeAnyStepRuns(t *testing.T) {
	f := runDeploy(t, `[{"interface":"deploy","step":"no_such_step","priority":50}]`, agentDeploySteps())
	requireRefused(t, f, "Failed to validate the final deploy steps list for node 1be26c0b-03f2-4d2e-ae87-c02d7f33c123: "+
		"node does not support this deploy step: {'interface': 'deploy', 'step': 'no_such_step', 'priority': 50}", true)
}

// Arguments are checked against the step's argsinfo: an unexpected one, a
// missing required one; a step the ironflow agent is known to offer is
// checked before the agent boots.
func TestDeployNodeBadArgsRefused(t *testing.T) {
	f := runDeploy(t, `[{"interface":"deploy","step":"apply_firmware_settings","priority":70,"args":{"speed":1}}]`, agentDeploySteps())
	requireRefused(t, f, "Failed to validate the final deploy steps list for node 1be26c0b-03f2-4d2e-ae87-c02d7f33c123: "+
		"deploy step {'interface': 'deploy', 'step': 'apply_firmware_settings', 'args': {'speed': 1}, 'priority': 70} has these unexpected arguments: speed; "+
		"deploy step {'interface': 'deploy', 'step': 'apply_firmware_settings', 'args': {'speed': 1}, 'priority': 70} is missing these required arguments: profile (the settings profile)", true)

	f = runDeploy(t, `[{"interface":"deploy","step":"erase_devices_metadata","priority":90,"args":{"wipe":true}}]`, nil)
	requireRefused(t, f, "Failed to validate deploy or power info for node 1be26c0b-03f2-4d2e-ae87-c02d7f33c123: "+
		"deploy step {'interface': 'deploy', 'step': 'erase_devices_metadata', 'args': {'wipe': True}, 'priority': 90} has these unexpected arguments: wipe", false)
	if n := countCalls(f.callList(), "PrepareBoot agent"); n != 0 {
		t.Fatalf("the agent was booted for a plan refused before it")
	}
}

// The same step twice is refused with Ironic's message.
func TestDeployNodeDuplicateStepRefused(t *testing.T) {
	f := runDeploy(t, `[{"interface":"deploy","step":"erase_devices_metadata","priority":90},{"interface":"deploy","step":"erase_devices_metadata","priority":85}]`, nil)
	requireRefused(t, f, "Failed to validate deploy or power info for node 1be26c0b-03f2-4d2e-ae87-c02d7f33c123: "+
		"deploy steps from all deploy templates matching this node's instance traits cannot have the same interface and step. "+
		"Duplicate deploy steps for deploy.erase_devices_metadata", false)
}

// A deploy template's step (the API appends the steps of every template
// matching the instance traits to the user's, apiserver/steps_resolve.go)
// joins the plan as a user step: here the agent's erase_devices_metadata
// at the template's priority, next to the user's own override.
func TestDeployNodeTemplateStepMerged(t *testing.T) {
	user := `[{"interface":"deploy","step":"tear_down_agent","priority":45},` +
		`{"interface":"deploy","step":"erase_devices_metadata","priority":95,"args":{}}]`
	f := runDeploy(t, user, nil)
	requireActive(t, f)
	if got, want := strings.Join(f.agentStepsRun(), " "), "deploy.erase_devices_metadata deploy.write_image deploy.prepare_instance_boot"; got != want {
		t.Fatalf("agent steps ran %q, want %q", got, want)
	}
	var plan []provision.Step
	for _, p := range f.plans {
		if p.AgentSteps != nil {
			plan = p.Steps
		}
	}
	if got := names(plan); got != "deploy.deploy deploy.erase_devices_metadata deploy.write_image deploy.prepare_instance_boot deploy.tear_down_agent deploy.boot_instance" {
		t.Fatalf("deploy_steps %q", got)
	}
	if plan[1].Priority != 95 || plan[4].Priority != 45 {
		t.Fatalf("priorities not the template's and the user's: %+v", plan)
	}
}

// ironflow's built-in steps declare no argsinfo and keep taking the args a
// user gives them, passed on with the step.
func TestDeployNodeBuiltinStepTakesArgs(t *testing.T) {
	f := runDeploy(t, `[{"interface":"deploy","step":"prepare_instance_boot","priority":60,"args":{"bootloader":"grub"}}]`, nil)
	requireActive(t, f)
	var plan []provision.Step
	for _, p := range f.plans {
		if p.AgentSteps != nil {
			plan = p.Steps
		}
	}
	if len(plan) != 5 || plan[2].StepID != provision.StepPrepareInstanceBoot || string(plan[2].Args) != `{"bootloader":"grub"}` {
		t.Fatalf("deploy_steps %+v", plan)
	}
}

// An agent deploy writes its step plan with the writes next to it: the
// plan before the agent boots with its first index, the agent's plan with
// the state that announces it and the next index, the clearing with active;
// the indexes of the last three of the five steps go with each step's first
// activity. One RecordStepPlan write of its own is left: the index of
// deploy.write_image, which no write of its own precedes.
func TestAgentDeployWritesItsStepPlanWithTheStatesNextToIt(t *testing.T) {
	f := newFakeCloud()
	env := newEnv(t, f)
	heartbeatAfter(env, 2*time.Minute)
	env.ExecuteWorkflow(DeployNode, deployRequest())
	if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
		t.Fatalf("workflow did not complete cleanly: %v", env.GetWorkflowError())
	}
	requireActive(t, f)
	if f.planWrites != 1 {
		t.Fatalf("RecordStepPlan writes: %d, want 1", f.planWrites)
	}
	var out []string
	for _, p := range f.plans {
		idx := "-"
		if p.Index != nil {
			idx = fmt.Sprint(*p.Index)
		}
		switch {
		case p.Clear:
			out = append(out, "clear")
		case p.OnlyIndex:
			out = append(out, "index "+idx)
		default:
			out = append(out, fmt.Sprintf("plan [%s] agent %d index %s", names(p.Steps), len(p.AgentSteps), idx))
		}
	}
	t.Log(strings.Join(out, "; "))
	if len(out) < 3 || !strings.HasSuffix(out[0], " agent 0 index 0") || !strings.HasPrefix(out[0], "plan [deploy.deploy ") ||
		!strings.HasSuffix(out[1], " agent 2 index 1") || out[len(out)-1] != "clear" {
		t.Fatalf("plan records %q: want the plan before the agent boots (index 0), the agent's plan, ..., the clearing last", out)
	}
}

func stateNames(ss []provision.State) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = string(s)
	}
	return out
}
