package store

import (
	"context"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
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
	// Project (API 1.113) is the project of the request that caused the
	// event, empty when none did or it carried none.
	Project string `json:"project" db:"project"`
	// State and TargetProvisionState (API 1.115) are the node's when the
	// event was recorded, DurationSeconds how long it had been in that
	// state (since provision_updated_at), as Ironic's node_history_record.
	// The store fills them from the node's row; rows from before 0.2.0
	// have none.
	State                *string `json:"state" db:"state"`
	TargetProvisionState *string `json:"target_provision_state" db:"target_provision_state"`
	DurationSeconds      *int    `json:"duration_seconds" db:"duration_seconds"`
}

const historyColumns = `id, uuid, node_uuid, created_at, severity, event_type, event, conductor, user_name,
	COALESCE(project, ''), state, target_provision_state, duration_seconds`

func scanHistory(row pgx.CollectableRow) (HistoryEvent, error) {
	var e HistoryEvent
	err := row.Scan(&e.ID, &e.UUID, &e.NodeUUID, &e.CreatedAt, &e.Severity, &e.EventType, &e.Event, &e.Conductor, &e.User,
		&e.Project, &e.State, &e.TargetProvisionState, &e.DurationSeconds)
	return e, err
}

// historyNodeState is the SQL of the node's provision state, target and
// seconds in that state, for the history row an INSERT ... SELECT writes
// from a node row n (read before any change the same statement makes).
const historyNodeState = `n.provision_state, n.target_provision_state,
	CASE WHEN n.provision_updated_at IS NULL THEN NULL ELSE GREATEST(0, floor(EXTRACT(EPOCH FROM now() - n.provision_updated_at)))::integer END`

// AddHistory records e for the node (UUID and CreatedAt filled when empty,
// Severity defaults to INFO) and, in the same statement, prunes the node's
// oldest rows beyond HistoryMaxEntries (0 or less: keep all). ErrNotFound
// when the node does not exist.
func (s *Store) AddHistory(ctx context.Context, nodeUUID string, e HistoryEvent) error {
	node, _ := canonicalUUID(nodeUUID)
	if e.UUID == "" {
		e.UUID = uuid.NewString()
	}
	if e.Severity == "" {
		e.Severity = SeverityInfo
	}
	var createdAt *time.Time
	if !e.CreatedAt.IsZero() {
		createdAt = &e.CreatedAt
	}
	// A data-modifying CTE runs to completion although the DELETE never
	// reads it; the DELETE sees the rows from before the INSERT, so keeping
	// max-1 of those plus the new one leaves max.
	_, err := s.pool.Exec(ctx, `WITH ins AS (
			INSERT INTO node_history (uuid, node_uuid, created_at, severity, event_type, event, conductor, user_name,
				project, state, target_provision_state, duration_seconds)
			SELECT $1, $2, COALESCE($3, now()), $4, $5, $6, $7, $8, NULLIF($10, ''), `+historyNodeState+`
			FROM (SELECT 1) one LEFT JOIN nodes n ON n.uuid = $2 RETURNING id)
		DELETE FROM node_history WHERE $9 > 0 AND node_uuid = $2 AND id <= (
			SELECT id FROM node_history WHERE node_uuid = $2 ORDER BY id DESC OFFSET GREATEST($9 - 1, 0) LIMIT 1)`,
		e.UUID, node, createdAt, e.Severity, e.EventType, e.Event, e.Conductor, e.User, s.HistoryMaxEntries, e.Project)
	return dbError(err, "add history event to node %s", nodeUUID)
}

// ListHistory returns the node's history, oldest first; empty when the node
// has none or does not exist.
func (s *Store) ListHistory(ctx context.Context, nodeUUID string) ([]HistoryEvent, error) {
	node, _ := canonicalUUID(nodeUUID)
	rows, _ := s.pool.Query(ctx, "SELECT "+historyColumns+" FROM node_history WHERE node_uuid = $1 ORDER BY created_at, id", node)
	events, err := pgx.CollectRows(rows, scanHistory)
	if err != nil {
		return nil, dbError(err, "list history of node %s", nodeUUID)
	}
	return events, nil
}

// GetHistoryEvent returns one event of the node's history.
func (s *Store) GetHistoryEvent(ctx context.Context, nodeUUID, eventUUID string) (*HistoryEvent, error) {
	node, _ := canonicalUUID(nodeUUID)
	ev, _ := canonicalUUID(eventUUID)
	rows, _ := s.pool.Query(ctx, "SELECT "+historyColumns+" FROM node_history WHERE node_uuid = $1 AND uuid = $2", node, ev)
	e, err := pgx.CollectExactlyOneRow(rows, scanHistory)
	if err != nil {
		return nil, dbError(err, "get history event %s of node %s", eventUUID, nodeUUID)
	}
	return &e, nil
}
