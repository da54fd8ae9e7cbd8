package apiserver

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/ironflow/ironflow/store"
)

// A manual cleaning's steps are checked against the agent's steps the
// node cached (driver_internal_info agent_cached_clean_steps) when it has
// them, else against the ironflow agent's, and against the interfaces'.
func TestCheckStepsUsesTheCachedAgentSteps(t *testing.T) {
	n := &store.Node{UUID: "1be26c0b-03f2-4d2e-ae87-c02d7f33c123", BIOSInterface: "fake"}
	req := func(steps string) provisionBody {
		return provisionBody{verb: "clean", cleanSteps: json.RawMessage(steps)}
	}
	metadata := `[{"interface":"deploy","step":"erase_devices_metadata"}]`
	if err := checkSteps(n, req(metadata)); err != nil {
		t.Fatalf("erase_devices_metadata refused without a cache: %v", err)
	}
	if err := checkSteps(n, req(`[{"interface":"bios","step":"factory_reset"}]`)); err != nil {
		t.Fatalf("the fake BIOS step refused: %v", err)
	}
	n.DriverInternalInfo = map[string]any{"agent_cached_clean_steps": []any{
		map[string]any{"interface": "deploy", "step": "erase_devices", "priority": 10, "abortable": true, "argsinfo": nil}}}
	err := checkSteps(n, req(metadata))
	want := "Cannot clean node " + n.UUID + ": node does not support this clean step: {'interface': 'deploy', 'step': 'erase_devices_metadata'}"
	if e, ok := err.(*apiError); !ok || e.status != http.StatusBadRequest || !strings.Contains(e.Error(), want) {
		t.Fatalf("error %v, want 400 %q", err, want)
	}
}

// A firmware update's settings are checked with the request: a malformed
// checksum or no components is the request's 400, before anything runs.
func TestCheckStepsRefusesMalformedFirmwareSettings(t *testing.T) {
	n := &store.Node{UUID: "1be26c0b-03f2-4d2e-ae87-c02d7f33c124", FirmwareInterface: "redfish"}
	req := func(settings string) provisionBody {
		return provisionBody{verb: "clean", disableRamdisk: true,
			cleanSteps: json.RawMessage(`[{"interface":"firmware","step":"update","args":{"settings":` + settings + `}}]`)}
	}
	good := `[{"component":"bios","url":"http://images.example/bios.bin","checksum":"sha256:` + strings.Repeat("a", 64) + `"}]`
	if err := checkSteps(n, req(good)); err != nil {
		t.Fatalf("a well-formed update refused: %v", err)
	}
	for _, bad := range []string{
		`[{"component":"bios","url":"http://images.example/bios.bin","checksum":"abc"}]`,
		`[]`,
	} {
		err := checkSteps(n, req(bad))
		want := "Cannot clean node " + n.UUID + ": Invalid firmware update"
		if e, ok := err.(*apiError); !ok || e.status != http.StatusBadRequest || !strings.Contains(e.Error(), want) {
			t.Errorf("settings %s: error %v, want 400 %q", bad, err, want)
		}
	}
}

// raid_interface agent: the agent's software RAID steps are in-band clean
// steps the manual cleaning is checked against, with the agent's cached
// steps or without; with disable_ramdisk they are refused as needing the
// ramdisk; a node on no-raid does not have them.
func TestCheckStepsKnowsTheAgentRAIDSteps(t *testing.T) {
	n := &store.Node{UUID: "1be26c0b-03f2-4d2e-ae87-c02d7f33c1a7", RAIDInterface: "agent"}
	create := provisionBody{verb: "clean", cleanSteps: json.RawMessage(`[{"interface":"raid","step":"create_configuration","args":{"delete_existing":true}},{"interface":"raid","step":"delete_configuration"}]`)}
	if err := checkSteps(n, create); err != nil {
		t.Fatalf("raid steps refused on raid_interface agent: %v", err)
	}
	n.DriverInternalInfo = map[string]any{"agent_cached_clean_steps": []any{
		map[string]any{"interface": "deploy", "step": "erase_devices", "priority": 10, "abortable": true, "argsinfo": nil}}}
	if err := checkSteps(n, create); err != nil {
		t.Fatalf("raid steps refused with a cache from before raid_interface agent: %v", err)
	}
	create.disableRamdisk = true
	if err := checkSteps(n, create); err == nil || !strings.Contains(err.Error(), "'step': 'create_configuration', 'args': {'delete_existing': True}} requires booting a ramdisk") {
		t.Fatalf("raid steps with disable_ramdisk: %v, want a refusal naming the step", err)
	}
	create.disableRamdisk = false
	n.RAIDInterface = "no-raid"
	if err := checkSteps(n, create); err == nil || !strings.Contains(err.Error(), "node does not support this clean step") {
		t.Fatalf("raid steps on no-raid: %v", err)
	}
}
