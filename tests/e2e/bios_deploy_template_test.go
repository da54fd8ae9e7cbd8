package e2e

import (
	"net/http"
	"os"
	"path/filepath"
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

	events := historyEvents(t, s.lab, uuid)
	at := func(substr string) int {
		for i, e := range events {
			if strings.Contains(e, substr) {
				return i
			}
		}
		return -1
	}
	run := at("Running deploy step bios.apply_configuration (priority 90) out of band")
	back := at("after step bios.apply_configuration rebooted the node")
	done := at("Deploy step bios.apply_configuration finished")
	if run < 0 || back < 0 || done < 0 || !(run < back && back < done) {
		t.Fatalf("history order: step %d, call-back %d, finished %d:\n%s", run, back, done, strings.Join(events, "\n"))
	}
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
	qlog, _ := os.ReadFile(filepath.Join(bmc.stateDir, vm.Name, "qemu.log"))
	var starts []string
	for _, line := range strings.Split(string(qlog), "\n") {
		if strings.Contains(line, " starting: ") {
			starts = append(starts, line)
		}
	}
	if len(starts) < 2 || !strings.Contains(starts[len(starts)-1], "-smp 2") || !strings.Contains(starts[0], "-smp 1") {
		t.Errorf("QEMU starts, want -smp 1 first and -smp 2 last:\n%s", strings.Join(starts, "\n"))
	}
	if code, body := biosAPI(t, s, http.MethodGet, "/v1/nodes/"+uuid+"/bios/ProcCores", "1.74", nil); code != http.StatusOK || !strings.Contains(string(body), `"value":"2"`) {
		t.Errorf("GET bios/ProcCores: HTTP %d: %s, want the value 2 cached", code, body)
	}
}
