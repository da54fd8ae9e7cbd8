package store

import (
	"context"
	"time"
)

// Inventory is the hardware inventory the agent reported for a node during
// inspection, plus data from inspection hooks (Ironic's node_inventory).
type Inventory struct {
	NodeUUID   string         `json:"node_uuid" db:"node_uuid"`
	Inventory  map[string]any `json:"inventory" db:"inventory"`
	PluginData map[string]any `json:"plugin_data" db:"plugin_data"`
	CreatedAt  time.Time      `json:"created_at" db:"created_at"`
}

// PutInventory creates or replaces the node's inventory and sets
// inv.CreatedAt. A missing node is ErrNotFound.
func (s *Store) PutInventory(ctx context.Context, inv *Inventory) error {
	inv.NodeUUID, _ = canonicalUUID(inv.NodeUUID)
	if inv.Inventory == nil {
		inv.Inventory = map[string]any{}
	}
	if inv.PluginData == nil {
		inv.PluginData = map[string]any{}
	}
	err := s.pool.QueryRow(ctx, `INSERT INTO node_inventory (node_uuid, inventory, plugin_data, created_at)
		VALUES ($1, $2, $3, now())
		ON CONFLICT (node_uuid) DO UPDATE SET inventory = EXCLUDED.inventory, plugin_data = EXCLUDED.plugin_data,
			created_at = now()
		RETURNING created_at`, inv.NodeUUID, inv.Inventory, inv.PluginData).Scan(&inv.CreatedAt)
	return dbError(err, "put inventory of node %s", inv.NodeUUID)
}

// GetInventory returns the node's inventory or ErrNotFound.
func (s *Store) GetInventory(ctx context.Context, nodeUUID string) (*Inventory, error) {
	node, _ := canonicalUUID(nodeUUID)
	inv := &Inventory{}
	err := s.pool.QueryRow(ctx, "SELECT node_uuid, inventory, plugin_data, created_at FROM node_inventory WHERE node_uuid = $1", node).
		Scan(&inv.NodeUUID, &inv.Inventory, &inv.PluginData, &inv.CreatedAt)
	if err != nil {
		return nil, dbError(err, "get inventory of node %s", nodeUUID)
	}
	return inv, nil
}

// DeleteInventory removes the node's inventory; no error if none.
func (s *Store) DeleteInventory(ctx context.Context, nodeUUID string) error {
	node, _ := canonicalUUID(nodeUUID)
	_, err := s.pool.Exec(ctx, "DELETE FROM node_inventory WHERE node_uuid = $1", node)
	return dbError(err, "delete inventory of node %s", nodeUUID)
}
