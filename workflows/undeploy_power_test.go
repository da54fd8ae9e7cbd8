package workflows

import (
	"strings"
	"testing"

	"go.temporal.io/sdk/workflow"

	"github.com/ironflow/ironflow/provision"
)

// TestUndeployRebootsADisablePowerOffNode: a node with disable_power_off
// keeps its power through the undeploy's power off (the SetPower activity
// decides), so once its boot configuration is removed the undeploy reboots
// it off its instance (change undeploy-0.2, version 1); the release's path
// (DefaultVersion) and a node without the flag do not, and only the
// flagged node's run asks the gate.
func TestUndeployRebootsADisablePowerOffNode(t *testing.T) {
	for _, c := range []struct {
		name    string
		flag    bool
		version workflow.Version
		reboot  bool
	}{
		{"flag, new path", true, 1, true},
		{"flag, 0.1.0 path", true, workflow.DefaultVersion, false},
		{"no flag", false, 1, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newFakeCloud()
			f.node.ProvisionState = provision.Active
			f.node.AutomatedClean = false
			f.node.DisablePowerOff = c.flag
			env := newEnv(t, f)
			asked := 0
			env.OnGetVersion(changeUndeployNext, workflow.DefaultVersion, 1).Return(func(string, workflow.Version, workflow.Version) workflow.Version {
				asked++
				return c.version
			})
			env.ExecuteWorkflow(UndeployNode, decided(provision.Request{NodeUUID: f.node.UUID, Verb: "deleted", FromState: provision.Active}))
			if err := env.GetWorkflowError(); err != nil {
				t.Fatal(err)
			}
			calls := strings.Join(f.callList(), ",")
			want := "RecordState deleting,SetPower power off,CleanBoot,ClearInstanceInfo"
			if c.reboot {
				want = "RecordState deleting,SetPower power off,CleanBoot,SetPower rebooting,ClearInstanceInfo"
			}
			if !strings.HasPrefix(calls, want) {
				t.Fatalf("calls %s, want them to begin %s", calls, want)
			}
			if (asked > 0) != c.flag {
				t.Fatalf("gate asked %d times for a node with disable_power_off %v", asked, c.flag)
			}
		})
	}
}
