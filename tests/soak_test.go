//go:build soak

package tests

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/ironflow/ironflow/agent/sim"
	"github.com/ironflow/ironflow/workflows"
)

// `make soak` (docs/benchmarks.md, "Soak"): not part of make test.
var (
	soakNodes   = flag.Int("soak.nodes", 1000, "fake-hardware nodes the soak deploys")
	soakTimeout = flag.Duration("soak.timeout", 90*time.Minute, "bound of the whole soak; a node not settled by then is stuck")
)

// TestSoak deploys -soak.nodes fake-hardware nodes at once with simulated
// agents, with faults injected everywhere — 20 % of BMC calls fail, 10 % of
// the agents' deploy steps fail — and kills the worker, the API and the
// Temporal server during the run (at 10 %, 30 % and 50 % of the nodes
// settled). Every node must end active, or deploy failed with a last_error:
// none stuck. It prints the figures: completion time, states, retries.
func TestSoak(t *testing.T) {
	n := *soakNodes
	start := time.Now()
	img := newCountingImage(t, 1<<20, 0)
	uuids := make([]string, n)
	macs := map[string]string{}
	var mu sync.Mutex
	parallel(n, 8, func(i int) {
		mac := fmt.Sprintf("52:54:%02x:%02x:%02x:%02x", 0xa0|i>>24&0x0f, i>>16&0xff, i>>8&0xff, i&0xff)
		var nd node
		if code, _ := call(t, "POST", "/v1/nodes", map[string]any{
			"name": fmt.Sprintf("soak-%04d", i), "driver": "fake-hardware", "deploy_interface": "direct",
			"automated_clean": false,
			"driver_info":     map[string]any{"fake_fail_rate": "0.2"},
			"properties":      map[string]any{"cpus": 2, "memory_mb": 2048, "local_gb": 20},
			"instance_info": map[string]any{"image_source": img.URL + "/disk.raw",
				"image_os_hash_algo": "sha256", "image_os_hash_value": img.sha256},
		}, &nd); code != 201 {
			t.Errorf("create node %d: %d", i, code)
			return
		}
		if code, _ := call(t, "POST", "/v1/ports", map[string]any{"address": mac, "node_uuid": nd.UUID}, nil); code != 201 {
			t.Errorf("create port %d: %d", i, code)
			return
		}
		uuids[i] = nd.UUID
		mu.Lock()
		macs[nd.UUID] = mac
		mu.Unlock()
	})
	if t.Failed() {
		t.FailNow()
	}
	enrolled := time.Since(start)
	// Manage and provide (no cleaning): the BMC faults can fail manage,
	// and the node says why; those are left out of the deploy.
	failedBefore := 0
	var refused, maintenance atomic.Int64
	for _, s := range []struct{ verb, state string }{{"manage", "manageable"}, {"provide", "available"}} {
		parallel(n, 8, func(i int) {
			if uuids[i] != "" && !soakVerb(t, uuids[i], s.verb, &refused, &maintenance) {
				uuids[i] = ""
			}
		})
		for i, u := range uuids {
			if u == "" {
				continue
			}
			nd := waitSettled(t, u, 10*time.Minute)
			if nd.ProvisionState != s.state {
				if nd.LastError == nil || *nd.LastError == "" {
					t.Errorf("node %d: %s ended %q without last_error", i, s.verb, nd.ProvisionState)
				}
				failedBefore++
				uuids[i] = ""
			}
		}
	}
	prepared := time.Since(start)

	f := startFleet(t, macs, func(uuid string) sim.Config {
		return sim.Config{HeartbeatInterval: 10 * time.Second, FailureRate: 0.1}
	})
	deployStart := time.Now()
	parallel(n, 16, func(i int) {
		if uuids[i] != "" && !soakVerb(t, uuids[i], "active", &refused, &maintenance) {
			uuids[i] = ""
		}
	})
	deploying := 0
	for _, u := range uuids {
		if u != "" {
			deploying++
		}
	}

	// Watch the fleet; kill the parts as the run goes.
	type kill struct {
		at   float64
		what string
		do   func() error
	}
	kills := []kill{
		{0.1, "worker", func() error { lab.KillWorker(); return lab.StartWorker() }},
		{0.3, "api", func() error { lab.KillAPI(); return lab.StartAPI(context.Background()) }},
		{0.5, "temporal", func() error { return lab.RestartTemporal(context.Background()) }},
	}
	var killLog []string
	settled := map[string]node{}
	deadline := start.Add(*soakTimeout)
	var lastProgress time.Time
	for len(settled) < deploying && time.Now().Before(deadline) {
		states, ok := listStates()
		if ok {
			for _, u := range uuids {
				if u == "" {
					continue
				}
				if _, done := settled[u]; done {
					continue
				}
				if st := states[u]; st == "active" || st == "deploy failed" {
					if nd, ok := tryGetNode(u); ok && (nd.ProvisionState == "active" && nd.TargetProvisionState == nil || nd.ProvisionState == "deploy failed") {
						settled[u] = nd
					}
				}
			}
		}
		frac := float64(len(settled)) / float64(max(deploying, 1))
		for len(kills) > 0 && frac >= kills[0].at {
			k := kills[0]
			kills = kills[1:]
			t0 := time.Now()
			if err := k.do(); err != nil {
				t.Fatalf("kill and restart the %s: %v", k.what, err)
			}
			killLog = append(killLog, fmt.Sprintf("%s killed at %s (%d/%d settled), back in %s", k.what,
				time.Since(deployStart).Round(time.Second), len(settled), deploying, time.Since(t0).Round(100*time.Millisecond)))
		}
		if time.Since(lastProgress) > 30*time.Second {
			lastProgress = time.Now()
			t.Logf("soak: %d/%d settled after %s", len(settled), deploying, time.Since(deployStart).Round(time.Second))
		}
		time.Sleep(time.Second)
	}
	deployTime := time.Since(deployStart)
	f.stop()

	// Figures.
	counts := map[string]int{}
	reasons := map[string]int{}
	for _, nd := range settled {
		counts[nd.ProvisionState]++
		if nd.ProvisionState == "deploy failed" {
			if nd.LastError == nil || *nd.LastError == "" {
				t.Errorf("node %s is in deploy failed without last_error", nd.UUID)
			} else {
				reasons[soakReason(*nd.LastError)]++
			}
		}
	}
	var stuck []string
	for _, u := range uuids {
		if _, ok := settled[u]; u != "" && !ok {
			nd, _ := tryGetNode(u)
			stuck = append(stuck, fmt.Sprintf("%s %q", u, nd.ProvisionState))
		}
	}
	retries, operatorWaits := soakRetries(t, settled)
	var b strings.Builder
	fmt.Fprintf(&b, "soak: %d nodes, BMC faults 20 %%, agent step faults 10 %%, worker, API and Temporal killed during the run\n", n)
	fmt.Fprintf(&b, "  enrolled in %s, managed and provided by %s (%d failed there with a last_error)\n", enrolled.Round(time.Second), prepared.Round(time.Second), failedBefore)
	fmt.Fprintf(&b, "  in maintenance, put there by the power sync (BMC faults), so not deployed: %d\n", maintenance.Load())
	fmt.Fprintf(&b, "  deploy of %d nodes: all settled in %s: active %d, deploy failed %d, stuck %d\n", deploying, deployTime.Round(time.Second), counts["active"], counts["deploy failed"], len(stuck))
	fmt.Fprintf(&b, "  retries: %d activity attempts after a failed one (BMC and agent), %d steps failed to the operator\n", retries, operatorWaits)
	fmt.Fprintf(&b, "  image downloads: %d for %d active nodes\n", img.started.Load(), counts["active"])
	fmt.Fprintf(&b, "  verbs refused with 400 No valid host (the worker's conductor heartbeat late under load) and sent again: %d\n", refused.Load())
	for _, k := range killLog {
		fmt.Fprintf(&b, "  %s\n", k)
	}
	keys := make([]string, 0, len(reasons))
	for r := range reasons {
		keys = append(keys, r)
	}
	sort.Strings(keys)
	for _, r := range keys {
		fmt.Fprintf(&b, "  deploy failed ×%d: %s\n", reasons[r], r)
	}
	t.Log(b.String())
	fmt.Print(b.String())
	if len(stuck) > 0 {
		t.Errorf("%d nodes stuck after %s: %v", len(stuck), *soakTimeout, stuck[:min(len(stuck), 20)])
	}
	if counts["active"] == 0 {
		t.Errorf("no node reached active")
	}
}

// soakVerb sends a provision verb as a client of the API does: a 400 "No
// valid host" (no conductor alive: a worker that is restarting, or whose
// liveness heartbeat is late on a loaded machine) or a 503 is tried again
// for up to two minutes; refused counts them.
//
// A node the power sync has put in maintenance (its power state could not be
// read, as Ironic's power sync does after repeated failures) is refused with
// 400: it is counted in maintenance and left out, not an error.
func soakVerb(t *testing.T, uuid, target string, refused, maintenance *atomic.Int64) bool {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var body map[string]any
		code, _ := call(t, "PUT", "/v1/nodes/"+uuid+"/states/provision", map[string]any{"target": target}, &body)
		if code == 202 {
			return true
		}
		if code == 400 && strings.Contains(faultstring(body), "in maintenance mode") {
			maintenance.Add(1)
			return false
		}
		retry := code == 503 || code == 400 && strings.Contains(faultstring(body), "No valid host")
		if !retry || time.Now().After(deadline) {
			t.Errorf("%s node %s: HTTP %d %s", target, uuid, code, faultstring(body))
			return false
		}
		refused.Add(1)
		time.Sleep(time.Second)
	}
}

// soakReason is a last_error without the node's UUID, to group them.
func soakReason(s string) string {
	s = firstLine(s, 160)
	fields := strings.Fields(s)
	for i, f := range fields {
		if len(strings.Trim(f, ".,:()")) == 36 && strings.Count(f, "-") == 4 {
			fields[i] = "<node>"
		}
	}
	return strings.Join(fields, " ")
}

// soakRetries counts, in the nodes' deploy histories, the activity attempts
// after a failed one (regular activities' started attempts above one, local
// activities' recorded attempts above one) and the steps that failed to the
// operator.
func soakRetries(t *testing.T, settled map[string]node) (retries, failedSteps int) {
	c := temporalClient(t)
	codec := labCodec(t)
	list := make([]string, 0, len(settled))
	for u := range settled {
		list = append(list, u)
	}
	var r, fsteps atomic.Int64
	parallel(len(list), 8, func(i int) {
		it := c.GetWorkflowHistory(context.Background(), workflows.WorkflowID(list[i]), "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
		for it.HasNext() {
			ev, err := it.Next()
			if err != nil {
				return
			}
			switch ev.GetEventType() {
			case enumspb.EVENT_TYPE_ACTIVITY_TASK_STARTED:
				if a := ev.GetActivityTaskStartedEventAttributes().GetAttempt(); a > 1 {
					r.Add(int64(a - 1))
				}
			case enumspb.EVENT_TYPE_MARKER_RECORDED:
				if p := ev.GetMarkerRecordedEventAttributes().GetDetails()["data"]; p != nil && len(p.GetPayloads()) > 0 {
					// The stack's payloads are encrypted: open them first.
					plain, err := codec.Decode(p.GetPayloads()[:1])
					if err != nil || len(plain) == 0 {
						return
					}
					var m struct{ Attempt int32 }
					if json.Unmarshal(plain[0].GetData(), &m) == nil && m.Attempt > 1 {
						r.Add(int64(m.Attempt - 1))
					}
				}
			case enumspb.EVENT_TYPE_TIMER_STARTED:
				// The operator wait is the only timer of a deploy as long
				// as the lab's operator-wait-timeout (10m).
				if ev.GetTimerStartedEventAttributes().GetStartToFireTimeout().AsDuration() == 10*time.Minute {
					fsteps.Add(1)
				}
			}
		}
	})
	return int(r.Load()), int(fsteps.Load())
}

// parallel runs fn(0..n-1) on width goroutines.
func parallel(n, width int, fn func(i int)) {
	var wg sync.WaitGroup
	next := atomic.Int64{}
	for w := 0; w < width; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				fn(i)
			}
		}()
	}
	wg.Wait()
}
