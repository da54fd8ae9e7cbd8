package workflows

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/ironflow/ironflow/provision"
)

// customStep is a deploy step only the node's agent image offers, as
// Metal3's customDeploy.method names one (priority 0: it runs only when a
// deploy names it).
var customStep = provision.Step{StepID: provision.StepID{Interface: "deploy", Step: "install_coreos"}}

// runCustomAgentDeploy runs DeployNode for a custom-agent node with user
// deploy_steps (JSON, "" for none); the agent offers its own steps and
// customStep.
func runCustomAgentDeploy(t *testing.T, user string) *fakeCloud {
	t.Helper()
	f := newFakeCloud()
	f.node.DeployInterface = "custom-agent"
	f.agentSteps = append(agentDeploySteps()[:2], customStep)
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

// custom-agent, as Metal3 provisions a host with customDeploy: the agent
// boots, the user's step runs on it by name, the boot device becomes disk
// with no bootloader installed in-band, the agent is torn down and the
// instance powered on. No write_image, no image checked.
func TestCustomAgentDeployRunsTheUsersStepAndNoWriteImage(t *testing.T) {
	f := runCustomAgentDeploy(t, `[{"interface":"deploy","step":"install_coreos","args":{},"priority":80}]`)
	requireActive(t, f)
	want := []string{
		"RecordState deploying",
		"PrepareBoot agent", "SetBootDevice pxe", "SetPower rebooting",
		"RecordState wait call-back",
		"RecordState deploying",
		"GetAgentSteps deploy",
		"RecordState deploying", // the plan
		"RecordState deploying", // Running deploy step deploy.install_coreos
		"RunAgentStep deploy.install_coreos @" + agentURL,
		"RecordState deploying", // finished
		"SetBootDevice disk",
		"AgentPowerOff", "SetPower power off",
		"CleanBoot", "SetPower power on",
		"RecordState active",
	}
	if got := f.callList(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("calls:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	events := strings.Join(f.events, "\n")
	plan := "Deploy steps: deploy.deploy (100), deploy.install_coreos (80), deploy.prepare_instance_boot (60), deploy.tear_down_agent (40), deploy.boot_instance (20)"
	if !strings.Contains(events, plan) {
		t.Fatalf("node history lacks %q:\n%s", plan, events)
	}
	// Every step's index recorded, in order, and the plan cleared.
	var indexes []int
	for _, p := range f.plans {
		if p.Index != nil {
			indexes = append(indexes, *p.Index)
		}
	}
	if got := indexes; len(got) != 5 || got[0] != 0 || got[4] != 4 {
		t.Fatalf("deploy_step_index recorded %v, want 0..4", got)
	}
	if last := f.plans[len(f.plans)-1]; !last.Clear {
		t.Fatalf("deploy_steps not cleared at the end: %+v", last)
	}
}

// Without a user step, custom-agent does what Ironic's CustomAgentDeploy
// does: the agent boots and is torn down, the machine boots from disk;
// nothing runs in-band.
func TestCustomAgentDeployWithoutAStepBootsTheInstance(t *testing.T) {
	f := runCustomAgentDeploy(t, "")
	requireActive(t, f)
	if got := f.agentStepsRun(); len(got) != 0 {
		t.Fatalf("agent steps ran %q, want none (no write_image for custom-agent)", got)
	}
	if !strings.Contains(strings.Join(f.events, "\n"), "Deploy steps: deploy.deploy (100), deploy.prepare_instance_boot (60), deploy.tear_down_agent (40), deploy.boot_instance (20)") {
		t.Fatalf("plan in the node's history:\n%s", strings.Join(f.events, "\n"))
	}
}

// A step the agent does not offer fails the deploy with Ironic's message
// once the agent's steps are known, before any other step runs.
func TestCustomAgentDeployUnknownStepFails(t *testing.T) {
	f := newFakeCloud()
	f.node.DeployInterface = "custom-agent"
	f.agentSteps = agentDeploySteps()[:2]
	env := newEnv(t, f)
	heartbeatAfter(env, 2*time.Minute)
	req := deployRequest()
	req.DeploySteps = json.RawMessage(`[{"interface":"deploy","step":"install_coreos","args":{},"priority":80}]`)
	env.ExecuteWorkflow(DeployNode, req)
	if last := f.states[len(f.states)-1]; last != provision.DeployFailed {
		t.Fatalf("final state %q, want deploy failed", last)
	}
	if !strings.Contains(f.lastErr, "Failed to validate the final deploy steps list") || !strings.Contains(f.lastErr, "install_coreos") {
		t.Fatalf("last_error %q", f.lastErr)
	}
	if got := f.agentStepsRun(); len(got) != 0 {
		t.Fatalf("agent steps ran %q before the plan was refused", got)
	}
}
