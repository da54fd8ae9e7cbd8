package provision

import (
	"encoding/json"
	"time"
)

// Request is what the API hands a provision workflow: the node,
// Ironic's verb as the user sent it, and the transition the API decided.
type Request struct {
	NodeUUID string `json:"node_uuid"`
	// Verb is Ironic's target as the user sent it.
	Verb Verb `json:"verb"`
	// FromState is the provision state the API saw when it accepted the
	// verb.
	FromState State `json:"from_state"`
	// Transition is what the API decided the verb does from FromState
	// (Accept), once: the workflow starts as its Operation, and its Next
	// state is what the API recorded before it started the workflow, so
	// the workflow's first write applies only while the node is still in
	// it.
	Transition Transition `json:"transition"`
	// ConfigDrive as sent: a string (gzip+base64 ISO or URL) or a JSON
	// object. The API no longer sets it: it stores the drive with the node
	// (instance_info.configdrive) before the start, so that its secrets
	// never enter workflow history; DeployNode still stores one that a
	// request recorded before carries.
	ConfigDrive json.RawMessage `json:"configdrive,omitempty"`
	DeploySteps json.RawMessage `json:"deploy_steps,omitempty"`
	CleanSteps  json.RawMessage `json:"clean_steps,omitempty"`
	// ServiceSteps are the service verb's steps (API 1.87).
	ServiceSteps json.RawMessage `json:"service_steps,omitempty"`
	// DisableRamdisk is Ironic's manual-cleaning and servicing flag (1.70).
	DisableRamdisk bool `json:"disable_ramdisk,omitempty"`
	// ConductorGroup routes hardware activities to the group's queue
	// (workflows.HardwareQueue).
	ConductorGroup string    `json:"conductor_group"`
	RequestedAt    time.Time `json:"requested_at"`
	// Rollout is the UUID of the rollout that sent the verb, if one did
	// (docs/rollouts.md): the node's workflow starts with the rollout's
	// search attribute. The workflow itself does not read it.
	Rollout string `json:"rollout,omitempty"`
}

// AbortRequest is the abort signal's payload when the API ends an
// operator's wait on a failed node because a new provision verb arrived
// (`baremetal node undeploy` of a node in deploy failed, say): the workflow
// then cleans up as for an abort but keeps the failure's last_error and
// records that the verb ended the wait, not an abort. An operator's own
// abort carries none (`temporal workflow signal --name abort`), and any
// other payload is an abort too.
type AbortRequest struct {
	// SupersededBy is the verb that ended the wait, as the user sent it.
	SupersededBy Verb `json:"superseded_by,omitempty"`
	// Request names a request other than a provision verb that ended the
	// wait (`Power action "power off"`, `Node deletion`): failed states
	// are resting states in Ironic, which accepts these there without a
	// lock to wait for.
	Request string `json:"request,omitempty"`
}
