package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Errors of port groups, matched with errors.Is.
var (
	// ErrPortgroupNotFound: a port names a group that does not exist.
	ErrPortgroupNotFound = errors.New("portgroup not found")
	// ErrPortgroupOtherNode: a port names a group of another node.
	ErrPortgroupOtherNode = errors.New("portgroup belongs to another node")
	// ErrPortgroupNotEmpty: a group that still has ports cannot be deleted.
	ErrPortgroupNotEmpty = errors.New("portgroup contains ports")
)

// Portgroup is a bond of a node's ports (Ironic's portgroup), with
// Ironic's field names.
type Portgroup struct {
	ID   int64   `json:"-" db:"id"`
	UUID string  `json:"uuid" db:"uuid"`
	Name *string `json:"name" db:"name"`
	// Address is the bond's MAC address, optional, stored lowercase and
	// unique across groups.
	Address                  *string        `json:"address" db:"address"`
	NodeID                   int64          `json:"-" db:"node_id"`
	NodeUUID                 string         `json:"node_uuid" db:"node_uuid"`
	Mode                     string         `json:"mode" db:"mode"`
	Properties               map[string]any `json:"properties" db:"properties"`
	Extra                    map[string]any `json:"extra" db:"extra"`
	StandalonePortsSupported bool           `json:"standalone_ports_supported" db:"standalone_ports_supported"`
	InternalInfo             map[string]any `json:"internal_info" db:"internal_info"`
	// PhysicalNetwork (API 1.102) is the group's and, once set through
	// UpdatePortgroup, its ports'; Category (1.103) is stored as given;
	// DynamicPortgroup (1.111) is false for every group the API creates.
	PhysicalNetwork  *string    `json:"physical_network" db:"physical_network"`
	Category         *string    `json:"category" db:"category"`
	DynamicPortgroup bool       `json:"dynamic_portgroup" db:"dynamic_portgroup"`
	CreatedAt        time.Time  `json:"created_at" db:"created_at"`
	UpdatedAt        *time.Time `json:"updated_at" db:"updated_at"`
}

// DefaultPortgroupMode is a new group's mode when none is given, as
// Ironic's [DEFAULT]default_portgroup_mode.
const DefaultPortgroupMode = "active-backup"

// PortgroupFilter selects groups for ListPortgroups. Zero values match all.
type PortgroupFilter struct {
	NodeUUID string
	// Project selects the groups of nodes it owns or leases.
	Project string
	Address string
	// ConductorGroups selects the groups of nodes in these conductor
	// groups (API 1.99), Shards those of nodes in these shards (1.106).
	ConductorGroups []string
	Shards          []string
	Limit           int
	Marker          string // a portgroup UUID
	SortKey         string // see PortgroupSortKeys; default "id"
	SortDir         string // "asc" (default) or "desc"
}

const portgroupColumns = `g.id, g.uuid, g.name, g.address, g.node_id, n.uuid, g.mode, g.properties, g.extra,
	g.standalone_ports_supported, g.internal_info, g.physical_network, g.category, g.dynamic_portgroup, g.created_at, g.updated_at`

const portgroupFrom = " FROM portgroups g JOIN nodes n ON n.id = g.node_id"

var portgroupTable = table{name: "portgroups", alias: "g", join: " JOIN nodes n ON n.id = g.node_id",
	what: "portgroup", whats: "portgroups", sortKeys: PortgroupSortKeys}

func scanPortgroup(row pgx.CollectableRow) (*Portgroup, error) {
	g := &Portgroup{}
	err := row.Scan(&g.ID, &g.UUID, &g.Name, &g.Address, &g.NodeID, &g.NodeUUID, &g.Mode, &g.Properties, &g.Extra,
		&g.StandalonePortsSupported, &g.InternalInfo, &g.PhysicalNetwork, &g.Category, &g.DynamicPortgroup, &g.CreatedAt, &g.UpdatedAt)
	return g, err
}

// preparePortgroup validates and normalises what CreatePortgroup and
// UpdatePortgroup write.
func preparePortgroup(g *Portgroup) error {
	if g.Address != nil {
		mac, err := NormalizeMAC(*g.Address)
		if err != nil {
			return err
		}
		g.Address = &mac
	}
	if g.Mode == "" {
		g.Mode = DefaultPortgroupMode
	}
	g.Properties, g.Extra, g.InternalInfo = nonNil(g.Properties), nonNil(g.Extra), nonNil(g.InternalInfo)
	g.NodeUUID, _ = canonicalUUID(g.NodeUUID)
	return nil
}

// CreatePortgroup inserts g for the node g.NodeUUID (ErrNotFound if it
// does not exist), filling UUID when empty, ID, NodeID and CreatedAt. A
// second group with the address is ErrDuplicateMAC, with the name
// ErrDuplicateName.
func (s *Store) CreatePortgroup(ctx context.Context, g *Portgroup) error {
	if err := newUUID(&g.UUID); err != nil {
		return fmt.Errorf("create portgroup: %w", err)
	}
	if err := preparePortgroup(g); err != nil {
		return fmt.Errorf("create portgroup %s: %w", g.UUID, err)
	}
	err := s.pool.QueryRow(ctx, `INSERT INTO portgroups (uuid, name, address, node_id, mode, properties, extra,
			standalone_ports_supported, internal_info, physical_network, category, dynamic_portgroup)
		SELECT $1, $2, $3, n.id, $5, $6, $7, $8, $9, $10, $11, $12 FROM nodes n WHERE n.uuid = $4
		RETURNING id, node_id, created_at`,
		g.UUID, g.Name, g.Address, g.NodeUUID, g.Mode, g.Properties, g.Extra, g.StandalonePortsSupported, g.InternalInfo,
		g.PhysicalNetwork, g.Category, g.DynamicPortgroup,
	).Scan(&g.ID, &g.NodeID, &g.CreatedAt)
	return createdForNode(err, "portgroup", g.UUID, g.NodeUUID)
}

// GetPortgroup finds a group by UUID or name.
func (s *Store) GetPortgroup(ctx context.Context, ident string) (*Portgroup, error) {
	return getRow(ctx, s, portgroupTable, portgroupColumns, scanPortgroup, ident, true)
}

// PortgroupSortKeys are the accepted PortgroupFilter.SortKey values.
var PortgroupSortKeys = map[string]string{
	"id":         "g.id",
	"uuid":       "g.uuid",
	"name":       "COALESCE(g.name, '')",
	"address":    "COALESCE(g.address, '')",
	"mode":       "g.mode",
	"created_at": "g.created_at",
	"updated_at": "COALESCE(g.updated_at, '-infinity'::timestamptz)",
}

// ListPortgroups returns the groups that match f.
func (s *Store) ListPortgroups(ctx context.Context, f PortgroupFilter) ([]*Portgroup, error) {
	pg, err := portgroupTable.page(f.Limit, f.Marker, f.SortKey, f.SortDir)
	if err != nil {
		return nil, err
	}
	var w where
	w.uuid("n.uuid", f.NodeUUID)
	w.project("n.", f.Project)
	if err := w.mac("g.address", f.Address); err != nil {
		return nil, fmt.Errorf("list portgroups: %w", err)
	}
	w.conductorGroups("n.", f.ConductorGroups)
	w.shards("n.", f.Shards)
	return listPage(ctx, s, pg, portgroupColumns, scanPortgroup, w.conds, w.args)
}

// UpdatePortgroup reads the group FOR UPDATE, lets fn change it and writes
// it back in one transaction. Changing NodeUUID moves the group to that
// node (ErrNotFound if it does not exist), unless ports are in the group
// (ErrPortgroupNotEmpty: a port and its group are always on one node, as
// Ironic's conductor keeps them). An error from fn aborts the update and is
// returned unwrapped.
func (s *Store) UpdatePortgroup(ctx context.Context, ident string, fn func(g *Portgroup) error) (*Portgroup, error) {
	cur, err := s.GetPortgroup(ctx, ident)
	if err != nil {
		return nil, err
	}
	return updateRow(ctx, s, portgroupTable, portgroupColumns, scanPortgroup, ident, "id", cur.ID, fn, func(tx pgx.Tx, locked Portgroup, g *Portgroup) (*Portgroup, error) {
		if err := preparePortgroup(g); err != nil {
			return nil, err
		}
		nodeID, err := nodeIDOf(ctx, tx, g.NodeUUID)
		if err != nil {
			return nil, err
		}
		_, err = tx.Exec(ctx, `UPDATE portgroups SET name = $2, address = $3, node_id = $4, mode = $5, properties = $6,
			extra = $7, standalone_ports_supported = $8, internal_info = $9, physical_network = $10, category = $11,
			dynamic_portgroup = $12, updated_at = now() WHERE id = $1`,
			locked.ID, g.Name, g.Address, nodeID, g.Mode, g.Properties, g.Extra, g.StandalonePortsSupported, g.InternalInfo,
			g.PhysicalNetwork, g.Category, g.DynamicPortgroup)
		if err != nil {
			return nil, err
		}
		// A group's new physical network becomes its ports' too, as
		// Ironic's Portgroup.update_physical_network (API 1.102).
		if strOrNil(g.PhysicalNetwork) != strOrNil(locked.PhysicalNetwork) {
			if _, err := tx.Exec(ctx, `UPDATE ports SET physical_network = $2, updated_at = now()
				WHERE portgroup_uuid = $1 AND physical_network IS DISTINCT FROM $2`, g.UUID, g.PhysicalNetwork); err != nil {
				return nil, err
			}
		}
		if nodeID != cur.NodeID {
			var hasPorts bool
			if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM ports WHERE portgroup_uuid = $1)", g.UUID).Scan(&hasPorts); err != nil {
				return nil, err
			}
			if hasPorts {
				return nil, fmt.Errorf("move portgroup %s to node %s: %w", g.UUID, g.NodeUUID, ErrPortgroupNotEmpty)
			}
		}
		rows, _ := tx.Query(ctx, "SELECT "+portgroupColumns+portgroupFrom+" WHERE g.id = $1", locked.ID)
		return pgx.CollectExactlyOneRow(rows, scanPortgroup)
	})
}

func strOrNil(p *string) any {
	if p == nil {
		return nil
	}
	return *p
}

// DeletePortgroup deletes a group that has no ports (ErrPortgroupNotEmpty
// otherwise).
func (s *Store) DeletePortgroup(ctx context.Context, uuid string) error {
	u, _ := canonicalUUID(uuid)
	tag, err := s.pool.Exec(ctx, `DELETE FROM portgroups g WHERE g.uuid = $1
		AND NOT EXISTS (SELECT 1 FROM ports p WHERE p.portgroup_uuid = g.uuid)`, u)
	if err != nil {
		return dbError(err, "delete portgroup %s", uuid)
	}
	if tag.RowsAffected() == 0 {
		var exists bool
		if err := s.pool.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM portgroups WHERE uuid = $1)", u).Scan(&exists); err != nil {
			return dbError(err, "delete portgroup %s", uuid)
		}
		if exists {
			return fmt.Errorf("delete portgroup %s: %w", uuid, ErrPortgroupNotEmpty)
		}
		return fmt.Errorf("delete portgroup %s: %w", uuid, ErrNotFound)
	}
	return nil
}

// checkPortgroup verifies, inside a port write, that the group a port
// names exists and is on the port's node.
func checkPortgroup(ctx context.Context, q interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}, p *Port) error {
	if p.PortgroupUUID == nil {
		return nil
	}
	u, ok := canonicalUUID(*p.PortgroupUUID)
	if !ok {
		return fmt.Errorf("portgroup %s: %w", *p.PortgroupUUID, ErrPortgroupNotFound)
	}
	p.PortgroupUUID = &u
	var node string
	err := q.QueryRow(ctx, "SELECT n.uuid FROM portgroups g JOIN nodes n ON n.id = g.node_id WHERE g.uuid = $1 FOR SHARE OF g", u).Scan(&node)
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("portgroup %s: %w", u, ErrPortgroupNotFound)
	}
	if err != nil {
		return err
	}
	if node != p.NodeUUID {
		return fmt.Errorf("portgroup %s is on node %s, port on %s: %w", u, node, p.NodeUUID, ErrPortgroupOtherNode)
	}
	return nil
}

// UpdateNodeNetwork locks the node, its ports and its port groups, lets fn
// change the ports' and groups' InternalInfo and Extra, and writes back
// those fn changed, in one transaction: VIF attach and detach, so that two
// concurrent attaches never choose the same free port. ErrNotFound if the
// node does not exist. An error from fn aborts and is returned unwrapped.
func (s *Store) UpdateNodeNetwork(ctx context.Context, nodeUUID string, fn func(ports []*Port, groups []*Portgroup) error) error {
	u, _ := canonicalUUID(nodeUUID)
	var fnErr error
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var nodeID int64
		// The node row serialises the node's VIF changes even when it has
		// no ports yet.
		if err := tx.QueryRow(ctx, "SELECT id FROM nodes WHERE uuid = $1 FOR NO KEY UPDATE", u).Scan(&nodeID); err != nil {
			if errors.Is(err, pgx.ErrNoRows) {
				return fmt.Errorf("node %s: %w", u, ErrNotFound)
			}
			return err
		}
		rows, _ := tx.Query(ctx, "SELECT "+portColumns+portFrom+" WHERE p.node_id = $1 ORDER BY p.id FOR UPDATE OF p", nodeID)
		ports, err := pgx.CollectRows(rows, scanPort)
		if err != nil {
			return err
		}
		rows, _ = tx.Query(ctx, "SELECT "+portgroupColumns+portgroupFrom+" WHERE g.node_id = $1 ORDER BY g.id FOR UPDATE OF g", nodeID)
		groups, err := pgx.CollectRows(rows, scanPortgroup)
		if err != nil {
			return err
		}
		type before struct{ info, extra string }
		snap := func(info, extra map[string]any) before {
			return before{fmt.Sprint(info), fmt.Sprint(extra)}
		}
		portsBefore := make([]before, len(ports))
		for i, p := range ports {
			portsBefore[i] = snap(p.InternalInfo, p.Extra)
		}
		groupsBefore := make([]before, len(groups))
		for i, g := range groups {
			groupsBefore[i] = snap(g.InternalInfo, g.Extra)
		}
		if fnErr = fn(ports, groups); fnErr != nil {
			return fnErr
		}
		for i, p := range ports {
			if snap(p.InternalInfo, p.Extra) == portsBefore[i] {
				continue
			}
			if _, err := tx.Exec(ctx, "UPDATE ports SET internal_info = $2, extra = $3, updated_at = now() WHERE id = $1",
				p.ID, nonNil(p.InternalInfo), nonNil(p.Extra)); err != nil {
				return err
			}
		}
		for i, g := range groups {
			if snap(g.InternalInfo, g.Extra) == groupsBefore[i] {
				continue
			}
			if _, err := tx.Exec(ctx, "UPDATE portgroups SET internal_info = $2, extra = $3, updated_at = now() WHERE id = $1",
				g.ID, nonNil(g.InternalInfo), nonNil(g.Extra)); err != nil {
				return err
			}
		}
		return nil
	})
	if fnErr != nil {
		return fnErr
	}
	return dbError(err, "update network of node %s", nodeUUID)
}
