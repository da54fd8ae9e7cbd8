package activities

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/ironflow/ironflow/bmc"
	"github.com/ironflow/ironflow/store"
	"github.com/ironflow/ironflow/workflows"
)

// pluginSourceOutOfBand is plugin_data's "source" for an inventory read
// from the BMC (out-of-band inspection), as Ironic's redfish inspect
// interface names it.
const pluginSourceOutOfBand = "redfish"

// RecordInspection sets inspection_started_at or inspection_finished_at.
// Local activity.
func (a *Activities) RecordInspection(ctx context.Context, in workflows.InspectionRecord) error {
	_, err := a.Store.UpdateNode(ctx, in.NodeUUID, func(n *store.Node) error {
		now := time.Now().UTC()
		if in.Started {
			n.InspectionStartedAt, n.InspectionFinishedAt = &now, nil
		}
		if in.Finished {
			n.InspectionFinishedAt = &now
		}
		return nil
	})
	return storeErr(err, "record inspection times of node %s", in.NodeUUID)
}

// CollectInventory asks the node's agent for its hardware inventory and
// stores it, for agents that heartbeat without posting it themselves.
func (a *Activities) CollectInventory(ctx context.Context, in workflows.AgentInput) error {
	defer keepAlive(ctx)()
	c, n, err := a.agentFor(ctx, in)
	if err != nil {
		return err
	}
	defer c.Close()
	inv, err := c.GetInventory(ctx)
	if err != nil {
		return agentErr(err, "get the inventory of node %s from its agent", n.UUID)
	}
	m, err := toMap(inv)
	if err != nil {
		return fmt.Errorf("inventory of node %s: %w", n.UUID, err)
	}
	return storeErr(a.Store.PutInventory(ctx, &store.Inventory{NodeUUID: n.UUID, Inventory: m, PluginData: map[string]any{}}),
		"store inventory of node %s", n.UUID)
}

func toMap(v any) (map[string]any, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	return m, json.Unmarshal(b, &m)
}

// InspectOutOfBand asks the node's BMC what the machine is (Redfish
// inspection) and stores it as the node's inventory; nothing boots.
func (a *Activities) InspectOutOfBand(ctx context.Context, node workflows.NodeInfo) error {
	d, err := a.driver(ctx, node)
	if err != nil {
		return err
	}
	defer d.Close()
	insp, ok := d.(bmc.Inspector)
	if !ok {
		return bmcErr(fmt.Errorf("%w: the %s driver cannot inspect out-of-band: use inspect_interface agent", bmc.ErrUnsupported, node.Driver), "inspect node %s", node.UUID)
	}
	inv, err := insp.Inspect(ctx)
	if err != nil {
		return bmcErr(err, "inspect node %s through its BMC", node.UUID)
	}
	m, err := toMap(inv)
	if err != nil {
		return fmt.Errorf("inventory of node %s: %w", node.UUID, err)
	}
	return storeErr(a.Store.PutInventory(ctx, &store.Inventory{NodeUUID: node.UUID, Inventory: m, PluginData: map[string]any{"source": pluginSourceOutOfBand}}),
		"store inventory of node %s", node.UUID)
}
