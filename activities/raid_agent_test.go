package activities_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/testsuite"

	"github.com/ironflow/ironflow/activities"
	"github.com/ironflow/ironflow/internal/testkit/storetest"
	"github.com/ironflow/ironflow/provision"
	"github.com/ironflow/ironflow/store"
	"github.com/ironflow/ironflow/workflows"
)

// agentSession is the driver_internal_info of a node whose agent called back
// from url.
func agentSession(url string) map[string]any {
	return map[string]any{store.KeyAgentToken: "tok-5d1e0c7a9b3f4e2d8c6a1b0e9f7d3c5a", store.KeyAgentURL: url}
}

// agentStepEnv creates n and returns Temporal's activity test environment
// with RunAgentStep registered: it heartbeats, which needs an activity
// context.
func agentStepEnv(t *testing.T, st *store.Store, n *store.Node) *testsuite.TestActivityEnvironment {
	t.Helper()
	if err := st.CreateNode(context.Background(), n); err != nil {
		t.Fatal(err)
	}
	a := activities.New(st, activities.Config{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	var suite testsuite.WorkflowTestSuite
	env := suite.NewTestActivityEnvironment()
	env.RegisterActivityWithOptions(a.RunAgentStep, activity.RegisterOptions{Name: workflows.ActRunAgentStep})
	return env
}

// TestAgentRAIDResultBecomesTheRAIDConfig: on raid_interface agent, the
// agent's create_configuration result is recorded as the node's
// raid_config with Ironic's update_raid_info (root volume size as
// local_gb, raid_level capability), and delete_configuration empties it.
func TestAgentRAIDResultBecomesTheRAIDConfig(t *testing.T) {
	st := storetest.New(t)
	ctx := context.Background()
	result := `{"clean_result":{"logical_disks":[{"controller":"software","raid_level":"1","size_gb":10,"is_root_volume":true,"volume_name":"root","physical_disks":["/dev/vda2","/dev/vdb2"]}]},"clean_step":{"interface":"raid","step":"create_configuration"}}`
	var sent []string
	agentSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		if r.Method == http.MethodGet {
			_, _ = io.WriteString(w, `{"commands":[]}`)
			return
		}
		var cmd struct {
			Name   string `json:"name"`
			Params struct {
				Step map[string]any `json:"step"`
			} `json:"params"`
		}
		_ = json.NewDecoder(r.Body).Decode(&cmd)
		sent = append(sent, cmd.Name+" "+cmd.Params.Step["interface"].(string)+"."+cmd.Params.Step["step"].(string))
		res := result
		if cmd.Params.Step["step"] == "delete_configuration" {
			res = `{"clean_result":{"logical_disks":[]},"clean_step":{"interface":"raid","step":"delete_configuration"}}`
		}
		_, _ = io.WriteString(w, `{"id":"c1","command_name":"execute_clean_step","command_status":"SUCCEEDED","command_error":null,"command_result":`+res+`}`)
	}))
	defer agentSrv.Close()
	n := &store.Node{Driver: "ipmi", RAIDInterface: "agent", ProvisionState: provision.Cleaning,
		Properties:         map[string]any{"capabilities": "boot_mode:uefi", "local_gb": 40},
		TargetRAIDConfig:   map[string]any{"logical_disks": []any{map[string]any{"controller": "software", "raid_level": "1", "size_gb": 10, "is_root_volume": true}}},
		DriverInternalInfo: agentSession(agentSrv.URL)}
	env := agentStepEnv(t, st, n)
	run := func(in workflows.AgentStepInput) error {
		_, err := env.ExecuteActivity(workflows.ActRunAgentStep, in)
		return err
	}
	in := workflows.AgentStepInput{Agent: workflows.AgentInput{NodeUUID: n.UUID, CallbackURL: agentSrv.URL}, Kind: provision.StepKindClean,
		Step: provision.Step{StepID: provision.StepID{Interface: "raid", Step: "create_configuration"}}}
	if err := run(in); err != nil {
		t.Fatalf("create_configuration: %v", err)
	}
	got, _ := st.GetNode(ctx, n.UUID)
	disks, _ := got.RAIDConfig["logical_disks"].([]any)
	if len(disks) != 1 || disks[0].(map[string]any)["controller"] != "software" || got.Properties["local_gb"] != float64(10) ||
		got.Properties["capabilities"] != "boot_mode:uefi,raid_level:1" {
		t.Fatalf("after create_configuration: raid_config %v, properties %v", got.RAIDConfig, got.Properties)
	}
	in.Step.Step = "delete_configuration"
	if err := run(in); err != nil {
		t.Fatalf("delete_configuration: %v", err)
	}
	got, _ = st.GetNode(ctx, n.UUID)
	if len(got.RAIDConfig) != 0 {
		t.Fatalf("after delete_configuration: raid_config %v", got.RAIDConfig)
	}
	if len(sent) != 2 || sent[0] != "clean.execute_clean_step raid.create_configuration" {
		t.Fatalf("the agent got %v", sent)
	}

	// A result without logical_disks fails the step with Ironic's words.
	result = `{"clean_result":null}`
	in.Step.Step = "create_configuration"
	if err := run(in); err == nil || !strings.Contains(err.Error(), "Agent ramdisk didn't return a proper command result while cleaning") {
		t.Fatalf("create_configuration without a result: %v", err)
	}
}
