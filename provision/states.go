package provision

import (
	"fmt"
	"sync/atomic"
)

// State is a provision state, spelled as Ironic spells it (Ironic's state
// machine documentation): the value of a node's provision_state and
// target_provision_state.
type State string

// The provision states ironflow records or accepts a verb in, and the rest
// of Ironic's, which a node list may filter by.
const (
	Enroll         State = "enroll"
	Verifying      State = "verifying"
	Manageable     State = "manageable"
	Available      State = "available"
	Active         State = "active"
	Error          State = "error"
	Deploying      State = "deploying"
	DeployWait     State = "wait call-back"
	DeployFailed   State = "deploy failed"
	DeployHold     State = "deploy hold"
	Deleting       State = "deleting"
	Cleaning       State = "cleaning"
	CleanWait      State = "clean wait"
	CleanFailed    State = "clean failed"
	CleanHold      State = "clean hold"
	Inspecting     State = "inspecting"
	InspectWait    State = "inspect wait"
	InspectFailed  State = "inspect failed"
	Adopting       State = "adopting"
	AdoptFailed    State = "adopt failed"
	Rescuing       State = "rescuing"
	RescueWait     State = "rescue wait"
	Rescue         State = "rescue"
	RescueFailed   State = "rescue failed"
	Unrescuing     State = "unrescuing"
	UnrescueFailed State = "unrescue failed"
	Servicing      State = "servicing"
	ServiceWait    State = "service wait"
	ServiceFailed  State = "service failed"
	ServiceHold    State = "service hold"
)

// KnownStates are the provision states an Ironic node can be in (the API
// accepts any of them as a list filter).
func KnownStates() []State {
	return []State{
		Enroll, Verifying, Manageable, Available, Active, Error,
		Deploying, DeployWait, DeployFailed, Deleting, Cleaning,
		CleanWait, CleanFailed, Inspecting, InspectWait, InspectFailed,
		Adopting, AdoptFailed, Rescuing, RescueWait, RescueFailed, Rescue,
		Unrescuing, UnrescueFailed, DeployHold, CleanHold,
		Servicing, ServiceWait, ServiceFailed, ServiceHold,
	}
}

// Settled reports whether s is a state where a provisioning workflow ends,
// never one where it waits: enroll, manageable, available, active and
// rescue. A workflow that records a settled state writes the node no more;
// it only closes. So a verb from a settled state needs no lock check before
// it records its transition: a workflow still closing is found by the
// start (ErrNodeLocked), which the API retries once it has closed
// (apiserver's startProvision), and a power or boot-device change writes
// no provision state. TestSettledStatesEndEveryRecordedHistory checks this
// on every recorded history, of this release and the earlier ones.
func (s State) Settled() bool {
	switch s {
	case Enroll, Manageable, Available, Active, Rescue:
		return true
	}
	return false
}

// Failed reports whether s is one of Ironic's failure states, where a
// workflow may wait for an operator.
func (s State) Failed() bool {
	switch s {
	case DeployFailed, CleanFailed, InspectFailed, AdoptFailed, RescueFailed, UnrescueFailed, ServiceFailed:
		return true
	}
	return false
}

// Verb is a target of PUT /v1/nodes/{node}/states/provision, as Ironic
// names it.
type Verb string

// The verbs ironflow accepts, with the aliases of API 1.73 (deploy for
// active, undeploy for deleted).
const (
	VerbManage   Verb = "manage"
	VerbProvide  Verb = "provide"
	VerbActive   Verb = "active"
	VerbDeploy   Verb = "deploy"
	VerbRebuild  Verb = "rebuild"
	VerbDeleted  Verb = "deleted"
	VerbUndeploy Verb = "undeploy"
	VerbInspect  Verb = "inspect"
	VerbClean    Verb = "clean"
	VerbAbort    Verb = "abort"
	// VerbRescue and VerbUnrescue (API 1.38) boot the agent for the rescue
	// user and boot the instance again.
	VerbRescue   Verb = "rescue"
	VerbUnrescue Verb = "unrescue"
	// VerbUnhold (API 1.85) lets a step plan paused by a hold step go on:
	// from a "* hold" state back to its wait state.
	VerbUnhold Verb = "unhold"
	// VerbService (API 1.87) runs service steps on an active node and
	// returns it to active.
	VerbService Verb = "service"
	// VerbAdopt (API 1.17) takes over a machine deployed by other means:
	// manageable (or adopt failed) → adopting → active, nothing written
	// to its disks and its power left as it is.
	VerbAdopt Verb = "adopt"
)

// ParseVerb is the verb a provision request's "target" names, spelled as
// the client sent it: Accept decides whether it applies to a node's state,
// and answers Ironic's message when it does not.
func ParseVerb(target string) Verb { return Verb(target) }

// Operation is what a node's workflow does: the Operation search attribute,
// the status query's operation and the event_type of its failure history.
type Operation string

// The operations, one per workflow (abort is sent to the running one).
const (
	OpManage     Operation = "manage"
	OpProvide    Operation = "provide"
	OpDeploy     Operation = "deploy"
	OpUndeploy   Operation = "undeploy"
	OpInspect    Operation = "inspect"
	OpClean      Operation = "clean"
	OpAbort      Operation = "abort"
	OpPower      Operation = "power"
	OpBootDevice Operation = "boot device"
	OpRescue     Operation = "rescue"
	OpUnrescue   Operation = "unrescue"
	// OpUnhold is SignalUnhold to the workflow paused in a hold state
	// by a hold step (workflows/hold.go); nothing is started.
	OpUnhold Operation = "unhold"
	// OpService is servicing (API 1.87): ServiceNode.
	OpService Operation = "service"
	// OpBootMode is ChangeBootMode's, OpVirtualMedia ChangeVirtualMedia's.
	OpBootMode     Operation = "boot mode"
	OpVirtualMedia Operation = "virtual media"
	// OpManagement is NodeManagement's: an NMI, the indicators.
	OpManagement Operation = "management"
	// OpVendorPassthru is a vendor passthru method run on the node's BMC
	// (API 1.1): VendorPassthru.
	OpVendorPassthru Operation = "vendor passthru"
	// OpAdopt is adoption (API 1.17): AdoptNode.
	OpAdopt Operation = "adopt"
)

// Transition is what a verb does from a state: the state the API records
// when it accepts the verb, and the goal recorded as target_provision_state.
// The API decides it once (Accept) and hands it to the workflow in the
// Request.
type Transition struct {
	Operation Operation `json:"operation"` // deploy, undeploy, manage, provide, inspect, clean, abort, ...
	Next      State     `json:"next"`      // provision_state recorded with the 202
	Target    State     `json:"target"`    // target_provision_state recorded with the 202 ("" keeps none)
}

// event is what a verb asks of Ironic's state machine: the aliases of API
// 1.73 resolve to one event.
func (v Verb) event() Verb {
	switch v {
	case VerbActive:
		return VerbDeploy
	case VerbUndeploy:
		return VerbDeleted
	}
	return v
}

// decide is Ironic's state machine for the verbs ironflow implements: the
// operation a verb starts from a state, the state recorded at once and the
// target. ok is false when Ironic would refuse the verb.
func decide(state State, verb Verb) (op Operation, next, target State, ok bool) {
	switch verb.event() {
	case VerbManage:
		switch state {
		case Enroll:
			return OpManage, Verifying, Manageable, true
		case CleanFailed, InspectFailed, Available, AdoptFailed:
			return OpManage, Manageable, "", true
		}
	case VerbProvide:
		if state == Manageable {
			return OpProvide, Cleaning, Available, true
		}
	case VerbDeploy:
		if state == Available || state == DeployFailed {
			return OpDeploy, Deploying, Active, true
		}
	case VerbRebuild:
		if state == Active || state == DeployFailed || state == Error {
			return OpDeploy, Deploying, Active, true
		}
	case VerbDeleted:
		switch state {
		case Active, DeployFailed, DeployWait, Error, Rescue, RescueFailed, RescueWait, UnrescueFailed:
			return OpUndeploy, Deleting, Available, true
		}
	case VerbInspect:
		if state == Manageable || state == InspectFailed {
			return OpInspect, Inspecting, Manageable, true
		}
	case VerbClean:
		if state == Manageable {
			return OpClean, Cleaning, Manageable, true
		}
	case VerbService:
		// Ironic's state machine: active and service failed --service-->
		// servicing.
		if state == Active || state == ServiceFailed {
			return OpService, Servicing, Active, true
		}
	case VerbAdopt:
		// Ironic's state machine: manageable and adopt failed --adopt-->
		// adopting (target active) --done--> active, --fail--> adopt
		// failed.
		if state == Manageable || state == AdoptFailed {
			return OpAdopt, Adopting, Active, true
		}
	case VerbRescue:
		switch state {
		case Active, Rescue, RescueFailed, UnrescueFailed, ServiceFailed:
			return OpRescue, Rescuing, Rescue, true
		}
	case VerbUnrescue:
		switch state {
		case Rescue, RescueFailed, UnrescueFailed:
			return OpUnrescue, Unrescuing, Active, true
		}
	case VerbUnhold:
		// Back to the wait state; the target (active, available or
		// manageable) stays what the paused operation set.
		switch state {
		case DeployHold:
			return OpUnhold, DeployWait, "", true
		case CleanHold:
			return OpUnhold, CleanWait, "", true
		case ServiceHold:
			return OpUnhold, ServiceWait, "", true
		}
	case VerbAbort:
		// Ironic aborts in the wait states (wait call-back from 1.110) and
		// the hold states (clean hold --abort--> clean failed, and so for
		// deploy and service); ironflow also aborts a failed step's wait
		// for an operator.
		switch state {
		case DeployWait, CleanWait, InspectWait, RescueWait, DeployFailed, CleanFailed, InspectFailed,
			RescueFailed, UnrescueFailed, ServiceWait, ServiceFailed, DeployHold, CleanHold, ServiceHold:
			return OpAbort, state, "", true
		}
	}
	return "", "", "", false
}

// Accept says what verb does from state, following Ironic's state machine
// (Ironic's state machine documentation). ok is false when Ironic would
// answer 400 "The requested action ... can not be performed".
func Accept(state State, verb Verb) (t Transition, ok bool) {
	decisions.Add(1)
	op, next, target, ok := decide(state, verb)
	if !ok {
		return Transition{}, false
	}
	return Transition{Operation: op, Next: next, Target: target}, true
}

// decisions counts Accept's evaluations of the state machine.
var decisions atomic.Uint64

// Decisions is how many times Accept has evaluated the state machine in
// this process. A provision request is decided once, by the API; tests
// read this to check that nothing decides it again.
func Decisions() uint64 { return decisions.Load() }

// NotAllowed is Ironic's message for an action refused in a state: a verb
// in a provision state, or a power target in a power state.
func NotAllowed[A, S ~string](verb A, nodeUUID string, state S) string {
	return fmt.Sprintf("The requested action \"%s\" can not be performed on node \"%s\" while it is in state \"%s\".", verb, nodeUUID, state)
}
