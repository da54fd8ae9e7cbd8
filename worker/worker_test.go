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
