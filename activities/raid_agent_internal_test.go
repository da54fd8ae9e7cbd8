package activities

import (
	"testing"

	"github.com/ironflow/ironflow/provision"
	"github.com/ironflow/ironflow/store"
)

// TestAgentRAIDResultOfEachKind: the raid_config is read from the
// <kind>_result of the agent's answer (deploy_result for
// raid.apply_configuration), and a software RAID root volume in
// raid_config is what makes install_bootloader run in BIOS mode too.
func TestAgentRAIDResultOfEachKind(t *testing.T) {
	cfg, err := agentRAIDResult(provision.StepKindDeploy, `{"deploy_result":{"logical_disks":[{"controller":"software","raid_level":"1","size_gb":"MAX","is_root_volume":true}]},"deploy_step":{}}`)
	if err != nil || len(cfg["logical_disks"].([]any)) != 1 {
		t.Fatalf("deploy_result: %v %v", cfg, err)
	}
	if _, err := agentRAIDResult(provision.StepKindClean, `{"deploy_result":{"logical_disks":[]}}`); err == nil {
		t.Fatal("a clean step's answer without clean_result accepted")
	}
	if !softwareRAIDRoot(&store.Node{RAIDConfig: cfg}) || softwareRAIDRoot(&store.Node{RAIDConfig: map[string]any{"logical_disks": []any{
		map[string]any{"controller": "RAID.Integrated.1-1", "is_root_volume": true}}}}) || softwareRAIDRoot(&store.Node{}) {
		t.Fatal("softwareRAIDRoot")
	}
}
