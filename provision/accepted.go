package provision

import (
	"fmt"
	"regexp"
)

// AcceptedEvent is the node history event the API writes with the state it
// records when it accepts a verb, before it starts the verb's workflow. The
// reconciler (workflows/reconcile.go) reads it back with ParseAcceptedEvent
// to tell a node whose workflow never started from one whose workflow ran.
func AcceptedEvent(verb Verb, from State, t Transition) string {
	return fmt.Sprintf("Provision action \"%s\" accepted in state \"%s\"; moving to \"%s\" with target \"%s\"", verb, from, t.Next, t.Target)
}

var acceptedEventRE = regexp.MustCompile(`^Provision action "([^"]*)" accepted in state "([^"]*)"; moving to "([^"]*)" with target "([^"]*)"$`)

// Accepted is what an AcceptedEvent says.
type Accepted struct {
	Verb   Verb  `json:"verb"`
	From   State `json:"from"`
	Next   State `json:"next"`
	Target State `json:"target"`
}

// ParseAcceptedEvent reads an AcceptedEvent; ok is false for any other
// event.
func ParseAcceptedEvent(event string) (a Accepted, ok bool) {
	m := acceptedEventRE.FindStringSubmatch(event)
	if m == nil {
		return Accepted{}, false
	}
	return Accepted{Verb: Verb(m[1]), From: State(m[2]), Next: State(m[3]), Target: State(m[4])}, true
}

// Retake is the transition a verb accepted earlier by the API decided, for
// the reconciler that starts the verb's workflow again when the API stopped
// between its state write and the start. It is Accept's state machine, but
// not counted in Decisions: that count is of the requests the API decides,
// and this is one it decided already.
func Retake(a Accepted) (Transition, bool) {
	op, next, target, ok := decide(a.From, a.Verb)
	if !ok || next != a.Next || target != a.Target {
		return Transition{}, false
	}
	return Transition{Operation: op, Next: next, Target: target}, true
}

// FailureOf is the state a node left in transient state s by an operation
// that can no longer go on is moved to, as Ironic's conductor does on
// takeover (its state machine's "fail" event): deploying and its wait and
// hold states to deploy failed, cleaning to clean failed, deleting to
// error, verifying back to enroll, and so on. ok is false for a state that
// is not transient (settled or failed already).
func FailureOf(s State) (State, bool) {
	switch s {
	case Deploying, DeployWait, DeployHold:
		return DeployFailed, true
	case Cleaning, CleanWait, CleanHold:
		return CleanFailed, true
	case Inspecting, InspectWait:
		return InspectFailed, true
	case Rescuing, RescueWait:
		return RescueFailed, true
	case Unrescuing:
		return UnrescueFailed, true
	case Servicing, ServiceWait, ServiceHold:
		return ServiceFailed, true
	case Adopting:
		return AdoptFailed, true
	case Deleting:
		return Error, true
	case Verifying:
		return Enroll, true
	}
	return "", false
}
