package activities

import (
	"context"

	"github.com/ironflow/ironflow/store"
	"github.com/ironflow/ironflow/workflows"
)

// FinalizeRescue gives the node's agent the hash of the rescue password
// (rescue.finalize_rescue, hashed): the agent sets the rescue user's
// password and stops serving its API. The hash is read from the store
// here, so that it never enters workflow history.
func (a *Activities) FinalizeRescue(ctx context.Context, in workflows.AgentInput) error {
	defer keepAlive(ctx)()
	c, n, err := a.agentFor(ctx, in)
	if err != nil {
		return err
	}
	defer c.Close()
	hash, _ := n.InstanceInfo[store.KeyHashedRescuePassword].(string)
	if hash == "" {
		return invalidConfig("node %s has no rescue password: rescue it again with a rescue_password", n.UUID)
	}
	return agentErr(c.FinalizeRescue(ctx, hash), "finalize rescue on node %s", n.UUID)
}

// ForgetRescuePassword removes the rescue password's hash from the node's
// instance_info, as Ironic's remove_node_rescue_password. Local activity;
// idempotent.
func (a *Activities) ForgetRescuePassword(ctx context.Context, nodeUUID string) error {
	_, err := a.Store.UpdateNode(ctx, nodeUUID, func(n *store.Node) error {
		delete(n.InstanceInfo, store.KeyHashedRescuePassword)
		delete(n.InstanceInfo, store.KeyRescuePassword)
		return nil
	})
	return storeErr(err, "remove the rescue password of node %s", nodeUUID)
}
