package activities

import (
	"testing"

	"github.com/ironflow/ironflow/store"
)

// TestBootModeFromNovaCapabilities: the boot mode Nova asks for in
// instance_info/capabilities (a JSON text, from the flavor's
// capabilities:boot_mode) is the deploy's, below the node's own boot_mode
// and instance_info/deploy_boot_mode.
func TestBootModeFromNovaCapabilities(t *testing.T) {
	uefi := "uefi"
	cases := []struct {
		name string
		n    store.Node
		want string
	}{
		{"default", store.Node{}, "bios"},
		{"nova text", store.Node{InstanceInfo: map[string]any{"capabilities": `{"boot_mode": "uefi"}`}}, "uefi"},
		{"object", store.Node{InstanceInfo: map[string]any{"capabilities": map[string]any{"boot_mode": "uefi"}}}, "uefi"},
		{"deploy_boot_mode first", store.Node{InstanceInfo: map[string]any{"deploy_boot_mode": "bios", "capabilities": `{"boot_mode": "uefi"}`}}, "bios"},
		{"node field first", store.Node{BootMode: &uefi, InstanceInfo: map[string]any{"capabilities": `{"boot_mode": "bios"}`}}, "uefi"},
		{"above properties", store.Node{InstanceInfo: map[string]any{"capabilities": `{"boot_mode": "bios"}`}, Properties: map[string]any{"capabilities": "boot_mode:uefi"}}, "bios"},
		{"unparsable", store.Node{InstanceInfo: map[string]any{"capabilities": "{"}, Properties: map[string]any{"capabilities": "boot_mode:uefi"}}, "uefi"},
	}
	for _, tc := range cases {
		if got := bootMode(&tc.n); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.name, got, tc.want)
		}
	}
}
