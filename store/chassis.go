package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Chassis groups nodes (Ironic's chassis, API 1.1); nodes name it by
// chassis_uuid.
type Chassis struct {
	ID          int64          `json:"-" db:"id"`
	UUID        string         `json:"uuid" db:"uuid"`
	Description *string        `json:"description" db:"description"`
	Extra       map[string]any `json:"extra" db:"extra"`
	CreatedAt   time.Time      `json:"created_at" db:"created_at"`
	UpdatedAt   *time.Time     `json:"updated_at" db:"updated_at"`
}

// ChassisFilter pages ListChassis.
type ChassisFilter struct {
	Limit   int
	Marker  string // a chassis UUID
	SortKey string // see ChassisSortKeys; default "id"
	SortDir string
}

// ChassisSortKeys are the accepted ChassisFilter.SortKey values.
var ChassisSortKeys = map[string]string{
	"id":          "id",
	"uuid":        "uuid",
	"description": "COALESCE(description, '')",
	"created_at":  "created_at",
	"updated_at":  "COALESCE(updated_at, '-infinity'::timestamptz)",
}

const chassisColumns = "id, uuid, description, extra, created_at, updated_at"

var chassisTable = table{name: "chassis", what: "chassis", whats: "chassis", sortKeys: ChassisSortKeys}

func scanChassis(row pgx.CollectableRow) (*Chassis, error) {
	ch := &Chassis{}
	err := row.Scan(&ch.ID, &ch.UUID, &ch.Description, &ch.Extra, &ch.CreatedAt, &ch.UpdatedAt)
	return ch, err
}

// CreateChassis inserts ch, filling UUID when empty, ID and CreatedAt.
func (s *Store) CreateChassis(ctx context.Context, ch *Chassis) error {
	if err := newUUID(&ch.UUID); err != nil {
		return fmt.Errorf("create chassis: %w", err)
	}
	ch.Extra = nonNil(ch.Extra)
	err := s.pool.QueryRow(ctx, "INSERT INTO chassis (uuid, description, extra) VALUES ($1, $2, $3) RETURNING id, created_at",
		ch.UUID, ch.Description, ch.Extra).Scan(&ch.ID, &ch.CreatedAt)
	return dbError(err, "create chassis %s", ch.UUID)
}

// GetChassis finds a chassis by UUID.
func (s *Store) GetChassis(ctx context.Context, id string) (*Chassis, error) {
	return getRow(ctx, s, chassisTable, chassisColumns, scanChassis, id, false)
}

// ListChassis returns the chassis in f's page.
func (s *Store) ListChassis(ctx context.Context, f ChassisFilter) ([]*Chassis, error) {
	p, err := chassisTable.page(f.Limit, f.Marker, f.SortKey, f.SortDir)
	if err != nil {
		return nil, err
	}
	return listPage(ctx, s, p, chassisColumns, scanChassis, nil, nil)
}

// UpdateChassis reads the chassis FOR UPDATE, lets fn change it and writes
// description and extra back. An error from fn is returned unwrapped.
func (s *Store) UpdateChassis(ctx context.Context, id string, fn func(ch *Chassis) error) (*Chassis, error) {
	u, _ := canonicalUUID(id)
	return updateRow(ctx, s, chassisTable, chassisColumns, scanChassis, id, "uuid", u, fn, func(tx pgx.Tx, _ Chassis, ch *Chassis) (*Chassis, error) {
		ch.Extra = nonNil(ch.Extra)
		rows, _ := tx.Query(ctx, "UPDATE chassis SET description = $2, extra = $3, updated_at = now() WHERE id = $1 RETURNING "+chassisColumns,
			ch.ID, ch.Description, ch.Extra)
		return pgx.CollectExactlyOneRow(rows, scanChassis)
	})
}

// DeleteChassis deletes an empty chassis: ErrChassisNotEmpty while nodes
// name it, ErrNotFound if it does not exist.
func (s *Store) DeleteChassis(ctx context.Context, id string) error {
	u, _ := canonicalUUID(id)
	tag, err := s.pool.Exec(ctx, "DELETE FROM chassis WHERE uuid = $1", u)
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) && pgErr.Code == "23503" {
		return fmt.Errorf("delete chassis %s: %w", id, ErrChassisNotEmpty)
	}
	if err != nil {
		return dbError(err, "delete chassis %s", id)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("delete chassis %s: %w", id, ErrNotFound)
	}
	return nil
}
