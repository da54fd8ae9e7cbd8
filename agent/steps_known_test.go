package agent

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/ironflow/ironflow/agent/client"
	"github.com/ironflow/ironflow/provision"
	"github.com/ironflow/ironflow/workflows"
)

// TestAdvertisedStepsAreTheOnesTheAPIKnows: the steps the API checks a
// manual clean, a servicing or a deploy against before the agent has booted
// once on the node (workflows.KnownAgentSteps) are the ones this agent
// advertises, with their priorities, abortable flags and arguments (name
// and required): a step or an argument added here and not there would be
// refused before the agent could offer it.
func TestAdvertisedStepsAreTheOnesTheAPIKnows(t *testing.T) {
	for _, c := range []struct {
		kind provision.StepKind
		have []client.Step
	}{{provision.StepKindClean, cleanSteps()}, {provision.StepKindService, serviceSteps()}, {provision.StepKindDeploy, deploySteps()}} {
		var agent, api []string
		for _, s := range c.have {
			var args []string
			for name, info := range s.ArgsInfo {
				m, _ := info.(map[string]any)
				args = append(args, fmt.Sprintf("%s(required=%v)", name, m["required"] == true))
			}
			sort.Strings(args)
			agent = append(agent, fmt.Sprintf("%s.%s p%d abortable=%v args=[%s]", s.Interface, s.Step, s.Priority, s.Abortable, strings.Join(args, " ")))
		}
		for _, s := range workflows.KnownAgentSteps(c.kind, nil) {
			var args []string
			for name, info := range s.ArgsInfo {
				args = append(args, fmt.Sprintf("%s(required=%v)", name, info.Required))
			}
			sort.Strings(args)
			api = append(api, fmt.Sprintf("%s.%s p%d abortable=%v args=[%s]", s.Interface, s.Step, s.Priority, s.Abortable, strings.Join(args, " ")))
		}
		sort.Strings(agent)
		sort.Strings(api)
		if strings.Join(agent, "\n") != strings.Join(api, "\n") {
			t.Errorf("%s steps: the agent advertises\n%s\nthe API knows\n%s\n(workflows/stepplan.go ironflowAgentSteps)", c.kind, strings.Join(agent, "\n"), strings.Join(api, "\n"))
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
