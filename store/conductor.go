package store

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
)

// Conductor is a registered worker process, as Ironic's conductors table
// records its conductor services: its hostname, the conductor groups whose
// hardware it reaches, the hardware types it runs, and its heartbeat
// (UpdatedAt).
type Conductor struct {
	ID              int64
	Hostname        string
	ConductorGroups []string
	Drivers         []string
	Online          bool
	CreatedAt       time.Time
	UpdatedAt       time.Time
}

// Alive reports whether the conductor is online and heartbeat within
// timeout of now, as Ironic's API computes "alive".
func (c *Conductor) Alive(now time.Time, timeout time.Duration) bool {
	return c.Online && now.Sub(c.UpdatedAt) <= timeout
}

const conductorColumns = "id, hostname, conductor_groups, drivers, online, created_at, updated_at"

func scanConductor(row pgx.CollectableRow) (*Conductor, error) {
	c := &Conductor{}
	err := row.Scan(&c.ID, &c.Hostname, &c.ConductorGroups, &c.Drivers, &c.Online, &c.CreatedAt, &c.UpdatedAt)
	return c, err
}

// RegisterConductor records c online with a fresh heartbeat, replacing the
// groups and drivers of an earlier registration of the same hostname (a
// restarted worker), as Ironic's register_conductor(update_existing=True).
// It fills ID, CreatedAt and UpdatedAt.
func (s *Store) RegisterConductor(ctx context.Context, c *Conductor) error {
	if c.ConductorGroups == nil {
		c.ConductorGroups = []string{}
	}
	if c.Drivers == nil {
		c.Drivers = []string{}
	}
	err := s.pool.QueryRow(ctx, `INSERT INTO conductors (hostname, conductor_groups, drivers) VALUES ($1, $2, $3)
		ON CONFLICT (hostname) DO UPDATE SET conductor_groups = EXCLUDED.conductor_groups, drivers = EXCLUDED.drivers,
			online = true, updated_at = now()
		RETURNING id, online, created_at, updated_at`, c.Hostname, c.ConductorGroups, c.Drivers).
		Scan(&c.ID, &c.Online, &c.CreatedAt, &c.UpdatedAt)
	return dbError(err, "register conductor %s", c.Hostname)
}

// TouchConductor records a heartbeat of hostname (ErrNotFound if it is not
// registered, e.g. its row was removed by hand).
func (s *Store) TouchConductor(ctx context.Context, hostname string) error {
	tag, err := s.pool.Exec(ctx, "UPDATE conductors SET updated_at = now(), online = true WHERE hostname = $1", hostname)
	if err != nil {
		return dbError(err, "heartbeat of conductor %s", hostname)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("heartbeat of conductor %s: %w", hostname, ErrNotFound)
	}
	return nil
}

// UnregisterConductor marks hostname offline, as Ironic's conductor does on
// a clean shutdown: the row stays and the API shows it not alive.
func (s *Store) UnregisterConductor(ctx context.Context, hostname string) error {
	_, err := s.pool.Exec(ctx, "UPDATE conductors SET online = false WHERE hostname = $1", hostname)
	return dbError(err, "unregister conductor %s", hostname)
}

// GetConductor finds a conductor by hostname.
func (s *Store) GetConductor(ctx context.Context, hostname string) (*Conductor, error) {
	rows, _ := s.pool.Query(ctx, "SELECT "+conductorColumns+" FROM conductors WHERE hostname = $1", hostname)
	c, err := pgx.CollectExactlyOneRow(rows, scanConductor)
	if err != nil {
		return nil, dbError(err, "get conductor %s", hostname)
	}
	return c, nil
}

// ConductorSortKeys are the accepted sort keys of conductors (Ironic
// refuses alive and drivers).
var ConductorSortKeys = map[string]string{
	"id":              "id",
	"hostname":        "hostname",
	"conductor_group": "conductor_groups",
	"created_at":      "created_at",
	"updated_at":      "updated_at",
}

// ConductorFilter pages the conductor list; Marker is a hostname.
type ConductorFilter struct {
	Limit   int
	Marker  string
	SortKey string
	SortDir string
}

// ListConductors returns every registered conductor, online or not.
func (s *Store) ListConductors(ctx context.Context, f ConductorFilter) ([]*Conductor, error) {
	expr, dir, op, err := sortClause(ConductorSortKeys, f.SortKey, f.SortDir)
	if err != nil {
		return nil, fmt.Errorf("list conductors: %w", err)
	}
	var conds []string
	var args []any
	if f.Marker != "" {
		args = append(args, f.Marker)
		conds = append(conds, fmt.Sprintf("(%s, id) %s (SELECT %s, id FROM conductors WHERE hostname = $%d)", expr, op, expr, len(args)))
	}
	q := "SELECT " + conductorColumns + " FROM conductors"
	if len(conds) > 0 {
		q += " WHERE " + conds[0]
	}
	q += fmt.Sprintf(" ORDER BY %s %s, id %s", expr, dir, dir)
	if f.Limit > 0 {
		args = append(args, f.Limit)
		q += fmt.Sprintf(" LIMIT $%d", len(args))
	}
	rows, _ := s.pool.Query(ctx, q, args...)
	out, err := pgx.CollectRows(rows, scanConductor)
	if err != nil {
		return nil, dbError(err, "list conductors")
	}
	if len(out) == 0 && f.Marker != "" {
		var exists bool
		if err := s.pool.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM conductors WHERE hostname = $1)", f.Marker).Scan(&exists); err != nil {
			return nil, dbError(err, "list conductors")
		}
		if !exists {
			return nil, fmt.Errorf("list conductors: marker %s: %w", f.Marker, ErrMarkerNotFound)
		}
	}
	return out, nil
}

// LiveConductors returns the conductors online with a heartbeat within
// timeout, by hostname: those a node may be served by.
func (s *Store) LiveConductors(ctx context.Context, timeout time.Duration) ([]*Conductor, error) {
	rows, _ := s.pool.Query(ctx, "SELECT "+conductorColumns+` FROM conductors
		WHERE online AND updated_at >= now() - make_interval(secs => $1) ORDER BY hostname`, timeout.Seconds())
	out, err := pgx.CollectRows(rows, scanConductor)
	if err != nil {
		return nil, dbError(err, "list live conductors")
	}
	return out, nil
}
