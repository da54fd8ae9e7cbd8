// Package store owns ironflow's inventory in PostgreSQL: nodes, ports, node
// history, boot configurations served by the PXE services, DHCP leases and
// node inventories. Every uniqueness rule lives in the database (unique
// constraints), and every state change that two requests could race for is a
// single conditional UPDATE, so that API replicas and workers can run side by
// side. It never talks to BMCs, agents or Temporal.
package store

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Errors callers match with errors.Is; the API maps them to HTTP codes.
var (
	ErrNotFound       = errors.New("not found")
	ErrDuplicateName  = errors.New("duplicate name")
	ErrDuplicateUUID  = errors.New("duplicate uuid")
	ErrDuplicateMAC   = errors.New("duplicate MAC address")
	ErrStateConflict  = errors.New("state conflict")
	ErrPoolExhausted  = errors.New("address pool exhausted")
	ErrMarkerNotFound = errors.New("marker not found")
	ErrInvalidSortKey = errors.New("invalid sort key")
	ErrInvalidInput   = errors.New("invalid input")
	// ErrInstanceAssociated: another node already has this instance_uuid.
	ErrInstanceAssociated = errors.New("instance already associated with another node")
	// ErrChassisNotFound: a node names a chassis that does not exist.
	ErrChassisNotFound = errors.New("chassis not found")
	// ErrParentNotFound: a node names a parent_node that does not exist.
	ErrParentNotFound = errors.New("parent node not found")
	// ErrChassisNotEmpty: the chassis to delete still has nodes.
	ErrChassisNotEmpty = errors.New("chassis contains nodes")
)

// DefaultHistoryMaxEntries is how many node_history rows a node keeps, as
// Ironic's [conductor]node_history_max_entries.
const DefaultHistoryMaxEntries = 300

// Store is the inventory database. It is safe for concurrent use.
type Store struct {
	// HistoryMaxEntries bounds node_history per node; oldest rows are pruned.
	HistoryMaxEntries int

	pool *pgxpool.Pool
}

// Open connects a pool to databaseURL (a libpq URL or DSN) and checks that
// the database answers.
func Open(ctx context.Context, databaseURL string) (*Store, error) {
	cfg, err := pgxpool.ParseConfig(databaseURL)
	if err != nil {
		// The URL may carry a password: never echo it.
		return nil, fmt.Errorf("parse database URL: %w", ErrInvalidInput)
	}
	if cfg.ConnConfig.ConnectTimeout == 0 {
		cfg.ConnConfig.ConnectTimeout = DefaultConnectTimeout
	}
	cfg.ConnConfig.Tracer = queryDeadline{timeout: DefaultQueryTimeout}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("connect to database %s on %s: %w", cfg.ConnConfig.Database, cfg.ConnConfig.Host, err)
	}
	s := &Store{HistoryMaxEntries: DefaultHistoryMaxEntries, pool: pool}
	if err := s.Ping(ctx); err != nil {
		pool.Close()
		return nil, fmt.Errorf("connect to database %s on %s: %w", cfg.ConnConfig.Database, cfg.ConnConfig.Host, err)
	}
	return s, nil
}

// Close releases the pool.
func (s *Store) Close() { s.pool.Close() }

// Ping checks that the database answers, within DefaultQueryTimeout when
// ctx has no deadline of its own.
func (s *Store) Ping(ctx context.Context) error {
	q := queryDeadline{timeout: DefaultQueryTimeout}
	ctx = q.start(ctx)
	defer q.end(ctx)
	return s.pool.Ping(ctx)
}

// Pool exposes the connection pool, for tests and tools that need raw SQL.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }
