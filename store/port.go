package store

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
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
	// Description (API 1.97), Vendor (1.100) and Category (1.101) are
	// stored as given; AvailableForDynamicPortgroup (1.111) defaults to true.
	Description                  *string    `json:"description" db:"description"`
	Vendor                       *string    `json:"vendor" db:"vendor"`
	Category                     *string    `json:"category" db:"category"`
	AvailableForDynamicPortgroup bool       `json:"available_for_dynamic_portgroup" db:"available_for_dynamic_portgroup"`
	CreatedAt                    time.Time  `json:"created_at" db:"created_at"`
	UpdatedAt                    *time.Time `json:"updated_at" db:"updated_at"`
}

// PortFilter selects ports for ListPorts. Zero values match all.
type PortFilter struct {
	NodeUUID string
	// Project selects the ports of nodes it owns or leases.
	Project string
	Address string
	// PortgroupUUID selects the ports of a port group.
	PortgroupUUID string
	// ConductorGroups selects the ports of nodes in these conductor groups
	// (compared lowercase, as nodes store them).
	ConductorGroups []string
	// DescriptionContains selects the ports whose description contains it.
	DescriptionContains string
	Limit               int
	Marker              string // a port UUID
	SortKey             string // see PortSortKeys; default "id"
	SortDir             string // "asc" (default) or "desc"
}

// portColumns is the SELECT list matching scanPort; the node's UUID comes
// from the join, ports reference nodes by their internal id.
const portColumns = `p.id, p.uuid, p.address, p.node_id, n.uuid, p.local_link_connection, p.pxe_enabled,
	p.physical_network, p.extra, p.internal_info, p.is_smartnic, p.name, p.portgroup_uuid,
	p.description, p.vendor, p.category, p.available_for_dynamic_portgroup, p.created_at, p.updated_at`

const portFrom = " FROM ports p JOIN nodes n ON n.id = p.node_id"

var portTable = table{name: "ports", alias: "p", join: " JOIN nodes n ON n.id = p.node_id",
	what: "port", whats: "ports", sortKeys: PortSortKeys}

func scanPort(row pgx.CollectableRow) (*Port, error) {
	p := &Port{}
	err := row.Scan(&p.ID, &p.UUID, &p.Address, &p.NodeID, &p.NodeUUID, &p.LocalLinkConnection, &p.PXEEnabled,
		&p.PhysicalNetwork, &p.Extra, &p.InternalInfo, &p.IsSmartNIC, &p.Name, &p.PortgroupUUID,
		&p.Description, &p.Vendor, &p.Category, &p.AvailableForDynamicPortgroup, &p.CreatedAt, &p.UpdatedAt)
	return p, err
}

// NormalizeMAC returns the lowercase colon-separated form of a MAC address.
func NormalizeMAC(mac string) (string, error) {
	hw, err := net.ParseMAC(strings.TrimSpace(mac))
	if err != nil {
		return "", fmt.Errorf("MAC address %q: %w", mac, ErrInvalidInput)
	}
	return hw.String(), nil
}

// preparePort validates and normalises the fields CreatePort and UpdatePort
// write.
func preparePort(p *Port) error {
	mac, err := NormalizeMAC(p.Address)
	if err != nil {
		return err
	}
	p.Address = mac
	p.LocalLinkConnection, p.Extra, p.InternalInfo = nonNil(p.LocalLinkConnection), nonNil(p.Extra), nonNil(p.InternalInfo)
	p.NodeUUID, _ = canonicalUUID(p.NodeUUID)
	return nil
}

// CreatePort inserts p for the node p.NodeUUID (ErrNotFound if it does not
// exist), filling UUID when empty, ID, NodeID and CreatedAt. The address is
// stored lowercase; a second port with it is ErrDuplicateMAC.
func (s *Store) CreatePort(ctx context.Context, p *Port) error {
	if err := newUUID(&p.UUID); err != nil {
		return fmt.Errorf("create port: %w", err)
	}
	if err := preparePort(p); err != nil {
		return fmt.Errorf("create port %s: %w", p.UUID, err)
	}
	if err := checkPortgroup(ctx, s.pool, p); err != nil {
		return fmt.Errorf("create port %s: %w", p.UUID, err)
	}
	err := s.pool.QueryRow(ctx, `INSERT INTO ports (uuid, address, node_id, local_link_connection, pxe_enabled,
			physical_network, extra, internal_info, is_smartnic, name, portgroup_uuid,
			description, vendor, category, available_for_dynamic_portgroup)
		SELECT $1, $2, n.id, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15 FROM nodes n WHERE n.uuid = $3
		RETURNING id, node_id, created_at`,
		p.UUID, p.Address, p.NodeUUID, p.LocalLinkConnection, p.PXEEnabled,
		p.PhysicalNetwork, p.Extra, p.InternalInfo, p.IsSmartNIC, p.Name, p.PortgroupUUID,
		p.Description, p.Vendor, p.Category, p.AvailableForDynamicPortgroup,
	).Scan(&p.ID, &p.NodeID, &p.CreatedAt)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("create port %s: node %s: %w", p.UUID, p.NodeUUID, ErrNotFound)
	}
	return dbError(err, "create port %s (%s)", p.UUID, p.Address)
}

// GetPort finds a port by UUID.
func (s *Store) GetPort(ctx context.Context, uuid string) (*Port, error) {
	return getRow(ctx, s, portTable, portColumns, scanPort, uuid, false)
}

// FindPort finds a port by UUID or name (ports have names from API 1.88).
func (s *Store) FindPort(ctx context.Context, ident string) (*Port, error) {
	return getRow(ctx, s, portTable, portColumns, scanPort, ident, true)
}

// PortSortKeys are the accepted PortFilter.SortKey values.
var PortSortKeys = map[string]string{
	"id":         "p.id",
	"uuid":       "p.uuid",
	"address":    "p.address",
	"created_at": "p.created_at",
	"updated_at": "COALESCE(p.updated_at, '-infinity'::timestamptz)",
}

// ListPorts returns the ports that match f.
func (s *Store) ListPorts(ctx context.Context, f PortFilter) ([]*Port, error) {
	pg, err := portTable.page(f.Limit, f.Marker, f.SortKey, f.SortDir)
	if err != nil {
		return nil, err
	}
	var w where
	w.uuid("n.uuid", f.NodeUUID)
	w.project("n.", f.Project)
	if err := w.mac("p.address", f.Address); err != nil {
		return nil, fmt.Errorf("list ports: %w", err)
	}
	w.uuid("p.portgroup_uuid", f.PortgroupUUID)
	w.conductorGroups("n.", f.ConductorGroups)
	w.contains("p.description", f.DescriptionContains)
	return listPage(ctx, s, pg, portColumns, scanPort, w.conds, w.args)
}

// UpdatePort reads the port FOR UPDATE, lets fn change it and writes it back
// in one transaction. Changing NodeUUID moves the port to that node
// (ErrNotFound if it does not exist). ID, UUID and CreatedAt are never taken
// from fn. An error from fn aborts the update and is returned unwrapped.
func (s *Store) UpdatePort(ctx context.Context, uuid string, fn func(p *Port) error) (*Port, error) {
	u, _ := canonicalUUID(uuid)
	return updateRow(ctx, s, portTable, portColumns, scanPort, uuid, "uuid", u, fn, func(tx pgx.Tx, locked Port, p *Port) (*Port, error) {
		if err := preparePort(p); err != nil {
			return nil, err
		}
		nodeID, err := nodeIDOf(ctx, tx, p.NodeUUID)
		if err != nil {
			return nil, err
		}
		if err := checkPortgroup(ctx, tx, p); err != nil {
			return nil, err
		}
		_, err = tx.Exec(ctx, `UPDATE ports SET address = $2, node_id = $3, local_link_connection = $4, pxe_enabled = $5,
			physical_network = $6, extra = $7, internal_info = $8, is_smartnic = $9, name = $10, portgroup_uuid = $11,
			description = $12, vendor = $13, category = $14, available_for_dynamic_portgroup = $15,
			updated_at = now() WHERE id = $1`,
			locked.ID, p.Address, nodeID, p.LocalLinkConnection, p.PXEEnabled,
			p.PhysicalNetwork, p.Extra, p.InternalInfo, p.IsSmartNIC, p.Name, p.PortgroupUUID,
			p.Description, p.Vendor, p.Category, p.AvailableForDynamicPortgroup)
		if err != nil {
			return nil, err
		}
		rows, _ := tx.Query(ctx, "SELECT "+portColumns+portFrom+" WHERE p.id = $1", locked.ID)
		return pgx.CollectExactlyOneRow(rows, scanPort)
	})
}

// nodeIDOf returns the id of the node a port or group is written for;
// ErrNotFound if it does not exist.
func nodeIDOf(ctx context.Context, tx pgx.Tx, nodeUUID string) (int64, error) {
	var nodeID int64
	if err := tx.QueryRow(ctx, "SELECT id FROM nodes WHERE uuid = $1", nodeUUID).Scan(&nodeID); err != nil {
		if errors.Is(err, pgx.ErrNoRows) {
			return 0, fmt.Errorf("node %s: %w", nodeUUID, ErrNotFound)
		}
		return 0, err
	}
	return nodeID, nil
}

// DeletePort deletes a port.
func (s *Store) DeletePort(ctx context.Context, uuid string) error {
	return s.deleteByUUID(ctx, "ports", "port", uuid)
}

// NodesByMACs returns the nodes owning any of the MAC addresses (the agent's
// lookup), by id. Addresses are compared lowercase; invalid ones are ignored.
func (s *Store) NodesByMACs(ctx context.Context, macs []string) ([]*Node, error) {
	valid := make([]string, 0, len(macs))
	for _, m := range macs {
		if mac, err := NormalizeMAC(m); err == nil {
			valid = append(valid, mac)
		}
	}
	if len(valid) == 0 {
		return []*Node{}, nil
	}
	rows, _ := s.pool.Query(ctx, "SELECT "+nodeColumns+` FROM nodes
		WHERE id IN (SELECT node_id FROM ports WHERE address = ANY($1)) ORDER BY id`, valid)
	nodes, err := pgx.CollectRows(rows, scanNode)
	if err != nil {
		return nil, dbError(err, "look up nodes by MACs %v", valid)
	}
	return nodes, nil
}
