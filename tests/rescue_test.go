package tests

import (
	"os"
	"strings"
	"testing"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/ironflow/ironflow/agent/sim"
	"github.com/ironflow/ironflow/shadow"
)

// TestRescueAndUnrescueWithSimulatedAgent deploys a node through the
// simulated agent, rescues it with `baremetal node rescue --wait` (a second
// agent boots, gets the password's hash with rescue.finalize_rescue and
// stops), and unrescues it with `baremetal node unrescue --wait`: the
// rescue agent holds the SHA-512 crypt hash of the password given to the
// CLI, wrote nothing to its disk, and the clear password is in no workflow
// history, log or node view (nor is its hash in the history).
func TestRescueAndUnrescueWithSimulatedAgent(t *testing.T) {
	img := newImageServer(t, 4<<20)
	const mac = "52:54:00:bb:05:01"
	uuid := enrollAgentNode(t, "sim-rescue-0", mac, img)
	mustCLI(t, "node", "set", uuid, "--rescue-interface", "agent")
	m := startSimMachine(t, uuid, []string{mac}, sim.Config{})
	mustCLI(t, "node", "manage", uuid, "--wait", "60")
	mustCLI(t, "node", "provide", uuid, "--wait", "120")
	mustCLI(t, "node", "deploy", uuid, "--wait", "180")
	boots := m.boots()

	const password = "rescue-me-0f sim-rescue-0"
	mustCLI(t, "node", "rescue", uuid, "--rescue-password", password, "--wait", "180")
	n := getNode(t, uuid)
	if n.ProvisionState != "rescue" || deref(n.PowerState) != "power on" {
		t.Fatalf("after rescue: %s %s (last_error %v)", n.ProvisionState, deref(n.PowerState), deref(n.LastError))
	}
	if m.boots() != boots+1 {
		t.Fatalf("rescue booted %d agents, want 1", m.boots()-boots)
	}
	rescueAgent := m.current()
	if hash := rescueAgent.Hardware().RescueHash(); !shadow.Verify(password, hash) {
		t.Fatalf("the rescue agent holds %q, not the hash of the CLI's password", hash)
	}
	if !rescueAgent.Rescued() {
		t.Fatal("the rescue agent was not told to finalize the rescue")
	}
	select {
	case <-rescueAgent.Done():
	default:
		t.Fatal("the rescue agent still serves its API")
	}
	for _, d := range rescueAgent.Hardware().Disks() {
		if d.BytesWritten() != 0 {
			t.Fatalf("rescue wrote %d bytes to %s", d.BytesWritten(), "the disk")
		}
	}
	if _, ok := n.InstanceInfo["hashed_rescue_password"]; ok {
		t.Fatalf("the rescue password's hash is kept after the rescue: %v", n.InstanceInfo)
	}
	if _, ok := n.DriverInternalInfo["agent_secret_token"]; ok {
		t.Fatal("the rescue agent's token is kept in rescue")
	}
	// The clear password is nowhere: workflow history, API and worker logs.
	c := temporalClient(t)
	hash := rescueAgent.Hardware().RescueHash()
	if _, found := historyCount(t, c, uuid, func(_ enumspb.EventType, s string) bool {
		return strings.Contains(s, password) || strings.Contains(s, hash)
	}); found != 0 {
		t.Fatal("the rescue password or its hash is in the RescueNode workflow's history")
	}
	for _, log := range []string{lab.WorkerLog(), lab.APILog()} {
		if data, _ := os.ReadFile(log); strings.Contains(string(data), password) {
			t.Fatalf("the rescue password is in %s", log)
		}
	}
	if show := mustCLI(t, "node", "show", uuid, "-f", "json"); strings.Contains(show, password) {
		t.Fatal("the rescue password is in the node view")
	}

	mustCLI(t, "node", "unrescue", uuid, "--wait", "180")
	n = getNode(t, uuid)
	if n.ProvisionState != "active" || deref(n.PowerState) != "power on" || n.LastError != nil {
		t.Fatalf("after unrescue: %s %s (last_error %v)", n.ProvisionState, deref(n.PowerState), deref(n.LastError))
	}
	if m.boots() != boots+1 {
		t.Fatal("unrescue booted an agent")
	}
	hist := mustCLI(t, "node", "history", "list", uuid, "-f", "json")
	for _, want := range []string{"Rescue finished", "Unrescue finished"} {
		if !strings.Contains(hist, want) {
			t.Errorf("node history has no %q:\n%s", want, hist)
		}
	}
}
