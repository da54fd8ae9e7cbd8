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
	CreatedAt      time.Time
	UpdatedAt      *time.Time
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
	r.public, r.owner, r.disable_ramdisk, r.created_at, r.updated_at`

var runbookTable = table{name: "runbooks", alias: "r", what: "runbook", whats: "runbooks", sortKeys: RunbookSortKeys}

func scanRunbook(row pgx.CollectableRow) (*Runbook, error) {
	r := &Runbook{}
	var steps []byte
	if err := row.Scan(&r.ID, &r.UUID, &r.Name, &r.Extra, &steps, &r.Public, &r.Owner, &r.DisableRamdisk, &r.CreatedAt, &r.UpdatedAt); err != nil {
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
		err := tx.QueryRow(ctx, `INSERT INTO runbooks (uuid, name, extra, public, owner, disable_ramdisk) VALUES ($1, $2, $3, $4, $5, $6)
			RETURNING id, created_at`, r.UUID, r.Name, r.Extra, r.Public, r.Owner, r.DisableRamdisk).Scan(&r.ID, &r.CreatedAt)
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
		err := tx.QueryRow(ctx, `UPDATE runbooks SET name = $2, extra = $3, public = $4, owner = $5, disable_ramdisk = $6, updated_at = now()
			WHERE uuid = $1 RETURNING id, updated_at`, r.UUID, r.Name, r.Extra, r.Public, r.Owner, r.DisableRamdisk).Scan(&r.ID, &r.UpdatedAt)
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

// DeleteRunbook deletes a runbook and its steps.
func (s *Store) DeleteRunbook(ctx context.Context, uuid string) error {
	return s.deleteByUUID(ctx, "runbooks", "runbook", uuid)
}
