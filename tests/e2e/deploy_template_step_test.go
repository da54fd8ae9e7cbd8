package e2e

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/ironflow/ironflow/workflows"
)

// TestDeployTemplateAgentStepOnVM deploys a SeaBIOS VM (IPMI, PXE, the
// ironflow agent) whose instance_info/traits names a deploy template made
// with the unmodified `baremetal deploy template create`: the template's
// step is one of the agent's own deploy steps, deploy.erase_devices_metadata
// (IPA offers it as a deploy step at priority 0, so a plain deploy never
// runs it), at priority 90. DeployNode asks the agent for its deploy steps
// once it called back, merges the template's step in, and runs it between
// deploy.deploy (100) and write_image (80): the workflow history shows it
// run on the agent before the image is written, the node's history (GET
// /v1/nodes/{id}/history) shows the plan and the step, and the node ends
// active with the instance booting from its disk.
func TestDeployTemplateAgentStepOnVM(t *testing.T) {
	s, vm, sum := rescueLab(t, "node-tmpl", "52:54:00:e2:1d:01", FirmwareBIOS)
	password := newBMCPassword()
	startIPMISim(t, s, agentVM(vm), password)
	uuid := createIPMINode(t, s, vm, "e2e-tmpl", password, "--deploy-interface", "direct")
	defer printNodeHistory(t, s, uuid)

	const trait = "CUSTOM_E2E_ERASE_BEFORE_IMAGE"
	s.mustCLI(t, "deploy", "template", "create", trait, "--steps",
		`[{"interface": "deploy", "step": "erase_devices_metadata", "args": {}, "priority": 90}]`)
	s.mustCLI(t, "node", "add", "trait", uuid, trait)
	s.mustCLI(t, "node", "set", uuid, "--instance-info", `traits=["`+trait+`"]`)

	defer printTimeline(t, s, uuid, "deploy with a deploy template")
	deployBooted(t, s, uuid, vm, sum)

	raw, err := workflowHistory(s, uuid)
	if err != nil {
		t.Fatal(err)
	}
	ran, err := agentStepsScheduled(raw)
	if err != nil {
		t.Fatal(err)
	}
	if i, w := stepPosition(ran, "deploy.erase_devices_metadata"), stepPosition(ran, "deploy.write_image"); i < 0 || w < 0 || i > w {
		t.Fatalf("agent steps of the deploy, in order: %v; want the template's deploy.erase_devices_metadata before deploy.write_image", ran)
	}
	t.Logf("agent steps of the deploy, in order: %v", ran)

	hist := s.mustCLI(t, "node", "history", "list", uuid, "-f", "json")
	for _, want := range []string{
		"Deploy steps: deploy.deploy (100), deploy.erase_devices_metadata (90), deploy.write_image (80)",
		"Running deploy step deploy.erase_devices_metadata (priority 90) on the agent",
		"Deploy step deploy.erase_devices_metadata finished",
	} {
		if !strings.Contains(hist, want) {
			t.Errorf("node history lacks %q:\n%s", want, hist)
		}
	}
	f := s.nodeFields(t, uuid)
	if f["provision_state"] != "active" {
		t.Fatalf("node after the deploy: %s", s.nodeShow(t, uuid))
	}
	if step, _ := f["deploy_step"].(map[string]any); len(step) != 0 {
		t.Errorf("deploy_step of the active node %v, want {}", step)
	}
	if dii, _ := f["driver_internal_info"].(map[string]any); dii["deploy_steps"] != nil || dii["deploy_step_index"] != nil {
		t.Errorf("driver_internal_info keeps the finished deploy's steps: %v", dii)
	}
}

// agentStepsScheduled lists the steps of the RunAgentStep activities a history
// scheduled (interface.step), in order.
func agentStepsScheduled(raw []byte) ([]string, error) {
	var h struct {
		Events []struct {
			Scheduled *struct {
				ActivityType struct{ Name string } `json:"activityType"`
				Input        struct {
					Payloads []struct {
						Data []byte `json:"data"`
					} `json:"payloads"`
				} `json:"input"`
			} `json:"activityTaskScheduledEventAttributes"`
		} `json:"events"`
	}
	if err := json.Unmarshal(raw, &h); err != nil {
		return nil, fmt.Errorf("decode history: %w", err)
	}
	var out []string
	for _, e := range h.Events {
		if e.Scheduled == nil || e.Scheduled.ActivityType.Name != workflows.ActRunAgentStep {
			continue
		}
		var in workflows.AgentStepInput
		if len(e.Scheduled.Input.Payloads) == 0 || json.Unmarshal(e.Scheduled.Input.Payloads[0].Data, &in) != nil {
			return nil, fmt.Errorf("a %s activity without a readable input", workflows.ActRunAgentStep)
		}
		out = append(out, in.Step.Name())
	}
	return out, nil
}

func stepPosition(list []string, s string) int {
	for i, e := range list {
		if e == s {
			return i
		}
	}
	return -1
}
