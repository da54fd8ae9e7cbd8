package store

import (
	"context"
	"time"
)

// Port is a network interface of a node, with Ironic's field names.
type Port struct {
	ID   int64  `json:"-" db:"id"`
	UUID string `json:"uuid" db:"uuid"`
	// Address is the MAC address, stored lowercase; unique across all ports.
	Address             string         `json:"address" db:"address"`
	NodeID              int64          `json:"-" db:"node_id"`
	NodeUUID            string         `json:"node_uuid" db:"node_uuid"`
	LocalLinkConnection map[string]any `json:"local_link_connection" db:"local_link_connection"`
	// PXEEnabled is stored as given; the API defaults it to true as Ironic does.
	PXEEnabled      bool           `json:"pxe_enabled" db:"pxe_enabled"`
	PhysicalNetwork *string        `json:"physical_network" db:"physical_network"`
	Extra           map[string]any `json:"extra" db:"extra"`
	InternalInfo    map[string]any `json:"internal_info" db:"internal_info"`
	IsSmartNIC      bool           `json:"is_smartnic" db:"is_smartnic"`
	Name            *string        `json:"name" db:"name"`
	PortgroupUUID   *string        `json:"portgroup_uuid" db:"portgroup_uuid"`
	CreatedAt       time.Time      `json:"created_at" db:"created_at"`
	UpdatedAt       *time.Time     `json:"updated_at" db:"updated_at"`
}

// PortFilter selects ports for ListPorts. Zero values match all.
type PortFilter struct {
	NodeUUID string
	Address  string
	Limit    int
	Marker   string // a port UUID
	SortKey  string // see PortSortKeys; default "id"
	SortDir  string // "asc" (default) or "desc"
}

// CreatePort inserts p for the node p.NodeUUID (ErrNotFound if it does not
// exist), filling UUID when empty, ID, NodeID and CreatedAt.
func (s *Store) CreatePort(ctx context.Context, p *Port) error { panic("todo") }

// GetPort finds a port by UUID.
func (s *Store) GetPort(ctx context.Context, uuid string) (*Port, error) { panic("todo") }

// ListPorts returns the ports that match f.
func (s *Store) ListPorts(ctx context.Context, f PortFilter) ([]*Port, error) { panic("todo") }

// UpdatePort reads the port FOR UPDATE, lets fn change it and writes it back
// in one transaction. Changing NodeUUID moves the port to that node.
func (s *Store) UpdatePort(ctx context.Context, uuid string, fn func(p *Port) error) (*Port, error) {
	panic("todo")
}

// DeletePort deletes a port.
func (s *Store) DeletePort(ctx context.Context, uuid string) error { panic("todo") }

// NodesByMACs returns the nodes owning any of the MAC addresses (the agent's
// lookup). Addresses are compared lowercase; invalid ones are ignored.
func (s *Store) NodesByMACs(ctx context.Context, macs []string) ([]*Node, error) { panic("todo") }
