package activities

import (
	"context"
	"encoding/json"
	"strings"

	"github.com/ironflow/ironflow/bmc"
	"github.com/ironflow/ironflow/store"
	"github.com/ironflow/ironflow/workflows"
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

// secureBootOn is whether the node boots with secure boot on as ironflow
// last recorded it (the node's secure_boot field: states/secure_boot, or
// an instance's deploy, read back from the BMC). The agent ISO of such a
// node boots through the signed chain; a node whose instance only asks
// for secure boot still boots the agent with it off (the deploy turns it
// on after the agent is done, as Ironic does).
func (a *Activities) secureBootOn(ctx context.Context, nodeUUID string) (bool, error) {
	n, _, err := a.Store.GetNodeForWork(ctx, nodeUUID)
	if err != nil {
		return false, storeErr(err, "load node %s", nodeUUID)
	}
	return n.SecureBoot != nil && *n.SecureBoot, nil
}

// checkSignedLoader is whether the agent must check the instance's loader
// before its first boot (agent/secureboot.go): the instance asks for
// secure boot and the node's BMC can turn it on. A driver without secure
// boot (ipmi) leaves it as the firmware has it, and the deploy only warns
// (workflows/secureboot.go), so an unsigned loader is not refused there.
func (a *Activities) checkSignedLoader(ctx context.Context, n *store.Node) bool {
	if !secureBootRequested(n) {
		return false
	}
	d, err := a.driver(ctx, workflows.NodeInfo{UUID: n.UUID})
	if err != nil {
		return true // the deploy's own secure boot step reports the BMC
	}
	defer d.Close()
	_, ok := d.(bmc.SecureBooter)
	return ok
}
