package workflows

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/ironflow/ironflow/hardware"
	"github.com/ironflow/ironflow/provision"
	"github.com/ironflow/ironflow/pyliteral"
)

// The out-of-band steps the node's interfaces declare, as Ironic's fake
// BIOS and RAID interfaces declare them (Ironic's node cleaning
// documentation): priority 0, so they run only when a user names them, and
// no ramdisk needed. They run as the activity ActRunInterfaceStep.
var interfaceSteps = map[string]map[hardware.Interface][]provision.Step{
	"bios": {hardware.Fake: {
		{StepID: provision.StepID{Interface: "bios", Step: "apply_configuration"}, ArgsInfo: map[string]provision.ArgInfo{
			"settings": {Description: "A list of BIOS settings to be applied", Required: true}}},
		{StepID: provision.StepID{Interface: "bios", Step: "factory_reset"}},
	}, hardware.Redfish: { // activities/bios.go: written, rebooted, verified
		{StepID: provision.StepID{Interface: "bios", Step: "apply_configuration"}, ArgsInfo: map[string]provision.ArgInfo{
			"settings": {Description: "A list of BIOS settings to be applied", Required: true}}},
		{StepID: provision.StepID{Interface: "bios", Step: "factory_reset"}},
	}},
	"raid": {hardware.Fake: raidSteps, hardware.Redfish: raidSteps},
	// Ironic's redfish firmware interface: update, priority 0, not
	// abortable (workflows/firmware.go runs it). Out of band here: the
	// BMC applies the images, the agent is not needed.
	"firmware": {hardware.Redfish: {
		{StepID: provision.StepFirmwareUpdate, ArgsInfo: map[string]provision.ArgInfo{
			"settings": {Description: "A list of dicts with firmware components to be updated", Required: true}}},
	}, hardware.Fake: { // Ironic's FakeFirmware: a clean step only, doing nothing
		{StepID: provision.StepFirmwareUpdate, ArgsInfo: map[string]provision.ArgInfo{
			"settings": {Description: "List of Firmware components, each item needs to contain a dictionary with name/value pairs", Required: true}}},
	}},
}

// cleanOnlySteps are interface steps Ironic declares as clean steps only
// (not deploy or service steps): the fake firmware interface's update.
var cleanOnlySteps = map[string]map[hardware.Interface]bool{"firmware": {hardware.Fake: true}}

// raidSteps are the raid interface's steps, fake and redfish alike
// (activities/raid.go runs redfish's through the BMC's Storage Volumes),
// and the agent's in-band ones (WithAgentInterfaceSteps): the step
// catalogue's (provision.RAIDSteps).
var raidSteps = provision.RAIDSteps()

// InterfaceSteps are the out-of-band steps of kind the node's interfaces
// declare (bios and raid interfaces; Ironic runs interface steps the same
// for clean and service). Of them, deploy has the ones deployInterfaceSteps
// names (workflows/deploy_steps.go), at priority 0: they run only when a
// request or a deploy template gives them a priority.
func InterfaceSteps(kind provision.StepKind, ifaces map[string]hardware.Interface) []provision.Step {
	var out []provision.Step
	for _, name := range []string{"bios", "raid", "firmware"} {
		for _, s := range interfaceSteps[name][ifaces[name]] {
			if kind == provision.StepKindDeploy && !deployInterfaceSteps[s.StepID] {
				continue
			}
			if kind != provision.StepKindClean && cleanOnlySteps[name][ifaces[name]] {
				continue
			}
			s.OutOfBand = true
			out = append(out, s)
		}
	}
	return out
}

// deployInterfaceSteps are the interface steps that are deploy steps too:
// Ironic's redfish firmware interface decorates update as a deploy step,
// its bios interfaces apply_configuration and factory_reset (priority 0,
// the same argsinfo), so that a deploy template can set BIOS settings or
// flash firmware for the instance.
var deployInterfaceSteps = map[provision.StepID]bool{
	provision.StepFirmwareUpdate:                     true,
	{Interface: "bios", Step: "apply_configuration"}: true,
	{Interface: "bios", Step: "factory_reset"}:       true,
}

// ironflowAgentSteps are the in-band steps the ironflow agent advertises,
// from the step catalogue it advertises them from (provision.AgentSteps):
// the API checks a user's steps against them before the agent boots, as
// Ironic checks them against the steps its agent last reported
// (driver_internal_info agent_cached_clean_steps). Once the agent is up,
// the list it returns is the one the workflow checks again. Their
// arguments are declared without descriptions, which are the agent's once
// it reports them.
func ironflowAgentSteps(kind provision.StepKind) []provision.Step {
	steps := provision.AgentSteps(kind)
	for i, s := range steps {
		if s.ArgsInfo == nil {
			continue
		}
		args := make(map[string]provision.ArgInfo, len(s.ArgsInfo))
		for name, arg := range s.ArgsInfo {
			args[name] = provision.ArgInfo{Required: arg.Required}
		}
		steps[i].ArgsInfo = args
	}
	return steps
}

// WithAgentInterfaceSteps is agentSteps (the agent's steps of kind, as
// KnownAgentSteps gives them) with the interface steps the agent runs
// in-band for the node's interfaces that are not there yet: the software
// RAID steps of raid_interface agent (agent/raid.go raidSteps, the same
// names and arguments as the out-of-band raid interfaces'), as Ironic's
// AgentRAID takes its clean steps from the agent (and, for a deploy,
// raid.apply_configuration). The agent offers them only to such a node, so
// a list it reported before the node's raid interface became agent lacks
// them.
func WithAgentInterfaceSteps(kind provision.StepKind, ifaces map[string]hardware.Interface, agentSteps []provision.Step) []provision.Step {
	add := raidSteps
	if kind == provision.StepKindDeploy {
		add = agentRAIDDeploySteps
	}
	if (kind != provision.StepKindClean && kind != provision.StepKindDeploy) || hardware.StepsOf(hardware.KindRAID, ifaces["raid"]) != hardware.StepsInBand {
		return agentSteps
	}
	out := append([]provision.Step(nil), agentSteps...)
	for _, s := range add {
		if !slices.ContainsFunc(out, func(a provision.Step) bool { return a.StepID == s.StepID }) {
			out = append(out, s)
		}
	}
	return out
}

// agentRAIDDeploySteps is the agent's raid.apply_configuration
// (provision.RAIDDeploySteps). A deploy checks it when the agent reports
// it: the plan before the agent runs leaves a step it does not know for
// then.
var agentRAIDDeploySteps = provision.RAIDDeploySteps()

// KnownAgentSteps is ironflowAgentSteps of kind, unless cached (the steps
// the node's agent last reported, driver_internal_info
// agent_cached_<kind>_steps) says otherwise.
func KnownAgentSteps(kind provision.StepKind, cached []provision.Step) []provision.Step {
	if len(cached) > 0 {
		return cached
	}
	return ironflowAgentSteps(kind)
}

// UserStep is one step of a request's clean_steps, deploy_steps or
// service_steps, with what Ironic's checks need: whether the user gave a
// priority, and the step as the user wrote it for messages.
type UserStep struct {
	provision.Step
	HasPriority bool           `json:"has_priority,omitempty"`
	ArgsGiven   map[string]any `json:"-"`
}

// repr is the step as Ironic's messages show it: the user's dict in
// Python's notation.
func (u UserStep) repr() string {
	parts := []string{"'interface': " + pyliteral.Repr(u.Interface), "'step': " + pyliteral.Repr(u.StepID.Step)}
	if u.ArgsGiven != nil {
		parts = append(parts, "'args': "+pyliteral.ReprDecoded(u.ArgsGiven))
	}
	if u.HasPriority {
		parts = append(parts, "'priority': "+strconv.Itoa(u.Priority))
	}
	return "{" + strings.Join(parts, ", ") + "}"
}

// ParseUserSteps reads a request's step list (already checked by the API's
// schema: a list of objects with interface and step).
func ParseUserSteps(raw json.RawMessage) ([]UserStep, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var list []map[string]any
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, fmt.Errorf("steps: %w", err)
	}
	out := make([]UserStep, 0, len(list))
	for _, m := range list {
		var u UserStep
		u.Interface, _ = m["interface"].(string)
		u.StepID.Step, _ = m["step"].(string)
		if p, ok := m["priority"]; ok && p != nil {
			f, ok := p.(float64)
			if !ok || f != math.Trunc(f) {
				return nil, fmt.Errorf("steps: priority of %s is not an integer", u.Name())
			}
			u.Priority, u.HasPriority = int(f), true
		}
		if a, ok := m["args"]; ok && a != nil {
			args, ok := a.(map[string]any)
			if !ok {
				return nil, fmt.Errorf("steps: args of %s is not an object", u.Name())
			}
			u.ArgsGiven = args
			if b, err := json.Marshal(args); err == nil {
				u.Args = b
			}
		}
		out = append(out, u)
	}
	return out, nil
}

// PlanInput is what MergeSteps builds a plan from.
type PlanInput struct {
	Kind provision.StepKind
	// Available are the driver's steps: the interfaces' and the agent's,
	// with their default priorities.
	Available []provision.Step
	// Priorities overrides the priority of available steps by
	// interface.step (automated cleaning's configured priorities; 0
	// disables a step).
	Priorities map[string]int
	// User are the request's steps. With Manual, they are the plan, in
	// the user's order (manual cleaning, servicing); otherwise they
	// override available steps by identity (deploy steps).
	User   []UserStep
	Manual bool
	// DisableRamdisk refuses steps that need the agent (manual cleaning
	// and servicing with disable_ramdisk).
	DisableRamdisk bool
	// SkipMissing leaves out a user step no available step matches instead
	// of refusing it (Ironic's skip_missing: a deploy checks its steps
	// before the agent's are known, and again once they are).
	SkipMissing bool
	// AnyArgs are available steps that take whatever args a user gives
	// while they declare no argsinfo: ironflow's built-in deploy steps,
	// which accepted args before their plan was checked.
	AnyArgs []provision.StepID
}

// PlanError is a refused plan: Ironic's InvalidParameterValue, whose
// message joins every problem with "; ".
type PlanError struct{ Problems []string }

func (e *PlanError) Error() string { return strings.Join(e.Problems, "; ") }

// MergeSteps builds the steps to run, as Ironic's conductor does
// (ironic/conductor/steps.py): without Manual, the available steps with
// their priority (overridden by Priorities, then by a user step of the
// same identity), those above 0, highest first and, at equal priority, in
// Ironic's interface order; with Manual, the user's steps in their order,
// each taking the available step's priority, abortable and ramdisk need.
// A user step no available step matches, an argument the step does not
// declare, a required argument missing, or a step that needs the agent
// with DisableRamdisk refuses the whole plan with Ironic's messages,
// before anything runs.
func MergeSteps(in PlanInput) ([]provision.Step, error) {
	byID := map[provision.StepID]provision.Step{}
	for _, s := range in.Available {
		if p, ok := in.Priorities[s.Name()]; ok {
			s.Priority = p
		}
		if _, dup := byID[s.StepID]; !dup {
			byID[s.StepID] = s
		}
	}
	kind := string(in.Kind)
	var problems []string
	var checked []provision.Step
	for _, u := range in.User {
		d, ok := byID[u.StepID]
		if !ok && in.SkipMissing {
			continue
		}
		if !ok {
			problems = append(problems, fmt.Sprintf("node does not support this %s step: %s", kind, u.repr()))
			continue
		}
		if d.ArgsInfo == nil && slices.Contains(in.AnyArgs, d.StepID) {
			d.ArgsInfo = map[string]provision.ArgInfo{}
			for k := range u.ArgsGiven {
				d.ArgsInfo[k] = provision.ArgInfo{}
			}
		}
		problems = append(problems, argProblems(kind, u, d, in.Manual, in.DisableRamdisk)...)
		s := d
		s.Args = u.Args
		if !in.Manual {
			s.Priority = d.Priority
			if u.HasPriority {
				s.Priority = u.Priority
			}
		}
		checked = append(checked, s)
	}
	if in.Kind == provision.StepKindDeploy {
		problems = append(problems, duplicateProblems(checked)...)
	}
	if len(problems) > 0 {
		return nil, &PlanError{Problems: problems}
	}
	if in.Manual {
		return checked, nil
	}
	overridden := map[provision.StepID]bool{}
	for _, s := range checked {
		overridden[s.StepID] = true
	}
	var steps []provision.Step
	for _, s := range in.Available {
		if overridden[s.StepID] {
			continue
		}
		s = byID[s.StepID]
		overridden[s.StepID] = true // keep the first of duplicates
		steps = append(steps, s)
	}
	steps = append(steps, checked...)
	out := steps[:0]
	for _, s := range steps {
		if s.Priority > 0 {
			out = append(out, s)
		}
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].Priority != out[j].Priority {
			return out[i].Priority > out[j].Priority
		}
		return interfaceOrder(out[i].Interface) > interfaceOrder(out[j].Interface)
	})
	return out, nil
}

// duplicateProblems is Ironic's _validate_deploy_steps_unique: a deploy
// step may be given once, whether by the request or by the deploy
// templates (Ironic says templates in both cases).
func duplicateProblems(steps []provision.Step) []string {
	count := map[string]int{}
	var dups []string
	for _, s := range steps {
		count[s.Name()]++
		if count[s.Name()] == 2 {
			dups = append(dups, s.Name())
		}
	}
	if len(dups) == 0 {
		return nil
	}
	sort.Strings(dups)
	return []string{"deploy steps from all deploy templates matching this node's instance traits cannot have the same interface and step. Duplicate deploy steps for " + strings.Join(dups, ", ")}
}

// argProblems is Ironic's _validate_user_step for one user step against
// the step its driver declares.
func argProblems(kind string, u UserStep, d provision.Step, manual, disableRamdisk bool) []string {
	var out []string
	var unexpected []string
	for k := range u.ArgsGiven {
		if _, ok := d.ArgsInfo[k]; !ok {
			unexpected = append(unexpected, k)
		}
	}
	sort.Strings(unexpected)
	if len(unexpected) > 0 {
		out = append(out, fmt.Sprintf("%s step %s has these unexpected arguments: %s", kind, u.repr(), strings.Join(unexpected, ", ")))
	}
	if manual || !u.HasPriority || u.Priority > 0 {
		var missing []string
		names := make([]string, 0, len(d.ArgsInfo))
		for k := range d.ArgsInfo {
			names = append(names, k)
		}
		sort.Strings(names)
		for _, k := range names {
			info := d.ArgsInfo[k]
			if _, given := u.ArgsGiven[k]; info.Required && !given {
				msg := k
				if info.Description != "" {
					msg += " (" + info.Description + ")"
				}
				missing = append(missing, msg)
			}
		}
		if len(missing) > 0 {
			out = append(out, fmt.Sprintf("%s step %s is missing these required arguments: %s", kind, u.repr(), strings.Join(missing, ", ")))
		}
		if disableRamdisk && !d.OutOfBand {
			out = append(out, fmt.Sprintf("%s step %s requires booting a ramdisk", kind, u.repr()))
		}
	}
	if !manual && u.HasPriority && u.Priority > 0 && d.StepID == provision.StepDeploy {
		out = append(out, fmt.Sprintf("deploy step %s on interface %s is a core step and cannot be overridden by user steps. It may be disabled by setting the priority to 0", u.StepID.Step, u.Interface))
	}
	return out
}

// interfaceOrder is Ironic's CLEANING_INTERFACE_PRIORITY: at equal
// priority, the step of the interface with the higher value runs first.
func interfaceOrder(iface string) int {
	switch iface {
	case "vendor":
		return 7
	case "power":
		return 6
	case "management":
		return 5
	case "deploy":
		return 4
	case "firmware":
		return 3
	case "bios":
		return 2
	case "raid":
		return 1
	}
	return 0
}

// StepInterfaces are the node's interfaces that declare steps, for
// InterfaceSteps.
func (n NodeInfo) StepInterfaces() map[string]hardware.Interface {
	return map[string]hardware.Interface{"bios": n.BIOSInterface, "raid": n.RAIDInterface, "firmware": n.FirmwareInterface}
}

// Activities of the step engine.
const (
	// ActRunInterfaceStep runs an interface's out-of-band step (a hardware
	// activity: local for fake-hardware).
	ActRunInterfaceStep = "RunInterfaceStep"
	// ActRecordStepPlan keeps a plan's progress in driver_internal_info,
	// as Ironic does (clean_steps and clean_step_index, or service_...),
	// and the agent's steps it was checked against
	// (agent_cached_clean_steps). Local activity.
	ActRecordStepPlan = "RecordStepPlan"
)

// InterfaceStepInput runs one out-of-band step.
type InterfaceStepInput struct {
	Node NodeInfo           `json:"node"`
	Kind provision.StepKind `json:"kind"`
	Step provision.Step     `json:"step"`
	// RebootInto is the boot device ("pxe" or "cdrom") a step that
	// reboots the node points the next boot at first, so that the machine
	// comes back into the agent ramdisk it runs under (a redfish bios step
	// while the agent is up; workflows/bios.go). Empty: the reboot boots
	// what the machine boots.
	RebootInto string `json:"reboot_into,omitempty"`
}

// StepPlanRecord is ActRecordStepPlan's input. Steps nil with Clear
// removes the keys (the operation ended); Index nil records null.
type StepPlanRecord struct {
	NodeUUID   string             `json:"node_uuid"`
	Kind       provision.StepKind `json:"kind"`
	Steps      []provision.Step   `json:"steps,omitempty"`
	Index      *int               `json:"index,omitempty"`
	AgentSteps []provision.Step   `json:"agent_steps,omitempty"`
	Clear      bool               `json:"clear,omitempty"`
	OnlyIndex  bool               `json:"only_index,omitempty"`
}
