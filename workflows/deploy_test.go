package workflows

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/ironflow/ironflow/hardware"
	"github.com/ironflow/ironflow/provision"
)

// fakeCloud stands in for the activities: it records each call in order,
// keeps the node's provision state like the store would, and fails the calls
// a test asks it to fail. Workflow unit tests only; tests/ runs the real ones.
type fakeCloud struct {
	mu    sync.Mutex
	calls []string
	// powerRecs are the power records written (RecordPowerState).
	powerRecs []PowerStateRecord
	states    []provision.State
	lastErr   string
	node      NodeInfo
	failures  map[string][]error // activity+detail -> errors returned on successive calls
	// agentStep runs in place of the agent for RunAgentStep.
	agentStep func(ctx context.Context, in AgentStepInput) (AgentStepResult, error)
	// loadErr is what LoadNode fails with.
	loadErr error
	// store, when set, is the node's provision state as the store keeps
	// it: RecordState refuses a change whose From it is not in, as
	// store.RecordTransition does.
	store provision.State
	froms [][]provision.State
	// deployStep and cleanStep are the node's fields as the store keeps
	// them; shown has, for each call in calls, the steps the node showed
	// once the call had run.
	deployStep, cleanStep map[string]any
	shown                 []shownSteps
	// verifySignal judges heartbeat signals as the worker's VerifySignal
	// does (nil: every signal is authentic); verdicts counts its answers.
	verifySignal func(VerifySignalInput) SignalVerdict
	verdicts     []SignalVerdict
	// plans are the RecordStepPlan calls (driver_internal_info).
	plans []StepPlanRecord
	// planWrites counts RecordStepPlan calls (a plan record written with a
	// state is in plans, not here).
	planWrites int
	// agentSteps, when set, is what GetAgentSteps answers.
	agentSteps []provision.Step
	// events are the RecordState history events, severities their
	// severities.
	events, severities []string
	// clearedAgent lists the states recorded with ClearAgent.
	clearedAgent []provision.State
	// onState, when set, is told each state RecordState records.
	onState func(provision.State)
}

// shownSteps are a node's deploy_step and clean_step as interface.step, ""
// for {}.
type shownSteps struct{ deploy, clean string }

func newFakeCloud() *fakeCloud {
	p := Policy{
		CallbackTimeout: 30 * time.Minute, HeartbeatTimeout: 5 * time.Minute, OperatorWaitTimeout: time.Hour,
		BMCAttempts: 3, BMCInitialInterval: time.Second, BMCCallTimeout: time.Minute, AgentCommandTimeout: time.Hour,
		EraseDevicesMetadataPriority: 99,
	}
	return &fakeCloud{
		node: NodeInfo{UUID: "1be26c0b-03f2-4d2e-ae87-c02d7f33c123", Driver: "ipmi", BootInterface: "ipxe",
			DeployInterface: "direct", ProvisionState: provision.Available, BootMode: "bios", MACs: []string{"52:54:00:12:34:56"},
			AutomatedClean: true, Policy: p},
		failures: map[string][]error{},
	}
}

// showStep records a step an activity begins, as activities.showStep does.
func (f *fakeCloud) showStep(rs *provision.RunningStep) {
	if rs == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if rs.Kind == provision.StepKindClean {
		f.cleanStep = rs.Step.View()
	} else {
		f.deployStep = rs.Step.View()
	}
	if rs.Index != nil {
		// The plan's index written with the step (showStep).
		f.plans = append(f.plans, StepPlanRecord{Kind: rs.Kind, Index: rs.Index, OnlyIndex: true})
	}
}

// recordSteps applies a RecordState's step fields as the store does.
func (f *fakeCloud) recordSteps(in RecordStateInput) {
	var v map[string]any
	if in.Step != nil {
		v = in.Step.View()
	}
	switch in.StepKind {
	case provision.StepKindDeploy:
		f.deployStep = v
	case provision.StepKindClean:
		f.cleanStep = v
	default:
		f.deployStep, f.cleanStep = nil, nil
	}
}

func stepName(v map[string]any) string {
	if len(v) == 0 {
		return ""
	}
	return fmt.Sprintf("%v.%v", v["interface"], v["step"])
}

// appendCall logs a call with the step the node shows after it; f.mu held.
func (f *fakeCloud) appendCall(call string) {
	f.calls = append(f.calls, call)
	f.shown = append(f.shown, shownSteps{deploy: stepName(f.deployStep), clean: stepName(f.cleanStep)})
}

func (f *fakeCloud) log(call string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.appendCall(call)
	if errs := f.failures[call]; len(errs) > 0 {
		f.failures[call] = errs[1:]
		return errs[0]
	}
	return nil
}

// requireTimedOut fails t unless the workflow ended in state want with a
// last_error naming the timeout (its message msg and its length wait), and
// the calls, one a line, hold cleanup.
func (f *fakeCloud) requireTimedOut(t *testing.T, want provision.State, msg, wait, cleanup string) {
	t.Helper()
	if last := f.states[len(f.states)-1]; last != want {
		t.Fatalf("final state %q, want %q (states %v)", last, want, f.states)
	}
	if !strings.Contains(f.lastErr, msg) || !strings.Contains(f.lastErr, wait) {
		t.Fatalf("last_error %q does not name the timeout (%q, %s)", f.lastErr, msg, wait)
	}
	if calls := strings.Join(f.callList(), "\n"); !strings.Contains(calls, cleanup) {
		t.Fatalf("the failed workflow did not clean up (%q):\n%s", cleanup, calls)
	}
}

func (f *fakeCloud) callList() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

func (f *fakeCloud) register(env *testsuite.TestWorkflowEnvironment) {
	reg := func(fn any, name string) { env.RegisterActivityWithOptions(fn, activity.RegisterOptions{Name: name}) }
	reg(func(ctx context.Context, uuid string) (NodeInfo, error) { return f.node, f.loadErr }, ActLoadNode)
	reg(func(ctx context.Context, in VerifySignalInput) (SignalVerdict, error) {
		f.mu.Lock()
		defer f.mu.Unlock()
		var v SignalVerdict
		if f.verifySignal != nil {
			v = f.verifySignal(in)
		}
		f.verdicts = append(f.verdicts, v)
		return v, nil
	}, ActVerifySignal)
	reg(func(ctx context.Context, in RecordStateInput) error {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.froms = append(f.froms, in.From)
		if f.store != "" && len(in.From) > 0 && !slices.Contains(in.From, f.store) {
			return temporal.NewNonRetryableApplicationError("node is in "+string(f.store), ErrTypeStateConflict, nil)
		}
		if f.store != "" {
			f.store = in.To
		}
		f.states = append(f.states, in.To)
		if f.onState != nil {
			f.onState(in.To)
		}
		f.lastErr = in.LastError
		f.events = append(f.events, in.Event)
		f.severities = append(f.severities, in.Severity)
		if in.ClearAgent {
			f.clearedAgent = append(f.clearedAgent, in.To)
		}
		f.recordSteps(in)
		if in.StepPlan != nil {
			// The plan record written with the state (RecordState).
			f.plans = append(f.plans, *in.StepPlan)
		}
		f.appendCall("RecordState " + string(in.To))
		return nil
	}, ActRecordState)
	reg(func(ctx context.Context, in ConfigDriveInput) error { return f.log("StoreConfigDrive") }, ActStoreConfigDrive)
	reg(func(ctx context.Context, in PowerStateRecord) error {
		f.mu.Lock()
		f.powerRecs = append(f.powerRecs, in)
		f.mu.Unlock()
		if in.KeepPowerState {
			f.mu.Lock()
			f.lastErr = in.LastError
			f.mu.Unlock()
			return f.log("RecordPowerState kept")
		}
		return f.log("RecordPowerState " + in.PowerState)
	}, ActRecordPowerState)
	reg(func(ctx context.Context, uuid string) error { return f.log("ClearInstanceInfo") }, ActClearInstanceInfo)
	reg(func(ctx context.Context, in BootInput) error {
		f.showStep(in.Starts)
		return f.log("PrepareBoot " + string(in.Kind))
	}, ActPrepareBoot)
	reg(func(ctx context.Context, in BootInput) error { f.showStep(in.Starts); return f.log("CleanBoot") }, ActCleanBoot)
	reg(func(ctx context.Context, in BootDeviceInput) error { return f.log("SetBootDevice " + in.Device) }, ActSetBootDevice)
	reg(func(ctx context.Context, in PowerInput) (string, error) {
		if err := f.log("SetPower " + in.Action); err != nil {
			return "", err
		}
		if in.Action == "power off" {
			return "power off", nil
		}
		return "power on", nil
	}, ActSetPower)
	reg(func(ctx context.Context, n NodeInfo) (string, error) { return "power off", f.log("GetPowerState") }, ActGetPowerState)
	reg(func(ctx context.Context, in AgentStepsInput) ([]provision.Step, error) {
		if f.agentSteps != nil {
			return f.agentSteps, f.log("GetAgentSteps " + string(in.Kind))
		}
		if in.Kind == provision.StepKindDeploy {
			// The agent's deploy steps (agent/steps.go deploySteps).
			return []provision.Step{{StepID: provision.StepWriteImage, Priority: 80, ArgsInfo: map[string]provision.ArgInfo{"image_info": {}, "configdrive": {}}},
				{StepID: provision.StepEraseDevicesMetadata, Priority: 0}}, f.log("GetAgentSteps " + string(in.Kind))
		}
		return []provision.Step{{StepID: provision.StepEraseDevicesMetadata, Priority: 0}, {StepID: provision.StepEraseDevices, Priority: 10}},
			f.log("GetAgentSteps " + string(in.Kind))
	}, ActGetAgentSteps)
	reg(func(ctx context.Context, in AgentStepInput) (AgentStepResult, error) {
		f.showStep(&provision.RunningStep{Kind: in.Kind, Step: in.Step, Index: in.Index})
		if err := f.log("RunAgentStep " + in.Step.Name() + " @" + in.Agent.CallbackURL); err != nil {
			return AgentStepResult{}, err
		}
		if f.agentStep != nil {
			return f.agentStep(ctx, in)
		}
		return AgentStepResult{Status: "SUCCEEDED"}, nil
	}, ActRunAgentStep)
	reg(func(ctx context.Context, in AgentInput) error { f.showStep(in.Starts); return f.log("AgentPowerOff") }, ActAgentPowerOff)
	reg(func(ctx context.Context, in InterfaceStepInput) error {
		f.showStep(&provision.RunningStep{Kind: in.Kind, Step: in.Step})
		call := "RunInterfaceStep " + in.Step.Name()
		if in.RebootInto != "" {
			call += " reboot into " + in.RebootInto
		}
		return f.log(call)
	}, ActRunInterfaceStep)
	reg(func(ctx context.Context, in StepPlanRecord) error {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.planWrites++
		f.plans = append(f.plans, in)
		return nil
	}, ActRecordStepPlan)
}

func newEnv(t *testing.T, f *fakeCloud) *testsuite.TestWorkflowEnvironment {
	t.Helper()
	var s testsuite.WorkflowTestSuite
	env := s.NewTestWorkflowEnvironment()
	env.RegisterWorkflow(DeployNode)
	env.RegisterWorkflow(UndeployNode)
	env.RegisterWorkflow(ProvideNode)
	env.RegisterWorkflow(ManageNode)
	env.RegisterWorkflow(SetPowerState)
	env.RegisterWorkflow(CleanNode)
	f.register(env)
	return env
}

const agentURL = "https://10.0.0.5:9999"

func heartbeatAfter(env *testsuite.TestWorkflowEnvironment, d time.Duration) {
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(SignalHeartbeat, Heartbeat{CallbackURL: agentURL, AgentVersion: "1.0"})
	}, d)
}

func deployRequest() provision.Request {
	return decided(provision.Request{NodeUUID: "1be26c0b-03f2-4d2e-ae87-c02d7f33c123", Verb: "active", FromState: provision.Available})
}

func TestDeployNodeHappyPathRunsTheStepsInOrder(t *testing.T) {
	f := newFakeCloud()
	env := newEnv(t, f)
	heartbeatAfter(env, 2*time.Minute)
	env.ExecuteWorkflow(DeployNode, deployRequest())
	if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
		t.Fatalf("workflow did not complete cleanly: %v", env.GetWorkflowError())
	}
	want := []string{
		"RecordState deploying",
		"PrepareBoot agent", "SetBootDevice pxe", "SetPower rebooting",
		"RecordState wait call-back",
		"RecordState deploying",
		"GetAgentSteps deploy",
		"RecordState deploying",
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
}

func TestDeployNodeCallbackTimeoutFailsNamingTheTimeout(t *testing.T) {
	f := newFakeCloud()
	env := newEnv(t, f)
	// No heartbeat ever; no operator either.
	env.ExecuteWorkflow(DeployNode, deployRequest())
	if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
		t.Fatalf("workflow did not complete cleanly: %v", env.GetWorkflowError())
	}
	// Nothing is left booting: boot config removed and power off.
	f.requireTimedOut(t, provision.DeployFailed, "Timeout reached while waiting for callback", "30m0s", "CleanBoot\nSetPower power off")
}

func TestDeployNodeHeartbeatsKeepALongWriteAlive(t *testing.T) {
	f := newFakeCloud()
	env := newEnv(t, f)
	heartbeatAfter(env, time.Minute)
	// The write takes 3× the heartbeat timeout; the agent heartbeats every
	// half timeout, so the step must succeed.
	for i := 1; i <= 8; i++ {
		heartbeatAfter(env, time.Minute+time.Duration(i)*150*time.Second)
	}
	f.agentStep = func(ctx context.Context, in AgentStepInput) (AgentStepResult, error) {
		if in.Step.Step == "write_image" {
			return AgentStepResult{Status: "SUCCEEDED"}, nil
		}
		return AgentStepResult{Status: "SUCCEEDED"}, nil
	}
	env.OnActivity(ActRunAgentStep, mockAny, mockAny).After(15*time.Minute).Return(AgentStepResult{Status: "SUCCEEDED"}, nil).Once()
	env.OnActivity(ActRunAgentStep, mockAny, mockAny).Return(AgentStepResult{Status: "SUCCEEDED"}, nil)
	env.ExecuteWorkflow(DeployNode, deployRequest())
	if env.GetWorkflowError() != nil {
		t.Fatal(env.GetWorkflowError())
	}
	if last := f.states[len(f.states)-1]; last != provision.Active {
		t.Fatalf("final state %q (last_error %q), want active", last, f.lastErr)
	}
}

// The liveness timer is re-armed from the last heartbeat when it fires:
// heartbeats just inside the timeout (0.9 of it) keep a step that runs four
// timeouts alive, which a timer counted from the step's start would not.
func TestDeployNodeHeartbeatsJustInsideTheTimeoutKeepTheStepAlive(t *testing.T) {
	f := newFakeCloud()
	env := newEnv(t, f)
	heartbeatAfter(env, time.Minute)
	for i := 1; i <= 6; i++ {
		heartbeatAfter(env, time.Minute+time.Duration(i)*270*time.Second)
	}
	env.OnActivity(ActRunAgentStep, mockAny, mockAny).After(20*time.Minute).Return(AgentStepResult{Status: "SUCCEEDED"}, nil).Once()
	env.OnActivity(ActRunAgentStep, mockAny, mockAny).Return(AgentStepResult{Status: "SUCCEEDED"}, nil)
	env.ExecuteWorkflow(DeployNode, deployRequest())
	if env.GetWorkflowError() != nil {
		t.Fatal(env.GetWorkflowError())
	}
	if last := f.states[len(f.states)-1]; last != provision.Active {
		t.Fatalf("final state %q (last_error %q), want active", last, f.lastErr)
	}
}

func TestDeployNodeAgentSilentMidWriteFails(t *testing.T) {
	f := newFakeCloud()
	env := newEnv(t, f)
	heartbeatAfter(env, time.Minute)
	// The write never finishes and the agent goes silent.
	env.OnActivity(ActRunAgentStep, mockAny, mockAny).After(10*time.Hour).Return(AgentStepResult{Status: "SUCCEEDED"}, nil)
	env.ExecuteWorkflow(DeployNode, deployRequest())
	if env.GetWorkflowError() != nil {
		t.Fatal(env.GetWorkflowError())
	}
	if last := f.states[len(f.states)-1]; last != provision.DeployFailed {
		t.Fatalf("final state %q, want deploy failed", last)
	}
	if !strings.Contains(f.lastErr, "stopped heartbeating") || !strings.Contains(f.lastErr, "deploy.write_image") {
		t.Fatalf("last_error %q does not say the agent went silent during write_image", f.lastErr)
	}
	// A lost machine is cleaned up at once, not after an operator wait:
	// nothing is left booting.
	if calls := strings.Join(f.callList(), ","); !strings.Contains(calls, "RecordState deploy failed,CleanBoot,SetPower power off,RecordState deploy failed") {
		t.Fatalf("lost agent: boot configuration not removed at once: %s", calls)
	}
}

func TestDeployNodeChecksumMismatchThenRetryReachesActive(t *testing.T) {
	f := newFakeCloud()
	env := newEnv(t, f)
	heartbeatAfter(env, time.Minute)
	mismatch := temporal.NewNonRetryableApplicationError("deploy.write_image on node x: agent command failed: image checksum mismatch: expected abc, got def", ErrTypeAgentStepFailed, nil)
	writes := 0
	f.agentStep = func(ctx context.Context, in AgentStepInput) (AgentStepResult, error) {
		if in.Step.Step == "write_image" {
			writes++
			if writes == 1 {
				return AgentStepResult{}, mismatch
			}
		}
		return AgentStepResult{Status: "SUCCEEDED"}, nil
	}
	var failedErr string
	env.RegisterDelayedCallback(func() {
		failedErr = f.lastErr
		env.SignalWorkflow(SignalRetry, nil)
	}, 10*time.Minute)
	env.ExecuteWorkflow(DeployNode, deployRequest())
	if env.GetWorkflowError() != nil {
		t.Fatal(env.GetWorkflowError())
	}
	if !strings.Contains(failedErr, "checksum mismatch") || !strings.Contains(failedErr, "write_image") {
		t.Fatalf("last_error while failed = %q, want it to name write_image and the checksum", failedErr)
	}
	if !containsState(f.states, provision.DeployFailed) {
		t.Fatalf("never recorded deploy failed: %v", f.states)
	}
	if last := f.states[len(f.states)-1]; last != provision.Active || writes != 2 {
		t.Fatalf("final state %q after %d writes, want active after 2", last, writes)
	}
}

func TestDeployNodeAbortInWaitCallback(t *testing.T) {
	f := newFakeCloud()
	env := newEnv(t, f)
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(SignalAbort, nil) }, 5*time.Minute)
	env.ExecuteWorkflow(DeployNode, deployRequest())
	if env.GetWorkflowError() != nil {
		t.Fatal(env.GetWorkflowError())
	}
	if last := f.states[len(f.states)-1]; last != provision.DeployFailed {
		t.Fatalf("final state %q, want deploy failed", last)
	}
	if !strings.Contains(f.lastErr, "aborted by operator") {
		t.Fatalf("last_error %q does not say the operator aborted", f.lastErr)
	}
	for _, c := range f.callList() {
		if strings.HasPrefix(c, "RunAgentStep") {
			t.Fatalf("an agent step ran after abort: %v", f.callList())
		}
	}
}

func TestDeployNodeSkipStep(t *testing.T) {
	f := newFakeCloud()
	env := newEnv(t, f)
	heartbeatAfter(env, time.Minute)
	f.agentStep = func(ctx context.Context, in AgentStepInput) (AgentStepResult, error) {
		if in.Step.Step == "prepare_instance_boot" {
			return AgentStepResult{}, temporal.NewNonRetryableApplicationError("no EFI partition", ErrTypeAgentStepFailed, nil)
		}
		return AgentStepResult{Status: "SUCCEEDED"}, nil
	}
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(SignalSkipStep, nil) }, 10*time.Minute)
	env.ExecuteWorkflow(DeployNode, deployRequest())
	if env.GetWorkflowError() != nil {
		t.Fatal(env.GetWorkflowError())
	}
	if last := f.states[len(f.states)-1]; last != provision.Active {
		t.Fatalf("final state %q, want active after skip-step", last)
	}
	// Only the failed in-band part was skipped: the bootloader is not
	// retried, boot device disk and the rest still run.
	calls := strings.Join(f.callList(), "\n")
	if countCalls(f.callList(), "RunAgentStep deploy.prepare_instance_boot @"+agentURL) != 1 ||
		!strings.Contains(calls, "RecordState deploy failed\nRecordState deploying\nSetBootDevice disk") ||
		!strings.Contains(calls, "CleanBoot\nSetPower power on") {
		t.Fatalf("unexpected calls after skip-step:\n%s", calls)
	}
}

func TestDeployNodeBMCErrorsRetriedThenReported(t *testing.T) {
	f := newFakeCloud()
	busy := temporal.NewApplicationError("set boot device pxe: BMC busy: 503", "BMCError")
	f.failures["SetBootDevice pxe"] = []error{busy, busy}
	env := newEnv(t, f)
	heartbeatAfter(env, 5*time.Minute)
	env.ExecuteWorkflow(DeployNode, deployRequest())
	if env.GetWorkflowError() != nil {
		t.Fatal(env.GetWorkflowError())
	}
	if last := f.states[len(f.states)-1]; last != provision.Active {
		t.Fatalf("two transient BMC errors should be retried through: final %q (%s)", last, f.lastErr)
	}
	if n := countCalls(f.callList(), "SetBootDevice pxe"); n != 3 {
		t.Fatalf("SetBootDevice pxe called %d times, want 3 (2 failures + success)", n)
	}

	// Persistent failure: attempts run out, the node says why and waits.
	f2 := newFakeCloud()
	f2.failures["SetBootDevice pxe"] = []error{busy, busy, busy, busy}
	env2 := newEnv(t, f2)
	env2.ExecuteWorkflow(DeployNode, deployRequest())
	if env2.GetWorkflowError() != nil {
		t.Fatal(env2.GetWorkflowError())
	}
	if n := countCalls(f2.callList(), "SetBootDevice pxe"); n != 3 {
		t.Fatalf("SetBootDevice pxe called %d times, want BMCAttempts=3", n)
	}
	if !strings.Contains(f2.lastErr, "BMC busy") || !strings.Contains(f2.lastErr, "deploy.deploy") {
		t.Fatalf("last_error %q should name the step and the BMC's answer", f2.lastErr)
	}
	if !containsState(f2.states, provision.DeployFailed) {
		t.Fatalf("states %v", f2.states)
	}
}

func TestDeployNodeAuthFailureIsNotRetried(t *testing.T) {
	f := newFakeCloud()
	f.failures["SetBootDevice pxe"] = []error{temporal.NewNonRetryableApplicationError("BMC authentication failed", ErrTypeBMCAuth, nil)}
	env := newEnv(t, f)
	env.ExecuteWorkflow(DeployNode, deployRequest())
	if n := countCalls(f.callList(), "SetBootDevice pxe"); n != 1 {
		t.Fatalf("auth failure retried: %d calls", n)
	}
	if !strings.Contains(f.lastErr, "authentication failed") {
		t.Fatalf("last_error %q", f.lastErr)
	}
}

func TestUndeployCleansThroughTheAgent(t *testing.T) {
	f := newFakeCloud()
	f.node.ProvisionState = provision.Active
	env := newEnv(t, f)
	heartbeatAfter(env, 3*time.Minute)
	env.ExecuteWorkflow(UndeployNode, decided(provision.Request{NodeUUID: f.node.UUID, Verb: "deleted", FromState: provision.Active}))
	if env.GetWorkflowError() != nil {
		t.Fatal(env.GetWorkflowError())
	}
	want := []string{
		"RecordState deleting", "SetPower power off", "CleanBoot", "ClearInstanceInfo",
		"RecordState cleaning", "PrepareBoot agent", "SetBootDevice pxe", "SetPower rebooting",
		"RecordState clean wait", "RecordState cleaning", "GetAgentSteps clean",
		"RunAgentStep deploy.erase_devices_metadata @" + agentURL,
		"AgentPowerOff", "SetPower power off", "CleanBoot", "RecordState available",
	}
	if got := f.callList(); strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("calls:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestProvideSkipsCleaningWhenDisabled(t *testing.T) {
	f := newFakeCloud()
	f.node.AutomatedClean = false
	f.node.ProvisionState = provision.Manageable
	env := newEnv(t, f)
	env.ExecuteWorkflow(ProvideNode, decided(provision.Request{NodeUUID: f.node.UUID, Verb: "provide", FromState: provision.Manageable}))
	if env.GetWorkflowError() != nil {
		t.Fatal(env.GetWorkflowError())
	}
	if got := strings.Join(f.callList(), ","); got != "RecordState cleaning,RecordState available" {
		t.Fatalf("calls %s", got)
	}
}

// TestFirstWriteIsConditionalOnTheAPIsState: a workflow's first write
// applies only while the node is in the state the API recorded for its
// verb; when another verb has moved the node since, the workflow ends
// cleanly and changes nothing.
func TestFirstWriteIsConditionalOnTheAPIsState(t *testing.T) {
	for _, c := range []struct {
		store provision.State
		calls string
	}{
		{provision.Cleaning, "RecordState cleaning,RecordState available"},
		{provision.Available, ""},
	} {
		f := newFakeCloud()
		f.node.AutomatedClean = false
		f.store = c.store
		env := newEnv(t, f)
		env.ExecuteWorkflow(ProvideNode, decided(provision.Request{NodeUUID: f.node.UUID, Verb: "provide", FromState: provision.Manageable}))
		if err := env.GetWorkflowError(); err != nil {
			t.Fatalf("node in %s: %v", c.store, err)
		}
		if got := strings.Join(f.callList(), ","); got != c.calls {
			t.Errorf("node in %s: calls %q, want %q", c.store, got, c.calls)
		}
		if len(f.froms) == 0 || fmt.Sprint(f.froms[0]) != "[cleaning]" {
			t.Errorf("node in %s: first write from %v, want [cleaning]", c.store, f.froms)
		}
	}
}

func TestManageFailsBackToEnrollWithTheBMCError(t *testing.T) {
	f := newFakeCloud()
	f.node.Policy.BMCAttempts = 1
	f.failures["GetPowerState"] = []error{temporal.NewNonRetryableApplicationError("BMC authentication failed: wrong password", ErrTypeBMCAuth, nil)}
	env := newEnv(t, f)
	env.ExecuteWorkflow(ManageNode, decided(provision.Request{NodeUUID: f.node.UUID, Verb: "manage", FromState: provision.Enroll}))
	if env.GetWorkflowError() != nil {
		t.Fatal(env.GetWorkflowError())
	}
	if got := fmt.Sprint(f.states); got != "[verifying enroll]" {
		t.Fatalf("states %s", got)
	}
	if !strings.Contains(f.lastErr, "Failed to get power state") || !strings.Contains(f.lastErr, "authentication failed") {
		t.Fatalf("last_error %q", f.lastErr)
	}
}

func TestAcceptFollowsIronicStateMachine(t *testing.T) {
	cases := []struct {
		state provision.State
		verb  provision.Verb
		next  provision.State
		ok    bool
	}{
		{provision.Enroll, "manage", provision.Verifying, true},
		{provision.Manageable, "provide", provision.Cleaning, true},
		{provision.Available, "active", provision.Deploying, true},
		{provision.Available, "deploy", provision.Deploying, true},
		{provision.Active, "deleted", provision.Deleting, true},
		{provision.Active, "rebuild", provision.Deploying, true},
		{provision.DeployFailed, "active", provision.Deploying, true},
		{provision.Available, "provide", "", false},
		{provision.Active, "active", "", false},
		{provision.Enroll, "provide", "", false},
		{provision.Available, "bogus", "", false},
	}
	for _, c := range cases {
		tr, ok := provision.Accept(c.state, c.verb)
		if ok != c.ok || tr.Next != c.next {
			t.Errorf("Accept(%q, %q) = %+v, %v; want next %q, %v", c.state, c.verb, tr, ok, c.next, c.ok)
		}
	}
}

func containsState(states []provision.State, s provision.State) bool {
	for _, v := range states {
		if v == s {
			return true
		}
	}
	return false
}

func countCalls(calls []string, c string) int {
	n := 0
	for _, v := range calls {
		if v == c {
			n++
		}
	}
	return n
}

var _ = errors.New

// mockAny is testify's mock.Anything, spelled out to keep testify out of our imports.
const mockAny = "mock.Anything"

// A node whose driver_info cannot be read (a timeout override that is not a
// number) must not stay in the state the API recorded: the operation fails
// at once with last_error naming the setting.
func TestUnreadableSettingsFailTheOperationClearly(t *testing.T) {
	cases := []struct {
		name     string
		wf       any
		req      any
		want     provision.State // state recorded; "kept" for a power change
		startsIn provision.State
	}{
		{"deploy", DeployNode, deployRequest(), provision.DeployFailed, provision.Available},
		{"provide", ProvideNode, decided(provision.Request{NodeUUID: "1be26c0b-03f2-4d2e-ae87-c02d7f33c123", Verb: "provide", FromState: provision.Manageable}), provision.CleanFailed, provision.Manageable},
		{"manage", ManageNode, decided(provision.Request{NodeUUID: "1be26c0b-03f2-4d2e-ae87-c02d7f33c123", Verb: "manage", FromState: provision.Enroll}), provision.Enroll, provision.Enroll},
		{"power", SetPowerState, PowerRequest{NodeUUID: "1be26c0b-03f2-4d2e-ae87-c02d7f33c123", Target: "power on"}, "kept", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFakeCloud()
			f.loadErr = temporal.NewNonRetryableApplicationError("driver_info of node 1be26c0b-03f2-4d2e-ae87-c02d7f33c123: deploy_callback_timeout must be a positive number of seconds, got abc", ErrTypeInvalidConfig, nil)
			env := newEnv(t, f)
			env.ExecuteWorkflow(c.wf, c.req)
			if env.GetWorkflowError() == nil {
				t.Fatalf("the workflow succeeded although the node could not be loaded")
			}
			calls := strings.Join(f.callList(), ",")
			if c.want == "kept" {
				if calls != "RecordPowerState kept" {
					t.Fatalf("calls %q, want the power change refused with the power state kept", calls)
				}
			} else if len(f.states) != 1 || f.states[0] != c.want {
				t.Fatalf("states recorded %v, want [%s]", f.states, c.want)
			}
			if !strings.Contains(f.lastErr, "deploy_callback_timeout must be a positive number") || !strings.HasPrefix(f.lastErr, capitalize(c.name)+" failed") {
				t.Fatalf("last_error %q does not say which setting stopped the %s", f.lastErr, c.name)
			}
		})
	}
}

// The liveness timer all agent steps share may fire while no step runs (here
// during a 20-minute operator wait, four heartbeat timeouts): the retried
// step still has the whole timeout from its own start.
func TestDeployNodeRetriedStepAfterALongWaitHasAFreshHeartbeatTimeout(t *testing.T) {
	f := newFakeCloud()
	env := newEnv(t, f)
	heartbeatAfter(env, time.Minute)
	mismatch := temporal.NewNonRetryableApplicationError("deploy.write_image on node x: agent command failed: image checksum mismatch", ErrTypeAgentStepFailed, nil)
	env.OnActivity(ActRunAgentStep, mockAny, mockAny).Return(AgentStepResult{}, mismatch).Once()
	env.OnActivity(ActRunAgentStep, mockAny, mockAny).After(3*time.Minute).Return(AgentStepResult{Status: "SUCCEEDED"}, nil).Once()
	env.OnActivity(ActRunAgentStep, mockAny, mockAny).Return(AgentStepResult{Status: "SUCCEEDED"}, nil)
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(SignalRetry, nil) }, 21*time.Minute)
	env.ExecuteWorkflow(DeployNode, deployRequest())
	if env.GetWorkflowError() != nil {
		t.Fatal(env.GetWorkflowError())
	}
	if last := f.states[len(f.states)-1]; last != provision.Active {
		t.Fatalf("final state %q (last_error %q), want active: the retried step was taken for a lost agent", last, f.lastErr)
	}
}

// Every deploy step but deploy.deploy runs on the agent: a step above
// deploy.deploy's priority runs right after it, once the agent is up, and
// deploy_steps shows that order.
func TestDeployNodeStepAboveTheCoreStepRunsOnceTheAgentIsUp(t *testing.T) {
	f := runDeploy(t, `[{"interface":"deploy","step":"erase_devices_metadata","priority":150}]`, nil)
	requireActive(t, f)
	calls := strings.Join(f.callList(), "\n")
	if !strings.Contains(calls, "GetAgentSteps deploy\nRecordState deploying\nRecordState deploying\nRunAgentStep deploy.erase_devices_metadata @"+agentURL) {
		t.Fatalf("erase_devices_metadata did not run first once the agent was up:\n%s", calls)
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
}

// The agent's boot device follows the node's boot interface: the network
// for ipxe, the virtual CD for redfish-virtual-media, UEFI HTTP boot of
// the ISO's URL for redfish-https (the activity gives the BMC the URL).
func TestDeployNodeBootsTheAgentByItsBootInterface(t *testing.T) {
	for iface, want := range map[string]string{"ipxe": "pxe", "redfish-virtual-media": "cdrom", "redfish-https": "uefihttp"} {
		t.Run(iface, func(t *testing.T) {
			f := newFakeCloud()
			f.node.Driver, f.node.BootInterface = "redfish", hardware.Interface(iface)
			env := newEnv(t, f)
			heartbeatAfter(env, 2*time.Minute)
			env.ExecuteWorkflow(DeployNode, deployRequest())
			if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
				t.Fatalf("workflow did not complete cleanly: %v", env.GetWorkflowError())
			}
			if got := f.callList(); countCalls(got, "SetBootDevice "+want) != 1 {
				t.Errorf("calls %q: want one SetBootDevice %s", got, want)
			}
		})
	}
}
