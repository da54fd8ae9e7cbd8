package activities_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ironflow/ironflow/bmc"
	"github.com/ironflow/ironflow/provision"
	"github.com/ironflow/ironflow/store"
	"github.com/ironflow/ironflow/workflows"
)

// TestSetPowerNeverPowersOffADisablePowerOffNode: the power calls of the
// workflows, for a node with disable_power_off, as Ironic master handles
// the flag: a power off leaves the machine on, the power on that follows
// resets it (to boot what the workflow prepared), a reboot is a reset; the
// machine's own record (fake_state_file) shows no power off. The same calls
// without the flag power off and on.
func TestSetPowerNeverPowersOffADisablePowerOffNode(t *testing.T) {
	for _, flag := range []bool{true, false} {
		l := newSyncLab(t)
		state := filepath.Join(t.TempDir(), "machine.json")
		n := l.node("", provision.Deploying, "power on", bmc.PowerOn, func(n *store.Node) { n.DisablePowerOff = flag })
		l.setDriverInfo(n.UUID, map[string]any{"fake_id": n.UUID, "fake_state_file": state})
		info := workflows.NodeInfo{UUID: n.UUID, Driver: "fake-hardware"}
		power := func(action string) string {
			t.Helper()
			got, err := l.sync.Activities.SetPower(context.Background(), workflows.PowerInput{Node: info, Action: action})
			if err != nil {
				t.Fatalf("flag %v, %s: %v", flag, action, err)
			}
			return got
		}
		// A user's power on of a machine that is on, after a workflow's
		// skipped power off, does nothing.
		if flag {
			power("power on")
			power("power off")
			if _, err := l.sync.Activities.SetPower(context.Background(), workflows.PowerInput{Node: info, Action: "power on", Requested: true}); err != nil {
				t.Fatal(err)
			}
		}
		// The machine (off in its new state file) powered on first, then a workflow's off/on
		// pair around a boot change, a reboot, a lone power on.
		states := []string{power("power on"), power("power off"), power("power on"), power("rebooting"), power("power on")}
		fs, err := bmc.ReadFakeState(state)
		if err != nil {
			t.Fatal(err)
		}
		var actions []string
		for _, a := range fs.Actions {
			actions = append(actions, string(a.Action))
		}
		got := strings.Join(actions, ",")
		want, wantStates := "power on,reset,reset", "power on,power on,power on,power on,power on"
		if !flag {
			want, wantStates = "power on,power off,power on,rebooting", "power on,power off,power on,power on,power on"
		}
		if got != want || strings.Join(states, ",") != wantStates {
			t.Errorf("disable_power_off %v: machine saw %q, states %q; want %q, %q", flag, got, states, want, wantStates)
		}
	}
}
