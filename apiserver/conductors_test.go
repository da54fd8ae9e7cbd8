package apiserver

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/ironflow/ironflow/worker"
)

// waitFor polls cond every 20 ms for up to d.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestAnnouncedWorkerIsAConductor: a worker that announces itself is listed
// alive, shown as the conductor of the nodes of its group, found by the
// ?conductor= filter, and no longer alive once its heartbeats stop for the
// heartbeat timeout (as a worker that died), nor after a clean stop.
func TestAnnouncedWorkerIsAConductor(t *testing.T) {
	const timeout = 400 * time.Millisecond
	e := newEnv(t, func(c *Config) { c.ConductorHeartbeatTimeout = timeout })
	node := e.createNode(map[string]any{"driver": "fake-hardware", "name": "served"})["uuid"].(string)
	other := e.createNode(map[string]any{"driver": "fake-hardware", "name": "elsewhere", "conductor_group": "rack9"})["uuid"].(string)

	ctx, crash := context.WithCancel(context.Background())
	stop, err := worker.Announce(ctx, e.st, worker.Conductor{Hostname: "worker-a", Interval: 50 * time.Millisecond}, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	defer stop()

	r := e.do("GET", "/v1/conductors", "1.49", nil)
	list, _ := r.json(t)["conductors"].([]any)
	if r.status != http.StatusOK || len(list) != 1 {
		t.Fatalf("conductors: %d %s", r.status, r.body)
	}
	if c := list[0].(map[string]any); c["hostname"] != "worker-a" || c["conductor_group"] != "" || c["alive"] != true || c["drivers"] != nil {
		t.Errorf("listed %v, want worker-a alive in the default group, default fields only", c)
	}
	r = e.do("GET", "/v1/conductors/worker-a", "1.49", nil)
	shown := r.json(t)
	drivers, _ := shown["drivers"].([]any)
	if r.status != http.StatusOK || shown["alive"] != true || len(drivers) == 0 || shown["links"] == nil || shown["created_at"] == nil {
		t.Errorf("show: %d %s", r.status, r.body)
	}
	if r := e.do("GET", "/v1/conductors?detail=True&sort_key=alive", "1.49", nil); r.status != http.StatusBadRequest {
		t.Errorf("sort by alive: %d %s", r.status, r.body)
	}
	if r := e.do("GET", "/v1/conductors/worker-b", "1.49", nil); r.status != http.StatusNotFound || r.faultstring(t) != "Conductor worker-b could not be found." {
		t.Errorf("unknown conductor: %d %s", r.status, r.body)
	}
	if r := e.do("GET", "/v1/conductors", "1.48", nil); r.status != http.StatusNotFound {
		t.Errorf("conductors at 1.48: %d", r.status)
	}

	if got := e.do("GET", "/v1/nodes/"+node, "1.49", nil).json(t)["conductor"]; got != "worker-a" {
		t.Errorf("conductor of a node of its group: %v", got)
	}
	if hosts := e.do("GET", "/v1/drivers/fake-hardware", "1.49", nil).json(t)["hosts"]; fmt.Sprint(hosts) != "[worker-a]" {
		t.Errorf("hosts of a driver the live worker runs: %v", hosts)
	}
	if got := e.do("GET", "/v1/nodes/"+other, "1.49", nil).json(t)["conductor"]; got != nil {
		t.Errorf("conductor of a node of a group no worker serves: %v", got)
	}
	r = e.do("GET", "/v1/nodes?conductor=worker-a&fields=uuid,conductor", "1.49", nil)
	nodes, _ := r.json(t)["nodes"].([]any)
	if len(nodes) != 1 || nodes[0].(map[string]any)["uuid"] != node || nodes[0].(map[string]any)["conductor"] != "worker-a" {
		t.Errorf("?conductor=worker-a: %s", r.body)
	}
	if r := e.do("GET", "/v1/nodes?conductor=worker-a", "1.48", nil); r.status != http.StatusNotAcceptable {
		t.Errorf("?conductor= at 1.48: %d", r.status)
	}

	// Alive past the timeout while it heartbeats.
	time.Sleep(2 * timeout)
	if c := e.do("GET", "/v1/conductors/worker-a", "1.49", nil).json(t); c["alive"] != true {
		t.Errorf("not alive although heartbeating: %v", c)
	}
	// Heartbeats stop: not alive once the timeout has passed.
	crash()
	waitFor(t, 5*timeout, "worker-a not alive after its heartbeats stopped", func() bool {
		return e.do("GET", "/v1/conductors/worker-a", "1.49", nil).json(t)["alive"] == false
	})
	if got := e.do("GET", "/v1/nodes/"+node, "1.49", nil).json(t)["conductor"]; got != nil {
		t.Errorf("conductor of the node once no worker is alive: %v", got)
	}
	drivers = e.do("GET", "/v1/drivers", "1.49", nil).json(t)["drivers"].([]any)
	for _, d := range drivers {
		if hosts := d.(map[string]any)["hosts"]; fmt.Sprint(hosts) != "[]" {
			t.Errorf("hosts of %v once no worker is alive: %v", d.(map[string]any)["name"], hosts)
		}
	}

	// A clean stop: not alive at once, still listed (Ironic keeps the row).
	stop2, err := worker.Announce(context.Background(), e.st, worker.Conductor{Hostname: "worker-a", Interval: time.Hour}, quietLogger())
	if err != nil {
		t.Fatal(err)
	}
	if c := e.do("GET", "/v1/conductors/worker-a", "1.49", nil).json(t); c["alive"] != true {
		t.Errorf("not alive after registering again: %v", c)
	}
	stop2()
	if c := e.do("GET", "/v1/conductors/worker-a", "1.49", nil).json(t); c["alive"] != false {
		t.Errorf("alive after a clean stop: %v", c)
	}
}

// TestConductorOfANodeIsStable: with several live workers in a group, a
// node always shows the same one, and the nodes spread over them.
func TestConductorOfANodeIsStable(t *testing.T) {
	e := newEnv(t)
	for _, h := range []string{"w1", "w2", "w3"} {
		stop, err := worker.Announce(context.Background(), e.st, worker.Conductor{Hostname: h, Interval: time.Hour}, quietLogger())
		if err != nil {
			t.Fatal(err)
		}
		defer stop()
	}
	seen := map[any]bool{}
	for i := 0; i < 12; i++ {
		uuid := e.createNode(map[string]any{"driver": "fake-hardware"})["uuid"].(string)
		first := e.do("GET", "/v1/nodes/"+uuid, "1.49", nil).json(t)["conductor"]
		if again := e.do("GET", "/v1/nodes/"+uuid, "1.82", nil).json(t)["conductor"]; again != first || first == nil {
			t.Fatalf("node %s: conductor %v then %v", uuid, first, again)
		}
		seen[first] = true
	}
	if len(seen) < 2 {
		t.Errorf("12 nodes all served by %v", seen)
	}
}
