package tests

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ironflow/ironflow/agent/sim"
	"github.com/ironflow/ironflow/bmc"
	"github.com/ironflow/ironflow/store"
)

// TestDisablePowerOffDeployUndeployNeverCutsPower: a node with
// disable_power_off (API 1.95) deploys, is undeployed and cleaned on the
// real stack (PostgreSQL, Temporal, the API and worker processes, ironflow's
// agent code on simulated disks) without one power off: the machine's own
// record (fake_state_file) shows resets where power cycles were, the agent
// of the deploy locks itself down instead of powering off, and the API
// refuses power off and soft power off with Ironic's 409.
func TestDisablePowerOffDeployUndeployNeverCutsPower(t *testing.T) {
	img := newImageServer(t, 1<<20)
	uuid := enrollAgentNode(t, "no-power-off-0", "52:54:00:bb:00:95", img)
	stateFile := filepath.Join(t.TempDir(), "machine.json")
	if code, _ := call(t, "PATCH", "/v1/nodes/"+uuid, []map[string]any{
		{"op": "add", "path": "/driver_info/fake_state_file", "value": stateFile},
		{"op": "add", "path": "/automated_clean", "value": true},
	}, nil); code != 200 {
		t.Fatalf("patch: %d", code)
	}
	setDisablePowerOff(t, uuid, true)
	for _, target := range []string{"power off", "soft power off"} {
		var body map[string]any
		if code, _ := call(t, "PUT", "/v1/nodes/"+uuid+"/states/power", map[string]any{"target": target}, &body); code != 409 ||
			!strings.Contains(body["error_message"].(string), "Failed to set node power state to "+target+".") {
			t.Fatalf("%s of a disable_power_off node: %d %v, want 409 PowerStateFailure", target, code, body)
		}
	}

	m := startSimMachine(t, uuid, []string{"52:54:00:bb:00:95"}, sim.Config{})
	for _, s := range []struct{ verb, state string }{{"manage", "manageable"}, {"provide", "available"}, {"active", "active"}, {"deleted", "available"}} {
		if _, err := call2(t, "PUT", "/v1/nodes/"+uuid+"/states/provision", map[string]any{"target": s.verb}); err != nil {
			t.Fatal(err)
		}
		waitState(t, uuid, s.state, 120*time.Second)
	}
	fs, err := bmc.ReadFakeState(stateFile)
	if err != nil {
		t.Fatal(err)
	}
	var actions []string
	for _, a := range fs.Actions {
		actions = append(actions, string(a.Action))
		if a.Action == bmc.ActionPowerOff || a.Action == bmc.ActionSoftOff {
			t.Errorf("the machine was powered off (%s at %s)", a.Action, a.At)
		}
	}
	if resets := strings.Count(strings.Join(actions, ","), "reset"); resets < 3 {
		t.Errorf("machine actions %v: want a reset for each boot after the first (provide's cleaning, deploy, instance, undeploy, cleaning)", actions)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	locked := 0
	for _, a := range m.agents {
		if a.LockedDown() {
			locked++
		}
	}
	// The agents of provide's cleaning, the deploy and the undeploy's
	// cleaning each locked down; none powered its machine off.
	if locked < 3 || len(m.agents) != locked {
		t.Errorf("%d agents booted, %d locked down; want every agent locked down, at least 3", len(m.agents), locked)
	}
	t.Logf("machine actions: %v; agents: %d", actions, len(m.agents))
}

// setDisablePowerOff sets or clears the node's disable_power_off: through the API at
// 1.95 once the lab serves it, else in the database (the API's maximum stays
// 1.93 until every version up to 1.95 is complete, docs/api-versions.md).
func setDisablePowerOff(t *testing.T, ident string, on bool) {
	t.Helper()
	code, _ := callAt(t, lab.APIURL, "1.95", "PATCH", "/v1/nodes/"+ident, []map[string]any{{"op": "add", "path": "/disable_power_off", "value": on}}, nil)
	if code == 200 {
		return
	}
	t.Logf("PATCH at 1.95: %d (not served yet): setting disable_power_off in the database", code)
	st, err := store.Open(context.Background(), lab.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	uuid := getNode(t, ident).UUID
	if _, err := st.UpdateNode(context.Background(), uuid, func(n *store.Node) error { n.DisablePowerOff = on; return nil }); err != nil {
		t.Fatal(err)
	}
}
