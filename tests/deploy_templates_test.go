package tests

import (
	"encoding/json"
	"strings"
	"testing"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/ironflow/ironflow/agent/sim"
)

// TestDeployTemplateStepRunsOnDeploy: a deploy template made with the
// unmodified `baremetal deploy template` commands adds its step to the
// deploy of a node whose instance_info/traits names it. The template's
// deploy.erase_devices_metadata at priority 85 (the agent advertises it at
// 0, so a plain deploy never runs it) runs on the simulated agent before
// write_image (80), as the workflow history shows.
//
// Runbooks have no `baremetal runbook` command in the Debian client (5.0.1)
// and need API 1.92: apiserver/runbooks_test.go covers them.
func TestDeployTemplateStepRunsOnDeploy(t *testing.T) {
	const trait = "CUSTOM_ERASE_BEFORE_IMAGE"
	steps := `[{"interface": "deploy", "step": "erase_devices_metadata", "args": {}, "priority": 85}]`
	out := mustCLI(t, "deploy", "template", "create", trait, "--steps", steps, "--extra", "purpose=test", "-f", "json")
	var created struct {
		UUID  string           `json:"uuid"`
		Name  string           `json:"name"`
		Steps []map[string]any `json:"steps"`
	}
	if err := json.Unmarshal([]byte(out), &created); err != nil || created.Name != trait || len(created.Steps) != 1 {
		t.Fatalf("deploy template create: %v\n%s", err, out)
	}
	defer mustCLI(t, "deploy", "template", "delete", trait)
	if list := mustCLI(t, "deploy", "template", "list", "-f", "json"); !strings.Contains(list, created.UUID) {
		t.Fatalf("deploy template list does not show %s:\n%s", created.UUID, list)
	}
	if show := mustCLI(t, "deploy", "template", "show", trait, "-f", "json"); !strings.Contains(show, "erase_devices_metadata") || !strings.Contains(show, created.UUID) {
		t.Fatalf("deploy template show:\n%s", show)
	}
	if _, errOut, err := baremetal(t, "deploy", "template", "create", "NOT_A_TRAIT", "--steps", steps); err == nil ||
		!strings.Contains(errOut, "is not valid under any of the given schemas") {
		t.Fatalf("a name that is no trait: %v %s", err, errOut)
	}

	img := newImageServer(t, 8<<20)
	uuid := enrollAgentNode(t, "template-node-0", "52:54:00:7e:01:01", img)
	startSimMachine(t, uuid, []string{"52:54:00:7e:01:01"}, sim.Config{})
	mustCLI(t, "node", "add", "trait", uuid, trait)
	// The CLI deserializes the JSON list, as docs/api.md shows.
	mustCLI(t, "node", "set", uuid, "--instance-info", `traits=["`+trait+`"]`)
	if got, _ := getNode(t, uuid).InstanceInfo["traits"].([]any); len(got) != 1 || got[0] != trait {
		t.Fatalf("instance_info/traits after node set: %v", getNode(t, uuid).InstanceInfo["traits"])
	}
	mustCLI(t, "node", "manage", uuid, "--wait", "60")
	mustCLI(t, "node", "provide", uuid, "--wait", "120")
	mustCLI(t, "node", "deploy", uuid, "--wait", "180")
	if n := getNode(t, uuid); n.ProvisionState != "active" {
		t.Fatalf("after deploy: %+v", n)
	}

	// The deploy's history: the template's step ran on the agent, before
	// the image was written.
	c := temporalClient(t)
	order := []string{}
	historyCount(t, c, uuid, func(et enumspb.EventType, s string) bool {
		if et != enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED || !strings.Contains(s, "RunAgentStep") {
			return false
		}
		for _, step := range []string{"erase_devices_metadata", "write_image"} {
			if strings.Contains(s, step) {
				order = append(order, step)
			}
		}
		return false
	})
	if len(order) < 2 || order[0] != "erase_devices_metadata" || !contains(order, "write_image") {
		t.Fatalf("agent steps of the deploy, in order: %v; want the template's erase_devices_metadata before write_image", order)
	}
	hist := mustCLI(t, "node", "history", "list", uuid, "-f", "json")
	t.Logf("deploy with template %s: agent steps %v\n%s", trait, order, hist[:min(len(hist), 2000)])
}

func contains(list []string, s string) bool {
	for _, e := range list {
		if e == s {
			return true
		}
	}
	return false
}
