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

// TestSecureBootGatesAskedOnlyForSecureBoot: a teardown of an instance
// that did not ask for secure boot asks no changeDeploySecureBoot, and a
// ramdisk deploy of one asks no changeNetbootDeploySecureBoot; neither
// changes the boot mode. An instance that asked for secure boot asks the
// gate once and has secure boot turned off (teardown) or on (deploy).
func TestSecureBootGatesAskedOnlyForSecureBoot(t *testing.T) {
	for _, c := range []struct {
		name string
		gate string
		call string
		prep func(f *fakeCloud, env *testsuite.TestWorkflowEnvironment)
		wf   any
		req  ProvisionRequest
	}{
		{"teardown", changeDeploySecureBoot, "SetSecureBoot off",
			func(f *fakeCloud, env *testsuite.TestWorkflowEnvironment) {
				f.node.ProvisionState = Active
				heartbeatAfter(env, 3*time.Minute)
			},
			UndeployNode, ProvisionRequest{NodeUUID: newFakeCloud().node.UUID, Verb: "deleted", FromState: string(Active)}},
		{"ramdisk deploy", changeNetbootDeploySecureBoot, "SetSecureBoot on",
			func(f *fakeCloud, _ *testsuite.TestWorkflowEnvironment) { f.node.DeployInterface = "ramdisk" },
			DeployNode, deployRequest()},
	} {
		for _, secure := range []bool{false, true} {
			f := newFakeCloud()
			f.node.SecureBoot = secure
			env := newEnv(t, f)
			c.prep(f, env)
			var recs []BootModeRecord
			secureBootFake(env, f, nil, &recs)
			asked := askCounter(env, changeDeploySecureBoot, changeNetbootDeploySecureBoot)
			env.ExecuteWorkflow(c.wf, c.req)
			if err := env.GetWorkflowError(); err != nil {
				t.Fatalf("%s, secure boot %v: %v", c.name, secure, err)
			}
			want := 0
			if secure {
				want = 1
			}
			if asked[c.gate] != want || countCalls(f.callList(), c.call) != want {
				t.Fatalf("%s, secure boot %v: asked %s %d times, calls %v; want %d", c.name, secure, c.gate, asked[c.gate], f.callList(), want)
			}
		}
	}
}
