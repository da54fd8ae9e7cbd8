package workflows

import (
	"strings"
	"testing"
	"time"

	"go.temporal.io/sdk/workflow"
)

// TestAgentDeployBaselineTakesTheCoveredNewPaths: an agent deploy on
// changeAgentDeployBaseline takes the new paths of the change IDs it covers
// without asking them: each is made to answer DefaultVersion here, which
// would take its old path if it were asked, and the deploy still runs the
// agent's deploy steps (changeDeployAgentSteps), verifies the heartbeat
// (changeVerifyHeartbeatSignal) and turns secure boot on
// (changeDeploySecureBoot).
func TestAgentDeployBaselineTakesTheCoveredNewPaths(t *testing.T) {
	f := newFakeCloud()
	f.node.SecureBoot = true
	env := newEnv(t, f)
	for _, id := range agentDeployBaseline {
		env.OnGetVersion(id, workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
	}
	var recs []BootModeRecord
	secureBootFake(env, f, nil, &recs)
	heartbeatAfter(env, 2*time.Minute)
	env.ExecuteWorkflow(DeployNode, deployRequest())
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	calls := strings.Join(f.callList(), "\n")
	if !strings.Contains(calls, "GetAgentSteps deploy") {
		t.Fatalf("the deploy did not ask the agent for its steps:\n%s", calls)
	}
	if n := countCalls(f.callList(), "SetSecureBoot on"); n != 1 {
		t.Fatalf("secure boot set %d times, want 1", n)
	}
	f.mu.Lock()
	verified := len(f.verdicts)
	f.mu.Unlock()
	if verified == 0 {
		t.Fatal("the heartbeat was trusted without verification")
	}
}

// TestAgentDeployWithoutBaselineAsksEachChangeID: a deploy whose history
// has no baseline marker (it started before changeAgentDeployBaseline)
// asks each covered change ID as it did: answered DefaultVersion, it takes
// their old paths (no agent deploy steps, no secure boot, no verification).
func TestAgentDeployWithoutBaselineAsksEachChangeID(t *testing.T) {
	f := newFakeCloud()
	f.node.SecureBoot = true
	env := newEnv(t, f)
	env.OnGetVersion(changeAgentDeployBaseline, workflow.DefaultVersion, agentDeployOneTimer).Return(workflow.DefaultVersion)
	for _, id := range agentDeployBaseline {
		env.OnGetVersion(id, workflow.DefaultVersion, 1).Return(workflow.DefaultVersion)
	}
	var recs []BootModeRecord
	secureBootFake(env, f, nil, &recs)
	heartbeatAfter(env, 2*time.Minute)
	env.ExecuteWorkflow(DeployNode, deployRequest())
	if err := env.GetWorkflowError(); err != nil {
		t.Fatal(err)
	}
	if n := countCalls(f.callList(), "SetSecureBoot on"); n != 0 {
		t.Fatalf("old path set secure boot %d times", n)
	}
	f.mu.Lock()
	verified := len(f.verdicts)
	f.mu.Unlock()
	if verified != 0 {
		t.Fatalf("old path verified %d heartbeats", verified)
	}
}
