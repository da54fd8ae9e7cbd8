package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Errors of volume connectors and targets, matched with errors.Is.
var (
	// ErrDuplicateConnector: another connector has the same type and
	// connector_id (Ironic's VolumeConnectorTypeAndIdAlreadyExists).
	ErrDuplicateConnector = errors.New("duplicate volume connector type and connector_id")
	// ErrDuplicateBootIndex: the node has a target with this boot_index
	// (Ironic's VolumeTargetBootIndexAlreadyExists).
	ErrDuplicateBootIndex = errors.New("duplicate volume target boot_index on the node")
)

// The unique constraints of migrations/0005_volume_conductors.sql.
func init() {
	uniqueErrors["volume_connectors_uuid_key"] = ErrDuplicateUUID
	uniqueErrors["volume_connectors_type_connector_id_key"] = ErrDuplicateConnector
	uniqueErrors["volume_targets_uuid_key"] = ErrDuplicateUUID
	uniqueErrors["volume_targets_node_id_boot_index_key"] = ErrDuplicateBootIndex
	uniqueErrors["conductors_hostname_key"] = ErrDuplicateName
}

// VolumeConnector is a node's connector to a storage network (an iSCSI
// initiator IQN, a Fibre Channel WWPN, ...), with Ironic's field names.
type VolumeConnector struct {
	ID          int64
	UUID        string
	NodeUUID    string
	Type        string
	ConnectorID string
	Extra       map[string]any
	CreatedAt   time.Time
	UpdatedAt   *time.Time
}

// VolumeTarget is a volume a node boots from or attaches, with Ironic's
// field names.
type VolumeTarget struct {
	ID         int64
	UUID       string
	NodeUUID   string
	VolumeType string
	Properties map[string]any
	BootIndex  int64
	VolumeID   string
	Extra      map[string]any
	CreatedAt  time.Time
	UpdatedAt  *time.Time
}

// VolumeFilter selects connectors or targets. Zero values match all.
type VolumeFilter struct {
	NodeUUID string
	// Project selects the objects of nodes it owns or leases.
	Project string
	Limit   int
	Marker  string // a connector's or target's UUID
	SortKey string // see VolumeConnectorSortKeys, VolumeTargetSortKeys
	SortDir string
}

// VolumeConnectorSortKeys are the accepted sort keys of connectors: every
// column but extra, as Ironic.
var VolumeConnectorSortKeys = map[string]string{
	"id":           "v.id",
	"uuid":         "v.uuid",
	"type":         "v.type",
	"connector_id": "v.connector_id",
	"created_at":   "v.created_at",
	"updated_at":   "COALESCE(v.updated_at, '-infinity'::timestamptz)",
}

// VolumeTargetSortKeys are the accepted sort keys of targets: every column
// but extra and properties, as Ironic.
var VolumeTargetSortKeys = map[string]string{
	"id":          "v.id",
	"uuid":        "v.uuid",
	"volume_type": "v.volume_type",
	"boot_index":  "v.boot_index",
	"volume_id":   "v.volume_id",
	"created_at":  "v.created_at",
	"updated_at":  "COALESCE(v.updated_at, '-infinity'::timestamptz)",
}

const connectorColumns = `v.id, v.uuid, n.uuid, v.type, v.connector_id, v.extra, v.created_at, v.updated_at`

func scanConnector(row pgx.CollectableRow) (*VolumeConnector, error) {
	c := &VolumeConnector{}
	err := row.Scan(&c.ID, &c.UUID, &c.NodeUUID, &c.Type, &c.ConnectorID, &c.Extra, &c.CreatedAt, &c.UpdatedAt)
	return c, err
}

const targetColumns = `v.id, v.uuid, n.uuid, v.volume_type, v.properties, v.boot_index, v.volume_id, v.extra, v.created_at, v.updated_at`

func scanTarget(row pgx.CollectableRow) (*VolumeTarget, error) {
	t := &VolumeTarget{}
	err := row.Scan(&t.ID, &t.UUID, &t.NodeUUID, &t.VolumeType, &t.Properties, &t.BootIndex, &t.VolumeID, &t.Extra, &t.CreatedAt, &t.UpdatedAt)
	return t, err
}

var (
	connectorTable = table{name: "volume_connectors", alias: "v", join: " JOIN nodes n ON n.id = v.node_id",
		what: "volume connector", whats: "volume connectors", sortKeys: VolumeConnectorSortKeys}
	targetTable = table{name: "volume_targets", alias: "v", join: " JOIN nodes n ON n.id = v.node_id",
		what: "volume target", whats: "volume targets", sortKeys: VolumeTargetSortKeys}
)

// CreateVolumeConnector inserts c for the node c.NodeUUID (ErrNotFound if it
// does not exist), filling UUID when empty, ID and CreatedAt. A second
// connector of the same type and connector_id is ErrDuplicateConnector.
func (s *Store) CreateVolumeConnector(ctx context.Context, c *VolumeConnector) error {
	if err := newUUID(&c.UUID); err != nil {
		return fmt.Errorf("create volume connector: %w", err)
	}
	c.Extra = nonNil(c.Extra)
	c.NodeUUID, _ = canonicalUUID(c.NodeUUID)
	err := s.pool.QueryRow(ctx, `INSERT INTO volume_connectors (uuid, node_id, type, connector_id, extra)
		SELECT $1, n.id, $3, $4, $5 FROM nodes n WHERE n.uuid = $2 RETURNING id, created_at`,
		c.UUID, c.NodeUUID, c.Type, c.ConnectorID, c.Extra).Scan(&c.ID, &c.CreatedAt)
	return createdForNode(err, "volume connector", c.UUID, c.NodeUUID)
}

// GetVolumeConnector finds a connector by UUID.
func (s *Store) GetVolumeConnector(ctx context.Context, id string) (*VolumeConnector, error) {
	return getRow(ctx, s, connectorTable, connectorColumns, scanConnector, id, false)
}

// ListVolumeConnectors returns the connectors that match f.
func (s *Store) ListVolumeConnectors(ctx context.Context, f VolumeFilter) ([]*VolumeConnector, error) {
	p, err := connectorTable.page(f.Limit, f.Marker, f.SortKey, f.SortDir)
	if err != nil {
		return nil, err
	}
	var w where
	w.uuid("n.uuid", f.NodeUUID)
	w.project("n.", f.Project)
	return listPage(ctx, s, p, connectorColumns, scanConnector, w.conds, w.args)
}

// UpdateVolumeConnector writes c's fields over the stored connector c.UUID;
// NodeUUID may move it to another node (ErrNotFound if that node does not
// exist). It fills UpdatedAt.
func (s *Store) UpdateVolumeConnector(ctx context.Context, c *VolumeConnector) error {
	c.Extra = nonNil(c.Extra)
	c.NodeUUID, _ = canonicalUUID(c.NodeUUID)
	err := s.pool.QueryRow(ctx, `UPDATE volume_connectors v SET node_id = n.id, type = $3, connector_id = $4, extra = $5, updated_at = now()
		FROM nodes n WHERE n.uuid = $2 AND v.uuid = $1 RETURNING v.updated_at`,
		c.UUID, c.NodeUUID, c.Type, c.ConnectorID, c.Extra).Scan(&c.UpdatedAt)
	return dbError(err, "update volume connector %s", c.UUID)
}

// DeleteVolumeConnector deletes a connector.
func (s *Store) DeleteVolumeConnector(ctx context.Context, id string) error {
	return s.deleteByUUID(ctx, "volume_connectors", "volume connector", id)
}

// CreateVolumeTarget inserts t for the node t.NodeUUID (ErrNotFound if it
// does not exist), filling UUID when empty, ID and CreatedAt. A second
// target of the node with the same boot_index is ErrDuplicateBootIndex.
func (s *Store) CreateVolumeTarget(ctx context.Context, t *VolumeTarget) error {
	if err := newUUID(&t.UUID); err != nil {
		return fmt.Errorf("create volume target: %w", err)
	}
	t.Extra, t.Properties = nonNil(t.Extra), nonNil(t.Properties)
	t.NodeUUID, _ = canonicalUUID(t.NodeUUID)
	err := s.pool.QueryRow(ctx, `INSERT INTO volume_targets (uuid, node_id, volume_type, properties, boot_index, volume_id, extra)
		SELECT $1, n.id, $3, $4, $5, $6, $7 FROM nodes n WHERE n.uuid = $2 RETURNING id, created_at`,
		t.UUID, t.NodeUUID, t.VolumeType, t.Properties, t.BootIndex, t.VolumeID, t.Extra).Scan(&t.ID, &t.CreatedAt)
	return createdForNode(err, "volume target", t.UUID, t.NodeUUID)
}

// GetVolumeTarget finds a target by UUID.
func (s *Store) GetVolumeTarget(ctx context.Context, id string) (*VolumeTarget, error) {
	return getRow(ctx, s, targetTable, targetColumns, scanTarget, id, false)
}

// ListVolumeTargets returns the targets that match f.
func (s *Store) ListVolumeTargets(ctx context.Context, f VolumeFilter) ([]*VolumeTarget, error) {
	p, err := targetTable.page(f.Limit, f.Marker, f.SortKey, f.SortDir)
	if err != nil {
		return nil, err
	}
	var w where
	w.uuid("n.uuid", f.NodeUUID)
	w.project("n.", f.Project)
	return listPage(ctx, s, p, targetColumns, scanTarget, w.conds, w.args)
}

// UpdateVolumeTarget writes t's fields over the stored target t.UUID, as
// UpdateVolumeConnector does.
func (s *Store) UpdateVolumeTarget(ctx context.Context, t *VolumeTarget) error {
	t.Extra, t.Properties = nonNil(t.Extra), nonNil(t.Properties)
	t.NodeUUID, _ = canonicalUUID(t.NodeUUID)
	err := s.pool.QueryRow(ctx, `UPDATE volume_targets v SET node_id = n.id, volume_type = $3, properties = $4, boot_index = $5,
		volume_id = $6, extra = $7, updated_at = now()
		FROM nodes n WHERE n.uuid = $2 AND v.uuid = $1 RETURNING v.updated_at`,
		t.UUID, t.NodeUUID, t.VolumeType, t.Properties, t.BootIndex, t.VolumeID, t.Extra).Scan(&t.UpdatedAt)
	return dbError(err, "update volume target %s", t.UUID)
}

// DeleteVolumeTarget deletes a target.
func (s *Store) DeleteVolumeTarget(ctx context.Context, id string) error {
	return s.deleteByUUID(ctx, "volume_targets", "volume target", id)
}
