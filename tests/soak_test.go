//go:build soak

package tests

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"

	"github.com/ironflow/ironflow/agent/sim"
	"github.com/ironflow/ironflow/bmc"
	"github.com/ironflow/ironflow/embedded"
	"github.com/ironflow/ironflow/store"
	"github.com/ironflow/ironflow/workflows"
)

// `make soak` (docs/benchmarks.md, "Soak"): not part of make test.
var (
	soakNodes   = flag.Int("soak.nodes", 2000, "fake-hardware nodes the soak deploys")
	soakTimeout = flag.Duration("soak.timeout", 90*time.Minute, "bound of the whole soak; a node not settled by then is stuck")
)

// TestSoak deploys -soak.nodes fake-hardware nodes at once with simulated
// agents, with faults injected everywhere — 20 % of BMC calls fail, 10 % of
// the agents' deploy steps fail, the BMCs of a few more nodes accept TCP
// and never answer — and, as the nodes settle, restarts PostgreSQL twice
// (down 20 s each) and the Temporal server twice, and kills the worker
// three times and the API three times. Every node must end active, or
// deploy failed with a last_error: none stuck; no node's operations may
// overlap, and no active node may have done anything twice (an image
// download, a BMC boot, an agent boot). It prints the figures: completion
// time, states, retries, the outages, the duplicates.
func TestSoak(t *testing.T) {
	n := *soakNodes
	start := time.Now()
	img := newCountingImage(t, 1<<20, 0)
	uuids := make([]string, n)
	macs := map[string]string{}
	// Each machine's power actions are kept in a state file of its own,
	// to count its boots; each node's image URL names it, to count its
	// downloads.
	stateDir := t.TempDir()
	stateFile := func(i int) string { return filepath.Join(stateDir, fmt.Sprintf("soak-%04d.json", i)) }
	var mu sync.Mutex
	parallel(n, 8, func(i int) {
		mac := fmt.Sprintf("52:54:%02x:%02x:%02x:%02x", 0xa0|i>>24&0x0f, i>>16&0xff, i>>8&0xff, i&0xff)
		if err := os.WriteFile(stateFile(i), []byte(`{"power": "power off", "boot": {}}`), 0o644); err != nil {
			t.Error(err)
			return
		}
		var nd node
		if code, _ := call(t, "POST", "/v1/nodes", map[string]any{
			"name": fmt.Sprintf("soak-%04d", i), "driver": "fake-hardware", "deploy_interface": "direct",
			"automated_clean": false,
			"driver_info":     map[string]any{"fake_fail_rate": "0.2", "fake_state_file": stateFile(i)},
			"properties":      map[string]any{"cpus": 2, "memory_mb": 2048, "local_gb": 20},
			"instance_info": map[string]any{"image_source": fmt.Sprintf("%s/disk.raw?node=%d", img.URL, i),
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

	// The nodes whose BMC hangs: available with a redfish BMC that
	// accepts TCP and never answers (they could not have been managed).
	hang := startDeadBMC(t, false)
	hung := soakHungNodes(t, hang.url(), soakHungBMCs)
	index := map[string]int{}
	for i, u := range uuids {
		if u != "" {
			index[u] = i
		}
	}
	uuids = append(uuids, hung...)

	f := startFleet(t, macs, func(uuid string) sim.Config {
		return sim.Config{HeartbeatInterval: 10 * time.Second, FailureRate: 0.1}
	})
	deployStart := time.Now()
	parallel(len(uuids), 16, func(i int) {
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
	worker := func() error { lab.KillWorker(); return lab.StartWorker() }
	api := func() error { lab.KillAPI(); return lab.StartAPI(context.Background()) }
	temporal := func() error { return lab.RestartTemporal(context.Background()) }
	postgres := func() error { return soakPostgresOutage(soakPostgresDown) }
	kills := []kill{
		{0.05, "worker", worker},
		{0.10, "postgres", postgres},
		{0.20, "api", api},
		{0.30, "temporal", temporal},
		{0.40, "worker", worker},
		{0.50, "api", api},
		{0.60, "postgres", postgres},
		{0.70, "temporal", temporal},
		{0.80, "worker", worker},
		{0.90, "api", api},
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
	for _, k := range kills {
		t.Errorf("the %s was not killed at %.0f %% settled: the run ended first", k.what, 100*k.at)
	}

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
	overlapping, twice := soakOverlaps(t, deployStart)

	// What each active node did, which it must have done once: download
	// the image, boot from the BMC twice (the agent, then the instance),
	// boot one agent.
	var dupDownloads, dupBoots, dupAgents []string
	for u, nd := range settled {
		i, ok := index[u]
		if !ok || nd.ProvisionState != "active" {
			continue
		}
		if d := img.forNode(strconv.Itoa(i)); d != 1 {
			dupDownloads = append(dupDownloads, fmt.Sprintf("%s: %d downloads", u, d))
		}
		if st, err := bmc.ReadFakeState(stateFile(i)); err != nil {
			t.Errorf("node %s: read its machine's state: %v", u, err)
		} else if st.Boots() != 2 {
			dupBoots = append(dupBoots, fmt.Sprintf("%s: %d BMC boots", u, st.Boots()))
		}
		if boots, _ := f.counts(u); boots != 1 {
			dupAgents = append(dupAgents, fmt.Sprintf("%s: %d agent boots", u, boots))
		}
	}
	// The nodes whose BMC hangs end deploy failed naming it, or were put
	// in maintenance by the power sync first (then the verb was refused).
	var hungOK int
	for _, u := range hung {
		nd, ok := settled[u]
		switch {
		case ok && nd.ProvisionState == "deploy failed" && strings.Contains(deref(nd.LastError), strings.TrimPrefix(hang.url(), "http://")):
			hungOK++
		case !ok && soakInMaintenanceNaming(t, u, strings.TrimPrefix(hang.url(), "http://")):
			hungOK++
		default:
			t.Errorf("node %s with a hanging BMC: %q, last_error %q: want deploy failed naming the BMC %s, or maintenance", u, nd.ProvisionState, deref(nd.LastError), hang.url())
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "soak: %d nodes, BMC faults 20 %%, agent step faults 10 %%, %d more nodes whose BMC hangs; PostgreSQL and Temporal restarted twice, the worker and the API killed three times during the run\n", n, len(hung))
	fmt.Fprintf(&b, "  enrolled in %s, managed and provided by %s (%d failed there with a last_error)\n", enrolled.Round(time.Second), prepared.Round(time.Second), failedBefore)
	fmt.Fprintf(&b, "  in maintenance, put there by the power sync (BMC faults), so not deployed: %d\n", maintenance.Load())
	fmt.Fprintf(&b, "  deploy of %d nodes: all settled in %s: active %d, deploy failed %d, stuck %d\n", deploying, deployTime.Round(time.Second), counts["active"], counts["deploy failed"], len(stuck))
	fmt.Fprintf(&b, "  retries: %d activity attempts after a failed one (BMC and agent), %d steps failed to the operator\n", retries, operatorWaits)
	fmt.Fprintf(&b, "  image downloads: %d for %d active nodes\n", img.started.Load(), counts["active"])
	fmt.Fprintf(&b, "  duplicated side effects on active nodes: %d with more than one image download, %d with other than 2 BMC boots, %d with more than one agent boot\n", len(dupDownloads), len(dupBoots), len(dupAgents))
	fmt.Fprintf(&b, "  operations: %d nodes with two workflow runs at once, %d with more than one deploy run\n", len(overlapping), len(twice))
	fmt.Fprintf(&b, "  nodes whose BMC hangs: %d of %d ended deploy failed naming it, or in maintenance\n", hungOK, len(hung))
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
	for what, l := range map[string][]string{"image downloads": dupDownloads, "BMC boots": dupBoots, "agent boots": dupAgents,
		"overlapping workflow runs": overlapping, "deploy runs": twice} {
		if len(l) > 0 {
			t.Errorf("%s: %d active nodes did it more than once: %v", what, len(l), l[:min(len(l), 10)])
		}
	}
}

// The soak's outages: PostgreSQL is down this long each time, and this
// many more nodes have a BMC that hangs.
const (
	soakPostgresDown = 20 * time.Second
	soakHungBMCs     = 5
)

// soakPostgresOutage stops the stack's PostgreSQL, keeps it down for
// down, and starts it again on the same port and data.
func soakPostgresOutage(down time.Duration) error {
	dir := lab.Postgres.DataDir()
	if err := lab.Postgres.Stop(); err != nil {
		return err
	}
	time.Sleep(down)
	pg, err := embedded.StartPostgres(context.Background(), dir, nil)
	if err != nil {
		return err
	}
	if pg.Port() != lab.Postgres.Port() {
		return fmt.Errorf("PostgreSQL came back on port %d, not %d", pg.Port(), lab.Postgres.Port())
	}
	lab.Postgres = pg
	return nil
}

// soakHungNodes creates n available redfish nodes whose BMC is address.
func soakHungNodes(t *testing.T, address string, n int) []string {
	ctx := context.Background()
	st, err := store.Open(ctx, lab.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var out []string
	for i := range n {
		name := fmt.Sprintf("soak-bmc-hangs-%d", i)
		nd := &store.Node{Name: &name, Driver: "redfish", ProvisionState: "available", PowerState: psPtr("power off"),
			DriverInfo: map[string]any{"redfish_address": address, "redfish_username": "admin", "redfish_password": "password",
				"redfish_system_id": "/redfish/v1/Systems/1", "redfish_timeout": "2s", "redfish_connection_attempts": 1}}
		if err := st.CreateNode(ctx, nd); err != nil {
			t.Fatal(err)
		}
		out = append(out, nd.UUID)
	}
	return out
}

// soakInMaintenanceNaming reports whether the node is in maintenance with
// a reason that names the BMC at address.
func soakInMaintenanceNaming(t *testing.T, uuid, address string) bool {
	var nd struct {
		Maintenance       bool    `json:"maintenance"`
		MaintenanceReason *string `json:"maintenance_reason"`
	}
	if code, _ := call(t, "GET", "/v1/nodes/"+uuid, nil, &nd); code != 200 {
		return false
	}
	return nd.Maintenance && strings.Contains(deref(nd.MaintenanceReason), address)
}

// soakOverlaps reads every node workflow run from Temporal's visibility:
// the nodes with two runs open at once, and those with more than one
// deploy run started since the deploys began.
func soakOverlaps(t *testing.T, since time.Time) (overlapping, twice []string) {
	c := temporalClient(t)
	type run struct {
		start, end time.Time
		typ        string
	}
	runs := map[string][]run{}
	var token []byte
	for {
		resp, err := c.ListWorkflow(context.Background(), &workflowservice.ListWorkflowExecutionsRequest{PageSize: 1000, NextPageToken: token})
		if err != nil {
			t.Errorf("list the workflow runs: %v", err)
			return nil, nil
		}
		for _, e := range resp.GetExecutions() {
			id := e.GetExecution().GetWorkflowId()
			if !strings.HasPrefix(id, "node-") {
				continue
			}
			r := run{start: e.GetStartTime().AsTime(), end: time.Now().Add(time.Hour), typ: e.GetType().GetName()}
			if e.GetCloseTime() != nil && !e.GetCloseTime().AsTime().IsZero() {
				r.end = e.GetCloseTime().AsTime()
			}
			runs[id] = append(runs[id], r)
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			break
		}
	}
	for id, rs := range runs {
		sort.Slice(rs, func(i, j int) bool { return rs[i].start.Before(rs[j].start) })
		deploys := 0
		for i, r := range rs {
			if i > 0 && r.start.Before(rs[i-1].end) {
				overlapping = append(overlapping, fmt.Sprintf("%s: %s from %s while %s ran until %s", id, r.typ, r.start.Format(time.RFC3339Nano), rs[i-1].typ, rs[i-1].end.Format(time.RFC3339Nano)))
			}
			if r.typ == workflows.WorkflowDeployNode && r.start.After(since) {
				deploys++
			}
		}
		if deploys > 1 {
			twice = append(twice, fmt.Sprintf("%s: %d deploy runs", id, deploys))
		}
	}
	return overlapping, twice
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
