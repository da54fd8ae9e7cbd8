package provision

import "testing"

func TestAcceptedEventReadsBackAndRetakes(t *testing.T) {
	for _, c := range []struct {
		verb Verb
		from State
	}{{VerbProvide, Manageable}, {VerbActive, Available}, {VerbDeleted, Active}, {VerbManage, Enroll}, {VerbUndeploy, DeployFailed}} {
		tr, ok := Accept(c.from, c.verb)
		if !ok {
			t.Fatalf("%s from %s refused", c.verb, c.from)
		}
		before := Decisions()
		a, ok := ParseAcceptedEvent(AcceptedEvent(c.verb, c.from, tr))
		if !ok || a.Verb != c.verb || a.From != c.from || a.Next != tr.Next || a.Target != tr.Target {
			t.Fatalf("%s from %s: read back %+v, %v", c.verb, c.from, a, ok)
		}
		if got, ok := Retake(a); !ok || got != tr {
			t.Errorf("%s from %s: Retake = %+v, %v; want %+v", c.verb, c.from, got, ok, tr)
		}
		if Decisions() != before {
			t.Errorf("Retake counted as a decision")
		}
	}
	// An event that says another state than the machine's is not retaken.
	if _, ok := Retake(Accepted{Verb: VerbProvide, From: Manageable, Next: Deploying, Target: Available}); ok {
		t.Error("Retake accepted a transition the state machine does not make")
	}
	if _, ok := ParseAcceptedEvent(`Provision action "provide" not started (x); back to state "manageable"`); ok {
		t.Error("a revert event read as an acceptance")
	}
}

func TestFailureOfEveryTransientState(t *testing.T) {
	for _, s := range KnownStates() {
		f, ok := FailureOf(s)
		switch {
		case s.Settled() || s.Failed() || s == Error:
			if ok {
				t.Errorf("%s is not transient, yet fails to %s", s, f)
			}
		case !ok:
			t.Errorf("transient state %s has no failure state", s)
		case !f.Failed() && f != Error && f != Enroll:
			t.Errorf("%s fails to %s, which is not a failure state", s, f)
		}
	}
}
