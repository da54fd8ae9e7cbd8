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

// PutInventory creates or replaces the node's inventory.
func (s *Store) PutInventory(ctx context.Context, inv *Inventory) error { panic("todo") }

// GetInventory returns the node's inventory or ErrNotFound.
func (s *Store) GetInventory(ctx context.Context, nodeUUID string) (*Inventory, error) {
	panic("todo")
}
