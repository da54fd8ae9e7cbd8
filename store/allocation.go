package store

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ironflow/ironflow/provision"
)

// The constraints of migrations/0011_allocations.sql.
func init() {
	uniqueErrors["allocations_uuid_key"] = ErrDuplicateUUID
	uniqueErrors["allocations_name_key"] = ErrDuplicateName
	uniqueErrors["allocations_node_uuid_key"] = ErrNodeAssociated
	uniqueErrors["nodes_allocation_uuid_key"] = ErrNodeAssociated
}

// ErrNodeAssociated: the node a backfill names already has another
// instance or allocation (Ironic's NodeAssociated).
var ErrNodeAssociated = errors.New("node already associated")

// The states of an allocation, Ironic's (ironic/common/states.py).
const (
	AllocationAllocating = "allocating"
	AllocationActive     = "active"
	AllocationError      = "error"
)

// Allocation is a request for one node (Ironic's allocation, API 1.52):
// an available node of ResourceClass with every trait of Traits, among
// CandidateNodes (UUIDs) when given, owned or leased by Owner when set.
// NodeUUID is the node it holds once active.
type Allocation struct {
	ID             int64
	UUID           string
	Name           *string
	NodeUUID       *string
	State          string
	LastError      *string
	ResourceClass  *string
	CandidateNodes []string
	Traits         []string
	Extra          map[string]any
	Owner          *string
	CreatedAt      time.Time
	UpdatedAt      *time.Time
}

// AllocationFilter selects allocations (Ironic's filters of
// get_allocation_list). Zero values match all.
type AllocationFilter struct {
	NodeUUID      string
	ResourceClass string
	State         string
	Owner         string

	Limit   int
	Marker  string
	SortKey string // see AllocationSortKeys
	SortDir string
}

// AllocationSortKeys: every column but extra, candidate_nodes and traits,
// which Ironic refuses as sort keys.
var AllocationSortKeys = map[string]string{
	"id":             "a.id",
	"uuid":           "a.uuid",
	"name":           "COALESCE(a.name, '')",
	"node_uuid":      "COALESCE(a.node_uuid, '')",
	"state":          "a.state",
	"last_error":     "COALESCE(a.last_error, '')",
	"resource_class": "COALESCE(a.resource_class, '')",
	"owner":          "COALESCE(a.owner, '')",
	"created_at":     "a.created_at",
	"updated_at":     "COALESCE(a.updated_at, '-infinity'::timestamptz)",
}

const allocationColumns = `a.id, a.uuid, a.name, a.node_uuid, a.state, a.last_error, a.resource_class,
	a.candidate_nodes, a.traits, a.extra, a.owner, a.created_at, a.updated_at`

var allocationTable = table{name: "allocations", alias: "a", what: "allocation", whats: "allocations",
	sortKeys: AllocationSortKeys}

func scanAllocation(row pgx.CollectableRow) (*Allocation, error) {
	a := &Allocation{}
	err := row.Scan(&a.ID, &a.UUID, &a.Name, &a.NodeUUID, &a.State, &a.LastError, &a.ResourceClass,
		&a.CandidateNodes, &a.Traits, &a.Extra, &a.Owner, &a.CreatedAt, &a.UpdatedAt)
	return a, err
}

func nonNilList(l []string) []string {
	if l == nil {
		return []string{}
	}
	return l
}

// CreateAllocation inserts a in state allocating (or a.State when set),
// filling UUID when empty, ID and CreatedAt. A second allocation of the
// same name is ErrDuplicateName, of the same UUID ErrDuplicateUUID.
func (s *Store) CreateAllocation(ctx context.Context, a *Allocation) error {
	if err := newUUID(&a.UUID); err != nil {
		return fmt.Errorf("create allocation: %w", err)
	}
	if a.State == "" {
		a.State = AllocationAllocating
	}
	a.Extra, a.CandidateNodes, a.Traits = nonNil(a.Extra), nonNilList(a.CandidateNodes), nonNilList(a.Traits)
	err := s.pool.QueryRow(ctx, `INSERT INTO allocations (uuid, name, state, resource_class, candidate_nodes, traits, extra, owner)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING id, created_at`,
		a.UUID, a.Name, a.State, a.ResourceClass, a.CandidateNodes, a.Traits, a.Extra, a.Owner).Scan(&a.ID, &a.CreatedAt)
	return dbError(err, "create allocation %s", a.UUID)
}

// GetAllocation finds an allocation by UUID or name.
func (s *Store) GetAllocation(ctx context.Context, ident string) (*Allocation, error) {
	return getRow(ctx, s, allocationTable, allocationColumns, scanAllocation, ident, true)
}

// ListAllocations returns a page of the allocations f selects.
func (s *Store) ListAllocations(ctx context.Context, f AllocationFilter) ([]*Allocation, error) {
	p, err := allocationTable.page(f.Limit, f.Marker, f.SortKey, f.SortDir)
	if err != nil {
		return nil, err
	}
	var w where
	w.uuid("a.node_uuid", f.NodeUUID)
	if f.ResourceClass != "" {
		w.eq("a.resource_class", f.ResourceClass)
	}
	if f.State != "" {
		w.eq("a.state", f.State)
	}
	if f.Owner != "" {
		w.eq("a.owner", f.Owner)
	}
	return listPage(ctx, s, p, allocationColumns, scanAllocation, w.conds, w.args)
}

// UpdateAllocation lets fn change the allocation's name and extra (the
// fields Ironic's PATCH changes) and stores them.
func (s *Store) UpdateAllocation(ctx context.Context, uuid string, fn func(a *Allocation) error) (*Allocation, error) {
	u, _ := canonicalUUID(uuid)
	return updateRow(ctx, s, allocationTable, allocationColumns, scanAllocation, uuid, "uuid", u, fn,
		func(tx pgx.Tx, _ Allocation, a *Allocation) (*Allocation, error) {
			rows, _ := tx.Query(ctx, `UPDATE allocations a SET name = $2, extra = $3, updated_at = now() WHERE id = $1
				RETURNING `+allocationColumns, a.ID, a.Name, nonNil(a.Extra))
			return pgx.CollectExactlyOneRow(rows, scanAllocation)
		})
}

// FailAllocation records that the allocation found no node: state error,
// no node, lastError. An allocation that was deleted meanwhile is not an
// error (Ironic's _allocation_failed). Only an allocation still
// allocating, or the backfill's own, changes: a filled one stays.
func (s *Store) FailAllocation(ctx context.Context, uuid, lastError string) error {
	u, _ := canonicalUUID(uuid)
	_, err := s.pool.Exec(ctx, `UPDATE allocations SET state = 'error', node_uuid = NULL, last_error = $2, updated_at = now()
		WHERE uuid = $1 AND state = 'allocating'`, u, lastError)
	return dbError(err, "record failed allocation %s", uuid)
}

// AllocationCandidate is a node an allocation may take, as read before the
// claim.
type AllocationCandidate struct {
	UUID   string
	Name   *string
	Traits []string
}

// AllocationCandidates are the nodes an allocation may take, before its
// traits are matched: available, not in maintenance, with a known power
// state, no instance and the allocation's resource class, among its
// candidate nodes if it names any, owned or leased by its owner if it has
// one (the filters of Ironic's _candidate_nodes), in id order.
func (s *Store) AllocationCandidates(ctx context.Context, a *Allocation) ([]AllocationCandidate, error) {
	w := where{}
	w.eq("provision_state", provision.Available)
	w.conds = append(w.conds, "NOT maintenance", "instance_uuid IS NULL", "allocation_uuid IS NULL", "power_state IS NOT NULL")
	rc := ""
	if a.ResourceClass != nil {
		rc = *a.ResourceClass
	}
	w.eq("resource_class", rc)
	if len(a.CandidateNodes) > 0 {
		w.args = append(w.args, a.CandidateNodes)
		w.conds = append(w.conds, fmt.Sprintf("uuid = ANY($%d::text[])", len(w.args)))
	}
	if a.Owner != nil && *a.Owner != "" {
		w.project("", *a.Owner)
	}
	rows, _ := s.pool.Query(ctx, "SELECT uuid, name, traits FROM nodes WHERE "+strings.Join(w.conds, " AND ")+" ORDER BY id", w.args...)
	list, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (AllocationCandidate, error) {
		var c AllocationCandidate
		err := row.Scan(&c.UUID, &c.Name, &c.Traits)
		return c, err
	})
	if err != nil {
		return nil, dbError(err, "list candidate nodes of allocation %s", a.UUID)
	}
	return list, nil
}

// ClaimResult is what one claim of a node for an allocation came to.
type ClaimResult int

const (
	// Claimed: the node is the allocation's.
	Claimed ClaimResult = iota
	// ClaimLocked: another transaction holds the node (Ironic's
	// NodeLocked): worth another try.
	ClaimLocked
	// ClaimUnsuitable: the node no longer matches (taken, in maintenance,
	// no longer available, other resource class or traits: Ironic's
	// _verify_node) or is gone.
	ClaimUnsuitable
	// ClaimAllocationGone: the allocation was deleted, or is no longer
	// allocating.
	ClaimAllocationGone
)

// ClaimNode gives the node to the allocation in one transaction, if the
// node still suits it: the node row is locked without waiting (SKIP
// LOCKED), checked as Ironic's _verify_node checks it, then the allocation
// becomes active with the node and the node gets the allocation as its
// instance_uuid and allocation_uuid and its traits as instance_info
// traits (Ironic's update_allocation). Of two allocations that claim the
// same node, one gets it and the other sees ClaimLocked or
// ClaimUnsuitable.
func (s *Store) ClaimNode(ctx context.Context, a *Allocation, nodeUUID string) (ClaimResult, error) {
	u, _ := canonicalUUID(nodeUUID)
	rc := ""
	if a.ResourceClass != nil {
		rc = *a.ResourceClass
	}
	traits := nonNilList(a.Traits)
	res := ClaimUnsuitable
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var id int64
		var ok bool
		err := tx.QueryRow(ctx, `SELECT id, (provision_state = $2 AND NOT maintenance AND instance_uuid IS NULL AND allocation_uuid IS NULL
				AND resource_class IS NOT DISTINCT FROM $3 AND traits @> $4::text[])
			FROM nodes WHERE uuid = $1 FOR UPDATE SKIP LOCKED`, u, provision.Available, rc, traits).Scan(&id, &ok)
		if errors.Is(err, pgx.ErrNoRows) {
			var exists bool
			if err := tx.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM nodes WHERE uuid = $1)", u).Scan(&exists); err != nil {
				return err
			}
			if exists {
				res = ClaimLocked
			}
			return nil
		}
		if err != nil || !ok {
			return err
		}
		tag, err := tx.Exec(ctx, `UPDATE allocations SET state = 'active', node_uuid = $2, last_error = NULL, updated_at = now()
			WHERE uuid = $1 AND state = 'allocating'`, a.UUID, u)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			res = ClaimAllocationGone
			return nil
		}
		if err := associate(ctx, tx, id, a.UUID, traits); err != nil {
			return err
		}
		res = Claimed
		return nil
	})
	if err != nil {
		return 0, dbError(err, "claim node %s for allocation %s", nodeUUID, a.UUID)
	}
	return res, nil
}

// associate writes the allocation into the node with id: instance_uuid,
// allocation_uuid and instance_info's traits.
func associate(ctx context.Context, tx pgx.Tx, id int64, allocUUID string, traits []string) error {
	_, err := tx.Exec(ctx, `UPDATE nodes SET instance_uuid = $2, allocation_uuid = $2,
		instance_info = instance_info || jsonb_build_object('traits', $3::jsonb), updated_at = now() WHERE id = $1`,
		id, allocUUID, traits)
	return err
}

// BackfillAllocation gives the node nodeUUID to the allocation that
// already holds it as an instance (Ironic's backfill, API 1.58): check
// (the caller's, Ironic's _do_backfill_allocation rules) sees the node
// locked; the node must have no instance but the allocation's
// (ErrNodeAssociated otherwise). An error from check is returned
// unwrapped and changes nothing.
func (s *Store) BackfillAllocation(ctx context.Context, a *Allocation, nodeUUID string, check func(n *Node) error) (*Node, error) {
	u, _ := canonicalUUID(nodeUUID)
	var checkErr error
	var out *Node
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		rows, _ := tx.Query(ctx, "SELECT "+nodeColumns+" FROM nodes WHERE uuid = $1 FOR UPDATE", u)
		n, err := pgx.CollectExactlyOneRow(rows, scanNode)
		if err != nil {
			return err
		}
		if checkErr = check(n); checkErr != nil {
			return checkErr
		}
		if (n.InstanceUUID != nil && *n.InstanceUUID != a.UUID) || (n.AllocationUUID != nil && *n.AllocationUUID != a.UUID) {
			inst := ""
			if n.InstanceUUID != nil {
				inst = *n.InstanceUUID
			}
			return fmt.Errorf("node %s is associated with instance %s: %w", n.UUID, inst, ErrNodeAssociated)
		}
		tag, err := tx.Exec(ctx, `UPDATE allocations SET state = 'active', node_uuid = $2, last_error = NULL, updated_at = now()
			WHERE uuid = $1`, a.UUID, u)
		if err != nil {
			return err
		}
		if tag.RowsAffected() == 0 {
			return fmt.Errorf("allocation %s: %w", a.UUID, ErrNotFound)
		}
		if err := associate(ctx, tx, n.ID, a.UUID, nonNilList(a.Traits)); err != nil {
			return err
		}
		rows, _ = tx.Query(ctx, "SELECT "+nodeColumns+" FROM nodes WHERE id = $1", n.ID)
		out, err = pgx.CollectExactlyOneRow(rows, scanNode)
		return err
	})
	if checkErr != nil {
		return nil, checkErr
	}
	if err != nil {
		return nil, dbError(err, "backfill allocation %s with node %s", a.UUID, nodeUUID)
	}
	return out, nil
}

// DeleteAllocation deletes the allocation and frees its node (no
// instance_uuid, no allocation_uuid) in one transaction, after check
// (Ironic's verify_node_for_deallocation, the caller's) has seen the node
// locked; an error from check is returned unwrapped and changes nothing.
// The allocation is locked first, so that a claim in flight either
// finished before or finds it gone.
func (s *Store) DeleteAllocation(ctx context.Context, uuid string, check func(n *Node) error) error {
	u, _ := canonicalUUID(uuid)
	var checkErr error
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		var nodeUUID *string
		if err := tx.QueryRow(ctx, "SELECT node_uuid FROM allocations WHERE uuid = $1 FOR UPDATE", u).Scan(&nodeUUID); err != nil {
			return err
		}
		if nodeUUID != nil {
			rows, _ := tx.Query(ctx, "SELECT "+nodeColumns+" FROM nodes WHERE uuid = $1 FOR UPDATE", *nodeUUID)
			n, err := pgx.CollectExactlyOneRow(rows, scanNode)
			if err != nil && !errors.Is(err, pgx.ErrNoRows) {
				return err
			}
			if n != nil && check != nil {
				if checkErr = check(n); checkErr != nil {
					return checkErr
				}
			}
		}
		return releaseAllocation(ctx, tx, u)
	})
	if checkErr != nil {
		return checkErr
	}
	return dbError(err, "delete allocation %s", uuid)
}

// releaseAllocation frees the node of the allocation and deletes it
// (Ironic's destroy_allocation): the node loses its instance_uuid here,
// its allocation_uuid by the foreign key.
func releaseAllocation(ctx context.Context, tx pgx.Tx, uuid string) error {
	if _, err := tx.Exec(ctx, "UPDATE nodes SET instance_uuid = NULL, updated_at = now() WHERE allocation_uuid = $1", uuid); err != nil {
		return err
	}
	tag, err := tx.Exec(ctx, "DELETE FROM allocations WHERE uuid = $1", uuid)
	if err != nil {
		return err
	}
	if tag.RowsAffected() == 0 {
		return pgx.ErrNoRows
	}
	return nil
}

// ResolveNodes maps each of idents, a node's UUID or name, to the node's
// UUID; idents that name no node (owned or leased by project, when set)
// are left out (Ironic's check_node_list).
func (s *Store) ResolveNodes(ctx context.Context, idents []string, project string) (map[string]string, error) {
	w := where{}
	w.args = append(w.args, idents)
	w.conds = append(w.conds, "(uuid = ANY($1::text[]) OR name = ANY($1::text[]))")
	w.project("", project)
	rows, _ := s.pool.Query(ctx, "SELECT uuid, name FROM nodes WHERE "+strings.Join(w.conds, " AND "), w.args...)
	out := map[string]string{}
	want := map[string]bool{}
	for _, id := range idents {
		want[id] = true
	}
	var u string
	var name *string
	_, err := pgx.ForEachRow(rows, []any{&u, &name}, func() error {
		if want[u] {
			out[u] = u
		}
		if name != nil && want[*name] {
			out[*name] = u
		}
		return nil
	})
	if err != nil {
		return nil, dbError(err, "resolve nodes")
	}
	return out, nil
}
