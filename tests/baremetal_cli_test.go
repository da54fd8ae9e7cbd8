package tests

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
)

// TestBaremetalCLIOnRealStack drives the unmodified baremetal CLI through a
// node's life on the real stack: PostgreSQL, the Temporal dev server, the
// api and worker processes. Provision verbs run as workflows.
func TestBaremetalCLIOnRealStack(t *testing.T) {
	out := mustCLI(t, "node", "create", "--driver", "fake-hardware", "--name", "cli-node-0",
		"--property", "cpus=4", "--property", "memory_mb=8192", "--driver-info", "fake_note=hello",
		"-f", "json")
	var created map[string]any
	if err := json.Unmarshal([]byte(out), &created); err != nil {
		t.Fatalf("node create output is not JSON: %v\n%s", err, out)
	}
	uuid, _ := created["uuid"].(string)
	if created["provision_state"] != "enroll" || uuid == "" {
		t.Fatalf("created node: %v", created)
	}
	if props, _ := created["properties"].(map[string]any); props["cpus"] != float64(4) {
		t.Fatalf("properties not kept as numbers: %v", created["properties"])
	}
	mustCLI(t, "port", "create", "52:54:00:aa:00:01", "--node", uuid)

	mustCLI(t, "node", "manage", "cli-node-0", "--wait", "60")
	if n := getNode(t, uuid); n.ProvisionState != "manageable" || n.TargetProvisionState != nil {
		t.Fatalf("after manage: %+v", n)
	}
	mustCLI(t, "node", "provide", "cli-node-0", "--wait", "60")
	if n := getNode(t, uuid); n.ProvisionState != "available" {
		t.Fatalf("after provide: %+v", n)
	}

	list := mustCLI(t, "node", "list", "-f", "json")
	if !strings.Contains(list, uuid) || !strings.Contains(list, `"Provisioning State": "available"`) {
		t.Fatalf("node list:\n%s", list)
	}
	long := mustCLI(t, "node", "list", "--long", "-f", "json")
	if !strings.Contains(long, `"Driver": "fake-hardware"`) || !strings.Contains(long, uuid) {
		t.Fatalf("node list --long:\n%s", long)
	}
	show := mustCLI(t, "node", "show", "cli-node-0", "-f", "json")
	if !strings.Contains(show, uuid) {
		t.Fatalf("node show by name:\n%s", show)
	}

	mustCLI(t, "node", "set", "cli-node-0", "--instance-info", "image_source=http://127.0.0.1:1/img.raw", "--instance-info", "root_gb=10")
	if n := getNode(t, uuid); fmt.Sprint(n.InstanceInfo["root_gb"]) != "10" {
		t.Fatalf("instance_info after set: %v", n.InstanceInfo)
	}
	mustCLI(t, "node", "unset", "cli-node-0", "--instance-info", "root_gb")
	if n := getNode(t, uuid); n.InstanceInfo["root_gb"] != nil || n.InstanceInfo["image_source"] == nil {
		t.Fatalf("instance_info after unset: %v", n.InstanceInfo)
	}
	if v := mustCLI(t, "node", "validate", "cli-node-0", "-f", "json"); !strings.Contains(v, `"Interface": "power"`) {
		t.Fatalf("validate:\n%s", v)
	}

	mustCLI(t, "node", "deploy", "cli-node-0", "--wait", "60")
	if n := getNode(t, uuid); n.ProvisionState != "active" || deref(n.PowerState) != "power on" {
		t.Fatalf("after deploy: %+v", n)
	}
	mustCLI(t, "node", "undeploy", "cli-node-0", "--wait", "60")
	if n := getNode(t, uuid); n.ProvisionState != "available" || len(n.InstanceInfo) != 0 {
		t.Fatalf("after undeploy: %+v", n)
	}
	if long := mustCLI(t, "node", "history", "list", "cli-node-0", "--long", "-f", "json"); !strings.Contains(long, "Deploy finished") {
		t.Errorf("history list --long:\n%s", long)
	}
	hist := mustCLI(t, "node", "history", "list", "cli-node-0", "-f", "json")
	for _, want := range []string{"Verified", "Deploy finished", "Undeploy finished"} {
		if !strings.Contains(hist, want) {
			t.Errorf("history has no %q event:\n%s", want, hist)
		}
	}

	// Errors, as Ironic words them.
	_, errOut, err := baremetal(t, "node", "provide", "cli-node-0")
	if err == nil || !strings.Contains(errOut, `The requested action "provide" can not be performed on node "`+uuid+`" while it is in state "available".`) || !strings.Contains(errOut, "(HTTP 400)") {
		t.Errorf("provide from available: err %v, stderr %q", err, errOut)
	}
	_, errOut, err = baremetal(t, "node", "show", "no-such-node")
	if err == nil || !strings.Contains(errOut, "Node no-such-node could not be found.") || !strings.Contains(errOut, "(HTTP 404)") {
		t.Errorf("unknown node: err %v, stderr %q", err, errOut)
	}
	_, errOut, err = baremetal(t, "--os-baremetal-api-version", "1.999", "node", "list")
	if err == nil || !strings.Contains(errOut, "1.999") {
		t.Errorf("bad microversion: err %v, stderr %q", err, errOut)
	}
	start := time.Now()
	_, errOut, err = baremetal(t, "port", "create", "52:54:00:aa:00:01", "--node", uuid)
	if err == nil || !strings.Contains(errOut, "A port with MAC address 52:54:00:aa:00:01 already exists.") || !strings.Contains(errOut, "(HTTP 409)") {
		t.Errorf("duplicate MAC: err %v, stderr %q (after %s)", err, errOut, time.Since(start))
	}

	mustCLI(t, "node", "delete", "cli-node-0")
	if code, _ := call(t, "GET", "/v1/nodes/"+uuid, nil, nil); code != 404 {
		t.Fatalf("deleted node answers %d", code)
	}
}
