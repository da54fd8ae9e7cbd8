// Package workflows holds ironflow's deterministic workflow code: DeployNode,
// UndeployNode, ManageNode, ProvideNode and their siblings, and the names of
// their signals and queries. It imports no I/O package: activities are called
// by name, and everything a workflow knows of the world arrives as activity
// results or signals.
package workflows

import (
	"time"

	"github.com/ironflow/ironflow/provision"
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
	// AgentTokenRef names the agent token the API accepted the heartbeat
	// with (signature.TokenRef, not the token): the worker refuses a signal
	// whose token is not the node's current one, an earlier operation's.
	AgentTokenRef string `json:"agent_token_ref,omitempty"`
	// Nonce and MAC authenticate the signal (package signature): the
	// workflow ignores a heartbeat whose MAC the worker cannot verify.
	Nonce string `json:"nonce,omitempty"`
	MAC   string `json:"mac,omitempty"`
}

// VerifySignalInput is the input of ActVerifySignal.
type VerifySignalInput struct {
	NodeUUID  string    `json:"node_uuid"`
	Heartbeat Heartbeat `json:"heartbeat"`
}

// SignalVerdict is ActVerifySignal's answer: Reason is empty when the signal
// is authentic.
type SignalVerdict struct {
	Reason string `json:"reason,omitempty"`
}

// Heartbeat.AgentStatus values (API 1.72): what a ramdisk that is not the
// agent (anaconda's kickstart) reports of its own progress.
const (
	AgentStatusStart = "start"
	AgentStatusEnd   = "end"
	AgentStatusError = "error"
)

// Status answers QueryStatus.
type Status struct {
	Operation      provision.Operation `json:"operation"`
	ProvisionState provision.State     `json:"provision_state"`
	// Step names what runs: a step's interface.step, or a stage of the
	// workflow between steps ("wait call-back", "clean up boot").
	Step string `json:"step"`
	// Progress of the current step, e.g. "1048576/67108864 bytes".
	Progress  string `json:"progress,omitempty"`
	LastError string `json:"last_error,omitempty"`
	Attempts  int    `json:"attempts"`
	// WaitingFor is set while the workflow waits for an operator signal.
	WaitingFor string `json:"waiting_for,omitempty"`
}
