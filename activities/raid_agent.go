package activities

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"go.temporal.io/sdk/temporal"

	"github.com/ironflow/ironflow/hardware"
	"github.com/ironflow/ironflow/provision"
	"github.com/ironflow/ironflow/store"
	"github.com/ironflow/ironflow/workflows"
)

// recordAgentRAID is what Ironic's AgentRAID does after the agent ran one
// of its RAID steps (the post-step hooks _create_configuration_final and
// _delete_configuration_final): create_configuration's (or
// apply_configuration's) result becomes the node's raid_config through
// raid.update_raid_info (recordRAIDConfig), delete_configuration empties
// it. Only for raid_interface agent: the out-of-band raid interfaces
// record their own (runRedfishRAID). Recording is idempotent, so a retried
// activity that follows the finished command again records it again.
func (a *Activities) recordAgentRAID(ctx context.Context, in workflows.AgentStepInput, res workflows.AgentStepResult) error {
	n, err := a.Store.GetNode(ctx, in.Agent.NodeUUID)
	if err != nil {
		return storeErr(err, "read node %s", in.Agent.NodeUUID)
	}
	if hardware.StepsOf(hardware.KindRAID, hardware.Interface(n.RAIDInterface)) != hardware.StepsInBand {
		return nil
	}
	switch in.Step.Step {
	case "delete_configuration":
		return a.recordRAIDConfig(ctx, n.UUID, in.Kind, map[string]any{}, "Software RAID configuration deleted")
	case "create_configuration", "apply_configuration":
	default:
		return nil
	}
	cfg, err := agentRAIDResult(in.Kind, res.Result)
	if err != nil {
		return temporal.NewNonRetryableApplicationError(fmt.Sprintf("Agent ramdisk didn't return a proper command result while %s %s: %v. It returned '%s' after command execution.",
			kindGerund(in.Kind), n.UUID, err, res.Result), workflows.ErrTypeAgentStepFailed, nil)
	}
	disks, _ := cfg["logical_disks"].([]any)
	var names []string
	for _, raw := range disks {
		ld, _ := raw.(map[string]any)
		members, _ := ld["physical_disks"].([]any)
		var ms []string
		for _, m := range members {
			ms = append(ms, fmt.Sprint(m))
		}
		names = append(names, fmt.Sprintf("RAID %v on %s", ld["raid_level"], strings.Join(ms, ", ")))
	}
	return a.recordRAIDConfig(ctx, n.UUID, in.Kind, cfg, "Software RAID configuration created: "+strings.Join(names, "; "))
}

// agentRAIDResult is the raid_config in the agent's answer to
// execute_<kind>_step: {"<kind>_result": {"logical_disks": [...]}, ...}.
func agentRAIDResult(kind provision.StepKind, result string) (map[string]any, error) {
	var out map[string]json.RawMessage
	if err := json.Unmarshal([]byte(result), &out); err != nil {
		return nil, fmt.Errorf("not a JSON object: %w", err)
	}
	var cfg map[string]any
	if raw, ok := out[string(kind)+"_result"]; !ok || json.Unmarshal(raw, &cfg) != nil || cfg == nil {
		return nil, fmt.Errorf("no %s_result object", kind)
	}
	if _, ok := cfg["logical_disks"].([]any); !ok {
		return nil, fmt.Errorf("the %s_result has no logical_disks", kind)
	}
	return cfg, nil
}

func kindGerund(kind provision.StepKind) string {
	switch kind {
	case provision.StepKindDeploy:
		return "deploying"
	case provision.StepKindService:
		return "servicing"
	}
	return "cleaning"
}

// softwareRAIDRoot reports whether the node's raid_config has a software
// RAID root volume: the agent deploys onto its md array and installs the
// boot loader on every holder (agent/raid_deploy.go).
func softwareRAIDRoot(n *store.Node) bool {
	if root := rootLogicalDisk(n.RAIDConfig); root != nil {
		return root["controller"] == "software"
	}
	return false
}
