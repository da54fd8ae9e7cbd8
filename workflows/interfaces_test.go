package workflows

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"

	"github.com/ironflow/ironflow/provision"
)

func TestRamdiskDeployBootsTheInstanceWithoutAnAgent(t *testing.T) {
	f := newFakeCloud()
	f.node.DeployInterface = "ramdisk"
	env := newEnv(t, f)
	env.ExecuteWorkflow(DeployNode, deployRequest())
	if env.GetWorkflowError() != nil {
		t.Fatal(env.GetWorkflowError())
	}
	want := "RecordState deploying,PrepareBoot ramdisk,SetBootDevice pxe,SetPower rebooting,RecordState active"
	if got := strings.Join(f.callList(), ","); got != want {
		t.Fatalf("calls %s\nwant  %s", got, want)
	}
}

func TestRamdiskDeployWithoutKernelFailsClearly(t *testing.T) {
	f := newFakeCloud()
	f.node.DeployInterface = "ramdisk"
	f.failures["PrepareBoot ramdisk"] = []error{temporal.NewNonRetryableApplicationError("node x: deploy_interface ramdisk needs instance_info kernel and ramdisk (or boot_iso)", ErrTypeInvalidConfig, nil)}
	env := newEnv(t, f)
	env.ExecuteWorkflow(DeployNode, deployRequest())
	if !strings.Contains(f.lastErr, "needs instance_info kernel and ramdisk") || !containsState(f.states, provision.DeployFailed) {
		t.Fatalf("last_error %q states %v", f.lastErr, f.states)
	}
}

func TestAnacondaDeployWaitsForTheInstallersEnd(t *testing.T) {
	f := newFakeCloud()
	f.node.DeployInterface = "anaconda"
	env := newEnv(t, f)
	// %pre says start (resets the timer), %post says end, 40 min later:
	// longer than one callback timeout, but heartbeats keep it alive.
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(SignalHeartbeat, Heartbeat{AgentStatus: "start", AgentStatusMessage: "pre"})
	}, 20*time.Minute)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(SignalHeartbeat, Heartbeat{AgentStatus: "end", AgentStatusMessage: "installed"})
	}, 40*time.Minute)
	env.ExecuteWorkflow(DeployNode, deployRequest())
	if env.GetWorkflowError() != nil {
		t.Fatal(env.GetWorkflowError())
	}
	want := "RecordState deploying,PrepareBoot anaconda,SetBootDevice pxe,SetPower rebooting,RecordState wait call-back," +
		"RecordState deploying,CleanBoot,SetBootDevice disk,SetPower rebooting,RecordState active"
	if got := strings.Join(f.callList(), ","); got != want {
		t.Fatalf("calls %s\nwant  %s", got, want)
	}
}

func TestAnacondaErrorFailsTheDeployWithTheInstallersMessage(t *testing.T) {
	f := newFakeCloud()
	f.node.DeployInterface = "anaconda"
	env := newEnv(t, f)
	env.RegisterDelayedCallback(func() {
		env.SignalWorkflow(SignalHeartbeat, Heartbeat{AgentStatus: "error", AgentStatusMessage: "no space left on /dev/vda"})
	}, 5*time.Minute)
	env.ExecuteWorkflow(DeployNode, deployRequest())
	if !containsState(f.states, provision.DeployFailed) || !strings.Contains(f.lastErr, "no space left on /dev/vda") {
		t.Fatalf("states %v last_error %q", f.states, f.lastErr)
	}
}

func registerInspect(env interface {
	RegisterActivityWithOptions(any, activity.RegisterOptions)
}, f *fakeCloud) {
	reg := func(fn any, name string) { env.RegisterActivityWithOptions(fn, activity.RegisterOptions{Name: name}) }
	reg(func(ctx context.Context, in InspectionRecord) error { return nil }, ActRecordInspection)
	reg(func(ctx context.Context, uuid string) error { return f.log("ApplyInventory") }, ActApplyInventory)
	reg(func(ctx context.Context, in AgentInput) error { return f.log("CollectInventory") }, ActCollectInventory)
	reg(func(ctx context.Context, n NodeInfo) error { return f.log("InspectOutOfBand") }, ActInspectOutOfBand)
}

func TestInspectInBandBootsTheAgentAndAppliesItsInventory(t *testing.T) {
	f := newFakeCloud()
	f.node.ProvisionState = provision.Manageable
	env := newEnv(t, f)
	env.RegisterWorkflow(InspectNode)
	registerInspect(env, f)
	heartbeatAfter(env, 2*time.Minute)
	env.ExecuteWorkflow(InspectNode, decided(provision.Request{NodeUUID: f.node.UUID, Verb: "inspect", FromState: provision.Manageable}))
	if env.GetWorkflowError() != nil {
		t.Fatal(env.GetWorkflowError())
	}
	want := "RecordState inspecting,PrepareBoot inspect,SetBootDevice pxe,SetPower rebooting,RecordState inspect wait," +
		"CollectInventory,AgentPowerOff,SetPower power off,CleanBoot,ApplyInventory,RecordState manageable"
	if got := strings.Join(f.callList(), ","); got != want {
		t.Fatalf("calls %s\nwant  %s", got, want)
	}
}

func TestInspectOutOfBandBootsNothing(t *testing.T) {
	f := newFakeCloud()
	f.node.ProvisionState = provision.Manageable
	f.node.InspectInterface = "redfish"
	env := newEnv(t, f)
	env.RegisterWorkflow(InspectNode)
	registerInspect(env, f)
	env.ExecuteWorkflow(InspectNode, decided(provision.Request{NodeUUID: f.node.UUID, Verb: "inspect", FromState: provision.Manageable}))
	if env.GetWorkflowError() != nil {
		t.Fatal(env.GetWorkflowError())
	}
	if got := strings.Join(f.callList(), ","); got != "RecordState inspecting,InspectOutOfBand,ApplyInventory,RecordState manageable" {
		t.Fatalf("calls %s", got)
	}
}

func TestInspectTimeoutEndsInInspectFailed(t *testing.T) {
	f := newFakeCloud()
	f.node.ProvisionState = provision.Manageable
	env := newEnv(t, f)
	env.RegisterWorkflow(InspectNode)
	registerInspect(env, f)
	env.ExecuteWorkflow(InspectNode, decided(provision.Request{NodeUUID: f.node.UUID, Verb: "inspect", FromState: provision.Manageable}))
	if last := f.states[len(f.states)-1]; last != provision.InspectFailed || !strings.Contains(f.lastErr, "Timeout reached") {
		t.Fatalf("final %q last_error %q", last, f.lastErr)
	}
}

func TestUndeployOfAnAnacondaNodeCleansItsDisk(t *testing.T) {
	f := newFakeCloud()
	f.node.DeployInterface = "anaconda"
	f.node.ProvisionState = provision.Active
	env := newEnv(t, f)
	heartbeatAfter(env, 3*time.Minute)
	env.ExecuteWorkflow(UndeployNode, decided(provision.Request{NodeUUID: f.node.UUID, Verb: "deleted", FromState: provision.Active}))
	if env.GetWorkflowError() != nil {
		t.Fatal(env.GetWorkflowError())
	}
	if !strings.Contains(strings.Join(f.callList(), ","), "RunAgentStep deploy.erase_devices_metadata") {
		t.Fatalf("the installed disk was not erased: %v", f.callList())
	}
}

func TestAbortedAnacondaDeployRemovesItsBootConfiguration(t *testing.T) {
	f := newFakeCloud()
	f.node.DeployInterface = "anaconda"
	env := newEnv(t, f)
	env.RegisterDelayedCallback(func() { env.SignalWorkflow(SignalAbort, nil) }, 5*time.Minute)
	env.ExecuteWorkflow(DeployNode, deployRequest())
	calls := strings.Join(f.callList(), ",")
	if !strings.Contains(calls, "CleanBoot,SetPower power off") || f.states[len(f.states)-1] != provision.DeployFailed {
		t.Fatalf("abort left the kickstart served: %s", calls)
	}
}
