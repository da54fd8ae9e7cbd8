package activities

import (
	"encoding/json"
	"strings"

	"github.com/ironflow/ironflow/store"
)

// secureBootRequested is whether the instance asks for secure boot, as
// Ironic's boot_mode_utils.is_secure_boot_requested reads it: the
// capability secure_boot in instance_info.capabilities (a JSON object, or
// its text, as Nova writes the flavor's capabilities), else in
// properties.capabilities ("k:v,k:v"); "true" in any case turns it on.
func secureBootRequested(n *store.Node) bool {
	caps, _ := n.InstanceInfo["capabilities"].(map[string]any)
	if text, ok := n.InstanceInfo["capabilities"].(string); ok {
		_ = json.Unmarshal([]byte(text), &caps)
	}
	switch v := caps["secure_boot"].(type) {
	case string:
		return strings.EqualFold(v, "true")
	case bool:
		return v
	}
	if text, ok := n.Properties["capabilities"].(string); ok {
		for _, c := range strings.Split(text, ",") {
			if k, v, ok := strings.Cut(strings.TrimSpace(c), ":"); ok && k == "secure_boot" {
				return strings.EqualFold(strings.TrimSpace(v), "true")
			}
		}
	}
	return false
}
