package workflows

import (
	"context"
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/temporal"
	"go.temporal.io/sdk/testsuite"

	"github.com/ironflow/ironflow/hardware"
	"github.com/ironflow/ironflow/provision"
)

// secureBootFake registers the boot mode activities on top of fakeCloud:
// SetBootMode logs the state asked for (or fails with fail), RecordBootMode
// logs what it records.
func secureBootFake(env *testsuite.TestWorkflowEnvironment, f *fakeCloud, fail error, recs *[]BootModeRecord) {
	reg := func(fn any, name string) { env.RegisterActivityWithOptions(fn, activity.RegisterOptions{Name: name}) }
	reg(func(ctx context.Context, in BootModeInput) (BootModeResult, error) {
		if in.SecureBoot == nil {
			return BootModeResult{}, f.log("SetBootMode " + in.BootMode)
		}
		on := *in.SecureBoot
		if err := f.log("SetSecureBoot " + map[bool]string{true: "on", false: "off"}[on]); err != nil {
			return BootModeResult{}, err
		}
		if fail != nil {
			return BootModeResult{}, fail
		}
		return BootModeResult{SecureBoot: &on}, nil
	}, ActSetBootMode)
	reg(func(ctx context.Context, in BootModeRecord) error {
		f.mu.Lock()
		*recs = append(*recs, in)
		f.mu.Unlock()
		return f.log("RecordBootMode")
	}, ActRecordBootMode)
}

// TestDeploySecureBootOnBeforeTheInstanceBoots: an instance that asks for
// secure boot has it turned on after the boot device is set to disk and
// before the machine powers on from disk (Ironic's prepare_instance), and
// the node records what the BMC read back.
func TestDeploySecureBootOnBeforeTheInstanceBoots(t *testing.T) {
	f := newFakeCloud()
	f.node.SecureBoot, f.node.BootMode = true, "uefi"
	env := newEnv(t, f)
	var recs []BootModeRecord
	secureBootFake(env, f, nil, &recs)
	heartbeatAfter(env, 2*time.Minute)
	env.ExecuteWorkflow(DeployNode, deployRequest())
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	calls := strings.Join(f.callList(), "\n")
	want := strings.Join([]string{"SetBootDevice disk", "SetSecureBoot on", "RecordBootMode",
		"AgentPowerOff", "SetPower power off", "CleanBoot", "SetPower power on", "RecordState active"}, "\n")
	if !strings.HasSuffix(calls, want) {
		t.Fatalf("calls:\n%s\nwant them to end with:\n%s", calls, want)
	}
	if len(recs) != 1 || recs[0].SecureBoot == nil || !*recs[0].SecureBoot || !strings.Contains(recs[0].Event, "Secure boot has been enabled") {
		t.Fatalf("recorded %+v", recs)
	}
}

// TestDeployWithoutSecureBootLeavesItAlone: no capability, no BMC call.
func TestDeployWithoutSecureBootLeavesItAlone(t *testing.T) {
	f := newFakeCloud()
	env := newEnv(t, f)
	var recs []BootModeRecord
	secureBootFake(env, f, nil, &recs)
	heartbeatAfter(env, 2*time.Minute)
	env.ExecuteWorkflow(DeployNode, deployRequest())
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if n := countCalls(f.callList(), "SetSecureBoot on"); n != 0 || len(recs) != 0 {
		t.Fatalf("secure boot set %d times, records %+v", n, recs)
	}
}

// TestDeploySecureBootUnsupportedWarnsAndGoesOn: a driver without secure
// boot only gets a warning in the node's history, as Ironic logs one; the
// deploy reaches active.
func TestDeploySecureBootUnsupportedWarnsAndGoesOn(t *testing.T) {
	f := newFakeCloud()
	f.node.SecureBoot = true
	env := newEnv(t, f)
	var recs []BootModeRecord
	secureBootFake(env, f, temporal.NewNonRetryableApplicationError(
		"Driver ipmi does not support set_secure_boot_state (disabled or not implemented).", ErrTypeBMCUnsupported, nil), &recs)
	heartbeatAfter(env, 2*time.Minute)
	env.ExecuteWorkflow(DeployNode, deployRequest())
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if f.states[len(f.states)-1] != provision.Active {
		t.Fatalf("states %v", f.states)
	}
	if len(recs) != 1 || recs[0].Severity != "WARNING" || recs[0].SecureBoot != nil ||
		!strings.Contains(recs[0].Event, "does not support set_secure_boot_state") {
		t.Fatalf("recorded %+v", recs)
	}
}

// TestDeploySecureBootBMCFailureFailsTheStep: any other BMC failure is the
// deploy's failure at step "enable secure boot"; the instance never powers
// on from disk.
func TestDeploySecureBootBMCFailureFailsTheStep(t *testing.T) {
	f := newFakeCloud()
	f.node.SecureBoot = true
	f.node.Policy.OperatorWaitTimeout = time.Minute
	env := newEnv(t, f)
	var recs []BootModeRecord
	secureBootFake(env, f, temporal.NewNonRetryableApplicationError("PATCH SecureBoot: 500", ErrTypeBMCAuth, nil), &recs)
	heartbeatAfter(env, 2*time.Minute)
	env.ExecuteWorkflow(DeployNode, deployRequest())
	if !containsState(f.states, provision.DeployFailed) {
		t.Fatalf("states %v", f.states)
	}
	if !strings.Contains(f.lastErr, "enable secure boot") && !strings.Contains(strings.Join(f.events, "\n"), "enable secure boot") {
		t.Fatalf("last_error %q, events %v", f.lastErr, f.events)
	}
	if n := countCalls(f.callList(), "SetPower power on"); n != 0 {
		t.Fatalf("instance powered on %d times after a failed secure boot change", n)
	}
}

// TestUndeployTurnsSecureBootOff: the teardown turns secure boot off
// after the instance's boot config is gone, before instance_info is
// cleared and the agent boots to clean.
func TestUndeployTurnsSecureBootOff(t *testing.T) {
	f := newFakeCloud()
	f.node.ProvisionState, f.node.SecureBoot = provision.Active, true
	env := newEnv(t, f)
	var recs []BootModeRecord
	secureBootFake(env, f, nil, &recs)
	heartbeatAfter(env, 3*time.Minute)
	env.ExecuteWorkflow(UndeployNode, decided(provision.Request{NodeUUID: f.node.UUID, Verb: "deleted", FromState: provision.Active}))
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	calls := strings.Join(f.callList(), "\n")
	want := strings.Join([]string{"RecordState deleting", "SetPower power off", "CleanBoot",
		"SetSecureBoot off", "RecordBootMode", "ClearInstanceInfo", "RecordState cleaning", "PrepareBoot agent"}, "\n")
	if !strings.HasPrefix(calls, want) {
		t.Fatalf("calls:\n%s\nwant them to start with:\n%s", calls, want)
	}
	if len(recs) != 1 || recs[0].SecureBoot == nil || *recs[0].SecureBoot {
		t.Fatalf("recorded %+v", recs)
	}
}

// TestRamdiskAndAnacondaDeploysTurnSecureBootOn: the ramdisk deploy turns
// secure boot on before it prepares and boots the instance's ramdisk; the
// anaconda deploy after the installer's boot config is removed and before
// the installed system boots from disk (changeNetbootDeploySecureBoot).
func TestRamdiskAndAnacondaDeploysTurnSecureBootOn(t *testing.T) {
	for _, tc := range []struct {
		iface string
		want  string
	}{
		{"ramdisk", "RecordState deploying,SetSecureBoot on,RecordBootMode,PrepareBoot ramdisk,SetBootDevice pxe,SetPower rebooting,RecordState active"},
		{"anaconda", "RecordState deploying,CleanBoot,SetSecureBoot on,RecordBootMode,SetBootDevice disk,SetPower rebooting,RecordState active"},
	} {
		t.Run(tc.iface, func(t *testing.T) {
			f := newFakeCloud()
			f.node.DeployInterface, f.node.SecureBoot = hardware.Interface(tc.iface), true
			env := newEnv(t, f)
			var recs []BootModeRecord
			secureBootFake(env, f, nil, &recs)
			env.RegisterDelayedCallback(func() {
				env.SignalWorkflow(SignalHeartbeat, Heartbeat{AgentStatus: "end", AgentStatusMessage: "installed"})
			}, 5*time.Minute)
			env.ExecuteWorkflow(DeployNode, deployRequest())
			if err := env.GetWorkflowError(); err != nil {
				t.Fatal(err)
			}
			if got := strings.Join(f.callList(), ","); !strings.HasSuffix(got, tc.want) {
				t.Fatalf("calls %s\nwant them to end with %s", got, tc.want)
			}
			if len(recs) != 1 || recs[0].SecureBoot == nil || !*recs[0].SecureBoot {
				t.Fatalf("recorded %+v", recs)
			}
		})
	}
}
