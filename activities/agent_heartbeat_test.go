package activities_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/converter"

	"github.com/ironflow/ironflow/internal/testkit/storetest"
	"github.com/ironflow/ironflow/provision"
	"github.com/ironflow/ironflow/store"
	"github.com/ironflow/ironflow/workflows"
)

// commandAgent answers one clean step as RUNNING, then the status polls of
// command c1 with polls[i] (the last one repeating), and the command list
// with list.
type commandAgent struct {
	mu    sync.Mutex
	polls []string
	list  string
	posts int
	gets  int
}

func (g *commandAgent) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	g.mu.Lock()
	defer g.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	switch {
	case r.Method == http.MethodPost:
		g.posts++
		_, _ = io.WriteString(w, `{"id":"c1","command_name":"execute_clean_step","command_status":"RUNNING","command_error":null,"command_result":null}`)
	case r.URL.Path == "/v1/commands/" || r.URL.Path == "/v1/commands":
		_, _ = io.WriteString(w, g.list)
	default:
		i := min(g.gets, len(g.polls)-1)
		g.gets++
		_, _ = io.WriteString(w, g.polls[i])
	}
}

const (
	c1Done    = `{"id":"c1","command_name":"execute_clean_step","command_status":"SUCCEEDED","command_error":null,"command_result":{"clean_step":{"interface":"deploy","step":"erase_devices_metadata"}}}`
	c1Running = `{"id":"c1","command_name":"execute_clean_step","command_status":"RUNNING","command_error":null,"command_result":{"progress":{"bytes_downloaded":10,"total_bytes":100}}}`
)

// TestAgentStepHeartbeatsOnlyWhileItRuns: a step the agent finishes before
// the first poll writes no heartbeat to Temporal (each one is a write of
// the workflow's state there); a step that reports progress heartbeats its
// command ID; and an attempt without heartbeat details follows the
// command it finds in the agent's list instead of starting the step again.
func TestAgentStepHeartbeatsOnlyWhileItRuns(t *testing.T) {
	st := storetest.New(t)
	g := &commandAgent{list: `{"commands":[]}`}
	agentSrv := httptest.NewServer(g)
	defer agentSrv.Close()
	n := &store.Node{Driver: "ipmi", ProvisionState: provision.Cleaning, DriverInternalInfo: agentSession(agentSrv.URL)}
	env := agentStepEnv(t, st, n)
	var beats []map[string]any
	env.SetOnActivityHeartbeatListener(func(_ *activity.Info, details converter.EncodedValues) {
		var d map[string]any
		_ = details.Get(&d)
		beats = append(beats, d)
	})
	in := workflows.AgentStepInput{Agent: workflows.AgentInput{NodeUUID: n.UUID, CallbackURL: agentSrv.URL}, Kind: provision.StepKindClean,
		Step: provision.Step{StepID: provision.StepID{Interface: "deploy", Step: "erase_devices_metadata"}}}
	run := func() workflows.AgentStepResult {
		t.Helper()
		v, err := env.ExecuteActivity(workflows.ActRunAgentStep, in)
		if err != nil {
			t.Fatalf("RunAgentStep: %v", err)
		}
		var res workflows.AgentStepResult
		if err := v.Get(&res); err != nil {
			t.Fatal(err)
		}
		return res
	}

	g.polls = []string{c1Done}
	if res := run(); res.CommandID != "c1" || res.Status != "SUCCEEDED" {
		t.Fatalf("quick step: %+v", res)
	}
	if len(beats) != 0 {
		t.Fatalf("a step done at the first poll heartbeat %d times: %v", len(beats), beats)
	}

	g.gets, g.polls = 0, []string{c1Running, c1Done}
	if res := run(); res.Status != "SUCCEEDED" {
		t.Fatalf("step with progress: %+v", res)
	}
	if len(beats) == 0 || beats[0]["command_id"] != "c1" || beats[0]["progress"] != "10/100 bytes" {
		t.Fatalf("a step that reports progress heartbeat %v, want its command ID and progress", beats)
	}

	// Another attempt with no heartbeat details (its worker died before the
	// first one): the running command is in the agent's list.
	g.list = `{"commands":[{"id":"c1","command_name":"clean.execute_clean_step","command_status":"RUNNING","command_error":null,` +
		`"command_params":{"step":{"interface":"deploy","step":"erase_devices_metadata"}},"command_result":null}]}`
	posts := g.posts
	g.gets, g.polls = 0, []string{c1Done}
	if res := run(); res.CommandID != "c1" || res.Status != "SUCCEEDED" {
		t.Fatalf("attempt without details: %+v", res)
	}
	if g.posts != posts {
		t.Fatalf("the attempt started the step again (%d POSTs), want it to follow command c1", g.posts-posts)
	}
}
