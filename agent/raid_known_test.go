package agent

import (
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/ironflow/ironflow/agent/client"
	"github.com/ironflow/ironflow/hardware"
	"github.com/ironflow/ironflow/provision"
	"github.com/ironflow/ironflow/workflows"
)

// TestRAIDStepsAreTheOnesTheAPIKnows: the software RAID steps the agent
// offers a node on raid_interface agent are those the API adds to the
// agent's clean steps for such a node (workflows.WithAgentInterfaceSteps),
// with the same priorities and arguments.
func TestRAIDStepsAreTheOnesTheAPIKnows(t *testing.T) {
	for kind, steps := range map[provision.StepKind][]client.Step{provision.StepKindClean: raidSteps(), provision.StepKindDeploy: raidDeploySteps()} {
		compareRAIDSteps(t, kind, steps)
	}
	if got := workflows.WithAgentInterfaceSteps(provision.StepKindClean, map[string]hardware.Interface{"raid": hardware.Redfish}, nil); len(got) != 0 {
		t.Errorf("raid_interface redfish: in-band raid steps %v", got)
	}
}

func compareRAIDSteps(t *testing.T, kind provision.StepKind, steps []client.Step) {
	var agent, api []string
	for _, s := range steps {
		var args []string
		for name, info := range s.ArgsInfo {
			m, _ := info.(map[string]any)
			args = append(args, fmt.Sprintf("%s(required=%v)", name, m["required"] == true))
		}
		sort.Strings(args)
		agent = append(agent, fmt.Sprintf("%s.%s p%d abortable=%v args=[%s]", s.Interface, s.Step, s.Priority, s.Abortable, strings.Join(args, " ")))
	}
	for _, s := range workflows.WithAgentInterfaceSteps(kind, map[string]hardware.Interface{"raid": hardware.Agent}, nil) {
		var args []string
		for name, info := range s.ArgsInfo {
			args = append(args, fmt.Sprintf("%s(required=%v)", name, info.Required))
		}
		sort.Strings(args)
		api = append(api, fmt.Sprintf("%s.%s p%d abortable=%v args=[%s]", s.Interface, s.Step, s.Priority, s.Abortable, strings.Join(args, " ")))
	}
	sort.Strings(agent)
	sort.Strings(api)
	if len(agent) == 0 || strings.Join(agent, "\n") != strings.Join(api, "\n") {
		t.Errorf("%s: the agent offers\n%s\nthe API knows\n%s", kind, strings.Join(agent, "\n"), strings.Join(api, "\n"))
	}
}
