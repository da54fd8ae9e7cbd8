package store

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// RunbookStep is one step of a runbook, with Ironic's keys: a runbook's
// steps run by their order, not by priority.
type RunbookStep struct {
	Interface string         `json:"interface"`
	Step      string         `json:"step"`
	Args      map[string]any `json:"args"`
	Order     int            `json:"order"`
}

// Runbook is a named list of clean or service steps (Ironic's runbook, API
// 1.92); a node may run it when the runbook's name is among its traits.
type Runbook struct {
	ID             int64
	UUID           string
	Name           string
	Extra          map[string]any
	Steps          []RunbookStep
	Public         bool
	Owner          *string
	DisableRamdisk bool
	// Description and Traits came with API 1.112: from then a runbook is
	// approved for the nodes that have one of its traits. UpdateRunbook
	// leaves Traits alone (SetRunbookTraits, AddRunbookTrait and
	// RemoveRunbookTrait change them).
	Description *string
	Traits      []string
	CreatedAt   time.Time
	UpdatedAt   *time.Time
}

// RunbookSortKeys are the accepted sort keys: every column but extra and
// steps, as Ironic.
var RunbookSortKeys = map[string]string{
	"id":              "r.id",
	"uuid":            "r.uuid",
	"name":            "r.name",
	"public":          "r.public",
	"owner":           "COALESCE(r.owner, '')",
	"disable_ramdisk": "r.disable_ramdisk",
	"created_at":      "r.created_at",
	"updated_at":      "COALESCE(r.updated_at, '-infinity'::timestamptz)",
}

const runbookColumns = `r.id, r.uuid, r.name, r.extra,
	COALESCE((SELECT jsonb_agg(jsonb_build_object('interface', s.interface, 'step', s.step, 'args', s.args, 'order', s."order") ORDER BY s.id)
		FROM runbook_steps s WHERE s.runbook_id = r.id), '[]'::jsonb),
	r.public, r.owner, r.disable_ramdisk, r.description, r.traits, r.created_at, r.updated_at`

var runbookTable = table{name: "runbooks", alias: "r", what: "runbook", whats: "runbooks", sortKeys: RunbookSortKeys}

func scanRunbook(row pgx.CollectableRow) (*Runbook, error) {
	r := &Runbook{}
	var steps []byte
	if err := row.Scan(&r.ID, &r.UUID, &r.Name, &r.Extra, &steps, &r.Public, &r.Owner, &r.DisableRamdisk, &r.Description, &r.Traits, &r.CreatedAt, &r.UpdatedAt); err != nil {
		return nil, err
	}
	if err := json.Unmarshal(steps, &r.Steps); err != nil {
		return nil, fmt.Errorf("runbook %s steps: %w", r.UUID, err)
	}
	return r, nil
}

// CreateRunbook inserts r with its steps, filling UUID when empty, ID and
// CreatedAt. A second runbook of the same name is ErrDuplicateName.
func (s *Store) CreateRunbook(ctx context.Context, r *Runbook) error {
	if err := newUUID(&r.UUID); err != nil {
		return fmt.Errorf("create runbook: %w", err)
	}
	r.Extra = nonNil(r.Extra)
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		if r.Traits == nil {
			r.Traits = []string{}
		}
		err := tx.QueryRow(ctx, `INSERT INTO runbooks (uuid, name, extra, public, owner, disable_ramdisk, description, traits)
			VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
			RETURNING id, created_at`, r.UUID, r.Name, r.Extra, r.Public, r.Owner, r.DisableRamdisk, r.Description, r.Traits).Scan(&r.ID, &r.CreatedAt)
		if err != nil {
			return err
		}
		return insertRunbookSteps(ctx, tx, r)
	})
	return dbError(err, "create runbook %s", r.UUID)
}

func insertRunbookSteps(ctx context.Context, tx pgx.Tx, r *Runbook) error {
	for _, st := range r.Steps {
		if _, err := tx.Exec(ctx, `INSERT INTO runbook_steps (runbook_id, interface, step, args, "order") VALUES ($1, $2, $3, $4, $5)`,
			r.ID, st.Interface, st.Step, nonNil(st.Args), st.Order); err != nil {
			return err
		}
	}
	return nil
}

// GetRunbook finds a runbook by UUID or name.
func (s *Store) GetRunbook(ctx context.Context, ident string) (*Runbook, error) {
	return getRow(ctx, s, runbookTable, runbookColumns, scanRunbook, ident, true)
}

// ListRunbooks returns a page of runbooks.
func (s *Store) ListRunbooks(ctx context.Context, f StepListFilter) ([]*Runbook, error) {
	p, err := runbookTable.page(f.Limit, f.Marker, f.SortKey, f.SortDir)
	if err != nil {
		return nil, err
	}
	var w where
	if f.Project != "" {
		w.args = append(w.args, f.Project)
		w.conds = append(w.conds, fmt.Sprintf("(r.owner = $%d OR r.public)", len(w.args)))
	}
	return listPage(ctx, s, p, runbookColumns, scanRunbook, w.conds, w.args)
}

// UpdateRunbook writes r's fields and steps over the stored runbook r.UUID
// and fills UpdatedAt.
func (s *Store) UpdateRunbook(ctx context.Context, r *Runbook) error {
	r.Extra = nonNil(r.Extra)
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		err := tx.QueryRow(ctx, `UPDATE runbooks SET name = $2, extra = $3, public = $4, owner = $5, disable_ramdisk = $6,
			description = $7, updated_at = now()
			WHERE uuid = $1 RETURNING id, traits, updated_at`, r.UUID, r.Name, r.Extra, r.Public, r.Owner, r.DisableRamdisk,
			r.Description).Scan(&r.ID, &r.Traits, &r.UpdatedAt)
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, `DELETE FROM runbook_steps WHERE runbook_id = $1`, r.ID); err != nil {
			return err
		}
		return insertRunbookSteps(ctx, tx, r)
	})
	return dbError(err, "update runbook %s", r.UUID)
}

// SetRunbookTraits replaces the traits of the runbook uuid (ErrNotFound if
// it does not exist); repeats are dropped, the order kept.
func (s *Store) SetRunbookTraits(ctx context.Context, uuid string, traits []string) error {
	seen := map[string]bool{}
	kept := []string{}
	for _, t := range traits {
		if !seen[t] {
			seen[t] = true
			kept = append(kept, t)
		}
	}
	return s.changeRunbookTraits(ctx, uuid, "traits = $2::text[]", kept)
}

// AddRunbookTrait adds a trait to the runbook uuid unless it has it.
func (s *Store) AddRunbookTrait(ctx context.Context, uuid, trait string) error {
	return s.changeRunbookTraits(ctx, uuid, "traits = CASE WHEN $2 = ANY(traits) THEN traits ELSE array_append(traits, $2) END", trait)
}

// RemoveRunbookTrait removes a trait from the runbook uuid (nothing if it
// does not have it, as Ironic's runbook traits controller).
func (s *Store) RemoveRunbookTrait(ctx context.Context, uuid, trait string) error {
	return s.changeRunbookTraits(ctx, uuid, "traits = array_remove(traits, $2)", trait)
}

func (s *Store) changeRunbookTraits(ctx context.Context, uuid, set string, arg any) error {
	u, _ := canonicalUUID(uuid)
	tag, err := s.pool.Exec(ctx, "UPDATE runbooks SET "+set+", updated_at = now() WHERE uuid = $1", u, arg)
	if err != nil {
		return dbError(err, "change traits of runbook %s", uuid)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("runbook %s: %w", uuid, ErrNotFound)
	}
	return nil
}

// DeleteRunbook deletes a runbook and its steps.
func (s *Store) DeleteRunbook(ctx context.Context, uuid string) error {
	return s.deleteByUUID(ctx, "runbooks", "runbook", uuid)
}
