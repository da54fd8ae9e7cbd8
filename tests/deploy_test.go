package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/ironflow/ironflow/agent/sim"
	"github.com/ironflow/ironflow/devstack"
	"github.com/ironflow/ironflow/workflows"
)

// enrollAgentNode creates an available fake-hardware node that deploys
// through the agent (deploy_interface direct), with one port.
func enrollAgentNode(t *testing.T, name, mac string, img *imageServer) string {
	t.Helper()
	var n node
	code, _ := call(t, "POST", "/v1/nodes", map[string]any{
		"name": name, "driver": "fake-hardware", "deploy_interface": "direct",
		"properties": map[string]any{"cpus": 2, "memory_mb": 2048, "local_gb": 20},
	}, &n)
	if code != 201 {
		t.Fatalf("create node %s: %d", name, code)
	}
	if code, _ := call(t, "POST", "/v1/ports", map[string]any{"address": mac, "node_uuid": n.UUID}, nil); code != 201 {
		t.Fatalf("create port: %d", code)
	}
	if code, _ := call(t, "PATCH", "/v1/nodes/"+n.UUID, []map[string]any{
		{"op": "add", "path": "/instance_info/image_source", "value": img.URL + "/disk.raw"},
		{"op": "add", "path": "/instance_info/image_os_hash_algo", "value": "sha256"},
		{"op": "add", "path": "/instance_info/image_os_hash_value", "value": img.sha256},
	}, nil); code != 200 {
		t.Fatalf("set instance_info: %d", code)
	}
	return n.UUID
}

func temporalClient(t *testing.T) client.Client {
	t.Helper()
	c, err := client.Dial(client.Options{HostPort: lab.Temporal.Address()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return c
}

// historyEvents returns the last run's history of the node's workflow.
func historyCount(t *testing.T, c client.Client, nodeUUID string, match func(eventType enumspb.EventType, text string) bool) (total, matched int) {
	t.Helper()
	it := c.GetWorkflowHistory(context.Background(), workflows.WorkflowID(nodeUUID), "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		total++
		if match(ev.GetEventType(), ev.String()) {
			matched++
		}
	}
	return total, matched
}

func TestDeployAndUndeployWithSimulatedAgent(t *testing.T) {
	img := newImageServer(t, 8<<20)
	uuid := enrollAgentNode(t, "sim-node-0", "52:54:00:bb:00:01", img)
	m := startSimMachine(t, uuid, []string{"52:54:00:bb:00:01"}, sim.Config{})

	mustCLI(t, "node", "manage", uuid, "--wait", "60")
	mustCLI(t, "node", "provide", uuid, "--wait", "120")
	if m.boots() != 1 {
		t.Fatalf("provide should clean through one agent boot, saw %d", m.boots())
	}
	mustCLI(t, "node", "deploy", uuid, "--wait", "180", "--config-drive", `{"meta_data": {"hostname": "sim-0", "public_keys": {"0": "ssh-ed25519 AAAAC3Nza sim"}}}`)
	n := getNode(t, uuid)
	// The agent wrote the config drive that ironflow built from the JSON
	// form: a config-2 partition on the simulated disk.
	if cd, _ := n.InstanceInfo["configdrive"].(string); cd == "" {
		t.Fatalf("no configdrive kept in instance_info: %v", n.InstanceInfo)
	}
	if n.ProvisionState != "active" || deref(n.PowerState) != "power on" {
		t.Fatalf("after deploy: %+v", n)
	}
	if _, ok := n.DriverInternalInfo["agent_secret_token"]; ok {
		t.Fatalf("agent token kept after deploy: %v", n.DriverInternalInfo)
	}
	if got := img.downloads.Load(); got != 1 {
		t.Fatalf("image downloaded %d times, want 1", got)
	}
	// The workflow's history reads like the steps.
	c := temporalClient(t)
	total, _ := historyCount(t, c, uuid, func(enumspb.EventType, string) bool { return false })
	for _, act := range []string{"RunAgentStep", "CleanBoot"} {
		if _, n := historyCount(t, c, uuid, func(et enumspb.EventType, s string) bool {
			// fake-hardware's BMC calls are local activities: markers.
			return (et == enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED || et == enumspb.EVENT_TYPE_MARKER_RECORDED) && strings.Contains(s, act)
		}); n == 0 {
			t.Errorf("deploy history has no %s activity", act)
		}
	}
	t.Logf("deploy with the simulated agent: %d history events", total)
	// The operator's timeline of that deploy: every step with its duration.
	out, err := exec.Command(lab.Bin, "timeline", "--temporal-address", lab.Temporal.Address(), uuid).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "DeployNode for node "+uuid) || !strings.Contains(string(out), "RunAgentStep") {
		t.Fatalf("ironflow timeline: %v\n%s", err, out)
	}
	t.Logf("timeline:\n%s", out)

	mustCLI(t, "node", "undeploy", uuid, "--wait", "180")
	n = getNode(t, uuid)
	if n.ProvisionState != "available" || len(n.InstanceInfo) != 0 {
		t.Fatalf("after undeploy: %+v", n)
	}
	if m.boots() != 3 {
		t.Fatalf("undeploy should clean through a third agent boot, saw %d", m.boots())
	}
	hist := mustCLI(t, "node", "history", "list", uuid, "-f", "json")
	if !strings.Contains(hist, "Agent called back") {
		t.Fatalf("history does not show the agent's callbacks:\n%s", hist)
	}
}

// TestWorkerKilledMidDeploy kills the worker with SIGKILL while the node
// waits for its agent and again while the agent writes the image: the deploy
// finishes when a worker comes back, without a second power-on or write.
func TestWorkerKilledMidDeploy(t *testing.T) {
	img := newImageServer(t, 16<<20)
	img.delay = 300 * time.Millisecond // about 5 s of writing
	uuid := enrollAgentNode(t, "crash-node-0", "52:54:00:bb:00:02", img)
	if code, _ := call(t, "PATCH", "/v1/nodes/"+uuid, []map[string]any{{"op": "add", "path": "/automated_clean", "value": false}}, nil); code != 200 {
		t.Fatalf("set automated_clean: %d", code)
	}
	for _, verb := range []string{"manage", "provide"} {
		if code, _ := call(t, "PUT", "/v1/nodes/"+uuid+"/states/provision", map[string]any{"target": verb}, nil); code != 202 {
			t.Fatalf("%s: %d", verb, code)
		}
		waitState(t, uuid, map[string]string{"manage": "manageable", "provide": "available"}[verb], 60*time.Second)
	}
	// No agent yet: the node will wait for its call-back.
	if _, err := call2(t, "PUT", "/v1/nodes/"+uuid+"/states/provision", map[string]any{"target": "active"}); err != nil {
		t.Fatal(err)
	}
	waitState(t, uuid, "wait call-back", 60*time.Second)
	lab.KillWorker()
	time.Sleep(time.Second)
	if err := lab.StartWorker(); err != nil {
		t.Fatal(err)
	}
	m := startSimMachine(t, uuid, []string{"52:54:00:bb:00:02"}, sim.Config{})
	// Wait until the image is being written, then crash again.
	deadline := time.Now().Add(90 * time.Second)
	for img.downloads.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if img.downloads.Load() == 0 {
		t.Fatalf("write_image never started; node %+v\n%s", getNode(t, uuid), workerLog())
	}
	lab.KillWorker()
	time.Sleep(2 * time.Second)
	if err := lab.StartWorker(); err != nil {
		t.Fatal(err)
	}
	waitState(t, uuid, "active", 180*time.Second)
	if got := img.downloads.Load(); got != 1 {
		t.Errorf("image written %d times across the crashes, want 1", got)
	}
	if m.boots() != 1 {
		t.Errorf("the machine booted the agent %d times, want 1", m.boots())
	}
	c := temporalClient(t)
	_, powerOns := historyCount(t, c, uuid, func(et enumspb.EventType, s string) bool {
		return et == enumspb.EVENT_TYPE_MARKER_RECORDED && strings.Contains(s, `SetPower`) && strings.Contains(s, "rebooting")
	})
	_, scheduled := historyCount(t, c, uuid, func(et enumspb.EventType, s string) bool {
		return et == enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED && strings.Contains(s, "SetPower") && strings.Contains(s, "rebooting")
	})
	if powerOns+scheduled > 1 {
		t.Errorf("the agent boot's power action ran %d times", powerOns+scheduled)
	}
}

// call2 is call without decoding, for requests whose body is empty.
func call2(t *testing.T, method, path string, body any) (int, error) {
	code, _ := call(t, method, path, body, nil)
	if code >= 300 {
		return code, fmt.Errorf("%s %s: HTTP %d", method, path, code)
	}
	return code, nil
}

// TestConcurrentDeployRequestsOneWins sends two deploy requests for one node
// at once: exactly one is accepted (202), the other gets 409 NodeLocked.
func TestConcurrentDeployRequestsOneWins(t *testing.T) {
	img := newImageServer(t, 1<<20)
	uuid := enrollAgentNode(t, "race-node-0", "52:54:00:bb:00:03", img)
	if code, _ := call(t, "PATCH", "/v1/nodes/"+uuid, []map[string]any{{"op": "add", "path": "/automated_clean", "value": false}}, nil); code != 200 {
		t.Fatalf("set automated_clean: %d", code)
	}
	for _, s := range []struct{ verb, state string }{{"manage", "manageable"}, {"provide", "available"}} {
		if _, err := call2(t, "PUT", "/v1/nodes/"+uuid+"/states/provision", map[string]any{"target": s.verb}); err != nil {
			t.Fatal(err)
		}
		waitState(t, uuid, s.state, 60*time.Second)
	}
	var wg sync.WaitGroup
	codes := make([]int, 2)
	bodies := make([]map[string]any, 2)
	for i := range codes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			codes[i], _ = call(t, "PUT", "/v1/nodes/"+uuid+"/states/provision", map[string]any{"target": "active"}, &bodies[i])
		}()
	}
	wg.Wait()
	if !((codes[0] == 202 && codes[1] == 409) || (codes[0] == 409 && codes[1] == 202)) {
		t.Fatalf("two concurrent deploys answered %v (%v), want one 202 and one 409", codes, bodies)
	}
	for i, b := range bodies {
		if codes[i] == 409 {
			msg, _ := json.Marshal(b)
			if !strings.Contains(string(msg), "locked") {
				t.Errorf("409 body does not say the node is locked: %s", msg)
			}
		}
	}
	// Let it finish so that the node is left clean.
	startSimMachine(t, uuid, []string{"52:54:00:bb:00:03"}, sim.Config{})
	waitState(t, uuid, "active", 120*time.Second)
}

// TestAPIKilledMidDeploy kills the API with SIGKILL while the node waits for
// its agent: the agent's lookups fail until the API is back, then the deploy
// goes on. The API holds no state of its own.
func TestAPIKilledMidDeploy(t *testing.T) {
	img := newImageServer(t, 1<<20)
	uuid := enrollAgentNode(t, "api-crash-node-0", "52:54:00:bb:00:04", img)
	if code, _ := call(t, "PATCH", "/v1/nodes/"+uuid, []map[string]any{{"op": "add", "path": "/automated_clean", "value": false}}, nil); code != 200 {
		t.Fatalf("set automated_clean: %d", code)
	}
	for _, s := range []struct{ verb, state string }{{"manage", "manageable"}, {"provide", "available"}, {"active", "wait call-back"}} {
		if _, err := call2(t, "PUT", "/v1/nodes/"+uuid+"/states/provision", map[string]any{"target": s.verb}); err != nil {
			t.Fatal(err)
		}
		waitState(t, uuid, s.state, 60*time.Second)
	}
	lab.KillAPI()
	// The machine boots its agent while the API is down.
	a, err := sim.Start(context.Background(), sim.Config{APIURL: lab.APIURL, MACs: []string{"52:54:00:bb:00:04"}, HeartbeatInterval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if a.PoweredOn() {
			a.Stop()
		}
	})
	time.Sleep(3 * time.Second)
	if err := lab.StartAPI(context.Background()); err != nil {
		t.Fatal(err)
	}
	waitState(t, uuid, "active", 120*time.Second)
	if got := img.downloads.Load(); got != 1 {
		t.Errorf("image written %d times, want 1", got)
	}
}

// TestChecksumMismatchThenOperatorRetry: a wrong checksum fails the deploy
// with a last_error that names it; the operator fixes instance_info and sends
// `temporal workflow signal --name retry` (the real temporal CLI, as the
// README says); the deploy ends active.
func TestChecksumMismatchThenOperatorRetry(t *testing.T) {
	img := newImageServer(t, 2<<20)
	uuid := enrollAgentNode(t, "checksum-node-0", "52:54:00:bb:00:05", img)
	if code, _ := call(t, "PATCH", "/v1/nodes/"+uuid, []map[string]any{
		{"op": "add", "path": "/automated_clean", "value": false},
		{"op": "replace", "path": "/instance_info/image_os_hash_value", "value": strings.Repeat("0", 64)},
	}, nil); code != 200 {
		t.Fatalf("patch: %d", code)
	}
	startSimMachine(t, uuid, []string{"52:54:00:bb:00:05"}, sim.Config{})
	for _, s := range []struct{ verb, state string }{{"manage", "manageable"}, {"provide", "available"}, {"active", "deploy failed"}} {
		if _, err := call2(t, "PUT", "/v1/nodes/"+uuid+"/states/provision", map[string]any{"target": s.verb}); err != nil {
			t.Fatal(err)
		}
		waitState(t, uuid, s.state, 90*time.Second)
	}
	n := getNode(t, uuid)
	if !strings.Contains(deref(n.LastError), "write_image") || !strings.Contains(strings.ToLower(deref(n.LastError)), "checksum") {
		t.Fatalf("last_error %q should name write_image and the checksum", deref(n.LastError))
	}
	// The operator's view: the status query says what it waits for.
	cli, err := devstack.FindTemporalCLI("")
	if err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(cli, "workflow", "query", "--address", lab.Temporal.Address(), "--workflow-id", "node-"+uuid, "--type", "status").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "retry, skip-step or abort") {
		t.Fatalf("status query: %v\n%s", err, out)
	}
	if code, _ := call(t, "PATCH", "/v1/nodes/"+uuid, []map[string]any{
		{"op": "replace", "path": "/instance_info/image_os_hash_value", "value": img.sha256},
	}, nil); code != 200 {
		t.Fatalf("fix instance_info: %d", code)
	}
	if out, err := exec.Command(cli, "workflow", "signal", "--address", lab.Temporal.Address(), "--workflow-id", "node-"+uuid, "--name", "retry").CombinedOutput(); err != nil {
		t.Fatalf("temporal workflow signal retry: %v\n%s", err, out)
	}
	waitFor(t, "the retry to leave deploy failed", 60*time.Second, func() bool { return getNode(t, uuid).ProvisionState != "deploy failed" })
	n = waitState(t, uuid, "active", 120*time.Second)
	if n.LastError != nil {
		t.Errorf("last_error kept after the retry succeeded: %q", *n.LastError)
	}
}

// TestUndeployAFailedDeployThatWaitsForAnOperator: the failed deploy's
// workflow waits for retry/skip-step/abort, but `baremetal node undeploy`
// is the operator's answer too: it ends the wait and cleans the node up.
func TestUndeployAFailedDeployThatWaitsForAnOperator(t *testing.T) {
	img := newImageServer(t, 1<<20)
	uuid := enrollAgentNode(t, "failed-undeploy-node-0", "52:54:00:bb:00:06", img)
	if code, _ := call(t, "PATCH", "/v1/nodes/"+uuid, []map[string]any{
		{"op": "add", "path": "/automated_clean", "value": false},
		{"op": "replace", "path": "/instance_info/image_source", "value": img.URL + "/missing-because-404"},
	}, nil); code != 200 {
		t.Fatalf("patch: %d", code)
	}
	startSimMachine(t, uuid, []string{"52:54:00:bb:00:06"}, sim.Config{})
	for _, s := range []struct{ verb, state string }{{"manage", "manageable"}, {"provide", "available"}, {"active", "deploy failed"}} {
		if _, err := call2(t, "PUT", "/v1/nodes/"+uuid+"/states/provision", map[string]any{"target": s.verb}); err != nil {
			t.Fatal(err)
		}
		waitState(t, uuid, s.state, 90*time.Second)
	}
	mustCLI(t, "node", "undeploy", uuid, "--wait", "120")
	if n := getNode(t, uuid); n.ProvisionState != "available" {
		t.Fatalf("after undeploy: %+v", n)
	}
}

// TestUnreadableDriverInfoFailsTheDeployClearly: a timeout override in
// driver_info that is not a number stops the deploy at once with a
// last_error that names it, instead of leaving the node in deploying.
func TestUnreadableDriverInfoFailsTheDeployClearly(t *testing.T) {
	uuid := strings.TrimSpace(mustCLI(t, "node", "create", "--driver", "fake-hardware", "--deploy-interface", "fake",
		"--name", "bad-settings-0", "-f", "value", "-c", "uuid"))
	for _, s := range []struct{ verb, state string }{{"manage", "manageable"}, {"provide", "available"}} {
		if code, _ := call(t, "PUT", "/v1/nodes/"+uuid+"/states/provision", map[string]any{"target": s.verb}, nil); code != 202 {
			t.Fatalf("%s: %d", s.verb, code)
		}
		waitState(t, uuid, s.state, 60*time.Second)
	}
	mustCLI(t, "node", "set", uuid, "--driver-info", "deploy_callback_timeout=soon")
	if code, _ := call(t, "PUT", "/v1/nodes/"+uuid+"/states/provision", map[string]any{"target": "active"}, nil); code != 202 {
		t.Fatalf("deploy: %d", code)
	}
	n := waitState(t, uuid, "deploy failed", 60*time.Second)
	if le := deref(n.LastError); !strings.Contains(le, "deploy_callback_timeout must be a positive number of seconds, got soon") {
		t.Fatalf("last_error %q does not name the unreadable setting", le)
	}
	// Fixed, the node deploys.
	mustCLI(t, "node", "unset", uuid, "--driver-info", "deploy_callback_timeout")
	if code, _ := call(t, "PUT", "/v1/nodes/"+uuid+"/states/provision", map[string]any{"target": "active"}, nil); code != 202 {
		t.Fatalf("deploy after the fix: %d", code)
	}
	waitState(t, uuid, "active", 60*time.Second)
}
