package tests

import (
	"encoding/json"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// Allocations through the clients Nova-less deployments use, unmodified,
// against the real stack: Debian's openstacksdk (the baremetal proxy at
// API 1.79) and the baremetal CLI (python3-ironicclient, which asks for
// 1.78).

// sdkAllocationScript drives the baremetal proxy of openstacksdk: create,
// wait, get by name, list, update, a failed allocation's wait, delete.
const sdkAllocationScript = `
import json, sys
import openstack
url, rc, name = sys.argv[1:4]
conn = openstack.connect(auth_type="none", baremetal_endpoint_override=url + "/", baremetal_api_version="1.79")
bm = conn.baremetal
out = {}
a = bm.create_allocation(resource_class=rc, name=name)
out["created_state"] = a.state
a = bm.wait_for_allocation(a, timeout=60)
out["state"], out["node_id"], out["id"] = a.state, a.node_id, a.id
out["got"] = bm.get_allocation(name).id
out["listed"] = [x.id for x in bm.allocations(resource_class=rc, state="active")]
a = bm.update_allocation(a, extra={"by": "sdk"})
out["extra"] = a.extra
b = bm.create_allocation(resource_class=rc + "-nothing")
try:
    bm.wait_for_allocation(b, timeout=60)
    out["wait_error"] = None
except Exception as e:
    out["wait_error"] = str(e)
bm.delete_allocation(a)
bm.delete_allocation(b)
out["after_delete"] = [x.id for x in bm.allocations(resource_class=rc)]
print(json.dumps(out))
`

// TestAllocationsOpenstackSDK: openstacksdk's allocation calls, with the
// node named as the allocation chosen among three (1.79).
func TestAllocationsOpenstackSDK(t *testing.T) {
	if _, err := os.Stat("/usr/lib/python3/dist-packages/openstack"); err != nil {
		t.Skip("SKIPPED LOUDLY: Debian's python3-openstacksdk is not installed")
	}
	const rc = "alloc-sdk"
	nodes := allocationNodes(t, "alloc-sdk", rc, 3)
	cmd := exec.Command("/usr/bin/python3", "-c", sdkAllocationScript, lab.APIURL, rc, "alloc-sdk-2")
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("openstacksdk script: %v\n%s\n%s\nworker log:\n%s", err, out, stderr, workerLog())
	}
	var r struct {
		CreatedState string         `json:"created_state"`
		State        string         `json:"state"`
		NodeID       string         `json:"node_id"`
		ID           string         `json:"id"`
		Got          string         `json:"got"`
		Listed       []string       `json:"listed"`
		Extra        map[string]any `json:"extra"`
		WaitError    *string        `json:"wait_error"`
		AfterDelete  []string       `json:"after_delete"`
	}
	if err := json.Unmarshal(out, &r); err != nil {
		t.Fatalf("script output %q: %v", out, err)
	}
	if r.CreatedState != "allocating" || r.State != "active" || r.NodeID != nodes[2] {
		t.Errorf("create and wait: created %q, then %q on %s; want allocating, then active on the node named alloc-sdk-2 (%s)", r.CreatedState, r.State, r.NodeID, nodes[2])
	}
	if r.Got != r.ID || len(r.Listed) != 1 || r.Listed[0] != r.ID || r.Extra["by"] != "sdk" {
		t.Errorf("get, list, update: %+v", r)
	}
	if r.WaitError == nil || !strings.Contains(*r.WaitError, "no available nodes match the resource class alloc-sdk-nothing") {
		t.Errorf("waiting for an allocation nothing matches: %v, want ResourceFailure with Ironic's message", r.WaitError)
	}
	if len(r.AfterDelete) != 0 {
		t.Errorf("allocations after delete: %v", r.AfterDelete)
	}
	if n := getAllocNode(t, nodes[2]); n.InstanceUUID != nil || n.AllocationUUID != nil {
		t.Errorf("node after the SDK deleted its allocation: %+v", n)
	}
}

// TestAllocationsBaremetalCLI: baremetal allocation create --wait, list,
// show, set and delete.
func TestAllocationsBaremetalCLI(t *testing.T) {
	const rc = "alloc-cli"
	nodes := allocationNodes(t, "alloc-cli", rc, 2)
	var created map[string]any
	out := mustCLI(t, "allocation", "create", "--resource-class", rc, "--trait", "CUSTOM_NONE_HERE", "--name", "cli-miss", "-f", "json")
	if err := json.Unmarshal([]byte(out), &created); err != nil || created["state"] != "allocating" {
		t.Fatalf("allocation create: %v %s", err, out)
	}
	if a := waitAllocation(t, created["uuid"].(string)); a.State != "error" {
		t.Errorf("allocation with a trait no node has: %+v", a)
	}
	out = mustCLI(t, "allocation", "create", "--resource-class", rc, "--candidate-node", "alloc-cli-1", "--name", "cli-alloc",
		"--extra", "team=infra", "--wait", "60", "-f", "json")
	var a map[string]any
	if err := json.Unmarshal([]byte(out), &a); err != nil || a["state"] != "active" || a["node_uuid"] != nodes[1] {
		t.Fatalf("allocation create --wait: %v %s", err, out)
	}
	if list := mustCLI(t, "allocation", "list", "--resource-class", rc, "--state", "active", "-f", "json"); !strings.Contains(list, a["uuid"].(string)) || strings.Contains(list, "cli-miss") {
		t.Errorf("allocation list --state active:\n%s", list)
	}
	if list := mustCLI(t, "allocation", "list", "--node", "alloc-cli-1", "--long", "-f", "json"); !strings.Contains(list, `"Name": "cli-alloc"`) {
		t.Errorf("allocation list --node --long:\n%s", list)
	}
	mustCLI(t, "allocation", "set", "cli-alloc", "--name", "cli-alloc-2", "--extra", "team=storage")
	show := mustCLI(t, "allocation", "show", "cli-alloc-2", "-f", "json")
	var shown map[string]any
	if err := json.Unmarshal([]byte(show), &shown); err != nil || shown["name"] != "cli-alloc-2" || shown["extra"].(map[string]any)["team"] != "storage" {
		t.Errorf("allocation show after set: %v %s", err, show)
	}
	if n := mustCLI(t, "node", "show", "alloc-cli-1", "-f", "json", "--fields", "allocation_uuid"); !strings.Contains(n, a["uuid"].(string)) {
		t.Errorf("node show allocation_uuid:\n%s", n)
	}
	mustCLI(t, "allocation", "delete", "cli-alloc-2", "cli-miss")
	if list := mustCLI(t, "allocation", "list", "--resource-class", rc, "-f", "json"); strings.TrimSpace(list) != "[]" {
		t.Errorf("allocation list after delete:\n%s", list)
	}
	if n := getAllocNode(t, nodes[1]); n.InstanceUUID != nil || n.AllocationUUID != nil {
		t.Errorf("node after allocation delete: %+v", n)
	}
}
