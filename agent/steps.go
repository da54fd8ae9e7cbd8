package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"time"

	"github.com/ironflow/ironflow/agent/client"
	"github.com/ironflow/ironflow/provision"
)

// hardwareManager names the agent's single hardware manager in step lists
// and hardware_manager_version, as IPA keys them.
const (
	hardwareManager        = "GenericHardwareManager"
	hardwareManagerKey     = "generic_hardware_manager"
	hardwareManagerVersion = "1.2"
	// powerDelay lets the HTTP answer of standby.power_off reach the
	// control plane before the machine goes down.
	powerDelay = 500 * time.Millisecond
)

func managerVersion() map[string]any {
	return map[string]any{hardwareManagerKey: hardwareManagerVersion}
}

// deploySteps, cleanSteps and serviceSteps are the in-band steps the agent
// advertises: the step catalogue (provision.AgentSteps), which the API and
// the workflows check a user's steps against too.
func deploySteps() []client.Step { return clientSteps(provision.AgentSteps(provision.StepKindDeploy)) }
func cleanSteps() []client.Step  { return clientSteps(provision.AgentSteps(provision.StepKindClean)) }
func serviceSteps() []client.Step {
	return clientSteps(provision.AgentSteps(provision.StepKindService))
}

// clientSteps are steps as IPA's step lists show them: argsinfo as
// {description, required} objects.
func clientSteps(steps []provision.Step) []client.Step {
	out := make([]client.Step, 0, len(steps))
	for _, s := range steps {
		c := client.Step{Step: s.Step, Priority: s.Priority, Interface: s.Interface, Abortable: s.Abortable}
		for name, arg := range s.ArgsInfo {
			if c.ArgsInfo == nil {
				c.ArgsInfo = map[string]any{}
			}
			c.ArgsInfo[name] = map[string]any{"description": arg.Description, "required": arg.Required}
		}
		out = append(out, c)
	}
	return out
}

type stepParams struct {
	Step    client.Step      `json:"step"`
	Node    map[string]any   `json:"node"`
	Ports   []map[string]any `json:"ports"`
	Version map[string]any   `json:"deploy_version"`
	Clean   map[string]any   `json:"clean_version"`
}

// echoStep is the step as a command's result repeats it (IPA's
// deploy_step, clean_step), without what must not travel on into the
// conductor's records: an image's request authorization (a registry
// token) and a config drive (large, may hold secrets in user data).
func echoStep(s client.Step) client.Step {
	if s.Args == nil {
		return s
	}
	_, auth := s.Args["image_request_authorization"]
	_, cd := s.Args["configdrive"]
	if !auth && !cd {
		return s
	}
	s.Args = maps.Clone(s.Args)
	if auth {
		s.Args["image_request_authorization"] = "******"
	}
	if cd {
		s.Args["configdrive"] = "<...>"
	}
	return s
}

// commandSpecs is the command table: IPA's names, sync or async.
func (a *Agent) commandSpecs() map[string]commandSpec {
	return map[string]commandSpec{
		"deploy.get_deploy_steps": {run: func(ctx context.Context, _ *command, raw json.RawMessage) (any, error) {
			var p stepParams
			_ = decodeParams(raw, &p) // the node is optional: without it, no raid steps
			return map[string]any{"deploy_steps": map[string]any{hardwareManager: a.deployStepsFor(a.nodeOrLookup(p.Node))}, "hardware_manager_version": managerVersion()}, nil
		}},
		"deploy.execute_deploy_step": {async: true, kind: "deploy", run: a.executeDeployStep},
		"clean.get_clean_steps": {run: func(ctx context.Context, _ *command, raw json.RawMessage) (any, error) {
			var p stepParams
			_ = decodeParams(raw, &p) // the node is optional: without it, no raid steps
			return map[string]any{"clean_steps": map[string]any{hardwareManager: a.cleanStepsFor(a.nodeOrLookup(p.Node))}, "hardware_manager_version": managerVersion()}, nil
		}},
		"clean.execute_clean_step": {async: true, kind: "clean", run: a.executeCleanStep},
		"service.get_service_steps": {run: func(ctx context.Context, _ *command, _ json.RawMessage) (any, error) {
			return map[string]any{"service_steps": map[string]any{hardwareManager: serviceSteps()}, "hardware_manager_version": managerVersion()}, nil
		}},
		"service.execute_service_step": {async: true, kind: "service", run: a.executeServiceStep},
		"standby.prepare_image":        {async: true, kind: "deploy", run: a.prepareImage},
		"standby.sync": {run: func(ctx context.Context, _ *command, _ json.RawMessage) (any, error) {
			if err := a.cfg.Hardware.SyncAll(); err != nil {
				return nil, fmt.Errorf("sync: %w", err)
			}
			return "sync completed", nil
		}},
		"standby.power_off":        {async: true, run: a.powerCommand(PowerOff)},
		"standby.reboot":           {async: true, run: a.powerCommand(Reboot)},
		"system.lockdown":          {run: a.lockdown},
		"image.install_bootloader": {async: true, kind: "deploy", run: a.installBootloader},
		"poll.get_hardware_info": {run: func(ctx context.Context, _ *command, _ json.RawMessage) (any, error) {
			return a.cfg.Hardware.Inventory(ctx)
		}},
		"log.collect_system_logs": {run: a.collectSystemLogs},
		"rescue.finalize_rescue":  {run: a.finalizeRescue},
	}
}

func (a *Agent) powerCommand(action PowerAction) handlerFunc {
	return func(ctx context.Context, _ *command, _ json.RawMessage) (any, error) {
		if err := a.cfg.Hardware.SyncAll(); err != nil {
			a.log.Warn("sync before power action failed", "err", err)
		}
		// Answer first, then act: the caller is waiting for the result.
		go func() {
			time.Sleep(powerDelay)
			if err := a.cfg.Hardware.Power(context.Background(), action); err != nil {
				a.log.Error("power action failed", "action", action, "err", err)
			}
		}()
		return fmt.Sprintf("power %s requested", action), nil
	}
}

func (a *Agent) executeDeployStep(ctx context.Context, cmd *command, raw json.RawMessage) (any, error) {
	var p stepParams
	if err := decodeParams(raw, &p); err != nil {
		return nil, err
	}
	if p.Step.Step == "" {
		return nil, newRESTError("InvalidCommandParamsError", 400, "Invalid command parameters", "Malformed deploy_step, no \"step\" key")
	}
	a.cacheNode(p.Node)
	var result any
	var err error
	switch p.Step.Step {
	case "write_image":
		result, err = a.writeImage(ctx, cmd, p.Node, p.Step.Args)
	case "erase_devices_metadata":
		result, err = a.eraseDevicesMetadata(ctx, cmd)
	case "apply_configuration":
		if p.Step.Interface != "raid" || !agentRAID(a.nodeOrLookup(p.Node)) {
			return nil, newRESTError("HardwareManagerMethodNotFound", 500, "No HardwareManager found to handle method", "Could not find method: "+p.Step.Step)
		}
		result, err = a.raidApplyConfiguration(ctx, cmd, p.Step.Args, a.nodeOrLookup(p.Node))
	default:
		c, ok := a.customDeployStep(p.Step.Step)
		if !ok || (p.Step.Interface != "" && p.Step.Interface != "deploy") {
			return nil, newRESTError("HardwareManagerMethodNotFound", 500, "No HardwareManager found to handle method", "Could not find method: "+p.Step.Step)
		}
		a.log.Info("running custom deploy step", "step", p.Step.Step)
		args := p.Step.Args
		if args == nil {
			args = map[string]any{} // a step's args are an object, {} when none
		}
		result, err = c.Run(ctx, args, a.nodeOrLookup(p.Node))
	}
	if err != nil {
		return nil, err
	}
	return map[string]any{"deploy_result": result, "deploy_step": echoStep(p.Step)}, nil
}

func (a *Agent) executeCleanStep(ctx context.Context, cmd *command, raw json.RawMessage) (any, error) {
	var p stepParams
	_ = decodeParams(raw, &p) // executeStep reports bad params
	return a.executeStep(ctx, cmd, raw, "clean", a.cleanStepsFor(a.nodeOrLookup(p.Node)))
}

// cleanStepsFor are the clean steps offered to node: cleanSteps, and the
// software RAID steps when its raid_interface is the agent's (agent/raid.go).
func (a *Agent) cleanStepsFor(node map[string]any) []client.Step {
	steps := cleanSteps()
	if agentRAID(node) {
		steps = append(steps, raidSteps()...)
	}
	return steps
}

// deployStepsFor are the deploy steps offered to node: deploySteps, and
// raid.apply_configuration when its raid_interface is the agent's.
func (a *Agent) deployStepsFor(node map[string]any) []client.Step {
	steps := deploySteps()
	if agentRAID(node) {
		steps = append(steps, raidDeploySteps()...)
	}
	for _, c := range a.customDeploySteps() {
		own := false
		for _, s := range steps {
			own = own || s.Step == c.Step
		}
		if !own {
			steps = append(steps, c)
		}
	}
	return steps
}

func (a *Agent) executeServiceStep(ctx context.Context, cmd *command, raw json.RawMessage) (any, error) {
	return a.executeStep(ctx, cmd, raw, "service", serviceSteps())
}

// stepFunc runs one clean or service step with its args and the node the
// conductor sent.
type stepFunc func(ctx context.Context, cmd *command, args, node map[string]any) (any, error)

// stepFuncs are the implementations of the clean and service steps.
func (a *Agent) stepFuncs() map[string]stepFunc {
	return map[string]stepFunc{
		"erase_devices_metadata": func(ctx context.Context, cmd *command, _, _ map[string]any) (any, error) {
			return a.eraseDevicesMetadata(ctx, cmd)
		},
		"erase_devices":         a.eraseDevices,
		"erase_devices_express": a.eraseDevicesExpress,
		"erase_pstore":          a.erasePstore,
		"clean_uefi_nvram":      a.cleanUEFINVRAM,
		"burnin_cpu":            a.burninCPU,
		"burnin_memory":         a.burninMemory,
		"burnin_disk":           a.burninDisk,
		"burnin_network":        a.burninNetwork,
		"create_configuration":  a.raidCreateConfiguration,
		"delete_configuration":  a.raidDeleteConfiguration,
	}
}

// executeStep runs a step of the kind's table ("clean" or "service"): the
// result is {<kind>_result, <kind>_step} as IPA answers.
func (a *Agent) executeStep(ctx context.Context, cmd *command, raw json.RawMessage, kind string, offered []client.Step) (any, error) {
	var p stepParams
	if err := decodeParams(raw, &p); err != nil {
		return nil, err
	}
	if p.Step.Step == "" {
		return nil, newRESTError("InvalidCommandParamsError", 400, "Invalid command parameters", "Malformed "+kind+"_step, no \"step\" key")
	}
	var known bool
	for _, s := range offered {
		known = known || s.Step == p.Step.Step
	}
	run := a.stepFuncs()[p.Step.Step]
	if !known || run == nil {
		return nil, newRESTError("HardwareManagerMethodNotFound", 500, "No HardwareManager found to handle method", "Could not find method: "+p.Step.Step)
	}
	result, err := run(ctx, cmd, p.Step.Args, a.nodeOrLookup(p.Node))
	if err != nil {
		return nil, err
	}
	return map[string]any{kind + "_result": result, kind + "_step": echoStep(p.Step)}, nil
}

// prepareImage is IPA's legacy standby.prepare_image {image_info, configdrive}.
func (a *Agent) prepareImage(ctx context.Context, cmd *command, raw json.RawMessage) (any, error) {
	var p map[string]any
	if err := decodeParams(raw, &p); err != nil {
		return nil, err
	}
	return a.writeImage(ctx, cmd, nil, p)
}

var errNoRootDevice = errors.New("no suitable root device")
