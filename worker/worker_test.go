package worker

import (
	"testing"

	"github.com/ironflow/ironflow/activities"
	"github.com/ironflow/ironflow/apiserver"
)

// TestEveryStartedWorkflowIsRegistered: every workflow type the API starts
// has a registration here, so that no verb leaves a workflow no worker runs.
func TestEveryStartedWorkflowIsRegistered(t *testing.T) {
	wfs := Workflows()
	for _, name := range apiserver.WorkflowTypes() {
		if _, ok := wfs[name]; !ok {
			t.Errorf("the API starts workflow %q, but the worker does not register it", name)
		}
	}
	acts := Activities(&activities.Activities{})
	for _, name := range []string{"LoadNode", "RecordState", "PrepareBoot", "RunAgentStep", "ApplyInventory", "InspectOutOfBand", "CollectInventory"} {
		if _, ok := acts[name]; !ok {
			t.Errorf("activity %q is not registered", name)
		}
	}
}

// TestPowerSyncDisabledStartsNothing: interval 0 is Ironic's
// sync_power_state_interval 0, no sync workflow (the client is never used).
func TestPowerSyncDisabledStartsNothing(t *testing.T) {
	run, err := StartPowerSync(t.Context(), nil, "", 0)
	if run != nil || err != nil {
		t.Fatalf("StartPowerSync with interval 0 = %v, %v; want nothing started", run, err)
	}
}
