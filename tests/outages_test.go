package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	enumspb "go.temporal.io/api/enums/v1"

	"github.com/ironflow/ironflow/agent/sim"
	"github.com/ironflow/ironflow/embedded"
	"github.com/ironflow/ironflow/internal/testkit/blackhole"
	"github.com/ironflow/ironflow/workflows"
)

// outageLength is how long the tests keep a part of the control plane
// down: the longest retry interval of the workflows' store work
// (workflows/recorder.go, localOptions: 30 s) plus a margin, so that every
// waiting workflow has retried against the dead part at least once at its
// longest interval (docs/crash-safety.md, "Outages that last").
const outageLength = 35 * time.Second

// outageClient is the HTTP client of the outage tests' requests. Its bound
// is far above any answer's (the API's own bounds are seconds): a request
// that reaches it is a hang, which the tests report as such.
var outageClient = &http.Client{Timeout: 90 * time.Second}

// ironicFault is Ironic's error body, decoded.
type ironicFault struct {
	status      int
	faultcode   string
	faultstring string
}

// outageCall sends a request to the API at base and decodes Ironic's error
// body when the answer is an error. A transport error (a hang cut by
// outageClient, a reset) is returned as such.
func outageCall(base, method, path string, body any) (ironicFault, []byte, error) {
	var r io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = strings.NewReader(string(b))
	}
	req, err := http.NewRequest(method, base+path, r)
	if err != nil {
		return ironicFault{}, nil, err
	}
	req.Header.Set("X-OpenStack-Ironic-API-Version", "1.78")
	req.Header.Set("Content-Type", "application/json")
	resp, err := outageClient.Do(req)
	if err != nil {
		return ironicFault{}, nil, err
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	f := ironicFault{status: resp.StatusCode}
	if resp.StatusCode >= 400 {
		var outer struct {
			ErrorMessage string `json:"error_message"`
		}
		var inner struct {
			Faultcode   string `json:"faultcode"`
			Faultstring string `json:"faultstring"`
		}
		if err := json.Unmarshal(data, &outer); err != nil {
			return f, data, fmt.Errorf("error body %q is not Ironic's: %w", data, err)
		}
		if err := json.Unmarshal([]byte(outer.ErrorMessage), &inner); err != nil {
			return f, data, fmt.Errorf("error_message %q is not Ironic's: %w", outer.ErrorMessage, err)
		}
		f.faultcode, f.faultstring = inner.Faultcode, inner.Faultstring
	}
	return f, data, nil
}

// wantTemporaryFailure checks that a request made during an outage is
// answered, with Ironic's TemporaryFailure: 503, a Server fault, and the
// message that tells the client to retry.
func wantTemporaryFailure(t *testing.T, base, method, path string, body any) {
	t.Helper()
	f, data, err := outageCall(base, method, path, body)
	if err != nil {
		t.Errorf("%s %s during the outage: %v", method, path, err)
		return
	}
	if f.status != http.StatusServiceUnavailable || f.faultcode != "Server" || f.faultstring != "Resource temporarily unavailable, please retry." {
		t.Errorf("%s %s during the outage: HTTP %d %s, want 503 with Ironic's TemporaryFailure", method, path, f.status, data)
	}
}

// outageNodes enrols n agent nodes (fake-hardware, the simulated agent),
// brings them to available without cleaning and returns their UUIDs.
func outageNodes(t *testing.T, prefix string, n int, macByte byte, img *imageServer) (uuids, macs []string) {
	t.Helper()
	for i := range n {
		mac := fmt.Sprintf("52:54:00:%02x:%02x:%02x", macByte, i/256, i%256)
		uuid := enrollAgentNode(t, fmt.Sprintf("%s-%d", prefix, i), mac, img)
		if code, _ := call(t, "PATCH", "/v1/nodes/"+uuid, []map[string]any{{"op": "add", "path": "/automated_clean", "value": false}}, nil); code != 200 {
			t.Fatalf("set automated_clean: %d", code)
		}
		uuids, macs = append(uuids, uuid), append(macs, mac)
	}
	for _, verb := range []string{"manage", "provide"} {
		for _, uuid := range uuids {
			if _, err := call2(t, "PUT", "/v1/nodes/"+uuid+"/states/provision", map[string]any{"target": verb}); err != nil {
				t.Fatal(err)
			}
		}
		for _, uuid := range uuids {
			waitState(t, uuid, map[string]string{"manage": "manageable", "provide": "available"}[verb], 2*time.Minute)
		}
	}
	return uuids, macs
}

// startDeploys deploys the nodes (through the lab's API) and starts their
// machines, whose simulated agents call apiURL ("" for the lab's API).
func startDeploys(t *testing.T, uuids, macs []string, apiURL string) {
	t.Helper()
	for _, uuid := range uuids {
		if _, err := call2(t, "PUT", "/v1/nodes/"+uuid+"/states/provision", map[string]any{"target": "active"}); err != nil {
			t.Fatal(err)
		}
	}
	for i, uuid := range uuids {
		startSimMachine(t, uuid, []string{macs[i]}, sim.Config{APIURL: apiURL})
	}
}

// startFleetDeploys deploys the nodes (through the lab's API) and plays
// their machines with one loop (a machine each would poll the API a
// hundred times as often), whose simulated agents call apiURL ("" for the
// lab's API).
func startFleetDeploys(t *testing.T, uuids, macs []string, apiURL string) {
	t.Helper()
	machines := map[string]string{}
	for i, uuid := range uuids {
		if _, err := call2(t, "PUT", "/v1/nodes/"+uuid+"/states/provision", map[string]any{"target": "active"}); err != nil {
			t.Fatal(err)
		}
		machines[uuid] = macs[i]
	}
	startFleet(t, machines, func(string) sim.Config { return sim.Config{APIURL: apiURL, HeartbeatInterval: 5 * time.Second} })
}

// settled waits until every node has ended its deploy: active, or deploy
// failed with a last_error. A node in any other state at the end is stuck.
func settled(t *testing.T, uuids []string, timeout time.Duration) (active, failed int) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for _, uuid := range uuids {
		var n node
		for {
			n = getNode(t, uuid)
			if n.ProvisionState == "active" || n.ProvisionState == "deploy failed" || time.Now().After(deadline) {
				break
			}
			time.Sleep(250 * time.Millisecond)
		}
		switch n.ProvisionState {
		case "active":
			active++
		case "deploy failed":
			failed++
			if n.LastError == nil || *n.LastError == "" {
				t.Errorf("node %s: deploy failed without a last_error", uuid)
			}
			t.Logf("node %s: deploy failed: %s", uuid, deref(n.LastError))
		default:
			t.Errorf("node %s stuck in %q (target %s, last_error %s)", uuid, n.ProvisionState, deref(n.TargetProvisionState), deref(n.LastError))
		}
	}
	return active, failed
}

// TestPostgresStoppedDuringDeploys stops the lab's PostgreSQL (connections
// refused) for outageLength while 100 deploys are in flight on the
// simulated agent: every API call answers 503 with Ironic's TemporaryFailure and none
// hangs, the workflows wait and retry their store work, the agents' lookups
// and heartbeats fail and are retried, and once PostgreSQL is back every
// node ends active or deploy failed with a reason.
func TestPostgresStoppedDuringDeploys(t *testing.T) {
	const nodes = 100
	img := newImageServer(t, 1<<20)
	uuids, macs := outageNodes(t, "pg-stopped", nodes, 0xd1, img)
	spare, _ := outageNodes(t, "pg-stopped-spare", 1, 0xd2, img)
	startFleetDeploys(t, uuids, macs, "")
	// Some nodes have called back; the rest will while the database is down.
	waitAnyState(t, uuids, []string{"deploying", "wait call-back"}, time.Minute)

	restart := stopLabPostgres(t)
	down := time.Now()

	wantTemporaryFailure(t, lab.APIURL, "GET", "/v1/nodes/"+uuids[0], nil)
	wantTemporaryFailure(t, lab.APIURL, "GET", "/v1/nodes?detail=true", nil)
	wantTemporaryFailure(t, lab.APIURL, "PUT", "/v1/nodes/"+spare[0]+"/states/provision", map[string]any{"target": "active"})
	wantTemporaryFailure(t, lab.APIURL, "POST", "/v1/heartbeat/"+uuids[0], map[string]any{"callback_url": "http://127.0.0.1:1", "agent_token": "x"})
	wantTemporaryFailure(t, lab.APIURL, "GET", "/v1/lookup?addresses="+macs[0], nil)

	time.Sleep(time.Until(down.Add(outageLength)))
	restart()

	active, failed := settled(t, uuids, 4*time.Minute)
	t.Logf("after a %s PostgreSQL outage: %d active, %d deploy failed", outageLength, active, failed)
	if failed > 0 {
		// An outage of the database is no fault of the machine: the
		// workflows wait it out.
		t.Errorf("%d of %d deploys failed because PostgreSQL was down", failed, nodes)
	}
	if n := getNode(t, spare[0]); n.ProvisionState != "available" || n.TargetProvisionState != nil {
		t.Errorf("the verb refused with 503 changed node %s: %q target %s", spare[0], n.ProvisionState, deref(n.TargetProvisionState))
	}
}

// stopLabPostgres stops the lab's PostgreSQL (connections refused) and
// returns what starts it again on the same port and data (at most once;
// the test's cleanup calls it too).
func stopLabPostgres(t *testing.T) (restart func()) {
	t.Helper()
	pgDir := lab.Postgres.DataDir()
	if err := lab.Postgres.Stop(); err != nil {
		t.Fatal(err)
	}
	restarted := false
	restart = func() {
		if restarted {
			return
		}
		restarted = true
		pg, err := embedded.StartPostgres(context.Background(), pgDir, nil)
		if err != nil {
			t.Fatalf("start PostgreSQL again: %v", err)
		}
		if pg.Port() != lab.Postgres.Port() {
			t.Fatalf("PostgreSQL came back on port %d, not %d", pg.Port(), lab.Postgres.Port())
		}
		lab.Postgres = pg
	}
	t.Cleanup(restart)
	return restart
}

// TestHeartbeatCheckedOnceTheDatabaseIsBack: a heartbeat the API accepted
// just before PostgreSQL went away is not dropped. The worker checks a
// heartbeat signal against the node's agent token in the database
// (worker/worker.go, tokenWaiting); with the database down the check
// waits, while the signal is fresh enough, instead of failing it. The
// window between the API's acceptance and the worker's check is held open
// here: the worker is paused (SIGSTOP) while the agent's one heartbeat is
// accepted and signalled, PostgreSQL is stopped, then the worker goes on.
// The agent's next heartbeat is minutes away, so the deploy moves only if
// that heartbeat was checked and taken.
func TestHeartbeatCheckedOnceTheDatabaseIsBack(t *testing.T) {
	img := newImageServer(t, 1<<20)
	uuids, macs := outageNodes(t, "hb-db-down", 1, 0xd8, img)
	uuid := uuids[0]
	if _, err := call2(t, "PUT", "/v1/nodes/"+uuid+"/states/provision", map[string]any{"target": "active"}); err != nil {
		t.Fatal(err)
	}
	waitState(t, uuid, "wait call-back", time.Minute)

	worker := lab.Worker.Pid()
	if err := syscall.Kill(worker, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	resumed := false
	resume := func() {
		if !resumed {
			resumed = true
			_ = syscall.Kill(worker, syscall.SIGCONT)
		}
	}
	t.Cleanup(resume)
	logFrom := fileSize(t, lab.WorkerLog())

	// One heartbeat now, the next in ten minutes: the deploy's liveness
	// timeout (30 s in the lab) would end the deploy long before.
	startSimMachine(t, uuid, macs, sim.Config{HeartbeatInterval: 10 * time.Minute})
	c := temporalClient(t)
	deadline := time.Now().Add(time.Minute)
	for {
		_, signalled := historyCount(t, c, uuid, func(et enumspb.EventType, text string) bool {
			return et == enumspb.EVENT_TYPE_WORKFLOW_EXECUTION_SIGNALED && strings.Contains(text, workflows.SignalHeartbeat)
		})
		if signalled > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the agent's heartbeat was not signalled to the deploy within a minute")
		}
		time.Sleep(200 * time.Millisecond)
	}

	restart := stopLabPostgres(t)
	resume()
	// The check waits for the database rather than failing the signal.
	waitLog(t, lab.WorkerLog(), logFrom, time.Minute, "its check waits", uuid)
	time.Sleep(15 * time.Second)
	restart()

	n := waitState(t, uuid, "active", 2*time.Minute)
	if n.LastError != nil && *n.LastError != "" {
		t.Errorf("node active with last_error %q", *n.LastError)
	}
	if line := logLine(t, lab.WorkerLog(), logFrom, "not authentic", uuid); line != "" {
		t.Errorf("the heartbeat was refused: %s", line)
	}
}

// fileSize is the size of the file at path (where a log's new lines start).
func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// logLine is the first line of the log at path, from byte from on, that
// holds every one of words ("" if none does).
func logLine(t *testing.T, path string, from int64, words ...string) string {
	t.Helper()
	b := readFile(path)
	if from > int64(len(b)) {
		from = 0 // the log was rotated
	}
lines:
	for _, l := range strings.Split(b[from:], "\n") {
		for _, w := range words {
			if !strings.Contains(l, w) {
				continue lines
			}
		}
		return l
	}
	return ""
}

// waitLog waits until the log at path holds, after byte from, a line
// with every one of words.
func waitLog(t *testing.T, path string, from int64, timeout time.Duration, words ...string) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for logLine(t, path, from, words...) == "" {
		if time.Now().After(deadline) {
			t.Fatalf("no line with %q in %s after %s; its end:\n%s", words, path, timeout, embedded.Tail(path, 3000))
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// waitAnyState waits until one of the nodes is in one of the states.
func waitAnyState(t *testing.T, uuids, states []string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		for _, uuid := range uuids {
			for _, s := range states {
				if getNode(t, uuid).ProvisionState == s {
					return
				}
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatalf("no node reached %v within %s", states, timeout)
}

// pgHole is the black hole between the test's API and worker and
// PostgreSQL: a network namespace whose frames are dropped (as root), else
// a proxy that stops forwarding.
type pgHole struct {
	addr       func() string
	drop, pass func() error
}

func (h pgHole) Addr() string { return h.addr() }

func pgBlackHole(t *testing.T, target string) pgHole {
	if os.Geteuid() == 0 {
		n, err := blackhole.StartNamespace(target, 0)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(n.Close)
		return pgHole{addr: n.Addr, drop: n.Drop, pass: n.Pass}
	}
	t.Log("SKIPPED LOUDLY: the packet-dropping namespace needs root; a proxy that stops forwarding stands in")
	p, err := blackhole.Start(target)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Close)
	return pgHole{addr: p.Addr, drop: func() error { p.Drop(); return nil }, pass: func() error { p.Pass(); return nil }}
}

// TestPostgresBlackHoledDuringDeploys puts PostgreSQL behind a black hole
// (a network namespace whose frames are dropped, so calls hang rather than
// fail: package blackhole) for
// outageLength, for an API and a worker that reach it through the hole,
// while deploys are in flight: every API call is answered, 503 with Ironic's
// TemporaryFailure, within the store's deadlines; the workflows wait; once
// the hole is lifted every node ends active.
func TestPostgresBlackHoledDuringDeploys(t *testing.T) {
	const nodes = 100
	ctx := context.Background()
	img := newImageServer(t, 1<<20)
	uuids, macs := outageNodes(t, "pg-blackholed", nodes, 0xd3, img)
	spare, _ := outageNodes(t, "pg-blackholed-spare", 1, 0xd4, img)

	direct := fmt.Sprintf("127.0.0.1:%d", lab.Postgres.Port())
	hole := pgBlackHole(t, direct)
	viaHole := strings.Replace(lab.DatabaseURL, direct, hole.Addr(), 1)
	if viaHole == lab.DatabaseURL {
		t.Fatalf("the lab's database URL %q does not name %s", lab.DatabaseURL, direct)
	}
	port, err := embedded.FreePort("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	listen := fmt.Sprintf("127.0.0.1:%d", port)
	apiURL := "http://" + listen
	api, err := lab.Spawn("ironflow-api-blackhole", append(lab.APIArgs(listen), "--database-url", viaHole))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(api.Kill)
	if err := lab.WaitHTTP(ctx, apiURL+"/", api); err != nil {
		t.Fatal(err)
	}
	// The workflows run on a worker behind the hole too.
	lab.KillWorker()
	worker, err := lab.Spawn("ironflow-worker-blackhole", append(lab.WorkerArgs(), "--database-url", viaHole, "--agent-api-url", apiURL))
	if err != nil {
		t.Fatal(err)
	}
	// A worker that cannot reach the database at start exits (it
	// registers as a conductor first): the hole opens once it serves.
	for deadline := time.Now().Add(time.Minute); !strings.Contains(worker.Tail(1<<16), `msg="worker started"`); {
		if time.Now().After(deadline) || !worker.Running() {
			t.Fatalf("the worker behind the proxy did not start:\n%s", worker.Tail(4000))
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Cleanup(func() {
		worker.Kill()
		if lab.Worker == nil {
			if err := lab.StartWorker(); err != nil {
				t.Errorf("start the lab's worker again: %v", err)
			}
		}
	})

	startFleetDeploys(t, uuids, macs, apiURL)
	waitAnyState(t, uuids, []string{"deploying", "wait call-back"}, time.Minute)

	if err := hole.drop(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = hole.pass() })
	down := time.Now()
	var wg sync.WaitGroup
	for _, r := range []struct {
		method, path string
		body         any
	}{
		{"GET", "/v1/nodes/" + uuids[0], nil},
		{"GET", "/v1/nodes?detail=true", nil},
		{"PUT", "/v1/nodes/" + spare[0] + "/states/provision", map[string]any{"target": "active"}},
		{"POST", "/v1/heartbeat/" + uuids[0], map[string]any{"callback_url": "http://127.0.0.1:1", "agent_token": "x"}},
		{"GET", "/v1/lookup?addresses=" + macs[0], nil},
	} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wantTemporaryFailure(t, apiURL, r.method, r.path, r.body)
		}()
	}
	wg.Wait()
	time.Sleep(time.Until(down.Add(outageLength)))
	if err := hole.pass(); err != nil {
		t.Fatal(err)
	}

	active, failed := settled(t, uuids, 4*time.Minute)
	t.Logf("after a %s black hole in front of PostgreSQL: %d active, %d deploy failed", outageLength, active, failed)
	if failed > 0 {
		t.Errorf("%d of %d deploys failed because PostgreSQL was unreachable\nworker log:\n%s", failed, nodes, worker.Tail(4000))
	}
	if n := getNode(t, spare[0]); n.ProvisionState != "available" || n.TargetProvisionState != nil {
		t.Errorf("the verb refused with 503 changed node %s: %q target %s", spare[0], n.ProvisionState, deref(n.TargetProvisionState))
	}
}

// TestTemporalDownDuringDeploys kills the Temporal server for outageLength
// while deploys are in flight: a provision or power verb is answered 503
// with Ironic's TemporaryFailure and leaves its node as it was (no state
// written without a workflow to carry it on), heartbeats are refused with
// 503 and retried by the agents, and once the server is back every
// workflow in flight finishes: every node ends active.
func TestTemporalDownDuringDeploys(t *testing.T) {
	const nodes = 4
	img := newImageServer(t, 1<<20)
	uuids, macs := outageNodes(t, "temporal-down", nodes, 0xd5, img)
	spare, _ := outageNodes(t, "temporal-down-spare", 1, 0xd6, img)
	before := getNode(t, spare[0])
	startDeploys(t, uuids, macs, "")
	waitAnyState(t, uuids, []string{"deploying", "wait call-back"}, time.Minute)

	lab.KillTemporal()
	back := false
	restart := func() {
		if back {
			return
		}
		back = true
		if err := lab.StartTemporal(context.Background()); err != nil {
			t.Fatalf("start Temporal again: %v", err)
		}
	}
	t.Cleanup(restart)
	down := time.Now()

	wantTemporaryFailure(t, lab.APIURL, "PUT", "/v1/nodes/"+spare[0]+"/states/provision", map[string]any{"target": "active"})
	wantTemporaryFailure(t, lab.APIURL, "PUT", "/v1/nodes/"+spare[0]+"/states/power", map[string]any{"target": "power on"})
	// Reads need the database only.
	if f, data, err := outageCall(lab.APIURL, "GET", "/v1/nodes/"+spare[0], nil); err != nil || f.status != http.StatusOK {
		t.Errorf("GET a node while Temporal is down: %d %s %v", f.status, data, err)
	}
	after := getNode(t, spare[0])
	if after.ProvisionState != before.ProvisionState || deref(after.TargetProvisionState) != deref(before.TargetProvisionState) ||
		deref(after.LastError) != deref(before.LastError) {
		t.Errorf("the verbs refused with 503 changed node %s: %+v, was %+v", spare[0], after, before)
	}
	var full struct {
		TargetPowerState *string `json:"target_power_state"`
	}
	if code, _ := call(t, "GET", "/v1/nodes/"+spare[0], nil, &full); code != 200 || full.TargetPowerState != nil {
		t.Errorf("the power verb refused with 503 left target_power_state %s", deref(full.TargetPowerState))
	}
	var history struct {
		History []struct {
			Event string `json:"event"`
		} `json:"history"`
	}
	if code, _ := callAt(t, lab.APIURL, "1.78", "GET", "/v1/nodes/"+spare[0]+"/history", nil, &history); code != 200 {
		t.Errorf("GET history: %d", code)
	}
	for _, h := range history.History {
		if strings.Contains(h.Event, `"active" accepted`) || strings.Contains(h.Event, `Power action "power on" accepted`) {
			t.Errorf("node %s's history records a verb refused with 503: %q", spare[0], h.Event)
		}
	}

	time.Sleep(time.Until(down.Add(outageLength)))
	restart()

	active, failed := settled(t, uuids, 4*time.Minute)
	t.Logf("after a %s Temporal outage: %d active, %d deploy failed", outageLength, active, failed)
	if failed > 0 {
		t.Errorf("%d of %d deploys failed because Temporal was down\nworker log:\n%s", failed, nodes, workerLog())
	}
	// The verb refused during the outage is accepted now.
	if _, err := call2(t, "PUT", "/v1/nodes/"+spare[0]+"/states/provision", map[string]any{"target": "manage"}); err != nil {
		t.Errorf("a verb once Temporal is back: %v", err)
	}
}

// TestPostgresOnAFullDisk runs an API on a PostgreSQL whose data lives on
// a 200 MiB tmpfs, then fills the disk: a write is answered 503 with
// Ironic's TemporaryFailure (PostgreSQL's disk_full, not a 500), reads are
// still served, and writes succeed again once space returns.
func TestPostgresOnAFullDisk(t *testing.T) {
	ctx := context.Background()
	dir := smallDisk(t, "200m")
	pg, err := embedded.StartPostgres(ctx, filepath.Join(dir, "pg"), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pg.Stop() })
	if out, err := exec.Command(lab.Bin, "migrate", "--database-url", pg.URL()).CombinedOutput(); err != nil {
		t.Fatalf("migrate: %v: %s", err, out)
	}
	port, err := embedded.FreePort("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	listen := fmt.Sprintf("127.0.0.1:%d", port)
	apiURL := "http://" + listen
	api, err := lab.Spawn("ironflow-api-fulldisk", append(lab.APIArgs(listen), "--database-url", pg.URL()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(api.Kill)
	if err := lab.WaitHTTP(ctx, apiURL+"/", api); err != nil {
		t.Fatal(err)
	}
	create := func(i int) (ironicFault, []byte, error) {
		return outageCall(apiURL, "POST", "/v1/nodes", map[string]any{"name": fmt.Sprintf("full-disk-%d", i), "driver": "fake-hardware",
			"description": strings.Repeat("x", 4000)})
	}
	if f, data, err := create(0); err != nil || f.status != http.StatusCreated {
		t.Fatalf("create a node before the disk fills: %d %s %v", f.status, data, err)
	}
	filler := filepath.Join(dir, "filler")
	// dd ends with "No space left on device": that is the point.
	_ = exec.Command("dd", "if=/dev/zero", "of="+filler, "bs=1M").Run()
	full := false
	for i := 1; i < 2000 && !full; i++ {
		f, data, err := create(i)
		switch {
		case err != nil:
			t.Fatalf("create a node on a full disk: %v", err)
		case f.status == http.StatusCreated:
		case f.status == http.StatusServiceUnavailable && f.faultstring == "Resource temporarily unavailable, please retry.":
			full = true
		default:
			t.Fatalf("create a node on a full disk: %d %s, want 503 TemporaryFailure", f.status, data)
		}
	}
	if !full {
		t.Fatal("2000 nodes fitted on the full disk: it never refused a write")
	}
	if f, data, err := outageCall(apiURL, "GET", "/v1/nodes?detail=true", nil); err != nil || f.status != http.StatusOK {
		t.Errorf("list nodes on a full disk: %d %s %v", f.status, data, err)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if f, data, err := create(5000); err != nil || f.status != http.StatusCreated {
		t.Errorf("create a node once space returns: %d %s %v", f.status, data, err)
	}
}
