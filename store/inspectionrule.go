package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// InspectionRule is Ironic's inspection rule (API 1.96): conditions and
// actions as the JSON objects the client sent.
type InspectionRule struct {
	ID          int64
	UUID        string
	Description *string
	Phase       string
	Priority    int
	Sensitive   bool
	Conditions  []map[string]any
	Actions     []map[string]any
	CreatedAt   time.Time
	UpdatedAt   *time.Time
}

// InspectionRuleFilter selects rules for ListInspectionRules.
type InspectionRuleFilter struct {
	Phase   string
	Limit   int
	Marker  string
	SortKey string
	SortDir string
}

// InspectionRuleSortKeys are the accepted sort keys: every column but
// conditions and actions, as Ironic.
var InspectionRuleSortKeys = map[string]string{
	"id":          "r.id",
	"uuid":        "r.uuid",
	"description": "COALESCE(r.description, '')",
	"phase":       "r.phase",
	"priority":    "r.priority",
	"sensitive":   "r.sensitive",
	"created_at":  "r.created_at",
	"updated_at":  "COALESCE(r.updated_at, '-infinity'::timestamptz)",
}

const inspectionRuleColumns = `r.id, r.uuid, r.description, r.phase, r.priority, r.sensitive, r.conditions, r.actions, r.created_at, r.updated_at`

var inspectionRuleTable = table{name: "inspection_rules", alias: "r", what: "inspection rule", whats: "inspection rules",
	sortKeys: InspectionRuleSortKeys}

func init() {
	uniqueErrors["inspection_rules_uuid_key"] = ErrDuplicateUUID
}

func scanInspectionRule(row pgx.CollectableRow) (*InspectionRule, error) {
	r := &InspectionRule{}
	err := row.Scan(&r.ID, &r.UUID, &r.Description, &r.Phase, &r.Priority, &r.Sensitive, &r.Conditions, &r.Actions, &r.CreatedAt, &r.UpdatedAt)
	return r, err
}

func nonNilObjects(l []map[string]any) []map[string]any {
	if l == nil {
		return []map[string]any{}
	}
	return l
}

// CreateInspectionRule inserts r, filling UUID when empty, ID and
// CreatedAt; a UUID in use is ErrDuplicateUUID.
func (s *Store) CreateInspectionRule(ctx context.Context, r *InspectionRule) error {
	if err := newUUID(&r.UUID); err != nil {
		return fmt.Errorf("create inspection rule: %w", err)
	}
	if r.Phase == "" {
		r.Phase = "main"
	}
	r.Conditions, r.Actions = nonNilObjects(r.Conditions), nonNilObjects(r.Actions)
	err := s.pool.QueryRow(ctx, `INSERT INTO inspection_rules (uuid, description, phase, priority, sensitive, conditions, actions)
		VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING id, created_at`,
		r.UUID, r.Description, r.Phase, r.Priority, r.Sensitive, r.Conditions, r.Actions).Scan(&r.ID, &r.CreatedAt)
	return dbError(err, "create inspection rule %s", r.UUID)
}

// GetInspectionRule finds a rule by UUID.
func (s *Store) GetInspectionRule(ctx context.Context, uuid string) (*InspectionRule, error) {
	return getRow(ctx, s, inspectionRuleTable, inspectionRuleColumns, scanInspectionRule, uuid, false)
}

// ListInspectionRules returns a page of rules.
func (s *Store) ListInspectionRules(ctx context.Context, f InspectionRuleFilter) ([]*InspectionRule, error) {
	p, err := inspectionRuleTable.page(f.Limit, f.Marker, f.SortKey, f.SortDir)
	if err != nil {
		return nil, err
	}
	var w where
	if f.Phase != "" {
		w.eq("r.phase", f.Phase)
	}
	return listPage(ctx, s, p, inspectionRuleColumns, scanInspectionRule, w.conds, w.args)
}

// InspectionRulesOfPhase returns every rule of the phase, oldest first (the
// engine orders them by priority, keeping this order among equals).
func (s *Store) InspectionRulesOfPhase(ctx context.Context, phase string) ([]*InspectionRule, error) {
	rows, _ := s.pool.Query(ctx, "SELECT "+inspectionRuleColumns+" FROM inspection_rules r WHERE r.phase = $1 ORDER BY r.id", phase)
	list, err := pgx.CollectRows(rows, scanInspectionRule)
	return list, dbError(err, "list inspection rules of phase %s", phase)
}

// UpdateInspectionRule writes r's fields over the stored rule r.UUID and
// fills UpdatedAt.
func (s *Store) UpdateInspectionRule(ctx context.Context, r *InspectionRule) error {
	r.Conditions, r.Actions = nonNilObjects(r.Conditions), nonNilObjects(r.Actions)
	err := s.pool.QueryRow(ctx, `UPDATE inspection_rules SET description = $2, phase = $3, priority = $4, sensitive = $5,
			conditions = $6, actions = $7, updated_at = now() WHERE uuid = $1 RETURNING id, created_at, updated_at`,
		r.UUID, r.Description, r.Phase, r.Priority, r.Sensitive, r.Conditions, r.Actions).Scan(&r.ID, &r.CreatedAt, &r.UpdatedAt)
	return dbError(err, "update inspection rule %s", r.UUID)
}

// DeleteInspectionRule deletes one rule.
func (s *Store) DeleteInspectionRule(ctx context.Context, uuid string) error {
	return s.deleteByUUID(ctx, "inspection_rules", "inspection rule", uuid)
}

// DeleteAllInspectionRules deletes every rule.
func (s *Store) DeleteAllInspectionRules(ctx context.Context) error {
	_, err := s.pool.Exec(ctx, "DELETE FROM inspection_rules")
	return dbError(err, "delete all inspection rules")
}

// InspectionOutcome is what an inspection's hooks and rules decided for a
// node: written by ApplyInspection with the node in one transaction.
type InspectionOutcome struct {
	PluginData map[string]any
	// NewPorts are created; a MAC another node's port has is skipped.
	NewPorts []*Port
	// UpdatedPorts have their local_link_connection, pxe_enabled,
	// physical_network and extra written.
	UpdatedPorts []*Port
	// DeletedPorts are UUIDs of the node's ports to delete.
	DeletedPorts []string
}

// ApplyInspection locks the node, reads its inventory and ports, lets fn
// decide the outcome of the inspection from them (fn changes the node in
// place), and writes the node, its ports and the plugin_data in one
// transaction: all of it, or (fn's error, returned unwrapped, or a database
// error) none. A node without an inventory is ErrNotFound.
func (s *Store) ApplyInspection(ctx context.Context, nodeUUID string, fn func(n *Node, ports []*Port, inv *Inventory) (*InspectionOutcome, error)) (*Node, error) {
	u, _ := canonicalUUID(nodeUUID)
	var out *Node
	var fnErr error
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		rows, _ := tx.Query(ctx, "SELECT "+nodeColumns+" FROM nodes WHERE uuid = $1 FOR UPDATE", u)
		n, err := pgx.CollectExactlyOneRow(rows, scanNode)
		if err != nil {
			return err
		}
		locked := *n
		inv := &Inventory{}
		if err := tx.QueryRow(ctx, "SELECT node_uuid, inventory, plugin_data, created_at FROM node_inventory WHERE node_uuid = $1", u).
			Scan(&inv.NodeUUID, &inv.Inventory, &inv.PluginData, &inv.CreatedAt); err != nil {
			return err
		}
		rows, _ = tx.Query(ctx, "SELECT "+portColumns+portFrom+" WHERE p.node_id = $1 ORDER BY p.id FOR UPDATE OF p", n.ID)
		ports, err := pgx.CollectRows(rows, scanPort)
		if err != nil {
			return err
		}
		o, err := fn(n, ports, inv)
		if err != nil {
			fnErr = err
			return err
		}
		if out, err = writeNode(ctx, tx, locked, n); err != nil {
			return err
		}
		for _, p := range o.UpdatedPorts {
			if err := preparePort(p); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `UPDATE ports SET local_link_connection = $3, pxe_enabled = $4, physical_network = $5,
					extra = $6, updated_at = now() WHERE uuid = $1 AND node_id = $2`,
				p.UUID, n.ID, p.LocalLinkConnection, p.PXEEnabled, p.PhysicalNetwork, p.Extra); err != nil {
				return err
			}
		}
		for _, p := range o.NewPorts {
			if err := newUUID(&p.UUID); err != nil {
				return err
			}
			if err := preparePort(p); err != nil {
				return err
			}
			if _, err := tx.Exec(ctx, `INSERT INTO ports (uuid, address, node_id, local_link_connection, pxe_enabled,
					physical_network, extra, internal_info) VALUES ($1, $2, $3, $4, $5, $6, $7, '{}')
				ON CONFLICT (address) DO NOTHING`,
				p.UUID, p.Address, n.ID, p.LocalLinkConnection, p.PXEEnabled, p.PhysicalNetwork, p.Extra); err != nil {
				return err
			}
		}
		if len(o.DeletedPorts) > 0 {
			if _, err := tx.Exec(ctx, "DELETE FROM ports WHERE node_id = $1 AND uuid = ANY($2)", n.ID, o.DeletedPorts); err != nil {
				return err
			}
		}
		_, err = tx.Exec(ctx, "UPDATE node_inventory SET plugin_data = $2 WHERE node_uuid = $1", u, nonNil(o.PluginData))
		return err
	})
	if fnErr != nil {
		return nil, fnErr
	}
	if err != nil {
		return nil, dbError(err, "apply the inspection of node %s", nodeUUID)
	}
	return out, nil
}
