package workflows

import (
	"context"
	"testing"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/testsuite"

	"github.com/ironflow/ironflow/hardware"
	"github.com/ironflow/ironflow/provision"
)

// TestManageCachesBIOSSettingsOnlyForRedfishBIOS: a manage of a node whose
// bios interface does not read settings runs no CacheBIOSSettings; a
// redfish-bios node caches its settings once.
func TestManageCachesBIOSSettingsOnlyForRedfishBIOS(t *testing.T) {
	for _, c := range []struct {
		iface hardware.Interface
		want  int
	}{{hardware.Fake, 0}, {hardware.NoBIOS, 0}, {hardware.Redfish, 1}} {
		t.Run(string(c.iface), func(t *testing.T) {
			f := newFakeCloud()
			f.node.BIOSInterface = c.iface
			env := newEnv(t, f)
			cached := 0
			env.RegisterActivityWithOptions(func(context.Context, NodeInfo) error { cached++; return nil },
				activity.RegisterOptions{Name: ActCacheBIOSSettings})
			env.ExecuteWorkflow(ManageNode, decided(provision.Request{NodeUUID: f.node.UUID, Verb: "manage", FromState: provision.Enroll}))
			if err := env.GetWorkflowError(); err != nil {
				t.Fatal(err)
			}
			if cached != c.want {
				t.Fatalf("cached %d times, want %d", cached, c.want)
			}
		})
	}
}

// TestSecureBootSetOnlyForSecureBoot: neither a teardown nor a ramdisk
// deploy of an instance that did not ask for secure boot changes the boot
// mode; an instance that asked for it has secure boot turned off
// (teardown) or on (deploy) once.
func TestSecureBootSetOnlyForSecureBoot(t *testing.T) {
	for _, c := range []struct {
		name string
		call string
		prep func(f *fakeCloud, env *testsuite.TestWorkflowEnvironment)
		wf   any
		req  provision.Request
	}{
		{"teardown", "SetSecureBoot off",
			func(f *fakeCloud, env *testsuite.TestWorkflowEnvironment) {
				f.node.ProvisionState = provision.Active
				heartbeatAfter(env, 3*time.Minute)
			},
			UndeployNode, decided(provision.Request{NodeUUID: newFakeCloud().node.UUID, Verb: "deleted", FromState: provision.Active})},
		{"ramdisk deploy", "SetSecureBoot on",
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
			env.ExecuteWorkflow(c.wf, c.req)
			if err := env.GetWorkflowError(); err != nil {
				t.Fatalf("%s, secure boot %v: %v", c.name, secure, err)
			}
			want := 0
			if secure {
				want = 1
			}
			if countCalls(f.callList(), c.call) != want {
				t.Fatalf("%s, secure boot %v: calls %v; want %s %d times", c.name, secure, f.callList(), c.call, want)
			}
		}
	}
}
