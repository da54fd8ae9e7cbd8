package tests

import (
	"strings"
	"testing"
	"time"

	"github.com/ironflow/ironflow/agent/sim"
)

// callService is call at API 1.87, where the service verb and a node's
// service_step are served.
func callService(t *testing.T, method, path string, body any, out any) int {
	t.Helper()
	code, _ := callAt(t, lab.APIURL, "1.87", method, path, body, out)
	return code
}

// activeSimNode deploys a node through the simulated agent.
func activeSimNode(t *testing.T, name, mac string, cfg sim.Config) (string, *simMachine) {
	t.Helper()
	img := newImageServer(t, 1<<20)
	uuid := enrollAgentNode(t, name, mac, img)
	m := startSimMachine(t, uuid, []string{mac}, cfg)
	mustCLI(t, "node", "manage", uuid, "--wait", "60")
	mustCLI(t, "node", "provide", uuid, "--wait", "120")
	mustCLI(t, "node", "deploy", uuid, "--wait", "180")
	return uuid, m
}

// waitAgentOff waits for the service agent to power off (the agent powers
// off after it answered the command).
func waitAgentOff(t *testing.T, m *simMachine) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); m.current().PoweredOn(); time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("the service agent still runs: the instance did not boot again\n%s", workerLog())
		}
	}
}

func serviceSteps(steps ...map[string]any) map[string]any {
	return map[string]any{"target": "service", "service_steps": steps}
}

// TestServiceWithSimulatedAgent services an active node (API 1.87):
// active → servicing → service wait → active with the agent's burnin_cpu
// and erase_pstore; one agent boots, the instance boots again from disk
// (powered on, the agent off), the plan is removed from
// driver_internal_info and the agent's service steps are cached. Below
// 1.87 the verb is 406; without service_steps, or with a step the agent
// lacks, 400 with Ironic's messages.
func TestServiceWithSimulatedAgent(t *testing.T) {
	uuid, m := activeSimNode(t, "sim-service-0", "52:54:00:bb:19:01", sim.Config{})
	boots := m.boots()

	if code, _ := call(t, "PUT", "/v1/nodes/"+uuid+"/states/provision", serviceSteps(map[string]any{"interface": "deploy", "step": "erase_pstore"}), nil); code != 406 {
		t.Fatalf("service at 1.78: %d, want 406", code)
	}
	var fault struct {
		Error string `json:"error_message"`
	}
	if code := callService(t, "PUT", "/v1/nodes/"+uuid+"/states/provision", map[string]any{"target": "service"}, &fault); code != 400 ||
		!strings.Contains(fault.Error, `is required when setting target provision state to service`) || !strings.Contains(fault.Error, "service_steps") {
		t.Fatalf("service without steps: %d %q", code, fault.Error)
	}
	if code := callService(t, "PUT", "/v1/nodes/"+uuid+"/states/provision", serviceSteps(map[string]any{"interface": "deploy", "step": "erase_everything"}), &fault); code != 400 ||
		!strings.Contains(fault.Error, "Cannot service node "+uuid+": node does not support this service step: {'interface': 'deploy', 'step': 'erase_everything'}") {
		t.Fatalf("service with an unknown step: %d %q", code, fault.Error)
	}
	if n := getNode(t, uuid); n.ProvisionState != "active" || m.boots() != boots {
		t.Fatalf("a refused service moved the node (%s) or booted the agent", n.ProvisionState)
	}

	if code := callService(t, "PUT", "/v1/nodes/"+uuid+"/states/provision", serviceSteps(
		map[string]any{"interface": "deploy", "step": "burnin_cpu", "args": map[string]any{"timeout": 1}},
		map[string]any{"interface": "deploy", "step": "erase_pstore"},
	), nil); code != 202 {
		t.Fatalf("service: %d", code)
	}
	sawServiceStep := false
	deadline := time.Now().Add(180 * time.Second)
	for {
		var full struct {
			ProvisionState string         `json:"provision_state"`
			ServiceStep    map[string]any `json:"service_step"`
			LastError      *string        `json:"last_error"`
		}
		callService(t, "GET", "/v1/nodes/"+uuid, nil, &full)
		if full.ProvisionState == "service wait" && full.ServiceStep["step"] != nil {
			sawServiceStep = true
		}
		if full.ProvisionState == "active" {
			if len(full.ServiceStep) != 0 {
				t.Fatalf("service_step kept after servicing: %v", full.ServiceStep)
			}
			break
		}
		if full.ProvisionState == "service failed" || time.Now().After(deadline) {
			t.Fatalf("servicing: %s, last_error %v\n%s", full.ProvisionState, deref(full.LastError), workerLog())
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !sawServiceStep {
		t.Log("service_step was never seen in service wait (the steps ran between polls)")
	}
	n := getNode(t, uuid)
	if n.LastError != nil || deref(n.PowerState) != "power on" {
		t.Fatalf("after servicing: power %s, last_error %v", deref(n.PowerState), deref(n.LastError))
	}
	if m.boots() != boots+1 {
		t.Fatalf("servicing booted %d agents, want 1", m.boots()-boots)
	}
	waitAgentOff(t, m)
	if _, ok := n.DriverInternalInfo["service_steps"]; ok {
		t.Fatalf("service_steps kept after servicing: %v", n.DriverInternalInfo)
	}
	if cached, _ := n.DriverInternalInfo["agent_cached_service_steps"].([]any); len(cached) == 0 {
		t.Fatalf("the agent's service steps are not cached: %v", n.DriverInternalInfo)
	}
	hist := mustCLI(t, "node", "history", "list", uuid, "-f", "json")
	for _, want := range []string{"Servicing finished", "Running step deploy.burnin_cpu on the agent", "Running step deploy.erase_pstore on the agent"} {
		if !strings.Contains(hist, want) {
			t.Fatalf("node history has no %q:\n%s", want, hist)
		}
	}
}

// TestServiceFailureAndAbort: a service step the agent fails leaves the
// node in service failed with a last_error naming the step; abort there
// is Ironic's service failed → active, the instance booted again.
func TestServiceFailureAndAbort(t *testing.T) {
	uuid, m := activeSimNode(t, "sim-service-1", "52:54:00:bb:19:02",
		sim.Config{FailureRate: 1, FailCommands: []string{"service.execute_service_step"}})
	boots := m.boots()
	if code := callService(t, "PUT", "/v1/nodes/"+uuid+"/states/provision", serviceSteps(map[string]any{"interface": "deploy", "step": "erase_pstore"}), nil); code != 202 {
		t.Fatalf("service: %d", code)
	}
	n := waitState(t, uuid, "service failed", 180*time.Second)
	if !strings.Contains(deref(n.LastError), "Service failed at step deploy.erase_pstore") {
		t.Fatalf("last_error %q does not name the failed step", deref(n.LastError))
	}
	if m.boots() != boots+1 {
		t.Fatalf("servicing booted %d agents, want 1", m.boots()-boots)
	}
	mustCLI(t, "node", "abort", uuid)
	// The node's workflow carries the abort out: until it does, the node
	// is still in service failed, which waitState takes for a failure.
	deadline := time.Now().Add(60 * time.Second)
	for n = getNode(t, uuid); n.ProvisionState == "service failed" && time.Now().Before(deadline); n = getNode(t, uuid) {
		time.Sleep(200 * time.Millisecond)
	}
	n = waitState(t, uuid, "active", 120*time.Second)
	waitAgentOff(t, m)
	if deref(n.PowerState) != "power on" {
		t.Fatalf("after abort: power %s, agent on %v\n%s", deref(n.PowerState), m.current().PoweredOn(), workerLog())
	}
	if hist := mustCLI(t, "node", "history", "list", uuid, "-f", "json"); !strings.Contains(hist, "Servicing aborted: the node is active again") {
		t.Fatalf("node history has no abort:\n%s", hist)
	}
}
