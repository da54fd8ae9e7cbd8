package workflows

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"go.temporal.io/sdk/workflow"

	"github.com/ironflow/ironflow/hardware"
	"github.com/ironflow/ironflow/provision"
)

// deployWithAgentSteps is the direct deploy with the agent's own deploy
// steps (changeDeployAgentSteps), as Ironic's conductor runs it
// (ironic/conductor/deployments.py, steps.py):
//
//   - before anything runs, the request's deploy_steps (the user's, then the
//     matching deploy templates' as the API resolved them) are checked
//     against the built-in steps and the ones the ironflow agent offers
//     (KnownAgentSteps), a step neither has skipped (Ironic's skip_missing:
//     the agent's steps are known for sure once it runs);
//   - deploy.deploy boots the agent and waits for its call-back;
//   - the agent's deploy steps (get_deploy_steps) join the built-in ones and
//     the whole plan is checked again, now refusing an unknown step: a
//     refusal ends in deploy failed with Ironic's "Failed to validate the
//     final deploy steps list" before any other step runs;
//   - the steps after deploy.deploy run in priority order (one above
//     deploy.deploy's 100 right after it: it needs the agent), an agent step
//     with a non-zero priority at its place, the node's deploy_step showing
//     the running one and driver_internal_info deploy_steps and
//     deploy_step_index the plan, as Ironic keeps them.
//
// deploySteps are the request's deploy_steps.
func (r *run) deployWithAgentSteps(deploySteps json.RawMessage) error {
	err := r.deployAgentPlan(deploySteps)
	if err != nil {
		if cerr := r.rec.local(ActRecordStepPlan, StepPlanRecord{NodeUUID: r.node.UUID, Kind: provision.StepKindDeploy, Clear: true}, nil); cerr != nil {
			workflow.GetLogger(r.ctx).Warn("clear the deploy steps of a failed deploy", "node", r.node.UUID, "error", errorText(cerr))
		}
	}
	return err
}

func (r *run) deployAgentPlan(deploySteps json.RawMessage) error {
	user, err := ParseUserSteps(deploySteps)
	if err != nil {
		return r.failDeployPlan(fmt.Sprintf("Failed to validate deploy or power info for node %s: %s", r.node.UUID, errorText(err)))
	}
	oob := r.deployOutOfBandSteps(user)
	table := r.deployTable()
	early, err := earlyDeployPlan(table, user, nil, oob)
	if err != nil {
		return r.failDeployPlan(fmt.Sprintf("Failed to validate deploy or power info for node %s: %s", r.node.UUID, errorText(err)))
	}
	boots := false
	for _, s := range early {
		boots = boots || s.StepID == provision.StepDeploy
	}
	if !boots {
		// deploy.deploy disabled: no agent to ask; the known steps run as
		// they are.
		return r.runDeployPlan(early, 0)
	}
	// deploy.deploy boots the agent: every other deploy step but the
	// out-of-band ones runs on it, so deploy.deploy runs first (after the
	// out-of-band steps above its priority) and a step above its priority
	// right after it.
	early = deployFirst(early)
	first := deployIndex(early)
	// The plan and the index of its first step in one write.
	index := new(int)
	r.steps.planIndexed = index
	if err := r.recordDeployPlan(early, nil, index); err != nil {
		return err
	}
	if err := r.runDeploySteps(early[:first+1], 0); err != nil {
		return err
	}
	var agentSteps []provision.Step
	if err := r.step("get deploy steps", func() error {
		return r.agent.call(ActGetAgentSteps, AgentStepsInput{Agent: r.agent.input(nil), Kind: provision.StepKindDeploy}, &agentSteps)
	}); err != nil {
		return err
	}
	plan, err := MergeSteps(PlanInput{Kind: provision.StepKindDeploy, Available: append(append(deployAvailable(table, agentSteps), oob...), FlowSteps(user)...), User: user, AnyArgs: builtinDeployIDs(table)})
	if err != nil {
		return r.failDeployPlan(fmt.Sprintf("Failed to validate the final deploy steps list for node %s: %s", r.node.UUID, errorText(err)))
	}
	// The plan goes on after deploy.deploy, which ran (after the
	// out-of-band steps above its priority, which ran too).
	plan = deployFirst(plan)
	if len(plan) <= first || plan[first].StepID != provision.StepDeploy {
		// The agent's list cannot take deploy.deploy out (a built-in
		// step): only a plan without it lacks it, and that one did not
		// boot the agent.
		return r.failDeployPlan(fmt.Sprintf("Failed to validate the final deploy steps list for node %s: %s left the plan", r.node.UUID, provision.StepDeploy))
	}
	// The plan, the agent's steps and the index of the next step with the
	// state that announces the plan, in one write.
	rec := &StepPlanRecord{NodeUUID: r.node.UUID, Kind: provision.StepKindDeploy, Steps: plan, AgentSteps: agentSteps}
	if next := first + 1; next < len(plan) {
		rec.Index = &next
		r.steps.planIndexed = &next
	}
	if err := r.rec.record(RecordStateInput{To: provision.Deploying, Target: provision.Active, Event: planEvent(plan), StepPlan: rec}); err != nil {
		return err
	}
	return r.runDeployPlan(plan, first+1)
}

// deployFirst is plan with deploy.deploy moved to the front, the others in
// their order, except the out-of-band steps (an interface's, through the
// BMC) ordered before it: they need no agent and stay before it, as
// Ironic runs every step above deploy.deploy's priority before deploy.deploy
// boots the agent.
func deployFirst(plan []provision.Step) []provision.Step {
	out := make([]provision.Step, 0, len(plan))
	lead := 0
	for lead < len(plan) && plan[lead].OutOfBand && plan[lead].StepID != provision.StepDeploy {
		lead++
	}
	out = append(out, plan[:lead]...)
	for _, s := range plan[lead:] {
		if s.StepID == provision.StepDeploy {
			out = append(out, s)
		}
	}
	for _, s := range plan[lead:] {
		if s.StepID != provision.StepDeploy {
			out = append(out, s)
		}
	}
	return out
}

// deployIndex is the index of deploy.deploy in a plan deployFirst ordered.
func deployIndex(plan []provision.Step) int {
	for i, s := range plan {
		if s.StepID == provision.StepDeploy {
			return i
		}
	}
	return 0
}

// deployOutOfBandSteps are the node's interface steps a deploy offers
// (InterfaceSteps, deploy kind: firmware.update, the bios steps), when the request or its
// deploy templates name one (none otherwise: the plan of a deploy that
// names none stays the built-in one).
func (r *run) deployOutOfBandSteps(user []UserStep) []provision.Step {
	oob := InterfaceSteps(provision.StepKindDeploy, r.node.StepInterfaces())
	named := false
	for _, u := range user {
		for _, s := range oob {
			named = named || s.StepID == u.StepID
		}
	}
	if !named {
		return nil
	}
	return oob
}

// tearDownAgentPriority is deploy.tear_down_agent's built-in priority.
var tearDownAgentPriority = func() int {
	for _, b := range directDeploy {
		if b.StepID == provision.StepTearDownAgent {
			return b.Priority
		}
	}
	return 0
}()

// deployInterfaceStep runs an interface's deploy step (firmware.update,
// bios.apply_configuration, bios.factory_reset) through the BMC, its start
// and end in the node's history. One that reboots the node while the agent
// runs on it reboots into the agent and waits for its call-back.
func (r *run) deployInterfaceStep(s provision.Step) error {
	if err := r.rec.enter(provision.Deploying, provision.Active, fmt.Sprintf("Running deploy step %s (priority %d) out of band", s.Name(), s.Priority)); err != nil {
		return err
	}
	// The agent runs on the node between deploy.deploy's call-back and
	// deploy.tear_down_agent (priority 40 unless a request changed it).
	underAgent := r.agent.url != "" && s.Priority > tearDownAgentPriority
	var err error
	switch {
	case s.StepID == provision.StepFirmwareUpdate:
		err = r.firmwareStep(provision.StepKindDeploy, s, underAgent) // workflows/firmware.go
	case r.biosStepUnderAgent(s, underAgent):
		err = r.biosStepWithAgent(s) // workflows/bios.go
	default:
		err = r.step(s.Name(), func() error {
			return r.hw.call(ActRunInterfaceStep, InterfaceStepInput{Node: r.node, Kind: provision.StepKindDeploy, Step: s}, nil)
		})
	}
	if err != nil {
		return err
	}
	return r.rec.enter(provision.Deploying, provision.Active, fmt.Sprintf("Deploy step %s finished", s.Name()))
}

// earlyDeployPlan is the plan of a deploy before its agent runs: the user's
// steps checked against the built-in ones and the agent's as cached
// reports them (KnownAgentSteps), a step neither has left out (Ironic's
// skip_missing).
//
// table is the deploy interface's built-in plan (deployTableOf).
func earlyDeployPlan(table []builtinStep, user []UserStep, cached, oob []provision.Step) ([]provision.Step, error) {
	// Reserved steps (hold, wait, power_on, ...: workflows/hold.go) are
	// available to every plan that names them.
	available := append(append(deployAvailable(table, KnownAgentSteps(provision.StepKindDeploy, cached)), oob...), FlowSteps(user)...)
	return MergeSteps(PlanInput{Kind: provision.StepKindDeploy, Available: available, User: user,
		SkipMissing: true, AnyArgs: builtinDeployIDs(table)})
}

// CheckDeploySteps checks a deploy request's steps (the user's, or those of
// the matching deploy templates) as Ironic's API does before the deploy
// starts: against the built-in deploy steps and the agent's (cached: the
// ones the node's agent last reported, driver_internal_info
// agent_cached_deploy_steps), a step not known before the agent runs left
// for DeployNode to check once it does. A refusal is a *PlanError.
//
// The node's interface deploy steps (ifaces: StepInterfaces' map) are
// checked too, a firmware.update's components and checksums included
// (ParseFirmwareSettings), so that a malformed one is the request's 400.
// ifaces["deploy"], when given, picks the built-in plan (deployTableOf).
func CheckDeploySteps(user []UserStep, cached []provision.Step, ifaces map[string]hardware.Interface) error {
	_, err := earlyDeployPlan(deployTableOf(ifaces["deploy"]), user, cached, InterfaceSteps(provision.StepKindDeploy, ifaces))
	if err != nil {
		return err
	}
	for _, u := range user {
		if u.StepID != provision.StepFirmwareUpdate || (u.HasPriority && u.Priority == 0) || hardware.StepsOf(hardware.KindFirmware, ifaces["firmware"]) != hardware.StepsOutOfBand {
			continue
		}
		if _, err := ParseFirmwareSettings(u.Args); err != nil {
			return &PlanError{Problems: []string{errorText(err)}}
		}
	}
	return nil
}

// deployAvailable are the built-in deploy steps (table's) and the agent's:
// a step both have is the built-in one (ironflow runs it), with the agent's
// argsinfo where the built-in declares none. custom-agent's table has no
// write_image: the agent's own runs only for a user who names it (priority
// 0, as IPA offers it), as with Ironic's CustomAgentDeploy.
func deployAvailable(table []builtinStep, agent []provision.Step) []provision.Step {
	out := stepsOf(table)
	if !slices.ContainsFunc(table, func(b builtinStep) bool { return b.StepID == provision.StepWriteImage }) {
		agent = slices.Clone(agent)
		for i := range agent {
			if agent[i].StepID == provision.StepWriteImage {
				agent[i].Priority = 0
			}
		}
	}
	for i := range out {
		for _, a := range agent {
			if a.StepID == out[i].StepID && out[i].ArgsInfo == nil {
				out[i].ArgsInfo = a.ArgsInfo
			}
		}
	}
	return append(out, agent...)
}

// builtinDeployIDs are the built-in deploy steps: they declare no argsinfo
// and take any args (MergeSteps AnyArgs), as they did before the plan was
// checked; write_image has the agent's.
func builtinDeployIDs(table []builtinStep) []provision.StepID {
	out := make([]provision.StepID, len(table))
	for i, s := range table {
		out[i] = s.StepID
	}
	return out
}

// runDeployPlan runs plan from index from on, then records active.
func (r *run) runDeployPlan(plan []provision.Step, from int) error {
	if err := r.runDeploySteps(plan[from:], from); err != nil {
		return err
	}
	done := RecordStateInput{To: provision.Active, Event: "Deploy finished: the instance is booting from disk", ClearAgent: true}
	// The plan cleared with active, in one write.
	done.StepPlan = &StepPlanRecord{NodeUUID: r.node.UUID, Kind: provision.StepKindDeploy, Clear: true}
	return r.rec.record(done)
}

// runDeploySteps runs steps, the first of which is the plan's step at
// index base, recording each one's index before it runs.
func (r *run) runDeploySteps(steps []provision.Step, base int) error {
	for i, s := range steps {
		idx := base + i
		fn := deployHandler(r.deployTable(), s.StepID)
		indexed := stepIndexed[s.StepID]
		if s.StepID == provision.StepPrepareInstanceBoot && !hardware.DeployOf(r.node.DeployInterface).WritesImage() {
			// custom-agent's begins with SetBootDevice, which records
			// no step.
			indexed = false
		}
		if s.OutOfBand && deployInterfaceSteps[s.StepID] { // deployOutOfBandSteps
			fn, indexed = (*run).deployInterfaceStep, false
		}
		if h := r.deployFlowStep(s); h != nil { // hold, wait, power_on, ... (workflows/hold.go)
			fn, indexed = h, false
		}
		switch {
		case r.steps.planIndexed != nil && *r.steps.planIndexed == idx:
			// The plan's write before this step set its index.
			r.steps.planIndexed = nil
		case indexed:
			// The step's first activity writes it with the step.
			r.steps.pendingIndex = &idx
		default:
			if err := r.rec.local(ActRecordStepPlan, StepPlanRecord{NodeUUID: r.node.UUID, Kind: provision.StepKindDeploy, Index: &idx, OnlyIndex: true}, nil); err != nil {
				return err
			}
		}
		err := r.runStep(s, fn)
		r.steps.pendingIndex = nil // never the next step's
		if err != nil {
			return err
		}
	}
	return nil
}

// stepIndexed are the built-in deploy steps whose first activity records
// the step (RunningStep or AgentStepInput), and with it the plan's index. deploy.prepare_instance_boot begins
// with RunAgentStep (install_bootloader), deploy.tear_down_agent with
// AgentPowerOff, deploy.boot_instance with CleanBoot; deploy.deploy and
// deploy.write_image have theirs written with the plan.
var stepIndexed = map[provision.StepID]bool{provision.StepPrepareInstanceBoot: true, provision.StepTearDownAgent: true, provision.StepBootInstance: true}

// deployHandler runs a deploy step: its built-in handler, or, for a step
// of the agent's own (named by the user, a deploy template or its
// priority), agentDeployStep.
func deployHandler(table []builtinStep, id provision.StepID) func(*run, provision.Step) error {
	for _, b := range table {
		if b.StepID == id {
			return b.run
		}
	}
	return (*run).agentDeployStep
}

// agentDeployStep runs one of the agent's deploy steps, its start and end
// in the node's history.
func (r *run) agentDeployStep(s provision.Step) error {
	if err := r.rec.enter(provision.Deploying, provision.Active, fmt.Sprintf("Running deploy step %s (priority %d) on the agent", s.Name(), s.Priority)); err != nil {
		return err
	}
	if err := r.inBand(s); err != nil {
		return err
	}
	return r.rec.enter(provision.Deploying, provision.Active, fmt.Sprintf("Deploy step %s finished", s.Name()))
}

// planEvent is the plan as the node's history shows it.
func planEvent(plan []provision.Step) string {
	parts := make([]string, len(plan))
	for i, s := range plan {
		parts[i] = fmt.Sprintf("%s (%d)", s.Name(), s.Priority)
	}
	return "Deploy steps: " + strings.Join(parts, ", ")
}

// recordDeployPlan keeps the plan in driver_internal_info deploy_steps (and
// the agent's steps in agent_cached_deploy_steps), deploy_step_index null
// until a step starts.
func (r *run) recordDeployPlan(plan, agentSteps []provision.Step, index *int) error {
	return r.rec.local(ActRecordStepPlan, StepPlanRecord{NodeUUID: r.node.UUID, Kind: provision.StepKindDeploy, Steps: plan, AgentSteps: agentSteps, Index: index}, nil)
}

// failDeployPlan ends a deploy whose plan is refused: deploy failed with
// msg; the agent, if it booted, is powered off with the boot configuration
// removed (finish).
func (r *run) failDeployPlan(msg string) error { return r.failPlan(msg) }
