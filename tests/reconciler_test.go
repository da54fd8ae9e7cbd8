package tests

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/sdk/client"

	"github.com/ironflow/ironflow/embedded"
	"github.com/ironflow/ironflow/internal/testkit/devstack"
	"github.com/ironflow/ironflow/workflows"
)

// reconcileStack is an installation of its own for the reconciler's tests:
// its API may be killed between a state write and a workflow start, and its
// database is restored from a backup, which the shared lab's other tests
// must not see. Its reconciler passes every 2 s and judges states older
// than 3 s.
type reconcileStack struct {
	*devstack.Stack
	dir           string
	tc            client.Client
	workerMetrics string
}

// startReconcileStack starts the stack with a crashhook build whose rules
// are crashAt (crashhook).
func startReconcileStack(t *testing.T, crashAt string) *reconcileStack {
	t.Helper()
	dir := t.TempDir()
	_ = os.Chmod(dir, 0o755)
	bin := crashhookBinary(t, dir)
	crashState := filepath.Join(dir, "crash")
	if err := os.MkdirAll(crashState, 0o755); err != nil {
		t.Fatal(err)
	}
	interval := "2s"
	if v := os.Getenv("IRONFLOW_TEST_RECONCILE_INTERVAL"); v != "" {
		interval = v // 0: no reconciler, to see the test fail without it
	}
	apiMetrics, workerMetrics, err := freeMetricsAddresses()
	if err != nil {
		t.Fatal(err)
	}
	s, err := devstack.StartStack(context.Background(), devstack.StackConfig{
		Dir: dir, Bin: bin,
		Env: []string{"IRONFLOW_CRASH_AT=" + crashAt, "IRONFLOW_CRASH_STATE=" + crashState},
		WorkerArgs: []string{"--reconcile-interval", interval, "--reconcile-grace", "3s", "--automated-clean=false",
			"--sync-power-state-interval", "0"},
		APIMetricsListen: apiMetrics, WorkerMetricsListen: workerMetrics,
	})
	if s != nil {
		t.Cleanup(s.Stop)
	}
	if err != nil {
		t.Fatalf("stack: %v", err)
	}
	opts := client.Options{HostPort: s.Temporal.Address()}
	codec, err := s.Codec()
	if err != nil {
		t.Fatal(err)
	}
	codec.Apply(&opts)
	tc, err := client.Dial(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tc.Close)
	return &reconcileStack{Stack: s, dir: dir, tc: tc, workerMetrics: workerMetrics}
}

func (rs *reconcileStack) call(t *testing.T, method, path string, body, out any) int {
	t.Helper()
	code, _ := callAt(t, rs.APIURL, "1.78", method, path, body, out)
	return code
}

func (rs *reconcileStack) node(t *testing.T, uuid string) node {
	t.Helper()
	var n node
	if code := rs.call(t, "GET", "/v1/nodes/"+uuid, nil, &n); code != 200 {
		t.Fatalf("GET node %s: %d", uuid, code)
	}
	return n
}

// waitState waits for the node's state (a deadline, not a timing
// assertion: a node never mended stays where it is).
func (rs *reconcileStack) waitState(t *testing.T, uuid, state string, timeout time.Duration) node {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var n node
	for time.Now().Before(deadline) {
		if n = rs.node(t, uuid); n.ProvisionState == state {
			return n
		}
		time.Sleep(250 * time.Millisecond)
	}
	t.Fatalf("node %s still %q (last_error %s) after %s waiting for %q\nworker log:\n%s", uuid, n.ProvisionState, deref(n.LastError), timeout, state,
		embedded.Tail(rs.WorkerLog(), 4000))
	return n
}

// verb sends a provision verb and waits for the state it leads to.
func (rs *reconcileStack) verb(t *testing.T, uuid, verb, state string) {
	t.Helper()
	if code := rs.call(t, "PUT", "/v1/nodes/"+uuid+"/states/provision", map[string]any{"target": verb}, nil); code != 202 {
		t.Fatalf("%s node %s: HTTP %d", verb, uuid, code)
	}
	if state != "" {
		rs.waitState(t, uuid, state, 2*time.Minute)
	}
}

// fakeNodes enrolls n fake-hardware nodes and takes each through verbs.
func (rs *reconcileStack) fakeNodes(t *testing.T, prefix string, n int, verbs ...[2]string) []string {
	t.Helper()
	uuids := make([]string, n)
	var wg sync.WaitGroup
	for i := range uuids {
		var nd node
		if code := rs.call(t, "POST", "/v1/nodes", map[string]any{"name": fmt.Sprintf("%s-%02d", prefix, i), "driver": "fake-hardware",
			"deploy_interface": "fake", "automated_clean": false}, &nd); code != 201 {
			t.Fatalf("create node: %d", code)
		}
		uuids[i] = nd.UUID
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, v := range verbs {
				rs.verb(t, nd.UUID, v[0], v[1])
			}
		}()
	}
	wg.Wait()
	return uuids
}

// history is the node's history events, as the API lists them.
func (rs *reconcileStack) history(t *testing.T, uuid string) []string {
	t.Helper()
	var h struct {
		History []struct {
			Event     string `json:"event"`
			EventType string `json:"event_type"`
		} `json:"history"`
	}
	if code, _ := callAt(t, rs.APIURL, "1.78", "GET", "/v1/nodes/"+uuid+"/history?detail=true", nil, &h); code != 200 {
		t.Fatalf("history of %s: %d", uuid, code)
	}
	var out []string
	for _, e := range h.History {
		out = append(out, e.EventType+": "+e.Event)
	}
	return out
}

func (rs *reconcileStack) reconcilerEvent(t *testing.T, uuid string) string {
	t.Helper()
	for _, e := range rs.history(t, uuid) {
		if strings.HasPrefix(e, "reconcile: ") {
			return e
		}
	}
	t.Errorf("node %s: no reconciler event in its history: %q", uuid, rs.history(t, uuid))
	return ""
}

// repairs reads ironflow_reconcile_repairs_total by kind from the worker.
func (rs *reconcileStack) repairs(t *testing.T) map[string]float64 {
	t.Helper()
	resp, err := http.Get("http://" + rs.workerMetrics + "/metrics")
	if err != nil {
		t.Fatalf("scrape the worker: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	out := map[string]float64{}
	re := regexp.MustCompile(`(?m)^ironflow_reconcile_repairs_total\{conductor_group="",kind="([a-z_]+)"\} (\S+)$`)
	for _, m := range re.FindAllStringSubmatch(string(b), -1) {
		v, _ := strconv.ParseFloat(m[2], 64)
		out[m[1]] = v
	}
	return out
}

// killedAPI sends a verb to the API armed to SIGKILL itself after its
// state write, before the workflow start (crashhook's
// StartWorkflow/<state> point), then starts the API again.
func (rs *reconcileStack) killedAPI(t *testing.T, uuid, verb string) {
	t.Helper()
	req, _ := http.NewRequest("PUT", rs.APIURL+"/v1/nodes/"+uuid+"/states/provision", strings.NewReader(`{"target": "`+verb+`"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-OpenStack-Ironic-API-Version", "1.78")
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
		t.Fatalf("%s node %s: HTTP %d; want the API killed before it answered", verb, uuid, resp.StatusCode)
	}
	rs.KillAPI() // reaps the dead process
	if err := rs.StartAPI(context.Background()); err != nil {
		t.Fatalf("start the API again: %v", err)
	}
}

// TestReconciler runs the reconciler's cases on one stack of their own:
//
//   - the API killed between a verb's state write and its workflow start
//     leaves the node in a transient state no workflow holds: a provide
//     (its request whole in the node's row) is started again and reaches
//     available; a deploy (its config drive and deploy steps were the
//     request's) fails to deploy failed with a last_error saying why;
//   - PostgreSQL restored from a backup taken before 20 operations, while
//     Temporal keeps running: every node takes the state its last workflow
//     recorded, and a workflow whose node the backup does not know ends.
//
// Every repair is in the node's history and counted in
// ironflow_reconcile_repairs_total. Without the reconciler no node moves
// (IRONFLOW_TEST_RECONCILE_INTERVAL=0 shows it: every wait fails).
func TestReconciler(t *testing.T) {
	stuckProvide, stuckDeploy := "5eed0000-0000-4000-8000-00000000c1ea", "5eed0000-0000-4000-8000-00000000de91"
	rs := startReconcileStack(t, "StartWorkflow/cleaning,node="+stuckProvide+";StartWorkflow/deploying,node="+stuckDeploy)

	t.Run("API killed between state write and workflow start", func(t *testing.T) {
		for _, u := range []string{stuckProvide, stuckDeploy} {
			if code := rs.call(t, "POST", "/v1/nodes", map[string]any{"uuid": u, "driver": "fake-hardware",
				"deploy_interface": "fake", "automated_clean": false}, nil); code != 201 {
				t.Fatalf("create node %s: %d", u, code)
			}
			rs.verb(t, u, "manage", "manageable")
		}
		rs.verb(t, stuckDeploy, "provide", "available")
		rs.killedAPI(t, stuckProvide, "provide")
		rs.killedAPI(t, stuckDeploy, "active")
		// The API's write is there, and no workflow: the node is stuck
		// until the reconciler finds it.
		if n := rs.node(t, stuckProvide); n.ProvisionState != "cleaning" {
			t.Fatalf("after the kill node %s is %q, want cleaning (the API's write)", stuckProvide, n.ProvisionState)
		}
		rs.waitState(t, stuckProvide, "available", 2*time.Minute)
		n := rs.waitState(t, stuckDeploy, "deploy failed", 2*time.Minute)
		if le := deref(n.LastError); !strings.Contains(le, "never started its workflow") || !strings.Contains(le, "config drive") {
			t.Errorf("deploy failed with last_error %q; want it to say the workflow never started and what was lost", le)
		}
		t.Logf("restarted: %s", rs.reconcilerEvent(t, stuckProvide))
		t.Logf("failed:    %s", rs.reconcilerEvent(t, stuckDeploy))
		if m := rs.repairs(t); m["restart"] < 1 || m["fail"] < 1 {
			t.Errorf("ironflow_reconcile_repairs_total %v; want a restart and a fail counted", m)
		}
	})

	t.Run("PostgreSQL restored from a backup taken before 20 operations", func(t *testing.T) {
		rs.restoreFromBackup(t)
	})
}

// restoreFromBackup: nodes in settled states, a pg_dump, 20 operations
// (8 deploys, 6 undeploys, 6 manages) and a node enrolled after the backup
// whose deploy waits for its agent; then the API and the worker stop, the
// database is restored from the dump while Temporal runs on, and the two
// start again. Each of the 20 nodes must take the state its workflow
// recorded last, and the late node's workflow must end.
func (rs *reconcileStack) restoreFromBackup(t *testing.T) {
	pgBin := postgresBin(t)
	deploy := rs.fakeNodes(t, "deploy", 8, [2]string{"manage", "manageable"}, [2]string{"provide", "available"})
	undeploy := rs.fakeNodes(t, "undeploy", 6, [2]string{"manage", "manageable"}, [2]string{"provide", "available"}, [2]string{"active", "active"})
	manage := rs.fakeNodes(t, "manage", 6, [2]string{"manage", "manageable"}, [2]string{"provide", "available"})

	dump := filepath.Join(rs.dir, "ironflow.dump")
	if out, err := exec.Command(filepath.Join(pgBin, "pg_dump"), "--format=custom", "--file", dump, rs.DatabaseURL).CombinedOutput(); err != nil {
		t.Fatalf("pg_dump: %v\n%s", err, out)
	}

	want := map[string]string{}
	var wg sync.WaitGroup
	op := func(uuids []string, verb, state string) {
		for _, u := range uuids {
			want[u] = state
			wg.Add(1)
			go func() { defer wg.Done(); rs.verb(t, u, verb, state) }()
		}
	}
	op(deploy, "active", "active")
	op(undeploy, "deleted", "available")
	op(manage, "manage", "manageable")
	wg.Wait()
	if len(want) != 20 {
		t.Fatalf("%d operations, want 20", len(want))
	}
	// A node the backup does not know, its deploy waiting for an agent
	// that never comes.
	late := "5eed0000-0000-4000-8000-0000000001a7"
	if code := rs.call(t, "POST", "/v1/nodes", map[string]any{"uuid": late, "driver": "fake-hardware",
		"deploy_interface": "direct", "automated_clean": false}, nil); code != 201 {
		t.Fatalf("create node %s: %d", late, code)
	}
	if code := rs.call(t, "POST", "/v1/ports", map[string]any{"address": "52:54:00:5e:ed:a7", "node_uuid": late}, nil); code != 201 {
		t.Fatalf("create port: %d", code)
	}
	rs.verb(t, late, "manage", "manageable")
	rs.verb(t, late, "provide", "available")
	rs.verb(t, late, "active", "wait call-back")

	// The restore, as docs/production.md gives it: stop what writes, drop
	// and recreate the database, pg_restore, start again.
	rs.KillWorker()
	rs.KillAPI()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, rs.Postgres.DatabaseURL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"DROP DATABASE ironflow WITH (FORCE)", "CREATE DATABASE ironflow"} {
		if _, err := conn.Exec(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	conn.Close(ctx)
	if out, err := exec.Command(filepath.Join(pgBin, "pg_restore"), "--dbname", rs.DatabaseURL, "--no-owner", dump).CombinedOutput(); err != nil {
		t.Fatalf("pg_restore: %v\n%s", err, out)
	}
	var stale int
	for u, s := range want {
		if rs.storedState(t, u) != s {
			stale++
		}
	}
	if stale != 20 {
		t.Fatalf("after the restore %d of the 20 nodes differ from their workflows, want all 20 (the backup predates them)", stale)
	}
	if err := rs.StartAPI(ctx); err != nil {
		t.Fatal(err)
	}
	if err := rs.StartWorker(); err != nil {
		t.Fatal(err)
	}

	var changed []string
	for u, s := range want {
		n := rs.waitState(t, u, s, 2*time.Minute)
		changed = append(changed, fmt.Sprintf("%s → %s: %s", u, n.ProvisionState, rs.reconcilerEvent(t, u)))
	}
	// The late node's workflow ends: its node is gone.
	deadline := time.Now().Add(2 * time.Minute)
	for {
		d, err := rs.tc.DescribeWorkflowExecution(ctx, workflows.WorkflowID(late), "")
		if err != nil {
			t.Fatal(err)
		}
		if st := d.GetWorkflowExecutionInfo().GetStatus(); st == enumspb.WORKFLOW_EXECUTION_STATUS_TERMINATED {
			changed = append(changed, fmt.Sprintf("%s: workflow terminated (node gone)", late))
			break
		} else if st != enumspb.WORKFLOW_EXECUTION_STATUS_RUNNING {
			t.Fatalf("the late node's workflow ended %v, want terminated by the reconciler", st)
		}
		if time.Now().After(deadline) {
			t.Fatalf("the late node's workflow still runs, its node gone\nworker log:\n%s", embedded.Tail(rs.WorkerLog(), 4000))
		}
		time.Sleep(500 * time.Millisecond)
	}
	sort.Strings(changed)
	t.Logf("the reconciler changed:\n%s", strings.Join(changed, "\n"))
	if m := rs.repairs(t); m["correct"] != 20 || m["end_orphan"] != 1 {
		t.Errorf("ironflow_reconcile_repairs_total %v of the restarted worker; want 20 corrections and 1 orphan ended", m)
	}
	// The reconciler's own account of what it changed.
	v, err := rs.tc.QueryWorkflow(ctx, workflows.ReconcileWorkflowID(""), "", workflows.QueryReconcileStatus)
	if err != nil {
		t.Fatal(err)
	}
	var st workflows.ReconcileStatus
	if err := v.Get(&st); err != nil {
		t.Fatal(err)
	}
	corrected := 0
	for _, c := range st.Changes {
		if c.Kind == workflows.RepairCorrect && want[c.NodeUUID] == string(c.To) {
			corrected++
		}
	}
	if corrected != 20 {
		t.Errorf("the reconciler's status lists %d of the 20 corrections: %+v", corrected, st.Changes)
	}
}

// storedState reads a node's state straight from PostgreSQL.
func (rs *reconcileStack) storedState(t *testing.T, uuid string) string {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, rs.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var s string
	if err := conn.QueryRow(ctx, "SELECT provision_state FROM nodes WHERE uuid = $1", uuid).Scan(&s); err != nil {
		t.Fatalf("node %s: %v", uuid, err)
	}
	return s
}

// postgresBin is the directory of PostgreSQL's client tools, the cluster's
// own.
func postgresBin(t *testing.T) string {
	t.Helper()
	dir, err := embedded.PostgresBin()
	if err == nil {
		if _, err = os.Stat(filepath.Join(dir, "pg_restore")); err == nil {
			return dir
		}
	}
	t.Skipf("SKIP LOUDLY: no PostgreSQL client tools (pg_dump, pg_restore): %v: scripts/install-deps.sh installs them", err)
	return ""
}
