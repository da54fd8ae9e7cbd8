package provision

import "testing"

// Accept is the one evaluation of the state machine, and Decisions counts
// it whether or not the verb is accepted.
func TestAcceptCountsEachDecision(t *testing.T) {
	before := Decisions()
	if tr, ok := Accept(Available, VerbActive); !ok || tr != (Transition{Operation: OpDeploy, Next: Deploying, Target: Active}) {
		t.Errorf("active from available: %+v %v", tr, ok)
	}
	if _, ok := Accept(Available, "bogus"); ok {
		t.Error("bogus accepted")
	}
	if n := Decisions() - before; n != 2 {
		t.Errorf("%d decisions counted, want 2", n)
	}
}

// The catalogue names each step once per kind, with a required argument
// only where the agent requires it.
func TestAgentStepsAreDistinct(t *testing.T) {
	for _, kind := range []StepKind{StepKindDeploy, StepKindClean, StepKindService} {
		seen := map[StepID]bool{}
		for _, s := range append(AgentSteps(kind), RAIDSteps()...) {
			if seen[s.StepID] {
				t.Errorf("%s step %s listed twice", kind, s.StepID)
			}
			seen[s.StepID] = true
			for name, arg := range s.ArgsInfo {
				if arg.Required || arg.Description == "" {
					t.Errorf("%s argument %s: %+v", s.StepID, name, arg)
				}
			}
		}
		if len(seen) == len(RAIDSteps()) {
			t.Errorf("no %s steps", kind)
		}
	}
	if !RAIDDeploySteps()[0].ArgsInfo["raid_config"].Required {
		t.Error("raid.apply_configuration's raid_config is not required")
	}
}
