package activities

import (
	"context"
	"fmt"

	"go.temporal.io/sdk/temporal"

	"github.com/ironflow/ironflow/hardware"
	"github.com/ironflow/ironflow/provision"
	"github.com/ironflow/ironflow/workflows"
)

// argsInfo is the agent's argsinfo as the step engine reads it.
func argsInfo(in map[string]any) map[string]provision.ArgInfo {
	if len(in) == 0 {
		return nil
	}
	out := make(map[string]provision.ArgInfo, len(in))
	for name, v := range in {
		var info provision.ArgInfo
		if m, ok := v.(map[string]any); ok {
			info.Description, _ = m["description"].(string)
			info.Required, _ = m["required"].(bool)
		}
		out[name] = info
	}
	return out
}

// RunInterfaceStep runs an interface's out-of-band step. The fake
// interfaces' steps do nothing but say so in the node's history, as
// Ironic's fake interfaces do; the redfish bios interface's run in
// runBIOSStep (bios.go).
func (a *Activities) RunInterfaceStep(ctx context.Context, in workflows.InterfaceStepInput) (err error) {
	ctx, endStep := startStepSpan(ctx, in.Kind, in.Step)
	defer func() { endStep(err) }()
	if err := a.showStep(ctx, in.Node.UUID, &provision.RunningStep{Kind: in.Kind, Step: in.Step}); err != nil {
		return err
	}
	impl := in.Node.StepInterfaces()[in.Step.Interface]
	switch kind := hardware.Kind(in.Step.Interface); hardware.StepsOf(kind, impl) {
	case hardware.StepsOutOfBand:
		switch kind {
		case hardware.KindBIOS:
			return a.runBIOSStep(ctx, in)
		case hardware.KindRAID:
			return a.runRedfishRAID(ctx, in) // activities/raid.go
		}
	case hardware.StepsRecorded:
		if kind == hardware.KindBIOS && in.Step.Step == "apply_configuration" {
			return a.fakeApplyBIOS(ctx, in) // activities/bios.go
		}
		return a.history(ctx, in.Node.UUID, "", string(in.Kind), fmt.Sprintf("Step %s ran (fake %s interface: nothing to do)", in.Step.Name(), in.Step.Interface))
	}
	return temporal.NewNonRetryableApplicationError(
		fmt.Sprintf("%s interface %q of node %s has no step %s", in.Step.Interface, impl, in.Node.UUID, in.Step.Step),
		workflows.ErrTypeBMCUnsupported, nil)
}

// stepPlanView is a plan's step as driver_internal_info keeps it (Ironic's
// step dict).
func stepPlanView(s provision.Step) map[string]any {
	v := s.View()
	v["abortable"] = s.Abortable
	v["requires_ramdisk"] = !s.OutOfBand
	if len(s.ArgsInfo) > 0 {
		v["argsinfo"] = s.ArgsInfo
	}
	return v
}

// RecordStepPlan keeps a plan's progress in driver_internal_info under
// Ironic's keys: <kind>_steps and <kind>_step_index while it runs, and
// agent_cached_<kind>_steps, the agent's steps, for the API's check of the
// next request. Local activity.
func (a *Activities) RecordStepPlan(ctx context.Context, in workflows.StepPlanRecord) error {
	kv, drop := stepPlanChanges(in)
	if in.Clear {
		return storeErr(a.Store.DeleteDriverInternalInfoKeys(ctx, in.NodeUUID, drop...), "clear the %s steps of node %s", in.Kind, in.NodeUUID)
	}
	return storeErr(a.Store.MergeDropDriverInternalInfo(ctx, in.NodeUUID, kv, drop...), "record the %s steps of node %s", in.Kind, in.NodeUUID)
}

// stepIndexKey is the driver_internal_info key of a plan's running index.
func stepIndexKey(kind provision.StepKind) string { return string(kind) + "_step_index" }

// stepPlanChanges are the driver_internal_info keys a step plan record sets
// and removes: RecordStepPlan writes them alone, RecordState with the
// state it records (RecordStateInput.StepPlan).
func stepPlanChanges(in workflows.StepPlanRecord) (kv map[string]any, drop []string) {
	steps, index := string(in.Kind)+"_steps", stepIndexKey(in.Kind)
	progress := workflows.StepProgressKey(in.Kind)
	if in.Clear {
		return nil, []string{steps, index, progress}
	}
	kv = map[string]any{index: nil}
	if in.Index != nil {
		kv[index] = *in.Index
	}
	if !in.OnlyIndex {
		list := make([]map[string]any, 0, len(in.Steps))
		for _, s := range in.Steps {
			list = append(list, stepPlanView(s))
		}
		kv[steps] = list
	}
	if in.AgentSteps != nil {
		list := make([]map[string]any, 0, len(in.AgentSteps))
		for _, s := range in.AgentSteps {
			list = append(list, stepPlanView(s))
		}
		kv["agent_cached_"+string(in.Kind)+"_steps"] = list
	}
	if in.Index != nil {
		// A new index is a new step: the previous one's progress goes.
		drop = []string{progress}
	}
	return kv, drop
}
