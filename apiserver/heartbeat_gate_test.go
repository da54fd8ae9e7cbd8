package apiserver

import (
	"errors"
	"testing"
	"time"

	"github.com/ironflow/ironflow/provision"
)

func TestSignalGateOpensOncePerInterval(t *testing.T) {
	g := newSignalGate()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	steps := []struct {
		node string
		at   time.Duration
		want bool
	}{
		{"a", 0, true},
		{"a", time.Second, false},
		{"b", time.Second, true}, // nodes are gated apart
		{"a", 59 * time.Second, false},
		{"a", 60 * time.Second, true}, // the interval has passed
		{"a", 61 * time.Second, false},
	}
	for _, s := range steps {
		if got := g.allow(s.node, t0.Add(s.at), time.Minute, false); got != s.want {
			t.Fatalf("allow(%s, +%s) = %v, want %v", s.node, s.at, got, s.want)
		}
	}
	if !g.allow("a", t0.Add(61*time.Second), time.Minute, true) {
		t.Fatalf("a forced heartbeat was held back")
	}
	g.reopen("a")
	if !g.allow("a", t0.Add(62*time.Second), time.Minute, false) {
		t.Fatalf("a reopened node was not let through")
	}
	// Expired entries are swept: the map does not grow with every node
	// that ever heartbeat.
	g.allow("c", t0.Add(10*time.Minute), time.Minute, false)
	if len(g.until) != 1 {
		t.Fatalf("after the sweep the gate holds %d nodes, want 1 (c)", len(g.until))
	}
}

// hbNode is a node in state with a port, looked up once: its token.
func hbNode(t *testing.T, e *env, state provision.State, driverInfo map[string]any) (uuid, token string) {
	t.Helper()
	body := map[string]any{"driver": "fake-hardware"}
	if driverInfo != nil {
		body["driver_info"] = driverInfo
	}
	uuid = e.createNode(body)["uuid"].(string)
	if r := e.do("POST", "/v1/ports", "1.78", map[string]any{"address": "52:54:01:00:3a:95", "node_uuid": uuid}); r.status != 201 {
		t.Fatalf("port: %d %s", r.status, r.body)
	}
	e.setState(uuid, state)
	r := e.do("GET", "/v1/lookup?node_uuid="+uuid, "1.78", nil)
	if r.status != 200 {
		t.Fatalf("lookup: %d %s", r.status, r.body)
	}
	return uuid, r.json(t)["config"].(map[string]any)["agent_token"].(string)
}

func TestHeartbeatSignalsWhatTheWorkflowNeeds(t *testing.T) {
	e := newEnv(t)
	uuid, token := hbNode(t, e, provision.DeployWait, nil)
	e.eng.hold(uuid, true)
	beat := func(kv ...string) {
		t.Helper()
		b := map[string]any{"callback_url": "http://127.0.0.1:9999", "agent_token": token, "agent_version": "9.4.0"}
		for i := 0; i < len(kv); i += 2 {
			b[kv[i]] = kv[i+1]
		}
		if r := e.do("POST", "/v1/heartbeat/"+uuid, "1.78", b); r.status != 202 {
			t.Fatalf("heartbeat: %d %s", r.status, r.body)
		}
	}
	signals := func() int {
		e.eng.mu.Lock()
		defer e.eng.mu.Unlock()
		return len(e.eng.signals)
	}

	// Waiting for the call back: every heartbeat reaches the workflow.
	beat()
	beat()
	if n := signals(); n != 2 {
		t.Fatalf("in %s: %d signals for 2 heartbeats, want 2", provision.DeployWait, n)
	}
	// An agent step runs: one signal per interval, but every heartbeat is
	// recorded.
	e.setState(uuid, provision.Deploying)
	before := e.node(uuid).DriverInternalInfo["agent_last_heartbeat"]
	time.Sleep(time.Millisecond) // agent_last_heartbeat has microseconds
	beat()
	beat()
	beat()
	if n := signals(); n != 2 {
		t.Fatalf("in deploying, within the interval after a signal: %d signals, want still 2", n)
	}
	if after := e.node(uuid).DriverInternalInfo["agent_last_heartbeat"]; after == before {
		t.Fatalf("a heartbeat that was not signalled was not recorded either (agent_last_heartbeat %v)", after)
	}
	// A status report always goes through.
	beat("agent_status", "start")
	if n := signals(); n != 3 {
		t.Fatalf("status heartbeat in deploying: %d signals, want 3", n)
	}
}

func TestHeartbeatSignalGateFollowsTheNodesTimeoutAndReopensOnError(t *testing.T) {
	e := newEnv(t)
	// 0.05 s heartbeat timeout: the gate closes for 10 ms.
	uuid, token := hbNode(t, e, provision.Cleaning, map[string]any{"ramdisk_heartbeat_timeout": "0.05"})
	e.eng.hold(uuid, true)
	body := map[string]any{"callback_url": "http://127.0.0.1:9999", "agent_token": token, "agent_version": "9.4.0"}
	beat := func() int {
		t.Helper()
		return e.do("POST", "/v1/heartbeat/"+uuid, "1.78", body).status
	}
	e.eng.signalErr = errors.New("temporal unavailable")
	if st := beat(); st != 500 {
		t.Fatalf("heartbeat whose signal failed: %d, want 500", st)
	}
	e.eng.signalErr = nil
	// The failed signal reopened the gate: the next heartbeat is signalled.
	if st := beat(); st != 202 || len(e.eng.signals) != 1 {
		t.Fatalf("heartbeat after a failed signal: %d with %d signals, want 202 and 1", st, len(e.eng.signals))
	}
	time.Sleep(20 * time.Millisecond)
	if st := beat(); st != 202 || len(e.eng.signals) != 2 {
		t.Fatalf("heartbeat after the node's interval: %d with %d signals, want 202 and 2", st, len(e.eng.signals))
	}
}

func TestLookupSendsTheNodesHeartbeatTimeout(t *testing.T) {
	e := newEnv(t)
	uuid := e.createNode(map[string]any{"driver": "fake-hardware", "driver_info": map[string]any{"ramdisk_heartbeat_timeout": 60}})["uuid"].(string)
	e.setState(uuid, provision.DeployWait)
	r := e.do("GET", "/v1/lookup?node_uuid="+uuid, "1.78", nil)
	if got := r.json(t)["config"].(map[string]any)["heartbeat_timeout"]; got != float64(60) {
		t.Fatalf("heartbeat_timeout %v, want the node's 60 (driver_info ramdisk_heartbeat_timeout)", got)
	}
}
