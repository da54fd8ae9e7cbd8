package apiserver

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/ironflow/ironflow/store"
)

// A deploy's own deploy_steps are checked before it starts, as Ironic's
// conductor checks them (skip_missing): a step given twice, an argument
// the step does not declare, the core step raised, are 400 with Ironic's
// message; a step not known before the agent runs passes, for the deploy to
// check once the agent has reported its steps.
func TestDeployStepsCheckedBeforeTheDeployStarts(t *testing.T) {
	n := &store.Node{UUID: "1be26c0b-03f2-4d2e-ae87-c02d7f33c123"}
	prefix := "Failed to validate deploy or power info for node " + n.UUID + `: Validation of deploy steps from "deploy steps" argument failed.`
	for _, c := range []struct {
		name, steps, want string
	}{
		{"duplicate", `[{"interface":"deploy","step":"erase_devices_metadata","priority":90},{"interface":"deploy","step":"erase_devices_metadata","priority":85}]`,
			prefix + "deploy steps from all deploy templates matching this node's instance traits cannot have the same interface and step. " +
				"Duplicate deploy steps for deploy.erase_devices_metadata"},
		{"unexpected argument", `[{"interface":"deploy","step":"erase_devices_metadata","priority":90,"args":{"wipe":true}}]`,
			prefix + "deploy step {'interface': 'deploy', 'step': 'erase_devices_metadata', 'args': {'wipe': True}, 'priority': 90} has these unexpected arguments: wipe"},
		{"core step", `[{"interface":"deploy","step":"deploy","priority":5}]`,
			prefix + "deploy step deploy on interface deploy is a core step and cannot be overridden by user steps. It may be disabled by setting the priority to 0"},
		{"not known yet", `[{"interface":"deploy","step":"apply_firmware_settings","priority":70}]`, ""},
		{"the agent's argument", `[{"interface":"deploy","step":"write_image","priority":80,"args":{"configdrive":"x"}}]`, ""},
	} {
		err := checkUserDeploySteps(n, json.RawMessage(c.steps))
		if c.want == "" {
			if err != nil {
				t.Errorf("%s: refused: %v", c.name, err)
			}
			continue
		}
		if e, ok := err.(*apiError); !ok || e.status != http.StatusBadRequest || e.msg != c.want {
			t.Errorf("%s: error\n%v\nwant 400\n%s", c.name, err, c.want)
		}
	}
}

// Through the API: a deploy whose deploy_steps name a step twice is 400
// and starts nothing.
func TestDeployWithADuplicateStepIsRefused(t *testing.T) {
	e := newEnv(t)
	uuid := e.createNode(map[string]any{"driver": "fake-hardware", "name": "dup-steps"})["uuid"].(string)
	e.setState(uuid, "available")
	before := len(e.eng.provisions)
	step := map[string]any{"interface": "deploy", "step": "erase_devices_metadata", "priority": 90}
	r := e.do("PUT", "/v1/nodes/"+uuid+"/states/provision", "1.78", map[string]any{"target": "active", "deploy_steps": []any{step, step}})
	want := "Failed to validate deploy or power info for node " + uuid + `: Validation of deploy steps from "deploy steps" argument failed.` +
		"deploy steps from all deploy templates matching this node's instance traits cannot have the same interface and step. " +
		"Duplicate deploy steps for deploy.erase_devices_metadata"
	if r.status != 400 || r.faultstring(t) != want {
		t.Fatalf("deploy with a duplicate step: %d %s, want 400 %q", r.status, r.body, want)
	}
	if len(e.eng.provisions) != before || e.node(uuid).ProvisionState != "available" {
		t.Fatalf("a refused deploy started: %d provisions, state %s", len(e.eng.provisions), e.node(uuid).ProvisionState)
	}
}

// A deploy template's step is checked as the user's, with Ironic's prefix
// naming the matching templates.
func TestDeployTemplateStepWithBadArgsIsRefused(t *testing.T) {
	e := newEnv(t)
	tpl := map[string]any{"name": "CUSTOM_BAD_ARGS", "steps": []any{map[string]any{"interface": "deploy", "step": "erase_devices_metadata",
		"args": map[string]any{"wipe": true}, "priority": 90}}}
	if r := e.do("POST", "/v1/deploy_templates", vTemplates, tpl); r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	uuid := e.createNode(map[string]any{"driver": "fake-hardware", "name": "bad-args"})["uuid"].(string)
	if r := e.do("PUT", "/v1/nodes/"+uuid+"/traits", "1.78", map[string]any{"traits": []string{"CUSTOM_BAD_ARGS"}}); r.status != 204 {
		t.Fatalf("set node traits: %d %s", r.status, r.body)
	}
	if r := e.do("PATCH", "/v1/nodes/"+uuid, "1.78", []map[string]any{{"op": "add", "path": "/instance_info/traits", "value": []string{"CUSTOM_BAD_ARGS"}}}); r.status != 200 {
		t.Fatalf("set instance traits: %d %s", r.status, r.body)
	}
	e.setState(uuid, "available")
	r := e.do("PUT", "/v1/nodes/"+uuid+"/states/provision", "1.78", map[string]any{"target": "active"})
	want := "Failed to validate deploy or power info for node " + uuid + ": Validation of deploy steps from deploy templates matching this node's instance traits failed. " +
		"Matching deploy templates: CUSTOM_BAD_ARGS. Errors: deploy step {'interface': 'deploy', 'step': 'erase_devices_metadata', 'args': {'wipe': True}, 'priority': 90} " +
		"has these unexpected arguments: wipe"
	if r.status != 400 || r.faultstring(t) != want {
		t.Fatalf("deploy with a bad template step: %d %s, want 400 %q", r.status, r.body, want)
	}
}

// The agent's clean steps carry their arguments before the node's agent
// has ever reported its steps: a manual cleaning with burnin_disk's
// runtime or erase_devices' options is accepted; an argument the step does
// not have is not.
func TestCleanStepArgsAcceptedBeforeTheAgentReported(t *testing.T) {
	n := &store.Node{UUID: "1be26c0b-03f2-4d2e-ae87-c02d7f33c123"}
	req := func(steps string) provisionBody {
		return provisionBody{verb: "clean", cleanSteps: json.RawMessage(steps)}
	}
	for _, ok := range []string{
		`[{"interface":"deploy","step":"burnin_disk","args":{"runtime":30}}]`,
		`[{"interface":"deploy","step":"erase_devices","args":{"enable_ata_secure_erase":false,"shred_random_overwrite_iterations":2}}]`,
		`[{"interface":"deploy","step":"erase_devices_express","args":{"enable_nvme_secure_erase":true}}]`,
		`[{"interface":"deploy","step":"clean_uefi_nvram","args":{"match_patterns":["^ironflow"]}}]`,
	} {
		if err := checkSteps(n, req(ok)); err != nil {
			t.Errorf("%s refused: %v", ok, err)
		}
	}
	err := checkSteps(n, req(`[{"interface":"deploy","step":"burnin_disk","args":{"duration":30}}]`))
	want := "Cannot clean node " + n.UUID + ": clean step {'interface': 'deploy', 'step': 'burnin_disk', 'args': {'duration': 30}} has these unexpected arguments: duration"
	if e, ok := err.(*apiError); !ok || e.status != http.StatusBadRequest || e.msg != want {
		t.Fatalf("error %v, want 400 %q", err, want)
	}
}
