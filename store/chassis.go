package store

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
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

func scanChassis(row pgx.CollectableRow) (*Chassis, error) {
	ch := &Chassis{}
	err := row.Scan(&ch.ID, &ch.UUID, &ch.Description, &ch.Extra, &ch.CreatedAt, &ch.UpdatedAt)
	return ch, err
}

// CreateChassis inserts ch, filling UUID when empty, ID and CreatedAt.
func (s *Store) CreateChassis(ctx context.Context, ch *Chassis) error {
	if ch.UUID == "" {
		ch.UUID = uuid.NewString()
	} else if u, ok := canonicalUUID(ch.UUID); ok {
		ch.UUID = u
	} else {
		return fmt.Errorf("create chassis: uuid %q: %w", ch.UUID, ErrInvalidInput)
	}
	if ch.Extra == nil {
		ch.Extra = map[string]any{}
	}
	err := s.pool.QueryRow(ctx, "INSERT INTO chassis (uuid, description, extra) VALUES ($1, $2, $3) RETURNING id, created_at",
		ch.UUID, ch.Description, ch.Extra).Scan(&ch.ID, &ch.CreatedAt)
	return dbError(err, "create chassis %s", ch.UUID)
}

// GetChassis finds a chassis by UUID.
func (s *Store) GetChassis(ctx context.Context, id string) (*Chassis, error) {
	u, _ := canonicalUUID(id)
	rows, _ := s.pool.Query(ctx, "SELECT "+chassisColumns+" FROM chassis WHERE uuid = $1", u)
	ch, err := pgx.CollectExactlyOneRow(rows, scanChassis)
	if err != nil {
		return nil, dbError(err, "get chassis %s", id)
	}
	return ch, nil
}

// ListChassis returns the chassis in f's page.
func (s *Store) ListChassis(ctx context.Context, f ChassisFilter) ([]*Chassis, error) {
	expr, dir, op, err := sortClause(ChassisSortKeys, f.SortKey, f.SortDir)
	if err != nil {
		return nil, fmt.Errorf("list chassis: %w", err)
	}
	marker := f.Marker
	if marker != "" {
		marker, _ = canonicalUUID(marker)
	}
	q, args := pageQuery("SELECT "+chassisColumns+" FROM chassis", nil, nil, "chassis", "id", expr, dir, op, marker, f.Limit)
	rows, _ := s.pool.Query(ctx, q, args...)
	list, err := pgx.CollectRows(rows, scanChassis)
	if err != nil {
		return nil, dbError(err, "list chassis")
	}
	if len(list) == 0 && marker != "" {
		if err := s.checkMarker(ctx, "chassis", marker); err != nil {
			return nil, fmt.Errorf("list chassis: %w", err)
		}
	}
	return list, nil
}

// UpdateChassis reads the chassis FOR UPDATE, lets fn change it and writes
// description and extra back. An error from fn is returned unwrapped.
func (s *Store) UpdateChassis(ctx context.Context, id string, fn func(ch *Chassis) error) (*Chassis, error) {
	u, _ := canonicalUUID(id)
	var out *Chassis
	var fnErr error
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		rows, _ := tx.Query(ctx, "SELECT "+chassisColumns+" FROM chassis WHERE uuid = $1 FOR UPDATE", u)
		ch, err := pgx.CollectExactlyOneRow(rows, scanChassis)
		if err != nil {
			return err
		}
		if fnErr = fn(ch); fnErr != nil {
			return fnErr
		}
		if ch.Extra == nil {
			ch.Extra = map[string]any{}
		}
		rows, _ = tx.Query(ctx, "UPDATE chassis SET description = $2, extra = $3, updated_at = now() WHERE id = $1 RETURNING "+chassisColumns,
			ch.ID, ch.Description, ch.Extra)
		out, err = pgx.CollectExactlyOneRow(rows, scanChassis)
		return err
	})
	if fnErr != nil {
		return nil, fnErr
	}
	if err != nil {
		return nil, dbError(err, "update chassis %s", id)
	}
	return out, nil
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
