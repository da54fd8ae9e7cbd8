package tests

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ironflow/ironflow/agent"
	"github.com/ironflow/ironflow/agent/sim"
)

// TestCustomAgentDeployRunsTheImagesStep deploys a custom-agent node as
// Metal3's baremetal-operator does for a host's customDeploy: no image in
// instance_info, and PUT states/provision {"target": "active",
// "deploy_steps": [<the method, priority 80>]}. The simulated agent offers
// the step (agent.Config CustomDeploySteps, as an image's
// /etc/ironflow-agent/deploy-steps.d would), runs it once with its args,
// and the node ends active and powered on, nothing downloaded or written.
func TestCustomAgentDeployRunsTheImagesStep(t *testing.T) {
	const mac = "52:54:00:c5:00:01"
	var n node
	if code, _ := call(t, "POST", "/v1/nodes", map[string]any{
		"name": "custom-agent-0", "driver": "fake-hardware", "deploy_interface": "custom-agent",
		"properties": map[string]any{"cpus": 2, "memory_mb": 2048, "local_gb": 20},
	}, &n); code != 201 {
		t.Fatalf("create a custom-agent node: %d", code)
	}
	if code, _ := call(t, "POST", "/v1/ports", map[string]any{"address": mac, "node_uuid": n.UUID}, nil); code != 201 {
		t.Fatalf("create port: %d", code)
	}
	// No image_source: custom-agent's validation asks for none.
	var v map[string]map[string]any
	if code, _ := call(t, "GET", "/v1/nodes/"+n.UUID+"/validate", nil, &v); code != 200 || v["deploy"]["result"] != true {
		t.Fatalf("validate a custom-agent node without an image: %d %v", code, v["deploy"])
	}

	var mu sync.Mutex
	var ran []map[string]any
	step := agent.CustomStep{Name: "install_coreos", Args: map[string]string{"ignition": "the host's ignition"}, Run: func(_ context.Context, args, _ map[string]any) (any, error) {
		mu.Lock()
		defer mu.Unlock()
		ran = append(ran, args)
		return "installed", nil
	}}
	m := startSimMachine(t, n.UUID, []string{mac}, sim.Config{CustomDeploySteps: []agent.CustomStep{step}})
	mustCLI(t, "node", "manage", n.UUID, "--wait", "60")
	mustCLI(t, "node", "provide", n.UUID, "--wait", "120")
	boots := m.boots()

	started := time.Now()
	if code, _ := callAt(t, lab.APIURL, "1.81", "PUT", "/v1/nodes/"+n.UUID+"/states/provision", map[string]any{
		"target":       "active",
		"deploy_steps": []map[string]any{{"interface": "deploy", "step": "install_coreos", "args": map[string]any{"ignition": "x"}, "priority": 80}},
	}, nil); code != 202 {
		t.Fatalf("custom deploy: %d", code)
	}
	got := waitState(t, n.UUID, "active", 3*time.Minute)
	t.Logf("custom-agent deploy to active in %s", time.Since(started).Round(time.Millisecond))
	if deref(got.PowerState) != "power on" {
		t.Fatalf("after the custom deploy: power %q", deref(got.PowerState))
	}
	mu.Lock()
	if len(ran) != 1 || ran[0]["ignition"] != "x" {
		t.Fatalf("the agent ran install_coreos %d times with %v, want once with ignition=x", len(ran), ran)
	}
	mu.Unlock()
	if m.boots() != boots+1 {
		t.Fatalf("the deploy booted the agent %d times, want once", m.boots()-boots)
	}
	if _, ok := got.DriverInternalInfo["deploy_steps"]; ok && got.DriverInternalInfo["deploy_steps"] != nil {
		t.Fatalf("deploy_steps kept after active: %v", got.DriverInternalInfo["deploy_steps"])
	}
	hist := mustCLI(t, "node", "history", "list", n.UUID, "-f", "json", "--long")
	for _, want := range []string{
		"deploy.install_coreos (80), deploy.prepare_instance_boot (60)",
		"Running deploy step deploy.install_coreos (priority 80) on the agent",
	} {
		if !strings.Contains(hist, want) {
			t.Fatalf("history lacks %q:\n%s", want, hist)
		}
	}
	if strings.Contains(hist, "write_image") {
		t.Fatalf("a custom-agent deploy ran write_image:\n%s", hist)
	}
}
