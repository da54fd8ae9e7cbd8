package workflows

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/ironflow/ironflow/provision"
)

// While a deploy runs, the node's deploy_step is the step that runs, in
// Ironic's form, from its first activity on: deploy.deploy through wait
// call-back, write_image while the image is written, and so on; {} before
// the first step and once the node is active.
func TestDeployStepShowsTheStepThatRuns(t *testing.T) {
	f := newFakeCloud()
	env := newEnv(t, f)
	heartbeatAfter(env, 2*time.Minute)
	var during map[string]any
	f.agentStep = func(_ context.Context, in AgentStepInput) (AgentStepResult, error) {
		if in.Step.StepID == provision.StepWriteImage {
			f.mu.Lock()
			during = f.deployStep
			f.mu.Unlock()
		}
		return AgentStepResult{Status: "SUCCEEDED"}, nil
	}
	env.ExecuteWorkflow(DeployNode, deployRequest())
	if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
		t.Fatalf("workflow did not complete cleanly: %v", env.GetWorkflowError())
	}
	want := []string{
		"RecordState deploying → ",
		"PrepareBoot agent → deploy.deploy",
		"SetBootDevice pxe → deploy.deploy",
		"SetPower rebooting → deploy.deploy",
		"RecordState wait call-back → deploy.deploy",
		"RecordState deploying → deploy.deploy",
		"GetAgentSteps deploy → deploy.deploy",
		"RecordState deploying → ", // the agent's plan, between two steps
		"RunAgentStep deploy.write_image @" + agentURL + " → deploy.write_image",
		"RunAgentStep deploy.prepare_instance_boot @" + agentURL + " → deploy.prepare_instance_boot",
		"SetBootDevice disk → deploy.prepare_instance_boot",
		"AgentPowerOff → deploy.tear_down_agent",
		"SetPower power off → deploy.tear_down_agent",
		"CleanBoot → deploy.boot_instance",
		"SetPower power on → deploy.boot_instance",
		"RecordState active → ",
	}
	if got := f.deployStepsShown(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("deploy_step after each call:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	wantView := map[string]any{"interface": "deploy", "step": "write_image", "priority": 80, "argsinfo": nil}
	if fmt.Sprint(during) != fmt.Sprint(wantView) {
		t.Fatalf("deploy_step while write_image runs = %v, want %v", during, wantView)
	}
}

// A callback timeout fails the deploy in wait call-back, which is no step
// of its own: the failure shows the step that was running (deploy.deploy,
// as Ironic shows it throughout wait call-back), never "wait call-back";
// once the workflow gives up, deploy_step is {} as Ironic leaves it.
func TestDeployStepOnACallbackTimeoutIsNoPseudoStep(t *testing.T) {
	f := newFakeCloud()
	env := newEnv(t, f)
	env.ExecuteWorkflow(DeployNode, deployRequest())
	if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
		t.Fatalf("workflow did not complete cleanly: %v", env.GetWorkflowError())
	}
	got := f.deployStepsShown()
	var failed []string
	for _, c := range got {
		if strings.HasPrefix(c, "RecordState deploy failed") {
			failed = append(failed, c)
		}
	}
	want := []string{"RecordState deploy failed → deploy.deploy", "RecordState deploy failed → "}
	if strings.Join(failed, "\n") != strings.Join(want, "\n") {
		t.Fatalf("deploy_step recorded with deploy failed:\n%s\nwant:\n%s\nall calls:\n%s",
			strings.Join(failed, "\n"), strings.Join(want, "\n"), strings.Join(got, "\n"))
	}
	assertOnlyRealSteps(t, f)
}

// Whatever fails, and wherever, the node's deploy_step and clean_step are {}
// or a real step's identity: never a stage of the workflow's own ("wait
// call-back", "clean up boot", "set boot device disk", ...).
func TestStepFieldsNeverShowAPseudoStep(t *testing.T) {
	busy := temporal.NewNonRetryableApplicationError("BMC busy", ErrTypeBMCUnsupported, nil)
	cases := []struct {
		name  string
		setup func(f *fakeCloud)
		wf    any
		req   provision.Request
		beats []time.Duration
	}{
		{"boot device disk fails", func(f *fakeCloud) { f.failures["SetBootDevice disk"] = []error{busy} }, DeployNode, deployRequest(), []time.Duration{time.Minute}},
		{"clean up boot fails", func(f *fakeCloud) { f.failures["CleanBoot"] = []error{busy} }, DeployNode, deployRequest(), []time.Duration{time.Minute}},
		{"config drive fails", func(f *fakeCloud) { f.failures["StoreConfigDrive"] = []error{busy} }, DeployNode,
			decided(provision.Request{NodeUUID: deployRequest().NodeUUID, Verb: "active", FromState: provision.Available, ConfigDrive: json.RawMessage(`"H4sI"`)}), nil},
		{"ramdisk boot fails", func(f *fakeCloud) {
			f.node.DeployInterface = "ramdisk"
			f.failures["PrepareBoot ramdisk"] = []error{busy}
		}, DeployNode, deployRequest(), nil},
		{"anaconda times out", func(f *fakeCloud) { f.node.DeployInterface = "anaconda" }, DeployNode, deployRequest(), nil},
		{"clean wait times out", func(f *fakeCloud) { f.node.ProvisionState = provision.Manageable }, ProvideNode,
			decided(provision.Request{NodeUUID: deployRequest().NodeUUID, Verb: "provide", FromState: provision.Manageable}), nil},
		{"clean step fails", func(f *fakeCloud) {
			f.node.ProvisionState = provision.Active
			f.failures["RunAgentStep deploy.erase_devices_metadata @"+agentURL] = []error{busy}
		}, UndeployNode, decided(provision.Request{NodeUUID: deployRequest().NodeUUID, Verb: "deleted", FromState: provision.Active}), []time.Duration{time.Minute}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFakeCloud()
			c.setup(f)
			env := newEnv(t, f)
			for _, d := range c.beats {
				heartbeatAfter(env, d)
			}
			env.ExecuteWorkflow(c.wf, c.req)
			if !env.IsWorkflowCompleted() {
				t.Fatal("workflow did not complete")
			}
			if !containsState(f.states, provision.DeployFailed) && !containsState(f.states, provision.CleanFailed) && !containsState(f.states, provision.Error) {
				t.Fatalf("the case did not fail as it should: states %v", f.states)
			}
			assertOnlyRealSteps(t, f)
		})
	}
}

// deployStepsShown pairs each call with the deploy_step it left.
func (f *fakeCloud) deployStepsShown() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]string, len(f.calls))
	for i, c := range f.calls {
		out[i] = c + " → " + f.shown[i].deploy
	}
	return out
}

// assertOnlyRealSteps fails t if the node ever showed a step that is not
// one ironflow or the agent runs.
func assertOnlyRealSteps(t *testing.T, f *fakeCloud) {
	t.Helper()
	real := map[string]bool{"": true}
	for _, id := range []provision.StepID{provision.StepDeploy, provision.StepWriteImage, provision.StepPrepareInstanceBoot, provision.StepTearDownAgent, provision.StepBootInstance, provision.StepEraseDevicesMetadata, provision.StepEraseDevices} {
		real[id.String()] = true
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, s := range f.shown {
		for _, v := range []string{s.deploy, s.clean} {
			if !real[v] {
				t.Errorf("after %s the node shows step %q, which no one runs", f.calls[i], v)
			}
		}
	}
}

// A step is one flat object on the wire, as Ironic and the agent write it,
// and its view on the node is Ironic's deploy_step.
func TestStepWireFormIsIronics(t *testing.T) {
	s := provision.Step{StepID: provision.StepWriteImage, Priority: 80, Args: json.RawMessage(`{"x":1}`)}
	b, err := json.Marshal(s)
	if err != nil || string(b) != `{"interface":"deploy","step":"write_image","priority":80,"args":{"x":1}}` {
		t.Fatalf("marshal: %s, %v", b, err)
	}
	var back provision.Step
	if err := json.Unmarshal([]byte(`{"interface":"deploy","step":"erase_devices","priority":10,"reboot_requested":true}`), &back); err != nil ||
		back.StepID != provision.StepEraseDevices || back.Priority != 10 || !back.RebootRequested {
		t.Fatalf("unmarshal: %+v, %v", back, err)
	}
	v, _ := json.Marshal(s.View())
	if string(v) != `{"args":{"x":1},"argsinfo":null,"interface":"deploy","priority":80,"step":"write_image"}` {
		t.Fatalf("view %s", v)
	}
}

// Every state has one constant, and every state ironflow's state machine
// starts from or moves to is one of Ironic's.
func TestKnownStatesAreIronicsAndDistinct(t *testing.T) {
	known := map[provision.State]bool{}
	for _, s := range provision.KnownStates() {
		if known[s] {
			t.Errorf("state %q listed twice", s)
		}
		known[s] = true
	}
	if len(known) != 30 {
		t.Errorf("%d states; an Ironic node can be in 30", len(known))
	}
	for _, from := range provision.KnownStates() {
		for _, v := range []provision.Verb{provision.VerbManage, provision.VerbProvide, provision.VerbActive, provision.VerbDeploy, provision.VerbRebuild, provision.VerbDeleted, provision.VerbUndeploy, provision.VerbInspect, provision.VerbClean, provision.VerbAbort} {
			tr, ok := provision.Accept(from, v)
			if !ok {
				continue
			}
			op, next, target := tr.Operation, tr.Next, tr.Target
			if _, has := WorkflowFor(op); !has && op != provision.OpAbort && op != provision.OpClean {
				t.Errorf("%s from %s starts operation %q, which has no workflow", v, from, op)
			}
			if !known[next] || (target != "" && !known[target]) {
				t.Errorf("%s from %s moves to %q (target %q), not Ironic's", v, from, next, target)
			}
		}
	}
}
