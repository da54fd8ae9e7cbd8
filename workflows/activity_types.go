package workflows

import (
	"encoding/json"
	"time"

	"github.com/ironflow/ironflow/hardware"
	"github.com/ironflow/ironflow/provision"
)

// Activity names. Workflows call activities by these names only, so that this
// package imports no I/O code; package activities registers its methods under
// the same names.
const (
	// Local activities: short, idempotent store work inside the workflow task.
	ActLoadNode = "LoadNode"
	// ActVerifySignal checks a heartbeat signal's MAC with the worker's key
	// (package signature); the key never enters workflow code or history.
	ActVerifySignal      = "VerifySignal"
	ActRecordState       = "RecordState"
	ActStoreConfigDrive  = "StoreConfigDrive"
	ActRecordPowerState  = "RecordPowerState"
	ActClearInstanceInfo = "ClearInstanceInfo"
	ActApplyInventory    = "ApplyInventory"
	ActRecordInspection  = "RecordInspection"
	// ActForgetRescuePassword removes the rescue password's hash from the
	// node once the agent has it, or the rescue ended without it.
	ActForgetRescuePassword = "ForgetRescuePassword"
	// ActValidateAdoption checks that a node can be adopted as Ironic's
	// adoption validates the boot interface (AdoptNode); it answers the
	// problem, "" when there is none.
	ActValidateAdoption = "ValidateAdoption"

	// Regular activities on the node's conductor-group queue: they reach
	// hardware or wait long.
	ActPrepareBoot      = "PrepareBoot"
	ActCleanBoot        = "CleanBoot"
	ActSetBootDevice    = "SetBootDevice"
	ActSetPower         = "SetPower"
	ActGetPowerState    = "GetPowerState"
	ActGetAgentSteps    = "GetAgentSteps"
	ActRunAgentStep     = "RunAgentStep"
	ActAgentPowerOff    = "AgentPowerOff"
	ActValidateHardware = "ValidateHardware"
	ActInspectOutOfBand = "InspectOutOfBand"
	ActCollectInventory = "CollectInventory"
	// ActFinalizeRescue sends the agent rescue.finalize_rescue with the
	// hash of the rescue password, which the activity reads from the store.
	ActFinalizeRescue = "FinalizeRescue"
)

// NodeInfo is what a workflow needs to know of a node, loaded once at start.
// It carries no secrets: activities read credentials and tokens from the
// store themselves, so that they never enter workflow history.
type NodeInfo struct {
	UUID             string             `json:"uuid"`
	Driver           string             `json:"driver"`
	BootInterface    hardware.Interface `json:"boot_interface"`
	DeployInterface  hardware.Interface `json:"deploy_interface"`
	InspectInterface hardware.Interface `json:"inspect_interface"`
	RescueInterface  hardware.Interface `json:"rescue_interface,omitempty"`
	// BIOSInterface and RAIDInterface declare out-of-band steps
	// (InterfaceSteps).
	BIOSInterface hardware.Interface `json:"bios_interface,omitempty"`
	RAIDInterface hardware.Interface `json:"raid_interface,omitempty"`
	// FirmwareInterface declares the firmware update step.
	FirmwareInterface hardware.Interface `json:"firmware_interface,omitempty"`
	ConductorGroup    string             `json:"conductor_group"`
	ProvisionState    provision.State    `json:"provision_state"`
	PowerState        string             `json:"power_state"`
	BootMode          string             `json:"boot_mode"` // uefi or bios
	// SecureBoot: the instance asks for secure boot (capability
	// secure_boot:true), turned on before its first boot and off at
	// teardown (workflows/secureboot.go).
	SecureBoot bool     `json:"secure_boot,omitempty"`
	MACs       []string `json:"macs"`
	// AutomatedClean is the effective setting: node field, else the global default.
	AutomatedClean bool `json:"automated_clean"`

	// DisablePowerOff: the machine is never powered off (API 1.95): the
	// SetPower activity keeps it on and resets it instead, the agent locks
	// itself down, and an undeploy reboots the machine off its instance.
	DisablePowerOff bool `json:"disable_power_off,omitempty"`

	// Timeouts and policies in force for this node (configuration, overridden
	// per node through driver_info).
	Policy Policy `json:"policy"`
}

// Policy holds every timer and retry bound a workflow uses. Defaults live in
// package activities (DefaultPolicy) and can be overridden in configuration
// and per node.
type Policy struct {
	// CallbackTimeout bounds wait call-back / clean wait: Ironic's
	// deploy_callback_timeout, reset by every heartbeat.
	CallbackTimeout time.Duration `json:"callback_timeout"`
	// RescueCallbackTimeout bounds rescue wait: Ironic's
	// rescue_callback_timeout, reset by every heartbeat.
	RescueCallbackTimeout time.Duration `json:"rescue_callback_timeout,omitempty"`
	// HeartbeatTimeout: a running agent step fails when the agent has been
	// silent this long (Ironic's ramdisk_heartbeat_timeout).
	HeartbeatTimeout time.Duration `json:"heartbeat_timeout"`
	// OperatorWaitTimeout bounds how long a failed step waits for retry,
	// skip-step or abort before the workflow ends in the failure state.
	OperatorWaitTimeout time.Duration `json:"operator_wait_timeout"`
	// BMCAttempts and BMCInitialInterval shape the retry of BMC calls.
	BMCAttempts        int32         `json:"bmc_attempts"`
	BMCInitialInterval time.Duration `json:"bmc_initial_interval"`
	// BMCCallTimeout bounds one BMC activity attempt.
	BMCCallTimeout time.Duration `json:"bmc_call_timeout"`
	// AgentActivityHeartbeat is how long a worker running an agent step or
	// a BMC call (a regular activity on a conductor group's queue) may go
	// without reporting before Temporal hands the attempt to another
	// worker; the group's workers report every 10 s while one runs
	// (activities.KeepAliveInterceptor).
	AgentActivityHeartbeat time.Duration `json:"agent_activity_heartbeat"`
	// AgentCommandTimeout bounds one agent command (write_image of a large
	// image is the long one).
	AgentCommandTimeout time.Duration `json:"agent_command_timeout"`
	// EraseDevicesMetadataPriority and EraseDevicesPriority order the
	// agent's automated clean steps (0 disables one), as Ironic's
	// [deploy]erase_devices_metadata_priority and erase_devices_priority.
	EraseDevicesMetadataPriority int `json:"erase_devices_metadata_priority"`
	EraseDevicesPriority         int `json:"erase_devices_priority"`
	// LocalBMC runs BMC activities as local activities: used for
	// fake-hardware, which has no BMC to reach from a conductor group.
	LocalBMC bool `json:"local_bmc"`
}

// UsesAgent reports whether the node's deploy interface boots the agent.
func (n NodeInfo) UsesAgent() bool {
	return hardware.DeployOf(n.DeployInterface).Flow() == hardware.FlowAgent
}

// Cleans reports whether automated cleaning boots the agent to erase the
// node's disks: every deploy interface that leaves something on them
// (direct, and anaconda's installed system; ramdisk too, as Ironic cleans
// it), unless the node or the configuration turned it off.
func (n NodeInfo) Cleans() bool {
	return hardware.DeployOf(n.DeployInterface).WritesDisk() && n.AutomatedClean
}

// VirtualMedia reports whether the agent boots from a virtual CD.
func (n NodeInfo) VirtualMedia() bool { return hardware.BootOf(n.BootInterface).VirtualMedia() }

// RecordStateInput changes a node's provision state and writes a history
// row, in one store transaction.
type RecordStateInput struct {
	NodeUUID string `json:"node_uuid"`
	// From lists the states the change may start from; empty means any.
	From   []provision.State `json:"from,omitempty"`
	To     provision.State   `json:"to"`
	Target provision.State   `json:"target"` // "" records null
	// LastError: "" clears it.
	LastError string `json:"last_error"`
	// StepKind names the step field Step is recorded in (deploy_step or
	// clean_step; nil records {}), the other one is kept; "" clears both.
	StepKind  provision.StepKind `json:"step_kind,omitempty"`
	Step      *provision.Step    `json:"step,omitempty"`
	Event     string             `json:"event"`
	EventType string             `json:"event_type"`
	Severity  string             `json:"severity"` // INFO or ERROR
	// ClearAgent wipes the agent token and URL (Ironic's wipe_token_and_url).
	ClearAgent bool `json:"clear_agent,omitempty"`
	// StepPlan, when set, is a step plan record (RecordStepPlan's) written
	// in the same statement: the agent deploy's plan with the state that
	// announces it, its clearing with active (agent-deploy-baseline
	// version 2, docs/versioning.md).
	StepPlan *StepPlanRecord `json:"step_plan,omitempty"`
}

// BootKind is what a node's network or virtual-media boot loads.
type BootKind string

// The boot kinds workflows pass to PrepareBoot and CleanBoot.
const (
	// BootAgent: the agent, to deploy or clean (PrepareBoot, CleanBoot).
	BootAgent BootKind = "agent"
	// BootInspect: the agent, to inspect; it boots as BootAgent does
	// (PrepareBoot, CleanBoot).
	BootInspect BootKind = "inspect"
	// BootRamdisk: the instance's own kernel and ramdisk or ISO, on every
	// boot while the node is active (deploy_interface ramdisk; PrepareBoot).
	BootRamdisk BootKind = "ramdisk"
	// BootAnaconda: the installer with its kickstart (deploy_interface
	// anaconda; PrepareBoot, CleanBoot).
	BootAnaconda BootKind = "anaconda"
	// BootRescue: the agent, to rescue; it boots as BootAgent does
	// (PrepareBoot, CleanBoot).
	BootRescue BootKind = "rescue"
	// BootInstance: whatever the active instance boots from ironflow, removed
	// on undeploy (CleanBoot only).
	BootInstance BootKind = "instance"
)

// BootInput prepares or removes a node's network or virtual-media boot.
type BootInput struct {
	Node NodeInfo `json:"node"`
	// Kind is what the machine boots. PrepareBoot sets up that kind.
	// CleanBoot removes whatever is set up, of any kind, and uses Kind only
	// in what it reports: after a failure or a worker restart the workflow
	// cannot be sure which kind is in place, and removing all of it is what
	// leaves nothing booting.
	Kind BootKind `json:"kind"`
	// Starts is the step this call begins, if any (see RunningStep).
	Starts *provision.RunningStep `json:"starts,omitempty"`
}

// BootDeviceInput is a boot-device change on a node's BMC.
type BootDeviceInput struct {
	Node       NodeInfo `json:"node"`
	Device     string   `json:"device"`
	Persistent bool     `json:"persistent"`
}

// PowerInput is a power action on a node's BMC.
type PowerInput struct {
	Node   NodeInfo `json:"node"`
	Action string   `json:"action"` // bmc.PowerAction values
	// Timeout for the action to show in the BMC's power state; 0 = default.
	TimeoutSeconds int `json:"timeout,omitempty"`
	// Requested: a user's power request (SetPowerState), not a workflow's
	// step: for a node with disable_power_off its power on of a machine
	// that is on does nothing, where a workflow's resets it after a power
	// off it skipped.
	Requested bool `json:"requested,omitempty"`
}

// AgentInput addresses the agent that last heartbeated for a node. The token
// and CA are read from the store by the activity.
type AgentInput struct {
	NodeUUID    string `json:"node_uuid"`
	CallbackURL string `json:"callback_url"`
	// Starts is the step this call begins, if any (see RunningStep).
	Starts *provision.RunningStep `json:"starts,omitempty"`
}

// AgentStepInput runs one in-band step on the agent.
type AgentStepInput struct {
	Agent AgentInput         `json:"agent"`
	Kind  provision.StepKind `json:"kind"`
	// Step is recorded as the node's running step (Kind says which field)
	// before the agent is asked to run it.
	Step provision.Step `json:"step"`
	// Index, when set, is the step's index in the plan, recorded with it
	// (RunningStep.Index).
	Index *int `json:"index,omitempty"`
}

// AgentStepsInput asks the agent for its steps.
type AgentStepsInput struct {
	Agent AgentInput         `json:"agent"`
	Kind  provision.StepKind `json:"kind"`
}

// AgentStepResult is what a finished agent step reported.
type AgentStepResult struct {
	CommandID string `json:"command_id"`
	Status    string `json:"status"`
	Result    string `json:"result,omitempty"`
}

// ConfigDriveInput carries the request's configdrive to be stored with the
// node (built into an ISO first when it is a JSON dict).
type ConfigDriveInput struct {
	NodeUUID    string          `json:"node_uuid"`
	ConfigDrive json.RawMessage `json:"configdrive"`
}

// PowerStateRecord stores what the BMC reported.
type PowerStateRecord struct {
	NodeUUID   string `json:"node_uuid"`
	PowerState string `json:"power_state"`
	LastError  string `json:"last_error"`
	Event      string `json:"event"`
	Severity   string `json:"severity"`
	// KeepPowerState leaves power_state as stored: the change was never
	// tried, so the last reading still holds.
	KeepPowerState bool `json:"keep_power_state,omitempty"`
}

// InspectionRecord marks the start or end of an inspection on the node
// (inspection_started_at, inspection_finished_at).
type InspectionRecord struct {
	NodeUUID string `json:"node_uuid"`
	Started  bool   `json:"started,omitempty"`
	Finished bool   `json:"finished,omitempty"`
}
