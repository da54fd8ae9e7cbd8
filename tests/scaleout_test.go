package tests

import (
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/ironflow/ironflow/agent/sim"
	"github.com/ironflow/ironflow/embedded"
)

// TestScaleOutTwoAPIsTwoWorkersConductorGroups runs a second API process and
// a second worker that serves only conductor group rack2, against the same
// Temporal server and PostgreSQL: nodes of rack2 deployed through the second
// API have their in-band steps run by the rack2 worker, the others by the
// first worker, and both APIs see every node.
func TestScaleOutTwoAPIsTwoWorkersConductorGroups(t *testing.T) {
	port, err := embedded.FreePort("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	api2 := fmt.Sprintf("127.0.0.1:%d", port)
	a2, err := lab.Spawn("ironflow-api2", lab.APIArgs(api2))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a2.Kill)
	w2, err := lab.Spawn("ironflow-worker-rack2", append(lab.WorkerArgs(), "--conductor-groups", "rack2", "--conductor-hostname", "worker-rack2", "--sync-power-state-interval", "0"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w2.Kill)
	waitFor(t, "the second API", 30*time.Second, func() bool {
		out, err := exec.Command("curl", "-sf", "http://"+api2+"/").CombinedOutput()
		return err == nil && strings.Contains(string(out), "v1")
	})
	// Each worker is its own conductor (API 1.49): the rack2 worker is
	// listed alive with its group.
	waitFor(t, "the rack2 worker listed as a conductor", 30*time.Second, func() bool {
		var c struct {
			Hostname       string `json:"hostname"`
			ConductorGroup string `json:"conductor_group"`
			Alive          bool   `json:"alive"`
		}
		code, _ := call(t, "GET", "/v1/conductors/worker-rack2", nil, &c)
		return code == 200 && c.Alive && c.ConductorGroup == "rack2"
	})

	img := newImageServer(t, 1<<20)
	type placed struct{ uuid, group, api string }
	var nodes []placed
	for i := 0; i < 4; i++ {
		group := map[bool]string{true: "rack2", false: ""}[i%2 == 0]
		mac := fmt.Sprintf("52:54:00:5c:00:%02x", i)
		uuid := enrollAgentNode(t, fmt.Sprintf("scale-node-%d", i), mac, img)
		if code, _ := call(t, "PATCH", "/v1/nodes/"+uuid, []map[string]any{
			{"op": "add", "path": "/automated_clean", "value": false},
			{"op": "add", "path": "/conductor_group", "value": group},
		}, nil); code != 200 {
			t.Fatalf("patch: %d", code)
		}
		moveTo(t, uuid, [2]string{"manage", "manageable"}, [2]string{"provide", "available"})
		startSimMachine(t, uuid, []string{mac}, sim.Config{})
		apiURL := lab.APIURL
		if group == "rack2" {
			apiURL = "http://" + api2
		}
		nodes = append(nodes, placed{uuid, group, apiURL})
	}
	var wg sync.WaitGroup
	for _, n := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			out, err := exec.Command("curl", "-sf", "-X", "PUT", "-H", "X-OpenStack-Ironic-API-Version: 1.78", "-H", "Content-Type: application/json",
				"-d", `{"target": "active"}`, n.api+"/v1/nodes/"+n.uuid+"/states/provision").CombinedOutput()
			if err != nil {
				t.Errorf("deploy %s through %s: %v %s", n.uuid, n.api, err, out)
			}
		}()
	}
	wg.Wait()
	c := temporalClient(t)
	for _, n := range nodes {
		waitState(t, n.uuid, "active", 120*time.Second)
		// Which worker ran the write? The started event names its identity.
		_, byRack2 := historyCount(t, c, n.uuid, func(et enumspb.EventType, s string) bool {
			return et == enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED && strings.Contains(s, fmt.Sprintf("%d@", w2.Pid()))
		})
		_, scheduledOnGroup := historyCount(t, c, n.uuid, func(et enumspb.EventType, s string) bool {
			return et == enumspb.EVENT_TYPE_ACTIVITY_TASK_SCHEDULED && strings.Contains(s, "ironflow.rack2")
		})
		if n.group == "rack2" && (byRack2 == 0 || scheduledOnGroup == 0) {
			t.Errorf("node %s of rack2: %d activities on ironflow.rack2, %d run by the rack2 worker", n.uuid, scheduledOnGroup, byRack2)
		}
		if n.group == "" && (byRack2 != 0 || scheduledOnGroup != 0) {
			t.Errorf("node %s of the default group ran activities on rack2", n.uuid)
		}
	}
}
