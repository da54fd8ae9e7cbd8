package workflows

import (
	"context"
	"slices"
	"strings"
	"testing"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/testsuite"

	"github.com/ironflow/ironflow/provision"
)

// newAdoptEnv is newEnv with AdoptNode on a manageable node whose
// validation answers problem.
func newAdoptEnv(t *testing.T, f *fakeCloud, problem string) *testsuite.TestWorkflowEnvironment {
	t.Helper()
	env := newEnv(t, f)
	env.RegisterWorkflow(AdoptNode)
	env.RegisterActivityWithOptions(func(ctx context.Context, uuid string) (string, error) {
		return problem, f.log("ValidateAdoption")
	}, activity.RegisterOptions{Name: ActValidateAdoption})
	f.node.ProvisionState = provision.Manageable
	return env
}

func adoptRequest(from provision.State) provision.Request {
	return decided(provision.Request{NodeUUID: "1be26c0b-03f2-4d2e-ae87-c02d7f33c123", Verb: provision.VerbAdopt, FromState: from})
}

// TestAdoptNodeRecordsActiveWithoutTouchingTheMachine: adopting, the
// validation, active; no BMC or boot activity at all (no power action, no
// boot device, no boot configuration), the agent's token and URL kept as
// they are (none: nothing booted).
func TestAdoptNodeRecordsActiveWithoutTouchingTheMachine(t *testing.T) {
	f := newFakeCloud()
	f.store = provision.Adopting
	env := newAdoptEnv(t, f, "")
	env.ExecuteWorkflow(AdoptNode, adoptRequest(provision.Manageable))
	if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
		t.Fatalf("workflow did not complete cleanly: %v", env.GetWorkflowError())
	}
	assertCalls(t, f, []string{"RecordState adopting", "ValidateAdoption", "RecordState active"})
	if f.lastErr != "" {
		t.Errorf("last_error %q after a successful adoption", f.lastErr)
	}
	// The first write is conditional on the state the API recorded.
	if len(f.froms) == 0 || !slices.Equal(f.froms[0], []provision.State{provision.Adopting}) {
		t.Errorf("first write's From %v, want [adopting]", f.froms)
	}
}

// TestAdoptNodeValidationFailureEndsInAdoptFailed: the validation's
// problem becomes Ironic's last_error and the node's ERROR history event;
// nothing else is called. From adopt failed, a second adopt that validates
// reaches active.
func TestAdoptNodeValidationFailureEndsInAdoptFailed(t *testing.T) {
	const problem = "Node 1be26c0b-03f2-4d2e-ae87-c02d7f33c123 does not have any port associated with it"
	f := newFakeCloud()
	env := newAdoptEnv(t, f, problem)
	env.ExecuteWorkflow(AdoptNode, adoptRequest(provision.Manageable))
	if !env.IsWorkflowCompleted() || env.GetWorkflowError() != nil {
		t.Fatalf("workflow did not complete cleanly: %v", env.GetWorkflowError())
	}
	assertCalls(t, f, []string{"RecordState adopting", "ValidateAdoption", "RecordState adopt failed"})
	want := "Error while attempting to adopt node 1be26c0b-03f2-4d2e-ae87-c02d7f33c123: " + problem + "."
	if f.lastErr != want {
		t.Errorf("last_error %q, want %q", f.lastErr, want)
	}
	if ev, sev := f.events[len(f.events)-1], f.severities[len(f.severities)-1]; ev != want || sev != "ERROR" {
		t.Errorf("history event %q (%s), want the last_error as an ERROR", ev, sev)
	}

	// Fixed, adopted again from adopt failed.
	f2 := newFakeCloud()
	env2 := newAdoptEnv(t, f2, "")
	f2.node.ProvisionState = provision.AdoptFailed
	env2.ExecuteWorkflow(AdoptNode, adoptRequest(provision.AdoptFailed))
	if env2.GetWorkflowError() != nil {
		t.Fatal(env2.GetWorkflowError())
	}
	if got := strings.Join(f2.callList(), ","); got != "RecordState adopting,ValidateAdoption,RecordState active" || f2.lastErr != "" {
		t.Errorf("adopt from adopt failed: %s, last_error %q", got, f2.lastErr)
	}
}

// TestAdoptNodeSupersededChangesNothing: a node that left adopting before
// the workflow's first write (another verb won it) is left alone.
func TestAdoptNodeSupersededChangesNothing(t *testing.T) {
	f := newFakeCloud()
	f.store = provision.Manageable
	env := newAdoptEnv(t, f, "")
	env.ExecuteWorkflow(AdoptNode, adoptRequest(provision.Manageable))
	if env.GetWorkflowError() != nil {
		t.Fatal(env.GetWorkflowError())
	}
	if len(f.states) != 0 || slices.Contains(f.callList(), "ValidateAdoption") {
		t.Errorf("a superseded adoption wrote %v, called %v", f.states, f.callList())
	}
}
