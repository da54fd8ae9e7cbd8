package agent

import (
	"fmt"
	"sort"
	"testing"

	"github.com/ironflow/ironflow/agent/client"
	"github.com/ironflow/ironflow/workflows"
)

// TestAdvertisedStepsAreTheOnesTheAPIKnows: the steps the API checks a
// manual clean against before the agent has booted once on the node
// (workflows.KnownAgentSteps) are the ones this agent advertises, with
// their priorities, abortable flags and argument names: a step added here and not there
// would be refused before the agent could offer it.
func TestAdvertisedStepsAreTheOnesTheAPIKnows(t *testing.T) {
	for _, c := range []struct {
		kind workflows.StepKind
		have []client.Step
	}{{workflows.StepKindClean, cleanSteps()}, {workflows.StepKindService, serviceSteps()}} {
		var agent, api []string
		for _, s := range c.have {
			agent = append(agent, fmt.Sprintf("%s.%s p%d abortable=%v args=%v", s.Interface, s.Step, s.Priority, s.Abortable, sortedKeys(s.ArgsInfo)))
		}
		for _, s := range workflows.KnownAgentSteps(c.kind, nil) {
			api = append(api, fmt.Sprintf("%s.%s p%d abortable=%v args=%v", s.Interface, s.Step, s.Priority, s.Abortable, sortedKeys(s.ArgsInfo)))
		}
		sort.Strings(agent)
		sort.Strings(api)
		if fmt.Sprint(agent) != fmt.Sprint(api) {
			t.Errorf("%s steps: the agent advertises %v, the API knows %v (workflows/stepplan.go ironflowAgentSteps)", c.kind, agent, api)
		}
	}
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
