package tests

import (
	"context"
	"encoding/json"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/ironflow/ironflow/agent/sim"
	"github.com/ironflow/ironflow/payload"
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
	// The stack's processes encrypt their payloads: the test's client
	// reads and writes them with the same key.
	opts := client.Options{HostPort: lab.Temporal.Address()}
	labCodec(t).Apply(&opts)
	c, err := client.Dial(opts)
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
		// Match the event as an operator reads it through the codec server.
		if err := payload.DecodeMessage(context.Background(), labCodec(t), ev); err != nil {
			t.Fatal(err)
		}
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
	// The deploy is one connected trace (tracing_test.go).
	checkDeployTrace(t, uuid)
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

// TestConcurrentDeployRequestsOneWins sends two deploy requests for one node
// at once: exactly one is accepted (202). The other is refused as Ironic
// refuses it: 409 NodeLocked when it read the node before the winner moved
// it (its conditional write then fails), or 400 when it read the node
// already in deploying, where "active" is no verb of Ironic's state
// machine. Which of the two depends only on when the second request reads.
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
	t.Logf("the two deploys answered %v", codes)
	refused := func(c int) bool { return c == 409 || c == 400 }
	if !((codes[0] == 202 && refused(codes[1])) || (refused(codes[0]) && codes[1] == 202)) {
		t.Fatalf("two concurrent deploys answered %v (%v), want one 202 and one 409 or 400", codes, bodies)
	}
	for i, b := range bodies {
		msg, _ := json.Marshal(b)
		switch codes[i] {
		case 409:
			if !strings.Contains(string(msg), "locked") {
				t.Errorf("409 body does not say the node is locked: %s", msg)
			}
		case 400:
			if em, _ := b["error_message"].(string); !strings.Contains(em, "can not be performed on node") || !strings.Contains(em, "while it is in state") || !strings.Contains(em, "deploying") {
				t.Errorf("400 body is not Ironic's refusal of a verb in deploying: %s", msg)
			}
		}
	}
	// Let it finish so that the node is left clean.
	startSimMachine(t, uuid, []string{"52:54:00:bb:00:03"}, sim.Config{})
	waitState(t, uuid, "active", 120*time.Second)
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
