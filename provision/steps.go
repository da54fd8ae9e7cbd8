package provision

import "encoding/json"

// StepKind says which of a node's step fields a step is shown in:
// deploy_step or clean_step. It is also the agent's command namespace for
// the step (deploy.execute_deploy_step, clean.execute_clean_step).
type StepKind string

// The step kinds.
const (
	StepKindDeploy StepKind = "deploy"
	StepKindClean  StepKind = "clean"
)

// StepKindService is the kind of a service step (API 1.87): shown in a
// node's service_step, run through the agent's service namespace.
const StepKindService StepKind = "service"

// ArgInfo is what a step declares of one argument (Ironic's argsinfo).
type ArgInfo struct {
	Description string `json:"description,omitempty"`
	Required    bool   `json:"required"`
}

// StepID is a step's identity as Ironic names it: the hardware interface
// that owns the step and the step's name, written "interface.step".
type StepID struct {
	Interface string `json:"interface"`
	Step      string `json:"step"`
}

// String is "interface.step", as last_error and history show it.
func (id StepID) String() string { return id.Interface + "." + id.Step }

// The steps ironflow runs itself or sets the priority of (Ironic's node
// deployment and node cleaning documentation).
var (
	StepDeploy              = StepID{Interface: "deploy", Step: "deploy"}
	StepWriteImage          = StepID{Interface: "deploy", Step: "write_image"}
	StepPrepareInstanceBoot = StepID{Interface: "deploy", Step: "prepare_instance_boot"}
	StepTearDownAgent       = StepID{Interface: "deploy", Step: "tear_down_agent"}
	StepBootInstance        = StepID{Interface: "deploy", Step: "boot_instance"}
	// The agent's erase steps, whose automated-cleaning priorities the
	// policy sets.
	StepEraseDevicesMetadata = StepID{Interface: "deploy", Step: "erase_devices_metadata"}
	StepEraseDevices         = StepID{Interface: "deploy", Step: "erase_devices"}
)

// The firmware interface's update step (API 1.86), as Ironic's redfish
// firmware interface declares it (ironic/drivers/modules/redfish/
// firmware.py): one argument, settings, a list of components to update in
// order, each {"component": "bios"|"bmc"|"nic:<id>", "url": ..., "wait":
// seconds to wait after it}.
var StepFirmwareUpdate = StepID{Interface: "firmware", Step: "update"}

// Step is a deploy or clean step as Ironic describes it: its identity, its
// priority, and the arguments it runs with. On the wire (the agent's step
// lists, the API's deploy_steps and clean_steps) it is one flat object.
type Step struct {
	StepID
	Priority int             `json:"priority"`
	Args     json.RawMessage `json:"args,omitempty"`
	// RebootRequested comes from the agent's step list.
	RebootRequested bool `json:"reboot_requested,omitempty"`
	// ArgsInfo declares the step's arguments, Abortable whether abort may
	// stop it while it runs (both from the step's owner, Ironic's
	// argsinfo and abortable).
	ArgsInfo  map[string]ArgInfo `json:"argsinfo,omitempty"`
	Abortable bool               `json:"abortable,omitempty"`
	// OutOfBand: an interface's step, run as an activity without the
	// agent (Ironic's requires_ramdisk false).
	OutOfBand bool `json:"out_of_band,omitempty"`
}

// Name is "interface.step", as last_error and history show it.
func (s Step) Name() string { return s.StepID.String() }

// View is the step as a node's deploy_step or clean_step shows it while it
// runs, in Ironic's form: interface, step, priority and argsinfo (null for
// every step ironflow knows), with args when the step was given some.
func (s Step) View() map[string]any {
	v := map[string]any{"interface": s.Interface, "step": s.Step, "priority": s.Priority, "argsinfo": nil}
	if len(s.Args) > 0 && string(s.Args) != "null" {
		var args any
		if json.Unmarshal(s.Args, &args) == nil {
			v["args"] = args
		}
	}
	return v
}

// RunningStep is the step an activity begins. An activity whose input
// carries one records it as the node's deploy_step or clean_step before it
// acts, so that the node shows the step that runs, as Ironic does from the
// moment a step starts, without a store call of its own in the workflow.
type RunningStep struct {
	Kind StepKind `json:"kind"`
	Step Step     `json:"step"`
	// Index, when set, is the plan's <kind>_step_index of the step, written
	// with it (the previous step's progress removed) by the step's first
	// activity instead of a RecordStepPlan of its own
	// (agent-deploy-baseline version 3).
	Index *int `json:"index,omitempty"`
}
