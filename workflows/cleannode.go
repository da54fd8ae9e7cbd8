package workflows

import (
	"encoding/json"
	"errors"
	"fmt"

	"go.temporal.io/sdk/workflow"

	"github.com/ironflow/ironflow/hardware"
	"github.com/ironflow/ironflow/provision"
)

// WorkflowCleanNode is the name CleanNode is registered and started under.
const WorkflowCleanNode = "CleanNode"

// CleanNode is Ironic's manual cleaning: manageable → cleaning → clean
// wait → manageable, running the request's clean_steps in the user's order
// (Ironic's node cleaning documentation). The agent boots unless
// disable_ramdisk, and the plan is checked against the steps the node's
// interfaces declare and the agent reports before any step runs; a plan
// the node cannot run ends in clean failed with Ironic's "Cannot clean
// node" message. driver_internal_info keeps clean_steps and
// clean_step_index while it runs, clean_step shows the running step. Abort
// (allowed in clean wait) stops an abortable step at once; a step that is
// not abortable finishes first, as Ironic's abort_after.
func CleanNode(ctx workflow.Context, req provision.Request) error {
	return runUserSteps(ctx, req, userStepsOperation{
		op: provision.OpClean, kind: provision.StepKindClean, what: "Manual cleaning", noun: "clean", gerund: "cleaning",
		active: provision.Cleaning, fail: provision.CleanFailed, goal: provision.Manageable,
		steps: req.CleanSteps, disableRamdisk: req.DisableRamdisk, cacheBIOS: (*run).cacheBIOSManual, run: (*run).manualClean,
	})
}

// userStepsOperation is what tells manual cleaning and servicing apart: the
// two operations that run a user's list of steps (runUserSteps).
type userStepsOperation struct {
	op   provision.Operation
	kind provision.StepKind
	// what, noun and gerund word its events and messages ("Manual
	// cleaning", "clean", "cleaning").
	what, noun, gerund string
	active, fail, goal provision.State
	// steps and disableRamdisk are the request's: its clean_steps or
	// service_steps, and whether the agent stays down.
	steps          json.RawMessage
	disableRamdisk bool
	cacheBIOS      func(*run) // workflows/bios.go
	run            func(r *run, user []UserStep, perr error, disableRamdisk bool) error
	// abortInFailure, when set, ends an operator's abort of a failed
	// step (servicing: back to active).
	abortInFailure func(r *run, disableRamdisk bool) error
}

// runUserSteps runs a manual cleaning or a servicing: the state recorded,
// the BIOS settings cached, the user's steps run, the plan cleared and the
// node's goal state recorded; a failure clears the plan and ends in the
// failure state (finish).
func runUserSteps(ctx workflow.Context, req provision.Request, m userStepsOperation) error {
	r, err := newRun(ctx, req, m.op)
	if err != nil {
		return err
	}
	r.rec.active, r.rec.fail, r.rec.target = m.active, m.fail, req.Transition.Target
	r.operator.holdAbort = func(s provision.Step) bool { return !s.Abortable }
	user, perr := ParseUserSteps(m.steps)
	event := fmt.Sprintf("%s: %d step(s)", m.what, len(user))
	if m.disableRamdisk {
		event += ", without the agent (disable_ramdisk)"
	}
	if err := r.rec.enter(m.active, m.goal, event); err != nil {
		return ended(err)
	}
	m.cacheBIOS(r)
	err = m.run(r, user, perr, m.disableRamdisk)
	if err != nil {
		if cerr := r.rec.local(ActRecordStepPlan, StepPlanRecord{NodeUUID: r.node.UUID, Kind: m.kind, Clear: true}, nil); cerr != nil {
			workflow.GetLogger(r.ctx).Warn(fmt.Sprintf("clear the %s steps of a failed %s", m.noun, m.gerund), "node", r.node.UUID, "error", errorText(cerr))
		}
		if m.abortInFailure != nil && errors.Is(err, errAborted) && r.rec.status.ProvisionState == m.fail && r.operator.abortMessage == "" {
			return m.abortInFailure(r, m.disableRamdisk)
		}
		if errors.Is(err, errAborted) && r.operator.abortMessage == "" {
			r.operator.abortMessage = fmt.Sprintf("By request, the %s operation was aborted", m.noun)
		}
		return r.finish(err)
	}
	if err := r.rec.local(ActRecordStepPlan, StepPlanRecord{NodeUUID: r.node.UUID, Kind: m.kind, Clear: true}, nil); err != nil {
		return err
	}
	return r.rec.record(RecordStateInput{To: m.goal, Event: m.what + " finished", ClearAgent: true})
}

func (r *run) manualClean(user []UserStep, perr error, disableRamdisk bool) error {
	if err := r.runManualPlan(manualCleaning, user, perr, disableRamdisk); err != nil {
		return err
	}
	if disableRamdisk {
		return nil
	}
	if err := r.step("tear down agent", func() error {
		return r.powerOffAgent(nil)
	}); err != nil {
		return err
	}
	return r.step("clean up boot", func() error {
		return r.hw.cleanBoot(BootAgent, nil)
	})
}

// manualOp is what a plan of the user's steps varies by: manual cleaning
// (CleanNode) or servicing (ServiceNode).
type manualOp struct {
	kind         provision.StepKind
	verb         string          // Ironic's messages: "Cannot <verb> node ..."
	active, wait provision.State // cleaning and clean wait, or servicing and service wait
	target       provision.State // where the operation returns: manageable or active
	// prepare and getSteps name the steps that boot the agent and ask it
	// for its steps (they name the operation's steps in its history).
	prepare, getSteps string
	// runOne runs a step that is not a reserved one; underAgent: the
	// agent runs on the node (no disable_ramdisk).
	runOne func(r *run, s provision.Step, underAgent bool) error
	// holds are the states a hold step moves between (workflows/hold.go).
	holds holdStates
}

var (
	manualCleaning = manualOp{kind: provision.StepKindClean, verb: "clean", active: provision.Cleaning, wait: provision.CleanWait, target: provision.Manageable,
		prepare: "prepare cleaning", getSteps: "get clean steps", runOne: (*run).manualStep, holds: cleanHolds}
	servicing = manualOp{kind: provision.StepKindService, verb: "service", active: provision.Servicing, wait: provision.ServiceWait, target: provision.Active,
		prepare: "prepare service", getSteps: "get service steps", runOne: (*run).serviceStep, holds: serviceHolds}
)

// runManualPlan boots the agent (unless disable_ramdisk), merges the
// user's steps with the interfaces' and the agent's, refusing a plan the
// node cannot run, and runs it step by step, recording the plan and the
// running step's index as Ironic does.
func (r *run) runManualPlan(m manualOp, user []UserStep, perr error, disableRamdisk bool) error {
	oob := InterfaceSteps(m.kind, r.node.StepInterfaces())
	cannot := func(err error) error {
		return r.failPlan(fmt.Sprintf("Cannot %s node %s: %s", m.verb, r.node.UUID, errorText(err)))
	}
	if perr != nil {
		return cannot(perr)
	}
	var agentSteps []provision.Step
	if !disableRamdisk {
		if err := r.step(m.prepare, r.bootAgent); err != nil {
			return err
		}
		if err := r.step("wait call-back", func() error {
			_, err := r.waitCallback(m.wait, func(hb Heartbeat) bool { return hb.CallbackURL != "" })
			if err == nil {
				err = r.rec.enter(m.active, m.target, fmt.Sprintf("Agent called back from %s", r.agent.url))
			}
			return err
		}); err != nil {
			return err
		}
		if err := r.step(m.getSteps, func() error {
			return r.agent.call(ActGetAgentSteps, AgentStepsInput{Agent: r.agent.input(nil), Kind: m.kind}, &agentSteps)
		}); err != nil {
			return err
		}
	} else {
		// Only to name the agent's steps as needing the ramdisk in the
		// refusal; the API refused such a plan already.
		agentSteps = KnownAgentSteps(m.kind, nil)
	}
	// Reserved steps (hold, wait, power_on, ...) behind changeFlowSteps.
	flow := r.flowStepsOf(user)
	available := append(append(oob, agentSteps...), flow...)
	plan, err := MergeSteps(PlanInput{Kind: m.kind, Available: available, User: user,
		Manual: true, DisableRamdisk: disableRamdisk})
	if err != nil {
		return cannot(err)
	}
	rec := StepPlanRecord{NodeUUID: r.node.UUID, Kind: m.kind, Steps: plan}
	if !disableRamdisk {
		rec.AgentSteps = agentSteps
	}
	if err := r.rec.local(ActRecordStepPlan, rec, nil); err != nil {
		return err
	}
	for i, s := range plan {
		idx := i
		if err := r.rec.local(ActRecordStepPlan, StepPlanRecord{NodeUUID: r.node.UUID, Kind: m.kind, Index: &idx, OnlyIndex: true}, nil); err != nil {
			return err
		}
		runOne := func(r *run, s provision.Step) error { return m.runOne(r, s, !disableRamdisk) }
		if len(flow) > 0 && IsFlowStep(s.StepID) {
			runOne = func(r *run, s provision.Step) error { return r.flowStep(m.holds, s) }
		}
		if err := r.runStep(s, runOne); err != nil {
			return err
		}
		if r.operator.abortAfter {
			r.operator.abortMessage = fmt.Sprintf("By request, the %s operation was aborted after the completion of step \"%s\"", m.verb, s.Name())
			return errAborted
		}
	}
	return nil
}

// manualStep runs one step of a manual plan: an interface's as an
// activity, the agent's in clean wait (where Ironic allows abort).
func (r *run) manualStep(s provision.Step, underAgent bool) error {
	if s.OutOfBand {
		if s.StepID == provision.StepFirmwareUpdate && hardware.StepsOf(hardware.KindFirmware, r.node.FirmwareInterface) != hardware.StepsRecorded {
			// (The fake interface's update does nothing but say so: an
			// interface step below, as Ironic's FakeFirmware.)
			return r.firmwareStep(r.rec.stepKind(), s, underAgent) // workflows/firmware.go
		}
		if r.biosStepUnderAgent(s, underAgent) {
			return r.biosStepWithAgent(s) // workflows/bios.go
		}
		return r.step(s.Name(), func() error {
			return r.hw.call(ActRunInterfaceStep, InterfaceStepInput{Node: r.node, Kind: r.rec.stepKind(), Step: s}, nil)
		})
	}
	if err := r.rec.enter(provision.CleanWait, r.rec.target, fmt.Sprintf("Running step %s on the agent", s.Name())); err != nil {
		return err
	}
	err := r.inBand(s)
	if errors.Is(err, errAborted) && r.operator.abortMessage == "" {
		r.operator.abortMessage = fmt.Sprintf("By request, the clean operation was aborted on step \"%s\"", s.Name())
	}
	if err != nil {
		return err
	}
	return r.rec.enter(provision.Cleaning, r.rec.target, stepFinished(s, r.rec.stepKind(), r.agent.lastResult))
}

// failPlan ends an operation whose plan is refused: the failure state with
// msg, nothing to retry.
func (r *run) failPlan(msg string) error {
	r.operator.abortMessage = msg
	if err := r.rec.record(RecordStateInput{To: r.rec.fail, LastError: msg, Event: msg, Severity: "ERROR", EventType: string(r.rec.status.Operation)}); err != nil {
		return err
	}
	return errAborted
}
