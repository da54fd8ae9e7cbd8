// Package workflows holds ironflow's deterministic workflow code: DeployNode,
// UndeployNode, ManageNode, ProvideNode and their siblings, and the names of
// their signals and queries. It imports no I/O package: activities are called
// by name, and everything a workflow knows of the world arrives as activity
// results or signals.
package workflows

import (
	"encoding/json"
	"fmt"
	"time"
)

// WorkflowID is the one workflow a node may have running at a time: Ironic's
// node lock.
func WorkflowID(nodeUUID string) string { return "node-" + nodeUUID }

// TaskQueue is the queue workflows run on.
const TaskQueue = "ironflow"

// HardwareQueue is the queue for activities that must run on a worker that
// can reach the node's network: ironflow.<conductor_group> ("ironflow.default"
// for the empty group).
func HardwareQueue(conductorGroup string) string {
	if conductorGroup == "" {
		conductorGroup = "default"
	}
	return TaskQueue + "." + conductorGroup
}

// Signals an operator or the API sends to a node's workflow. The README shows
// each as a `temporal workflow signal` command.
const (
	SignalHeartbeat = "agent-heartbeat"
	SignalAbort     = "abort"
	SignalRetry     = "retry"
	SignalSkipStep  = "skip-step"
	// QueryStatus answers a Status.
	QueryStatus = "status"
)

// Search attributes kept current so that the Temporal Web UI finds a node's
// workflows.
const (
	SearchAttrNodeUUID       = "NodeUUID"
	SearchAttrProvisionState = "ProvisionState"
	SearchAttrOperation      = "Operation"
)

// ProvisionRequest is what the API hands a provision workflow: the node and
// Ironic's verb as the user sent it.
type ProvisionRequest struct {
	NodeUUID string `json:"node_uuid"`
	// Verb is Ironic's target: manage, provide, active, deploy, deleted,
	// undeploy, rebuild, inspect, clean, abort.
	Verb string `json:"verb"`
	// FromState is the provision state the API saw when it accepted the verb.
	FromState string `json:"from_state"`
	// ConfigDrive as sent: a string (gzip+base64 ISO or URL) or a JSON object.
	ConfigDrive json.RawMessage `json:"configdrive,omitempty"`
	DeploySteps json.RawMessage `json:"deploy_steps,omitempty"`
	CleanSteps  json.RawMessage `json:"clean_steps,omitempty"`
	// DisableRamdisk is Ironic's manual-cleaning flag (1.70).
	DisableRamdisk bool `json:"disable_ramdisk,omitempty"`
	// ConductorGroup routes hardware activities to HardwareQueue(ConductorGroup).
	ConductorGroup string    `json:"conductor_group"`
	RequestedAt    time.Time `json:"requested_at"`
}

// PowerRequest is a power-state change asked through the API.
type PowerRequest struct {
	NodeUUID       string `json:"node_uuid"`
	Target         string `json:"target"` // "power on", "power off", "rebooting", "soft power off", "soft rebooting"
	TimeoutSeconds int    `json:"timeout,omitempty"`
	ConductorGroup string `json:"conductor_group"`
}

// BootDeviceRequest is a boot-device change asked through the API.
type BootDeviceRequest struct {
	NodeUUID       string `json:"node_uuid"`
	BootDevice     string `json:"boot_device"`
	Persistent     bool   `json:"persistent"`
	ConductorGroup string `json:"conductor_group"`
}

// Heartbeat is the payload of SignalHeartbeat: what the agent sent to
// POST /v1/heartbeat/{node}, already validated by the API.
type Heartbeat struct {
	CallbackURL        string    `json:"callback_url"`
	AgentVersion       string    `json:"agent_version"`
	AgentVerifyCA      string    `json:"agent_verify_ca,omitempty"`
	AgentStatus        string    `json:"agent_status,omitempty"`
	AgentStatusMessage string    `json:"agent_status_message,omitempty"`
	ReceivedAt         time.Time `json:"received_at"`
}

// Status answers QueryStatus.
type Status struct {
	Operation      string `json:"operation"`
	ProvisionState string `json:"provision_state"`
	Step           string `json:"step"`
	// Progress of the current step, e.g. "1048576/67108864 bytes".
	Progress  string `json:"progress,omitempty"`
	LastError string `json:"last_error,omitempty"`
	Attempts  int    `json:"attempts"`
	// WaitingFor is set while the workflow waits for an operator signal.
	WaitingFor string `json:"waiting_for,omitempty"`
}

// Provision states, Ironic's names.
const (
	StateEnroll         = "enroll"
	StateVerifying      = "verifying"
	StateManageable     = "manageable"
	StateAvailable      = "available"
	StateActive         = "active"
	StateError          = "error"
	StateDeploying      = "deploying"
	StateDeployWait     = "wait call-back"
	StateDeployFailed   = "deploy failed"
	StateDeleting       = "deleting"
	StateCleaning       = "cleaning"
	StateCleanWait      = "clean wait"
	StateCleanFailed    = "clean failed"
	StateInspecting     = "inspecting"
	StateInspectWait    = "inspect wait"
	StateInspectFailed  = "inspect failed"
	StateAdopting       = "adopting"
	StateAdoptFailed    = "adopt failed"
	StateRescue         = "rescue"
	StateRescueFailed   = "rescue failed"
	StateRescueWait     = "rescue wait"
	StateUnrescueFailed = "unrescue failed"
	StateDeployHold     = "deploy hold"
	StateCleanHold      = "clean hold"
)

// Transition is what a verb does from a state: the state the API records
// when it accepts the verb, and the goal recorded as target_provision_state.
type Transition struct {
	Operation string // workflow operation name: deploy, undeploy, manage, provide, inspect, clean, abort
	Next      string // provision_state recorded with the 202
	Target    string // target_provision_state recorded with the 202
}

// verbs maps Ironic's API targets to events, with the aliases of 1.73.
var verbs = map[string]string{
	"active": "deploy", "deploy": "deploy", "rebuild": "rebuild",
	"deleted": "delete", "undeploy": "delete",
	"manage": "manage", "provide": "provide", "inspect": "inspect",
	"clean": "clean", "abort": "abort",
}

// Accept says what verb does from state, following Ironic's state machine
// (reference/ironic-states.md). ok is false when Ironic would answer 400
// "The requested action ... can not be performed".
func Accept(state, verb string) (t Transition, ok bool) {
	ev, known := verbs[verb]
	if !known {
		return Transition{}, false
	}
	switch ev {
	case "manage":
		switch state {
		case StateEnroll:
			return Transition{"manage", StateVerifying, StateManageable}, true
		case StateCleanFailed, StateInspectFailed, StateAvailable, StateAdoptFailed:
			return Transition{"manage", StateManageable, ""}, true
		}
	case "provide":
		if state == StateManageable {
			return Transition{"provide", StateCleaning, StateAvailable}, true
		}
	case "deploy":
		if state == StateAvailable || state == StateDeployFailed {
			return Transition{"deploy", StateDeploying, StateActive}, true
		}
	case "rebuild":
		if state == StateActive || state == StateDeployFailed || state == StateError {
			return Transition{"deploy", StateDeploying, StateActive}, true
		}
	case "delete":
		switch state {
		case StateActive, StateDeployFailed, StateDeployWait, StateError, StateRescue, StateRescueFailed, StateRescueWait, StateUnrescueFailed:
			return Transition{"undeploy", StateDeleting, StateAvailable}, true
		}
	case "inspect":
		if state == StateManageable || state == StateInspectFailed {
			return Transition{"inspect", StateInspecting, StateManageable}, true
		}
	case "clean":
		if state == StateManageable {
			return Transition{"clean", StateCleaning, StateManageable}, true
		}
	case "abort":
		// Ironic aborts in the wait states (wait call-back from 1.110);
		// ironflow also aborts a failed step's wait for an operator.
		switch state {
		case StateDeployWait, StateCleanWait, StateInspectWait, StateDeployFailed, StateCleanFailed, StateInspectFailed:
			return Transition{"abort", state, ""}, true
		}
	}
	return Transition{}, false
}

// NotAllowed is Ironic's message for a verb refused in a state.
func NotAllowed(verb, nodeUUID, state string) string {
	return fmt.Sprintf("The requested action \"%s\" can not be performed on node \"%s\" while it is in state \"%s\".", verb, nodeUUID, state)
}

// IsFailureState reports whether state is one of Ironic's failure states,
// where a workflow may wait for an operator.
func IsFailureState(state string) bool {
	switch state {
	case StateDeployFailed, StateCleanFailed, StateInspectFailed, StateAdoptFailed, StateRescueFailed, StateUnrescueFailed:
		return true
	}
	return false
}
