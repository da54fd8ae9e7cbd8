package store

import (
	"context"
	"time"
)

// Severities of node history events, as Ironic's.
const (
	SeverityInfo  = "INFO"
	SeverityError = "ERROR"
)

// HistoryEvent is one row of a node's history (Ironic's node_history).
type HistoryEvent struct {
	ID        int64     `json:"-" db:"id"`
	UUID      string    `json:"uuid" db:"uuid"`
	NodeUUID  string    `json:"-" db:"node_uuid"`
	CreatedAt time.Time `json:"created_at" db:"created_at"`
	Severity  string    `json:"severity" db:"severity"`
	EventType string    `json:"event_type" db:"event_type"`
	Event     string    `json:"event" db:"event"`
	Conductor string    `json:"conductor" db:"conductor"`
	User      string    `json:"user" db:"user_name"`
}

// AddHistory records e for the node (UUID and CreatedAt filled when empty)
// and prunes the node's oldest rows beyond HistoryMaxEntries.
func (s *Store) AddHistory(ctx context.Context, nodeUUID string, e HistoryEvent) error {
	panic("todo")
}

// ListHistory returns the node's history, oldest first.
func (s *Store) ListHistory(ctx context.Context, nodeUUID string) ([]HistoryEvent, error) {
	panic("todo")
}

// GetHistoryEvent returns one event of the node's history.
func (s *Store) GetHistoryEvent(ctx context.Context, nodeUUID, eventUUID string) (*HistoryEvent, error) {
	panic("todo")
}
