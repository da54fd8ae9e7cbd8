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
)

// DefaultHistoryMaxEntries is how many node_history rows a node keeps, as
// Ironic's [conductor]node_history_max_entries.
const DefaultHistoryMaxEntries = 300

// Store is the inventory database. It is safe for concurrent use.
type Store struct {
	// HistoryMaxEntries bounds node_history per node; oldest rows are pruned.
	HistoryMaxEntries int
}

// Open connects a pool to databaseURL (a libpq URL or DSN).
func Open(ctx context.Context, databaseURL string) (*Store, error) { panic("todo") }

// Close releases the pool.
func (s *Store) Close() { panic("todo") }

// Ping checks that the database answers.
func (s *Store) Ping(ctx context.Context) error { panic("todo") }

// Migrate applies the embedded SQL migrations not yet recorded in
// schema_migrations. Concurrent callers serialise on an advisory lock.
func (s *Store) Migrate(ctx context.Context) error { panic("todo") }
