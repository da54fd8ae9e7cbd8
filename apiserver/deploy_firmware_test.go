package apiserver

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/ironflow/ironflow/store"
)

// firmware.update is a deploy step of the redfish firmware interface, as in
// Ironic: deploy_steps naming it are accepted for such a node, with its
// components checked before the deploy starts; a node without that
// interface has no such step.
func TestFirmwareUpdateDeployStepChecked(t *testing.T) {
	redfish := &store.Node{UUID: "5f0c1d2e-7a3b-4c8d-9e10-f2a3b4c5d6e7", FirmwareInterface: "redfish"}
	prefix := "Failed to validate deploy or power info for node " + redfish.UUID + `: Validation of deploy steps from "deploy steps" argument failed.`
	good := `[{"interface":"firmware","step":"update","priority":110,"args":{"settings":[{"component":"bios","url":"http://images.example/bios.bin"}]}}]`
	if err := checkUserDeploySteps(redfish, json.RawMessage(good)); err != nil {
		t.Fatalf("a firmware update deploy step was refused: %v", err)
	}
	for _, c := range []struct{ name, steps, want string }{
		{"no components", `[{"interface":"firmware","step":"update","priority":110,"args":{"settings":[]}}]`,
			prefix + "Invalid firmware update []. Errors: no components to update"},
		{"unexpected argument", `[{"interface":"firmware","step":"update","priority":110,"args":{"settings":[{"component":"bios","url":"http://x/b.bin"}],"force":true}}]`,
			prefix + "deploy step {'interface': 'firmware', 'step': 'update', 'args': {'force': True, 'settings': [{'component': 'bios', 'url': 'http://x/b.bin'}]}, 'priority': 110} has these unexpected arguments: force"},
	} {
		err := checkUserDeploySteps(redfish, json.RawMessage(c.steps))
		if e, ok := err.(*apiError); !ok || e.status != http.StatusBadRequest || e.msg != c.want {
			t.Errorf("%s: error\n%v\nwant 400\n%s", c.name, err, c.want)
		}
	}
	// Without the redfish firmware interface the step is not the node's:
	// left, as any step not known before the agent runs, for the deploy to
	// refuse once the agent has reported its steps.
	plain := &store.Node{UUID: redfish.UUID}
	if err := checkUserDeploySteps(plain, json.RawMessage(`[{"interface":"firmware","step":"update","priority":110,"args":{"settings":[]}}]`)); err != nil &&
		strings.Contains(err.Error(), "firmware update") {
		t.Fatalf("the components of a step the node does not have were checked: %v", err)
	}
}

// The bios interface's apply_configuration is a deploy step too: a deploy
// template or deploy_steps naming it is checked against its argsinfo.
func TestBIOSDeployStepChecked(t *testing.T) {
	n := &store.Node{UUID: "5f0c1d2e-7a3b-4c8d-9e10-f2a3b4c5d6e8", BIOSInterface: "redfish"}
	good := `[{"interface":"bios","step":"apply_configuration","priority":110,"args":{"settings":[{"name":"ProcCores","value":"2"}]}}]`
	if err := checkUserDeploySteps(n, json.RawMessage(good)); err != nil {
		t.Fatalf("a bios deploy step was refused: %v", err)
	}
	want := "Failed to validate deploy or power info for node " + n.UUID + `: Validation of deploy steps from "deploy steps" argument failed.` +
		"deploy step {'interface': 'bios', 'step': 'apply_configuration', 'priority': 110} is missing these required arguments: settings (A list of BIOS settings to be applied)"
	err := checkUserDeploySteps(n, json.RawMessage(`[{"interface":"bios","step":"apply_configuration","priority":110}]`))
	if e, ok := err.(*apiError); !ok || e.status != http.StatusBadRequest || e.msg != want {
		t.Fatalf("error\n%v\nwant 400\n%s", err, want)
	}
}
