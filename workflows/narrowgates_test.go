package workflows

import (
	"context"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/testsuite"
	"go.temporal.io/sdk/workflow"

	"github.com/ironflow/ironflow/hardware"
)

// askCounter counts, per change ID, how often a workflow asks the gate;
// each answers version 1 (the new path).
func askCounter(env *testsuite.TestWorkflowEnvironment, ids ...string) map[string]int {
	asked := map[string]int{}
	for _, id := range ids {
		env.OnGetVersion(id, workflow.DefaultVersion, 1).Return(func(string, workflow.Version, workflow.Version) workflow.Version {
			asked[id]++
			return 1
		})
	}
	return asked
}

// TestManageAsksTheBIOSGateOnlyForRedfishBIOS: a manage of a node whose
// bios interface does not read settings asks no changeCacheBIOSSettings
// (no marker, no change-version upsert in its history); a redfish-bios
// node asks it once and caches its settings.
func TestManageAsksTheBIOSGateOnlyForRedfishBIOS(t *testing.T) {
	for _, c := range []struct {
		iface hardware.Interface
		asks  int
	}{{hardware.Fake, 0}, {hardware.NoBIOS, 0}, {hardware.Redfish, 1}} {
		t.Run(string(c.iface), func(t *testing.T) {
			f := newFakeCloud()
			f.node.BIOSInterface = c.iface
			env := newEnv(t, f)
			cached := 0
			env.RegisterActivityWithOptions(func(context.Context, NodeInfo) error { cached++; return nil },
				activity.RegisterOptions{Name: ActCacheBIOSSettings})
			asked := askCounter(env, changeCacheBIOSSettings)
			env.ExecuteWorkflow(ManageNode, ProvisionRequest{NodeUUID: f.node.UUID, Verb: "manage", FromState: string(Enroll)})
			if err := env.GetWorkflowError(); err != nil {
				t.Fatal(err)
			}
			if asked[changeCacheBIOSSettings] != c.asks || cached != c.asks {
				t.Fatalf("asked %s %d times and cached %d times, want %d", changeCacheBIOSSettings, asked[changeCacheBIOSSettings], cached, c.asks)
			}
		})
	}
}

// TestTeardownAsksTheSecureBootGateOnlyForSecureBoot: an undeploy of an
// instance that did not ask for secure boot asks no changeDeploySecureBoot
// and changes no boot mode; one that did asks it once and turns secure boot
// off.
func TestTeardownAsksTheSecureBootGateOnlyForSecureBoot(t *testing.T) {
	for _, secure := range []bool{false, true} {
		f := newFakeCloud()
		f.node.ProvisionState, f.node.SecureBoot = Active, secure
		env := newEnv(t, f)
		var recs []BootModeRecord
		secureBootFake(env, f, nil, &recs)
		heartbeatAfter(env, 3*time.Minute)
		asked := askCounter(env, changeDeploySecureBoot)
		env.ExecuteWorkflow(UndeployNode, ProvisionRequest{NodeUUID: f.node.UUID, Verb: "deleted", FromState: string(Active)})
		if err := env.GetWorkflowError(); err != nil {
			t.Fatal(err)
		}
		want := 0
		if secure {
			want = 1
		}
		if asked[changeDeploySecureBoot] != want || countCalls(f.callList(), "SetSecureBoot off") != want {
			t.Fatalf("secure boot %v: asked %s %d times, calls %v; want %d", secure, changeDeploySecureBoot, asked[changeDeploySecureBoot], f.callList(), want)
		}
	}
}

// TestNetbootDeployAsksTheSecureBootGateOnlyForSecureBoot: a ramdisk
// deploy of an instance without secure boot asks no
// changeNetbootDeploySecureBoot.
func TestNetbootDeployAsksTheSecureBootGateOnlyForSecureBoot(t *testing.T) {
	for _, secure := range []bool{false, true} {
		f := newFakeCloud()
		f.node.DeployInterface, f.node.SecureBoot = "ramdisk", secure
		env := newEnv(t, f)
		var recs []BootModeRecord
		secureBootFake(env, f, nil, &recs)
		asked := askCounter(env, changeNetbootDeploySecureBoot, changeDeploySecureBoot)
		env.ExecuteWorkflow(DeployNode, deployRequest())
		if err := env.GetWorkflowError(); err != nil {
			t.Fatal(err)
		}
		want := 0
		if secure {
			want = 1
		}
		if asked[changeNetbootDeploySecureBoot] != want || countCalls(f.callList(), "SetSecureBoot on") != want {
			t.Fatalf("secure boot %v: asked %s %d times, calls %v; want %d", secure, changeNetbootDeploySecureBoot, asked[changeNetbootDeploySecureBoot], f.callList(), want)
		}
	}
}
