package e2e

import (
	"net/http"
	"strings"
	"testing"
)

// TestDeployTemplateBIOSStepOnVM: a deploy template sets a BIOS setting for
// the instance (bios.apply_configuration ProcCores=2 at priority 90, as
// Ironic's bios deploy step) on a SeaBIOS VM behind `ironflow vbmc serve`
// (Redfish, bios_interface redfish). The step runs once the agent called
// back, reboots the VM into the agent (the vbmc applies the setting at
// the start: QEMU -smp 2), and write_image runs after the agent's call-back
// from that boot; the deployed disk boots and the setting is cached.
func TestDeployTemplateBIOSStepOnVM(t *testing.T) {
	s, vm, sum := rescueLab(t, "node-tmpl-bios", "52:54:00:e2:1d:3c", FirmwareBIOS)
	bmc := startRedfishBMC(t, s, vmDefinition(vm, 1, AgentMemoryMB, vmDiskSize))
	uuid := createRedfishNode(t, s, bmc, vm.Name, vm.Firmware, vm.MAC,
		"--deploy-interface", "direct", "--boot-interface", "ipxe", "--bios-interface", "redfish")
	defer printNodeHistory(t, s, uuid)

	const trait = "CUSTOM_E2E_BIOS_TWO_CORES"
	s.mustCLI(t, "deploy", "template", "create", trait, "--steps",
		`[{"interface": "bios", "step": "apply_configuration", "priority": 90, "args": {"settings": [{"name": "ProcCores", "value": "2"}]}}]`)
	s.mustCLI(t, "node", "add", "trait", uuid, trait)
	s.mustCLI(t, "node", "set", uuid, "--instance-info", `traits=["`+trait+`"]`)

	defer printTimeline(t, s, uuid, "deploy with a BIOS deploy template")
	deployBooted(t, s, uuid, vm, sum)

	requireHistoryOrder(t, s.lab, uuid,
		"Running deploy step bios.apply_configuration (priority 90) out of band",
		"after step bios.apply_configuration rebooted the node",
		"Deploy step bios.apply_configuration finished")
	if f := s.nodeFields(t, uuid); f["provision_state"] != "active" {
		t.Fatalf("node after the deploy: %s", s.nodeShow(t, uuid))
	}
	raw, err := workflowHistory(s, uuid)
	if err != nil {
		t.Fatal(err)
	}
	if ran, err := agentStepsScheduled(raw); err != nil || stepPosition(ran, "deploy.write_image") < 0 {
		t.Fatalf("agent steps of the deploy: %v (%v)", ran, err)
	}
	bmc.checkSMPApplied(t, vm)
	if code, body := biosAPI(t, s, http.MethodGet, "/v1/nodes/"+uuid+"/bios/ProcCores", "1.74", nil); code != http.StatusOK || !strings.Contains(string(body), `"value":"2"`) {
		t.Errorf("GET bios/ProcCores: HTTP %d: %s, want the value 2 cached", code, body)
	}
}
