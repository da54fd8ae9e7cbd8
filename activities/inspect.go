package activities

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/ironflow/ironflow/bmc"
	"github.com/ironflow/ironflow/store"
	"github.com/ironflow/ironflow/workflows"
)

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

// ApplyInventory updates the node from its stored inventory as Ironic's
// inspection does: properties cpus, memory_mb, local_gb (the largest disk
// less one GiB, as Ironic's root device default) and cpu_arch, and a port for
// every discovered MAC that has none. Local activity.
func (a *Activities) ApplyInventory(ctx context.Context, nodeUUID string) error {
	inv, err := a.Store.GetInventory(ctx, nodeUUID)
	if err != nil {
		return storeErr(err, "read the inventory of node %s", nodeUUID)
	}
	props := inventoryProperties(inv.Inventory)
	if _, err := a.Store.UpdateNode(ctx, nodeUUID, func(n *store.Node) error {
		for k, v := range props {
			n.Properties[k] = v
		}
		return nil
	}); err != nil {
		return storeErr(err, "update properties of node %s", nodeUUID)
	}
	created := 0
	for _, mac := range inventoryMACs(inv.Inventory) {
		err := a.Store.CreatePort(ctx, &store.Port{Address: mac, NodeUUID: nodeUUID, PXEEnabled: true,
			LocalLinkConnection: map[string]any{}, Extra: map[string]any{}})
		switch {
		case err == nil:
			created++
		case errors.Is(err, store.ErrDuplicateMAC):
			// The port exists (on this node or another): Ironic leaves it.
		default:
			return storeErr(err, "create port %s for node %s", mac, nodeUUID)
		}
	}
	return a.history(ctx, nodeUUID, store.SeverityInfo, "inspection",
		fmt.Sprintf("Inspection found %v CPUs, %v MiB of memory, %v GiB of disk; %d new ports", props["cpus"], props["memory_mb"], props["local_gb"], created))
}

// inventoryProperties reads IPA's inventory shape.
func inventoryProperties(inv map[string]any) map[string]any {
	props := map[string]any{}
	if cpu, ok := inv["cpu"].(map[string]any); ok {
		if c, ok := number(cpu["count"]); ok && c > 0 {
			props["cpus"] = int(c)
		}
		if arch, ok := cpu["architecture"].(string); ok && arch != "" {
			props["cpu_arch"] = arch
		}
	}
	if mem, ok := inv["memory"].(map[string]any); ok {
		if mb, ok := number(mem["physical_mb"]); ok && mb > 0 {
			props["memory_mb"] = int(mb)
		} else if total, ok := number(mem["total"]); ok && total > 0 {
			props["memory_mb"] = int(total / (1 << 20))
		}
	}
	var largest float64
	if disks, ok := inv["disks"].([]any); ok {
		for _, d := range disks {
			if dm, ok := d.(map[string]any); ok {
				if size, ok := number(dm["size"]); ok && size > largest {
					largest = size
				}
			}
		}
	}
	if largest > 0 {
		props["local_gb"] = int(math.Max(0, math.Floor(largest/(1<<30))-1))
	}
	return props
}

func inventoryMACs(inv map[string]any) []string {
	var out []string
	ifaces, _ := inv["interfaces"].([]any)
	for _, i := range ifaces {
		im, _ := i.(map[string]any)
		mac, _ := im["mac_address"].(string)
		mac = strings.ToLower(strings.TrimSpace(mac))
		if mac == "" || mac == "00:00:00:00:00:00" {
			continue
		}
		out = append(out, mac)
	}
	return out
}

func number(v any) (float64, bool) {
	switch n := v.(type) {
	case float64:
		return n, true
	case int:
		return float64(n), true
	case int64:
		return float64(n), true
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	}
	return 0, false
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
	return storeErr(a.Store.PutInventory(ctx, &store.Inventory{NodeUUID: node.UUID, Inventory: m, PluginData: map[string]any{"source": "redfish"}}),
		"store inventory of node %s", node.UUID)
}
