package tests

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/ironflow/ironflow/agent/sim"
)

// The baremetal CLI for the step commands: manual cleaning, abort, deploy
// templates and what needs a later API (docs/api.md). Debian's client
// (python3-ironicclient 5.0.1) negotiates at most API 1.78: `node clean
// --clean-steps`, `node abort` and `deploy template ...` run through it;
// what needs a later version (service 1.87, unhold 1.85, runbooks 1.92,
// children 1.83, port names 1.88, virtual media 1.89 and 1.93) has no
// command in that client and goes to the API as plain HTTP (callAt, with
// X-OpenStack-Ironic-API-Version), as docs/api.md tells users to.

// at sends a raw API request at version v.
func at(t *testing.T, v, method, path string, body, out any) int {
	t.Helper()
	code, _ := callAt(t, lab.APIURL, v, method, path, body, out)
	return code
}

type apiFault struct {
	Error string `json:"error_message"`
}

// faultstring is the message inside Ironic's error_message (a JSON
// document of its own).
func (f apiFault) faultstring() string {
	var inner struct {
		Faultstring string `json:"faultstring"`
	}
	if json.Unmarshal([]byte(f.Error), &inner) != nil {
		return f.Error
	}
	return inner.Faultstring
}

// nodeStep reads the node's clean_step or service_step as interface.step.
func nodeStep(t *testing.T, uuid, field string) string {
	t.Helper()
	var n map[string]any
	if code := at(t, "1.87", "GET", "/v1/nodes/"+uuid, nil, &n); code != 200 {
		t.Fatalf("GET node %s: %d", uuid, code)
	}
	s, _ := n[field].(map[string]any)
	if s == nil {
		return ""
	}
	return s["interface"].(string) + "." + s["step"].(string)
}

// waitLeaves polls until the node is no longer in state.
func waitLeaves(t *testing.T, uuid, state string, timeout time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		n := getNode(t, uuid)
		if n.ProvisionState != state {
			return n.ProvisionState
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %s still %q after %s\nworker log:\n%s", uuid, state, timeout, workerLog())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestCLICleanHoldUnholdContinues: `baremetal node clean --clean-steps`
// with Ironic's reserved hold step between two steps pauses the manual
// cleaning in clean hold (clean_step shows the hold step, the simulated
// agent keeps heartbeating and nothing times out); unhold (raw, 1.85;
// 406 at 1.84) answers 202 once the node left clean hold, and the plan
// goes on: the bios step after the hold runs and the node ends manageable.
func TestCLICleanHoldUnholdContinues(t *testing.T) {
	img := newImageServer(t, 1<<20)
	const mac = "52:54:00:d1:85:01"
	uuid := enrollAgentNode(t, "steps-cli-hold-0", mac, img)
	mustCLI(t, "node", "set", uuid, "--bios-interface", "fake")
	m := startSimMachine(t, uuid, []string{mac}, sim.Config{})
	mustCLI(t, "node", "manage", uuid, "--wait", "60")

	steps := `[{"interface": "deploy", "step": "erase_devices_metadata"}, {"interface": "deploy", "step": "hold"}, {"interface": "bios", "step": "factory_reset"}]`
	mustCLI(t, "node", "clean", uuid, "--clean-steps", steps)
	waitState(t, uuid, "clean hold", 120*time.Second)
	if got := nodeStep(t, uuid, "clean_step"); got != "deploy.hold" {
		t.Fatalf("clean_step in clean hold: %q, want deploy.hold", got)
	}
	// Held longer than a heartbeat or two: still held, the agent alive.
	time.Sleep(3 * time.Second)
	if n := getNode(t, uuid); n.ProvisionState != "clean hold" || !m.current().PoweredOn() {
		t.Fatalf("after 3 s of hold: %s, agent on %v", n.ProvisionState, m.current().PoweredOn())
	}
	if hist := mustCLI(t, "node", "history", "list", uuid, "-f", "json"); strings.Contains(hist, "Step bios.factory_reset ran") {
		t.Fatalf("the step after the hold ran before unhold:\n%s", hist)
	}

	if code := at(t, "1.84", "PUT", "/v1/nodes/"+uuid+"/states/provision", map[string]any{"target": "unhold"}, nil); code != 406 {
		t.Fatalf("unhold at 1.84: %d, want 406", code)
	}
	if code := at(t, "1.85", "PUT", "/v1/nodes/"+uuid+"/states/provision", map[string]any{"target": "unhold"}, nil); code != 202 {
		t.Fatalf("unhold: %d, want 202", code)
	}
	if st := getNode(t, uuid).ProvisionState; st == "clean hold" {
		t.Fatal("the 202 of unhold came while the node was still in clean hold")
	}
	n := waitState(t, uuid, "manageable", 120*time.Second)
	if n.LastError != nil {
		t.Fatalf("after unhold: last_error %v", deref(n.LastError))
	}
	hist := mustCLI(t, "node", "history", "list", uuid, "-f", "json")
	for _, want := range []string{"holding until unhold", "Unhold requested", "Step bios.factory_reset ran", "Manual cleaning finished"} {
		if !strings.Contains(hist, want) {
			t.Errorf("node history has no %q:\n%s", want, hist)
		}
	}
	// Unhold outside a hold state: Ironic's state error.
	var fault apiFault
	if code := at(t, "1.85", "PUT", "/v1/nodes/"+uuid+"/states/provision", map[string]any{"target": "unhold"}, &fault); code != 400 ||
		fault.faultstring() != `The requested action "unhold" can not be performed on node "`+uuid+`" while it is in state "manageable".` {
		t.Fatalf("unhold in manageable: %d %q", code, fault.faultstring())
	}
}

// TestCLICleanHoldThenAbort: `baremetal node abort` in clean hold ends the
// cleaning in clean failed (Ironic's clean hold --abort--> clean failed);
// the steps after the hold never run.
func TestCLICleanHoldThenAbort(t *testing.T) {
	img := newImageServer(t, 1<<20)
	const mac = "52:54:00:d1:85:02"
	uuid := enrollAgentNode(t, "steps-cli-hold-1", mac, img)
	mustCLI(t, "node", "set", uuid, "--bios-interface", "fake")
	startSimMachine(t, uuid, []string{mac}, sim.Config{})
	mustCLI(t, "node", "manage", uuid, "--wait", "60")

	mustCLI(t, "node", "clean", uuid, "--clean-steps", `[{"interface": "deploy", "step": "hold"}, {"interface": "bios", "step": "factory_reset"}]`)
	waitState(t, uuid, "clean hold", 120*time.Second)
	mustCLI(t, "node", "abort", uuid)
	n := waitState(t, uuid, "clean failed", 60*time.Second)
	if !strings.Contains(deref(n.LastError), "aborted") {
		t.Fatalf("last_error after abort in clean hold: %q", deref(n.LastError))
	}
	if hist := mustCLI(t, "node", "history", "list", uuid, "-f", "json"); strings.Contains(hist, "Step bios.factory_reset ran") {
		t.Fatalf("a step after the aborted hold ran:\n%s", hist)
	}
}

// TestRawServiceHoldUnhold: servicing (raw, 1.87) with a hold step waits
// in service hold with service_step showing it; unhold goes on with the
// agent's erase_pstore and the node ends active with the instance
// booted again.
func TestRawServiceHoldUnhold(t *testing.T) {
	uuid, m := activeSimNode(t, "steps-cli-service-0", "52:54:00:d1:85:03", sim.Config{})
	if code := at(t, "1.87", "PUT", "/v1/nodes/"+uuid+"/states/provision",
		serviceSteps(map[string]any{"interface": "deploy", "step": "hold"}, map[string]any{"interface": "deploy", "step": "erase_pstore"}), nil); code != 202 {
		t.Fatalf("service: %d", code)
	}
	waitState(t, uuid, "service hold", 120*time.Second)
	if got := nodeStep(t, uuid, "service_step"); got != "deploy.hold" {
		t.Fatalf("service_step in service hold: %q", got)
	}
	if code := at(t, "1.87", "PUT", "/v1/nodes/"+uuid+"/states/provision", map[string]any{"target": "unhold"}, nil); code != 202 {
		t.Fatalf("unhold: %d", code)
	}
	n := waitState(t, uuid, "active", 120*time.Second)
	if n.LastError != nil || deref(n.PowerState) != "power on" {
		t.Fatalf("after servicing: last_error %v, power %s", deref(n.LastError), deref(n.PowerState))
	}
	waitAgentOff(t, m)
	if hist := mustCLI(t, "node", "history", "list", uuid, "-f", "json"); !strings.Contains(hist, "Servicing finished") || !strings.Contains(hist, "Step deploy.hold: holding until unhold") {
		t.Fatalf("node history:\n%s", hist)
	}
}

// TestCLIDeployHoldUnhold: `baremetal node deploy --deploy-steps` with a
// hold at priority 90 (after deploy.deploy, before write_image) pauses the
// deploy in deploy hold with the agent up; unhold (raw, 1.85) goes back to
// wait call-back and the deploy writes the image and ends active.
func TestCLIDeployHoldUnhold(t *testing.T) {
	img := newImageServer(t, 1<<20)
	const mac = "52:54:00:d1:85:07"
	uuid := enrollAgentNode(t, "steps-cli-deploy-0", mac, img)
	startSimMachine(t, uuid, []string{mac}, sim.Config{})
	mustCLI(t, "node", "manage", uuid, "--wait", "60")
	mustCLI(t, "node", "provide", uuid, "--wait", "120")
	mustCLI(t, "node", "deploy", uuid, "--deploy-steps", `[{"interface": "deploy", "step": "hold", "args": {}, "priority": 90}]`)
	waitState(t, uuid, "deploy hold", 120*time.Second)
	if got := nodeStep(t, uuid, "deploy_step"); got != "deploy.hold" {
		t.Fatalf("deploy_step in deploy hold: %q", got)
	}
	if code := at(t, "1.85", "PUT", "/v1/nodes/"+uuid+"/states/provision", map[string]any{"target": "unhold"}, nil); code != 202 {
		t.Fatalf("unhold: %d", code)
	}
	n := waitState(t, uuid, "active", 180*time.Second)
	if n.LastError != nil {
		t.Fatalf("after unhold: last_error %v", deref(n.LastError))
	}
	if hist := mustCLI(t, "node", "history", "list", uuid, "-f", "json"); !strings.Contains(hist, "Step deploy.hold: holding until unhold") || !strings.Contains(hist, "Unhold requested") {
		t.Fatalf("node history:\n%s", hist)
	}
}

// TestCLIDeployTemplateCRUD: `baremetal deploy template create`, `list`,
// `show`, `set` (steps and extra) and `delete`, with Ironic's trait check.
func TestCLIDeployTemplateCRUD(t *testing.T) {
	const name = "CUSTOM_STEPS_CLI_TEMPLATE"
	out := mustCLI(t, "deploy", "template", "create", name, "--steps",
		`[{"interface": "deploy", "step": "erase_devices_metadata", "args": {}, "priority": 85}]`, "-f", "json")
	var created struct {
		UUID string `json:"uuid"`
	}
	if err := json.Unmarshal([]byte(out), &created); err != nil || created.UUID == "" {
		t.Fatalf("create: %v\n%s", err, out)
	}
	deleted := false
	defer func() {
		if !deleted {
			_, _, _ = baremetal(t, "deploy", "template", "delete", name)
		}
	}()
	if list := mustCLI(t, "deploy", "template", "list", "-f", "json"); !strings.Contains(list, created.UUID) || !strings.Contains(list, name) {
		t.Fatalf("list:\n%s", list)
	}
	mustCLI(t, "deploy", "template", "set", name, "--steps",
		`[{"interface": "deploy", "step": "erase_devices", "args": {}, "priority": 70}]`, "--extra", "owner=steps-cli")
	show := mustCLI(t, "deploy", "template", "show", created.UUID, "-f", "json")
	var got struct {
		Steps []map[string]any `json:"steps"`
		Extra map[string]any   `json:"extra"`
	}
	if err := json.Unmarshal([]byte(show), &got); err != nil || len(got.Steps) != 1 || got.Steps[0]["step"] != "erase_devices" ||
		got.Steps[0]["priority"] != float64(70) || got.Extra["owner"] != "steps-cli" {
		t.Fatalf("show after set: %v\n%s", err, show)
	}
	mustCLI(t, "deploy", "template", "delete", name)
	deleted = true
	if _, errOut, err := baremetal(t, "deploy", "template", "show", name); err == nil || !strings.Contains(errOut, "could not be found") {
		t.Fatalf("show after delete: %v %s", err, errOut)
	}
}

// TestRawRunbookCRUDAndHold: runbooks (raw, 1.92; 404 at 1.91) are
// created, listed, shown, patched and deleted; a clean by runbook whose
// step is hold pauses in clean hold like clean_steps do, and the
// runbook's hold ends with abort. The node needs the runbook's name as a
// trait.
func TestRawRunbookCRUDAndHold(t *testing.T) {
	const name = "CUSTOM_STEPS_CLI_RUNBOOK"
	if code := at(t, "1.91", "GET", "/v1/runbooks", nil, nil); code != 404 {
		t.Fatalf("runbooks at 1.91: %d, want 404", code)
	}
	var rb map[string]any
	if code := at(t, "1.92", "POST", "/v1/runbooks", map[string]any{"name": name,
		"steps": []any{map[string]any{"interface": "deploy", "step": "hold", "args": map[string]any{}, "order": 0}}}, &rb); code != 201 {
		t.Fatalf("create runbook: %d %v", code, rb)
	}
	rbUUID, _ := rb["uuid"].(string)
	defer at(t, "1.92", "DELETE", "/v1/runbooks/"+rbUUID, nil, nil)
	var list struct {
		Runbooks []map[string]any `json:"runbooks"`
	}
	if code := at(t, "1.92", "GET", "/v1/runbooks", nil, &list); code != 200 || !strings.Contains(jsonText(list), rbUUID) {
		t.Fatalf("list runbooks: %d %v", code, list)
	}
	if code := at(t, "1.92", "PATCH", "/v1/runbooks/"+name, []map[string]any{{"op": "add", "path": "/extra/purpose", "value": "steps-cli"}}, nil); code != 200 {
		t.Fatalf("patch runbook: %d", code)
	}
	var shown map[string]any
	if code := at(t, "1.92", "GET", "/v1/runbooks/"+rbUUID, nil, &shown); code != 200 || shown["extra"].(map[string]any)["purpose"] != "steps-cli" {
		t.Fatalf("show runbook: %d %v", code, shown)
	}

	img := newImageServer(t, 1<<20)
	const mac = "52:54:00:d1:85:04"
	uuid := enrollAgentNode(t, "steps-cli-runbook-0", mac, img)
	startSimMachine(t, uuid, []string{mac}, sim.Config{})
	mustCLI(t, "node", "manage", uuid, "--wait", "60")
	var fault apiFault
	if code := at(t, "1.92", "PUT", "/v1/nodes/"+uuid+"/states/provision", map[string]any{"target": "clean", "runbook": name}, &fault); code != 400 {
		t.Fatalf("clean by runbook without the trait: %d %q, want 400", code, fault.Error)
	}
	mustCLI(t, "node", "add", "trait", uuid, name)
	if code := at(t, "1.92", "PUT", "/v1/nodes/"+uuid+"/states/provision", map[string]any{"target": "clean", "runbook": name}, &fault); code != 202 {
		t.Fatalf("clean by runbook: %d %q", code, fault.Error)
	}
	waitState(t, uuid, "clean hold", 120*time.Second)
	if code := at(t, "1.92", "PUT", "/v1/nodes/"+uuid+"/states/provision", map[string]any{"target": "abort"}, nil); code != 202 {
		t.Fatalf("abort in clean hold: %d", code)
	}
	waitState(t, uuid, "clean failed", 60*time.Second)

	if code := at(t, "1.92", "DELETE", "/v1/runbooks/"+name, nil, nil); code != 204 {
		t.Fatalf("delete runbook: %d", code)
	}
	if code := at(t, "1.92", "GET", "/v1/runbooks/"+rbUUID, nil, nil); code != 404 {
		t.Fatalf("show deleted runbook: %d, want 404", code)
	}
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// TestRawChildrenPortNameAndVirtualMedia: `node children` (raw, 1.83),
// `port create --name` (raw, 1.88: the name is a port identifier) and
// virtual media attach, read and detach (raw, 1.89 and 1.93) on a
// fake-hardware node, whose BMC keeps what was inserted.
func TestRawChildrenPortNameAndVirtualMedia(t *testing.T) {
	var parent, child node
	if code := at(t, "1.83", "POST", "/v1/nodes", map[string]any{"driver": "fake-hardware", "name": "steps-cli-parent"}, &parent); code != 201 {
		t.Fatalf("create parent: %d", code)
	}
	if code := at(t, "1.83", "POST", "/v1/nodes", map[string]any{"driver": "fake-hardware", "name": "steps-cli-child", "parent_node": "steps-cli-parent"}, &child); code != 201 {
		t.Fatalf("create child: %d", code)
	}
	var kids struct {
		Children []string `json:"children"`
	}
	if code := at(t, "1.83", "GET", "/v1/nodes/steps-cli-parent/children", nil, &kids); code != 200 || len(kids.Children) != 1 || kids.Children[0] != child.UUID {
		t.Fatalf("children: %d %v, want [%s]", code, kids.Children, child.UUID)
	}
	if code := at(t, "1.82", "GET", "/v1/nodes/steps-cli-parent/children", nil, nil); code != 404 {
		t.Fatalf("children at 1.82: %d, want 404", code)
	}

	var port map[string]any
	if code := at(t, "1.88", "POST", "/v1/ports", map[string]any{"address": "52:54:00:d1:85:05", "node_uuid": parent.UUID, "name": "steps-cli-port"}, &port); code != 201 || port["name"] != "steps-cli-port" {
		t.Fatalf("port create with a name: %d %v", code, port)
	}
	var byName map[string]any
	if code := at(t, "1.88", "GET", "/v1/ports/steps-cli-port", nil, &byName); code != 200 || byName["uuid"] != port["uuid"] {
		t.Fatalf("port by name: %d %v", code, byName)
	}
	if code := at(t, "1.87", "POST", "/v1/ports", map[string]any{"address": "52:54:00:d1:85:06", "node_uuid": parent.UUID, "name": "steps-cli-port-2"}, nil); code != 406 {
		t.Fatalf("port name at 1.87: %d, want 406", code)
	}

	vm := "/v1/nodes/" + parent.UUID + "/vmedia"
	read := func() map[string]any {
		t.Helper()
		var devs []map[string]any
		if code := at(t, "1.93", "GET", vm, nil, &devs); code != 200 || len(devs) == 0 {
			t.Fatalf("GET vmedia: %d %v\nworker log:\n%s", code, devs, workerLog())
		}
		return devs[0]
	}
	if code := at(t, "1.92", "GET", vm, nil, nil); code != 404 {
		t.Fatalf("GET vmedia at 1.92: %d, want 404", code)
	}
	if d := read(); d["inserted"] != false {
		t.Fatalf("vmedia before attach: %v", d)
	}
	const iso = "http://images.example/steps-cli.iso"
	if code := at(t, "1.89", "POST", vm, map[string]any{"device_type": "cdrom", "image_url": iso}, nil); code != 204 {
		t.Fatalf("attach vmedia: %d", code)
	}
	if d := read(); d["inserted"] != true || d["image"] != iso || d["image_name"] != "steps-cli.iso" {
		t.Fatalf("vmedia after attach: %v", d)
	}
	if code := at(t, "1.89", "DELETE", vm, nil, nil); code != 204 {
		t.Fatalf("detach vmedia: %d", code)
	}
	if d := read(); d["inserted"] != false {
		t.Fatalf("vmedia after detach: %v", d)
	}
}
