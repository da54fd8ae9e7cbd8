package activities

import (
	"reflect"
	"testing"

	"github.com/ironflow/ironflow/store"
)

// TestAgentNodeCarriesTheRAIDFields: the node sent with the agent's step
// commands names its raid interface and target_raid_config, which the
// agent's software RAID steps are offered by and built from.
func TestAgentNodeCarriesTheRAIDFields(t *testing.T) {
	target := map[string]any{"logical_disks": []any{map[string]any{"controller": "software", "raid_level": "1", "size_gb": "MAX"}}}
	m := agentNode(&store.Node{UUID: "3e9a1c57-0b2d-4c8e-a6f4-91d2b7e5c038", RAIDInterface: "agent", TargetRAIDConfig: target})
	if m["raid_interface"] != "agent" || !reflect.DeepEqual(m["target_raid_config"], target) {
		t.Fatalf("agent node %v", m)
	}
}
