package tests

import (
	"strings"
	"testing"
	"time"

	"github.com/ironflow/ironflow/agent/sim"
)

const eraseMetadata = `[{"interface": "deploy", "step": "erase_devices_metadata"}]`

// TestManualCleanWithSimulatedAgent runs Ironic's manual cleaning through
// the baremetal CLI (`node clean --clean-steps`): manageable → cleaning →
// clean wait → manageable with the agent's erase_devices_metadata, which
// wipes the simulated disk's metadata; the plan is kept in
// driver_internal_info while it runs and removed after, the agent's steps
// are cached; an unknown step is refused with 400 before anything boots;
// an interface's step runs with disable_ramdisk and boots nothing.
func TestManualCleanWithSimulatedAgent(t *testing.T) {
	img := newImageServer(t, 1<<20)
	const mac = "52:54:00:bb:18:01"
	uuid := enrollAgentNode(t, "sim-clean-0", mac, img)
	mustCLI(t, "node", "set", uuid, "--bios-interface", "fake")
	m := startSimMachine(t, uuid, []string{mac}, sim.Config{})
	mustCLI(t, "node", "manage", uuid, "--wait", "60")

	mustCLI(t, "node", "clean", uuid, "--clean-steps", eraseMetadata, "--wait", "120")
	n := getNode(t, uuid)
	if n.ProvisionState != "manageable" || n.LastError != nil || deref(n.PowerState) != "power off" {
		t.Fatalf("after clean: %s, power %s, last_error %v", n.ProvisionState, deref(n.PowerState), deref(n.LastError))
	}
	if m.boots() != 1 {
		t.Fatalf("manual cleaning booted %d agents, want 1", m.boots())
	}
	var wrote int64
	for _, d := range m.current().Hardware().Disks() {
		wrote += d.BytesWritten()
	}
	if wrote == 0 {
		t.Fatal("erase_devices_metadata wrote nothing to the simulated disk")
	}
	if _, ok := n.DriverInternalInfo["clean_steps"]; ok {
		t.Fatalf("clean_steps kept after cleaning: %v", n.DriverInternalInfo)
	}
	if cached, _ := n.DriverInternalInfo["agent_cached_clean_steps"].([]any); len(cached) == 0 {
		t.Fatalf("the agent's clean steps are not cached: %v", n.DriverInternalInfo)
	}
	if hist := mustCLI(t, "node", "history", "list", uuid, "-f", "json"); !strings.Contains(hist, "Manual cleaning finished") {
		t.Fatalf("node history has no \"Manual cleaning finished\":\n%s", hist)
	}

	// An unknown step: 400 with Ironic's message, nothing boots, the node
	// stays manageable.
	var fault struct {
		Error string `json:"error_message"`
	}
	code, _ := call(t, "PUT", "/v1/nodes/"+uuid+"/states/provision", map[string]any{
		"target": "clean", "clean_steps": []map[string]any{{"interface": "deploy", "step": "erase_everything"}}}, &fault)
	want := "Cannot clean node " + uuid + ": node does not support this clean step: {'interface': 'deploy', 'step': 'erase_everything'}"
	if code != 400 || !strings.Contains(fault.Error, want) {
		t.Fatalf("unknown step: %d %q, want 400 with %q", code, fault.Error, want)
	}
	// A step with an argument it does not declare: 400 as well.
	code, _ = call(t, "PUT", "/v1/nodes/"+uuid+"/states/provision", map[string]any{
		"target": "clean", "clean_steps": []map[string]any{{"interface": "bios", "step": "factory_reset", "args": map[string]any{"force": true}}}}, &fault)
	if code != 400 || !strings.Contains(fault.Error, "has these unexpected arguments: force") {
		t.Fatalf("unexpected argument: %d %q, want 400", code, fault.Error)
	}
	// An agent step with disable_ramdisk: 400, it needs the agent.
	code, _ = call(t, "PUT", "/v1/nodes/"+uuid+"/states/provision", map[string]any{
		"target": "clean", "disable_ramdisk": true, "clean_steps": []map[string]any{{"interface": "deploy", "step": "erase_devices_metadata"}}}, &fault)
	if code != 400 || !strings.Contains(fault.Error, "requires booting a ramdisk") {
		t.Fatalf("agent step without the ramdisk: %d %q, want 400", code, fault.Error)
	}
	time.Sleep(time.Second)
	if n := getNode(t, uuid); n.ProvisionState != "manageable" || m.boots() != 1 {
		t.Fatalf("a refused plan moved the node (%s) or booted an agent (%d boots)", n.ProvisionState, m.boots())
	}

	// An interface's step without the agent.
	if code, _ := call(t, "PUT", "/v1/nodes/"+uuid+"/states/provision", map[string]any{
		"target": "clean", "disable_ramdisk": true, "clean_steps": []map[string]any{{"interface": "bios", "step": "factory_reset"}}}, nil); code != 202 {
		t.Fatalf("clean with disable_ramdisk: %d", code)
	}
	waitState(t, uuid, "manageable", 60*time.Second)
	if m.boots() != 1 {
		t.Fatal("cleaning with disable_ramdisk booted the agent")
	}
	if hist := mustCLI(t, "node", "history", "list", uuid, "-f", "json"); !strings.Contains(hist, "Step bios.factory_reset ran") {
		t.Fatalf("node history does not show the bios step:\n%s", hist)
	}
}

// TestManualCleanFailureAndAbort: a clean step the agent fails leaves the
// node in clean failed with a last_error naming the step; abort of a
// running abortable step ends in clean failed with Ironic's words.
func TestManualCleanFailureAndAbort(t *testing.T) {
	img := newImageServer(t, 1<<20)
	const mac = "52:54:00:bb:18:02"
	uuid := enrollAgentNode(t, "sim-clean-1", mac, img)
	startSimMachine(t, uuid, []string{mac}, sim.Config{FailureRate: 1, FailCommands: []string{"clean.execute_clean_step"}})
	mustCLI(t, "node", "manage", uuid, "--wait", "60")

	if _, _, err := baremetal(t, "node", "clean", uuid, "--clean-steps", eraseMetadata); err != nil {
		t.Fatalf("node clean: %v", err)
	}
	n := waitState(t, uuid, "clean failed", 120*time.Second)
	if !strings.Contains(deref(n.LastError), "deploy.erase_devices_metadata") {
		t.Fatalf("last_error %q does not name the failed step", deref(n.LastError))
	}
	// The failed step waits for the operator; abort ends it.
	mustCLI(t, "node", "abort", uuid)
	deadline := time.Now().Add(30 * time.Second)
	for n = getNode(t, uuid); !strings.Contains(deref(n.LastError), "By request, the clean operation was aborted") && time.Now().Before(deadline); n = getNode(t, uuid) {
		time.Sleep(200 * time.Millisecond)
	}
	if n.ProvisionState != "clean failed" || !strings.Contains(deref(n.LastError), "By request, the clean operation was aborted") {
		t.Fatalf("after abort: %s, last_error %q", n.ProvisionState, deref(n.LastError))
	}
	mustCLI(t, "node", "manage", uuid, "--wait", "60")

	// A slow agent: abort while erase_devices_metadata (abortable) runs
	// in clean wait.
	const mac2 = "52:54:00:bb:18:03"
	uuid2 := enrollAgentNode(t, "sim-clean-2", mac2, img)
	startSimMachine(t, uuid2, []string{mac2}, sim.Config{Latency: 20 * time.Second})
	mustCLI(t, "node", "manage", uuid2, "--wait", "60")
	if _, _, err := baremetal(t, "node", "clean", uuid2, "--clean-steps", eraseMetadata); err != nil {
		t.Fatalf("node clean: %v", err)
	}
	deadline = time.Now().Add(150 * time.Second)
	for {
		var full struct {
			ProvisionState string         `json:"provision_state"`
			CleanStep      map[string]any `json:"clean_step"`
		}
		call(t, "GET", "/v1/nodes/"+uuid2, nil, &full)
		if full.ProvisionState == "clean wait" && full.CleanStep["step"] == "erase_devices_metadata" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the node never showed erase_devices_metadata running in clean wait (%s %v)\n%s", full.ProvisionState, full.CleanStep, workerLog())
		}
		time.Sleep(200 * time.Millisecond)
	}
	mustCLI(t, "node", "abort", uuid2)
	n = waitState(t, uuid2, "clean failed", 60*time.Second)
	if want := `By request, the clean operation was aborted on step "deploy.erase_devices_metadata"`; deref(n.LastError) != want {
		t.Fatalf("last_error %q, want %q", deref(n.LastError), want)
	}
}
