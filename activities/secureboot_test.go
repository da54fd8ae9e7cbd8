package activities

import (
	"testing"

	"github.com/ironflow/ironflow/store"
)

// TestSecureBootRequestedReadsTheCapability: instance_info.capabilities
// (object or its JSON text) first, else properties.capabilities.
func TestSecureBootRequestedReadsTheCapability(t *testing.T) {
	for _, c := range []struct {
		name string
		ii   map[string]any
		prop map[string]any
		want bool
	}{
		{"nothing", nil, nil, false},
		{"instance object", map[string]any{"capabilities": map[string]any{"secure_boot": "true"}}, nil, true},
		{"instance text", map[string]any{"capabilities": `{"secure_boot": "True"}`}, nil, true},
		{"instance false wins", map[string]any{"capabilities": map[string]any{"secure_boot": "false"}},
			map[string]any{"capabilities": "secure_boot:true"}, false},
		{"properties", nil, map[string]any{"capabilities": "boot_mode:uefi, secure_boot:true"}, true},
		{"properties false", nil, map[string]any{"capabilities": "secure_boot:false"}, false},
	} {
		n := &store.Node{InstanceInfo: c.ii, Properties: c.prop}
		if got := secureBootRequested(n); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}
