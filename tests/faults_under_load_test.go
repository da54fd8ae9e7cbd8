package tests

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ironflow/ironflow/agent/sim"
)

// TestFaultsUnderLoad deploys many nodes at once with faults injected
// everywhere — BMC calls that fail 20 % of the time and answer slowly,
// agents whose deploy steps fail 10 % of the time — and kills the worker,
// the API and the Temporal server during the run. Every node must end
// active or in deploy failed with a last_error that says why: none may be
// left in deploying or wait call-back.
func TestFaultsUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("SKIPPED LOUDLY: -short skips the load test with faults")
	}
	const nodes = 16
	img := newImageServer(t, 1<<20)
	uuids := make([]string, nodes)
	for i := range uuids {
		mac := fmt.Sprintf("52:54:00:fa:00:%02x", i)
		uuids[i] = enrollAgentNode(t, fmt.Sprintf("fault-node-%02d", i), mac, img)
		if code, _ := call(t, "PATCH", "/v1/nodes/"+uuids[i], []map[string]any{
			{"op": "add", "path": "/automated_clean", "value": false},
			{"op": "add", "path": "/driver_info/fake_fail_rate", "value": "0.2"},
			{"op": "add", "path": "/driver_info/fake_latency", "value": "100ms"},
		}, nil); code != 200 {
			t.Fatalf("patch node %d: %d", i, code)
		}
		startSimMachine(t, uuids[i], []string{mac}, sim.Config{FailureRate: 0.1, Seed: uint64(i + 1)})
	}
	for _, s := range []struct{ verb, state string }{{"manage", "manageable"}, {"provide", "available"}} {
		for i, u := range uuids {
			if u == "" {
				continue
			}
			if code, _ := call(t, "PUT", "/v1/nodes/"+u+"/states/provision", map[string]any{"target": s.verb}, nil); code != 202 {
				t.Fatalf("%s node %d: %d", s.verb, i, code)
			}
		}
		for i, u := range uuids {
			if u == "" {
				continue
			}
			if n := waitSettled(t, u, 120*time.Second); n.ProvisionState != s.state {
				// The injected BMC faults can fail manage: the node says so.
				if n.LastError == nil {
					t.Fatalf("node %d ended %q without last_error", i, n.ProvisionState)
				}
				t.Logf("node %d: %s failed: %s", i, s.verb, firstLine(*n.LastError, 200))
				uuids[i] = ""
			}
		}
	}

	var wg sync.WaitGroup
	for _, u := range uuids {
		if u == "" {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			call(t, "PUT", "/v1/nodes/"+u+"/states/provision", map[string]any{"target": "active"}, nil)
		}()
	}
	wg.Wait()

	// Crash every part of the control plane once during the run.
	time.Sleep(2 * time.Second)
	lab.KillWorker()
	time.Sleep(time.Second)
	if err := lab.StartWorker(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	lab.KillAPI()
	time.Sleep(time.Second)
	if err := lab.StartAPI(context.Background()); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	if err := lab.RestartTemporal(context.Background()); err != nil {
		t.Fatal(err)
	}

	counts := map[string]int{}
	var reasons []string
	for _, u := range uuids {
		if u == "" {
			counts["failed before deploy"]++
			continue
		}
		n := waitSettled(t, u, 240*time.Second)
		counts[n.ProvisionState]++
		switch n.ProvisionState {
		case "active":
		case "deploy failed":
			if n.LastError == nil || *n.LastError == "" {
				t.Errorf("node %s is in deploy failed without last_error", u)
			} else {
				reasons = append(reasons, *n.LastError)
			}
		default:
			t.Errorf("node %s ended in %q (last_error %s)", u, n.ProvisionState, deref(n.LastError))
		}
	}
	sort.Strings(reasons)
	t.Logf("%d nodes with faults and a crash of worker, API and Temporal: %v", nodes, counts)
	for _, r := range reasons {
		t.Logf("  deploy failed: %s", firstLine(r, 200))
	}
	if counts["active"] == 0 {
		t.Fatalf("no node reached active: %v", counts)
	}
}

// waitSettled waits until the node is in a stable or failure state: no
// target, no -ing or wait state.
func waitSettled(t *testing.T, uuid string, timeout time.Duration) node {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var n node
	for time.Now().Before(deadline) {
		var ok bool
		if n, ok = tryGetNode(uuid); !ok {
			time.Sleep(500 * time.Millisecond)
			continue
		}
		settled := n.ProvisionState == "active" || n.ProvisionState == "available" || n.ProvisionState == "manageable" ||
			n.ProvisionState == "enroll" || strings.HasSuffix(n.ProvisionState, "failed")
		if settled && (n.TargetProvisionState == nil || strings.HasSuffix(n.ProvisionState, "failed")) {
			return n
		}
		time.Sleep(500 * time.Millisecond)
	}
	t.Fatalf("node %s still %q (target %s) after %s\nworker log:\n%s", uuid, n.ProvisionState, deref(n.TargetProvisionState), timeout, workerLog())
	return n
}

func firstLine(s string, max int) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > max {
		s = s[:max] + "…"
	}
	return s
}
