package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"

	"github.com/ironflow/ironflow/nodelock"
	"github.com/ironflow/ironflow/provision"
)

// raceVerbs are the verbs the concurrency test sends at random.
var raceVerbs = []provision.Verb{"manage", "provide", "active", "deleted", "inspect", "abort", "adopt"}

// workflowMoves are the transitions the workflows record themselves on a
// fake-hardware node (Ironic's state machine documentation), beyond the
// state the API records when it accepts a verb.
var workflowMoves = map[[2]provision.State]bool{
	{"verifying", "manageable"}: true, {"verifying", "enroll"}: true,
	{"cleaning", "available"}: true, {"cleaning", "manageable"}: true,
	{"cleaning", "clean wait"}: true, {"clean wait", "cleaning"}: true,
	{"deploying", "active"}: true, {"deploying", "wait call-back"}: true, {"wait call-back", "deploying"}: true,
	{"deleting", "cleaning"}:     true,
	{"inspecting", "manageable"}: true, {"inspecting", "inspect wait"}: true, {"inspect wait", "inspecting"}: true,
	{"adopting", "active"}: true,
}

// validMove reports whether from→to is a transition of Ironic's state
// machine: one a verb makes (provision.Accept, the API's contract table)
// or one a workflow records.
func validMove(from, to provision.State) bool {
	if workflowMoves[[2]provision.State{from, to}] {
		return true
	}
	for _, v := range raceVerbs {
		if t, ok := provision.Accept(from, v); ok && t.Next == to {
			return true
		}
	}
	return false
}

// stateLog records every provision-state change of the nodes table, as
// PostgreSQL sees it, so that a test reads the exact path a node took.
type stateLog struct{ pool *pgxpool.Pool }

func openStateLog(t *testing.T) *stateLog {
	t.Helper()
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, lab.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)
	for _, q := range []string{
		`CREATE TABLE IF NOT EXISTS test_state_log (id bigserial PRIMARY KEY, node_uuid text NOT NULL, old_state text, new_state text)`,
		`CREATE OR REPLACE FUNCTION test_log_state() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN
			INSERT INTO test_state_log (node_uuid, old_state, new_state) VALUES (NEW.uuid::text, OLD.provision_state, NEW.provision_state);
			RETURN NEW;
		END $$`,
		`DROP TRIGGER IF EXISTS test_log_state ON nodes`,
		`CREATE TRIGGER test_log_state AFTER UPDATE ON nodes FOR EACH ROW
			WHEN (OLD.provision_state IS DISTINCT FROM NEW.provision_state) EXECUTE FUNCTION test_log_state()`,
	} {
		if _, err := pool.Exec(ctx, q); err != nil {
			t.Fatalf("state log: %v", err)
		}
	}
	t.Cleanup(func() { _, _ = pool.Exec(context.Background(), `DROP TRIGGER IF EXISTS test_log_state ON nodes`) })
	return &stateLog{pool: pool}
}

type move struct {
	id       int64
	from, to provision.State
}

// since returns the node's moves after id.
func (l *stateLog) since(t *testing.T, nodeUUID string, id int64) []move {
	t.Helper()
	rows, err := l.pool.Query(context.Background(),
		`SELECT id, old_state, new_state FROM test_state_log WHERE node_uuid = $1 AND id > $2 ORDER BY id`, nodeUUID, id)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []move
	for rows.Next() {
		var m move
		if err := rows.Scan(&m.id, &m.from, &m.to); err != nil {
			t.Fatal(err)
		}
		out = append(out, m)
	}
	return out
}

// last is the newest id of the log.
func (l *stateLog) last(t *testing.T) int64 {
	t.Helper()
	var id int64
	if err := l.pool.QueryRow(context.Background(), `SELECT coalesce(max(id), 0) FROM test_state_log`).Scan(&id); err != nil {
		t.Fatal(err)
	}
	return id
}

// stableStates are where a fake-hardware node rests once no workflow runs.
var stableStates = map[string]bool{"enroll": true, "manageable": true, "available": true, "active": true}

// waitQuiet waits until no workflow holds the node and it rests in a
// stable state.
func waitQuiet(t *testing.T, c client.Client, uuid string) node {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for time.Now().Before(deadline) {
		held, err := nodelock.Held(context.Background(), c, uuid)
		if err != nil {
			t.Fatal(err)
		}
		if !held {
			if n := getNode(t, uuid); stableStates[n.ProvisionState] {
				return n
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	n := getNode(t, uuid)
	t.Fatalf("node %s did not settle: %s (last_error %s)\nworker log:\n%s", uuid, n.ProvisionState, deref(n.LastError), workerLog())
	return n
}

// provisionRuns counts the node's provision workflows started at or after
// since, and how many of them did not complete.
func provisionRuns(t *testing.T, c client.Client, uuid string, since time.Time) (runs, notCompleted int) {
	t.Helper()
	q := fmt.Sprintf("NodeUUID = '%s' AND StartTime >= '%s' AND WorkflowType IN ('ManageNode','ProvideNode','DeployNode','UndeployNode','InspectNode','AdoptNode')",
		uuid, since.UTC().Format(time.RFC3339Nano))
	var token []byte
	for {
		resp, err := c.ListWorkflow(context.Background(), &workflowservice.ListWorkflowExecutionsRequest{Query: q, NextPageToken: token})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range resp.GetExecutions() {
			runs++
			if e.GetStatus() != enumspb.WORKFLOW_EXECUTION_STATUS_COMPLETED {
				notCompleted++
			}
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			return runs, notCompleted
		}
	}
}

// raceRound sends n verbs at once to the node (verbs[i] or a random one)
// and checks every answer: 202, or 409 NodeLocked, or 400 with Ironic's
// "can not be performed" text. It returns how many were accepted.
func raceRound(t *testing.T, uuid string, verbs []provision.Verb) (accepted int, codes map[string]int) {
	t.Helper()
	var (
		wg sync.WaitGroup
		mu sync.Mutex
	)
	codes = map[string]int{}
	for _, verb := range verbs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var body map[string]any
			code, _ := call(t, "PUT", "/v1/nodes/"+uuid+"/states/provision", map[string]any{"target": verb}, &body)
			msg := faultstring(body)
			mu.Lock()
			defer mu.Unlock()
			codes[fmt.Sprintf("%s:%d", verb, code)]++
			switch {
			case code == 202:
				accepted++
			case code == 409 && strings.HasPrefix(msg, "Node "+uuid+" is locked by host "):
			case code == 400 && strings.HasPrefix(msg, fmt.Sprintf(`The requested action "%s" can not be performed on node "%s" while it is in state "`, verb, uuid)):
			default:
				t.Errorf("%s on %s: %d %s", verb, uuid, code, msg)
			}
		}()
	}
	wg.Wait()
	return accepted, codes
}

// checkRound checks what a round did to the node: every move valid, one
// provision workflow per accepted verb, every one completed.
func checkRound(t *testing.T, c client.Client, log *stateLog, uuid string, logFrom int64, started time.Time, accepted int, codes map[string]int) {
	t.Helper()
	moves := log.since(t, uuid, logFrom)
	var path []provision.State
	for i, m := range moves {
		if i == 0 {
			path = append(path, m.from)
		}
		path = append(path, m.to)
		if !validMove(m.from, m.to) {
			t.Errorf("node %s moved %q → %q, which Ironic's state machine does not allow (path %v, answers %v)", uuid, m.from, m.to, path, codes)
		}
		if i > 0 && moves[i-1].to != m.from {
			t.Errorf("node %s: gap in the state log between %q and %q", uuid, moves[i-1].to, m.from)
		}
	}
	// Abort is accepted only in a wait state, where it starts nothing; a
	// fake-hardware node never waits, so every 202 started a workflow.
	var runs, bad int
	deadline := time.Now().Add(15 * time.Second)
	for {
		runs, bad = provisionRuns(t, c, uuid, started)
		if runs == accepted && bad == 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	if runs != accepted || bad != 0 {
		t.Errorf("node %s: %d verbs accepted, %d provision workflows ran (%d not completed); answers %v, path %v", uuid, accepted, runs, bad, codes, path)
	}
}

// faultstring is the message of an Ironic error body.
func faultstring(body map[string]any) string {
	var inner struct {
		Faultstring string `json:"faultstring"`
	}
	s, _ := body["error_message"].(string)
	_ = json.Unmarshal([]byte(s), &inner)
	return inner.Faultstring
}

func raceNode(t *testing.T, name string) string {
	t.Helper()
	uuid := createNode(t, map[string]any{"name": name, "driver": "fake-hardware", "deploy_interface": "fake", "automated_clean": false}, "")
	moveTo(t, uuid, [2]string{"manage", "manageable"})
	return uuid
}

func randomVerbs(r *rand.Rand, n int) []provision.Verb {
	out := make([]provision.Verb, n)
	for i := range out {
		out[i] = raceVerbs[r.IntN(len(raceVerbs))]
	}
	return out
}

// TestParallelVerbsOneWins sends rounds of 20 parallel provision verbs to
// one node, then to ten nodes at once: each round, the node follows only
// Ironic's transitions, every loser gets 409 or 400 with Ironic's text, and
// exactly one workflow runs per accepted verb. IRONFLOW_SOAK=1 runs the
// full 50 rounds on 20 nodes.
func TestParallelVerbsOneWins(t *testing.T) {
	c := temporalClient(t)
	log := openStateLog(t)
	r := rand.New(rand.NewPCG(16, uint64(time.Now().UnixNano())))
	oneRounds, manyRounds, manyNodes := 10, 5, 10
	if os.Getenv("IRONFLOW_SOAK") != "" {
		oneRounds, manyRounds, manyNodes = 50, 50, 20
	}

	uuid := raceNode(t, "race-one-0")
	// The two races the issue saw: 20 × provide on a manageable node, and
	// active with four manage on an available node.
	round := func(uuid string, verbs []provision.Verb) (accepted int, codes map[string]int, from int64) {
		waitQuiet(t, c, uuid)
		from, started := log.last(t), time.Now()
		time.Sleep(10 * time.Millisecond) // StartTime is compared at the server's clock
		accepted, codes = raceRound(t, uuid, verbs)
		n := waitQuiet(t, c, uuid)
		checkRound(t, c, log, uuid, from, started.Add(-time.Millisecond), accepted, codes)
		t.Logf("node %s: %v → %s", uuid, codes, n.ProvisionState)
		return accepted, codes, from
	}
	provides := make([]provision.Verb, 20)
	for i := range provides {
		provides[i] = "provide"
	}
	accepted, codes, from := round(uuid, provides)
	if accepted != 1 {
		t.Errorf("20 parallel provide on a manageable node: %d accepted (%v), want 1", accepted, codes)
	}
	if moves := log.since(t, uuid, from); len(moves) != 2 {
		t.Errorf("one provide moves the node twice (cleaning, available), saw %v", moves)
	}
	for i := 0; i < 3; i++ {
		switch getNode(t, uuid).ProvisionState {
		case "active":
			moveTo(t, uuid, [2]string{"deleted", "available"})
		case "manageable":
			moveTo(t, uuid, [2]string{"provide", "available"})
		}
		if accepted, codes, _ := round(uuid, []provision.Verb{"active", "manage", "manage", "manage", "manage"}); accepted != 1 {
			t.Errorf("active with four manage on an available node: %d accepted (%v), want 1", accepted, codes)
		}
	}
	for i := 0; i < oneRounds; i++ {
		round(uuid, randomVerbs(r, 20))
	}

	nodes := make([]string, manyNodes)
	for i := range nodes {
		nodes[i] = raceNode(t, fmt.Sprintf("race-many-%d", i))
	}
	for i := 0; i < manyRounds; i++ {
		var wg sync.WaitGroup
		for _, u := range nodes {
			verbs := randomVerbs(r, 20)
			wg.Add(1)
			go func() { defer wg.Done(); round(u, verbs) }()
		}
		wg.Wait()
		if t.Failed() {
			break
		}
	}
}
