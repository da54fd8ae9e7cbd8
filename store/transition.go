package store

import (
	"context"
	"fmt"

	"github.com/google/uuid"

	"github.com/ironflow/ironflow/provision"
)

// Transition is one provision-state change a workflow records.
type Transition struct {
	// From, when not empty, are the states the node must be in.
	From []provision.State
	To   provision.State
	// Target and LastError are written as given (nil clears them).
	Target    *provision.State
	LastError *string
	// StepKind "clean", "deploy" or "service" sets that step field to Step
	// (nil: {}); any other kind clears them all.
	StepKind provision.StepKind
	Step     map[string]any
	// DropInternal are driver_internal_info keys to remove.
	DropInternal []string
	// SetInternal are driver_internal_info keys to set, in the same
	// statement (after DropInternal).
	SetInternal map[string]any
	// History, when its Event is not empty, is added to the node's history.
	History HistoryEvent
}

// RecordTransition applies t and adds its history event in one statement
// (one round trip, no explicit transaction): a workflow records a state
// several times per deploy, so this is the store's hottest write.
// provision_updated_at moves only when the state changes. It returns
// ErrStateConflict (naming the current state) when From does not hold,
// ErrNotFound when the node does not exist.
func (s *Store) RecordTransition(ctx context.Context, nodeUUID string, t Transition) error {
	u, _ := canonicalUUID(nodeUUID)
	from := t.From
	if from == nil {
		from = []provision.State{}
	}
	step := t.Step
	if step == nil {
		step = map[string]any{}
	}
	drop := t.DropInternal
	if drop == nil {
		drop = []string{}
	}
	set := t.SetInternal
	if set == nil {
		set = map[string]any{}
	}
	h := t.History
	if h.UUID == "" {
		h.UUID = uuid.NewString()
	}
	if h.Severity == "" {
		h.Severity = SeverityInfo
	}
	// The DELETE sees the history from before the INSERT (data-modifying
	// CTEs share one snapshot), so keeping max-1 of it plus the new row
	// leaves max, as AddHistory does.
	var changed int
	err := s.pool.QueryRow(ctx, `WITH upd AS (
			UPDATE nodes SET provision_state = $2, target_provision_state = $3, last_error = $4,
				provision_updated_at = CASE WHEN provision_state <> $2 THEN now() ELSE provision_updated_at END,
				updated_at = now(),
				clean_step = CASE $6 WHEN 'clean' THEN $7::jsonb WHEN 'deploy' THEN clean_step WHEN 'service' THEN clean_step ELSE '{}'::jsonb END,
				deploy_step = CASE $6 WHEN 'deploy' THEN $7::jsonb WHEN 'clean' THEN deploy_step WHEN 'service' THEN deploy_step ELSE '{}'::jsonb END,
				service_step = CASE $6 WHEN 'service' THEN $7::jsonb ELSE '{}'::jsonb END,
				driver_internal_info = (driver_internal_info - $8::text[]) || $16::jsonb
			WHERE uuid = $1 AND (cardinality($5::text[]) = 0 OR provision_state = ANY($5::text[]))
			RETURNING uuid),
		ins AS (
			INSERT INTO node_history (uuid, node_uuid, created_at, severity, event_type, event, conductor, user_name,
				project, state, target_provision_state, duration_seconds)
			SELECT $9, upd.uuid, now(), $10, $11, $12, $13, $14, NULLIF($17, ''), `+historyNodeState+`
			FROM upd JOIN nodes n ON n.uuid = upd.uuid WHERE $12 <> ''),
		trim AS (
			DELETE FROM node_history WHERE $15 > 0 AND $12 <> '' AND EXISTS (SELECT 1 FROM upd) AND node_uuid = $1 AND id <= (
				SELECT id FROM node_history WHERE node_uuid = $1 ORDER BY id DESC OFFSET GREATEST($15 - 1, 0) LIMIT 1))
		SELECT count(*) FROM upd`,
		u, t.To, t.Target, t.LastError, from, t.StepKind, step, drop,
		h.UUID, h.Severity, h.EventType, h.Event, h.Conductor, h.User, s.HistoryMaxEntries, set, h.Project).Scan(&changed)
	if err != nil {
		return dbError(err, "record provision state %s of node %s", t.To, nodeUUID)
	}
	if changed == 1 {
		return nil
	}
	return s.notTransitioned(ctx, nodeUUID, t.To, from)
}

// RecordStep shows the step that starts running as the node's deploy_step
// (kind "deploy"), clean_step (kind "clean") or service_step (kind
// "service"), leaving the rest of the node
// as it is: the worker records it when a step begins, between the
// transitions a workflow records. It returns ErrNotFound when the node does
// not exist.
func (s *Store) RecordStep(ctx context.Context, nodeUUID, kind string, step map[string]any) error {
	return s.recordStep(ctx, nodeUUID, kind, step, "", 0, nil)
}

// RecordStepAt is RecordStep that also moves the plan to the step: when
// driver_internal_info's indexKey is not index yet, it is set to index and
// the keys drop (the previous step's progress) are removed, in the same
// statement; when it already is (an activity's retry), only the step is
// written, so the running step's own progress stays.
func (s *Store) RecordStepAt(ctx context.Context, nodeUUID, kind string, step map[string]any, indexKey string, index int, drop []string) error {
	return s.recordStep(ctx, nodeUUID, kind, step, indexKey, index, drop)
}

// recordStep is RecordStep, and RecordStepAt when indexKey is not empty.
func (s *Store) recordStep(ctx context.Context, nodeUUID, kind string, step map[string]any, indexKey string, index int, drop []string) error {
	if kind != "deploy" && kind != "clean" && kind != "service" {
		return fmt.Errorf("record %q step of node %s: %w", kind, nodeUUID, ErrInvalidInput)
	}
	if step == nil {
		step = map[string]any{}
	}
	if drop == nil {
		drop = []string{}
	}
	u, _ := canonicalUUID(nodeUUID)
	tag, err := s.pool.Exec(ctx, `UPDATE nodes SET
			deploy_step = CASE $2 WHEN 'deploy' THEN $3::jsonb ELSE deploy_step END,
			clean_step = CASE $2 WHEN 'clean' THEN $3::jsonb ELSE clean_step END,
			service_step = CASE $2 WHEN 'service' THEN $3::jsonb ELSE service_step END,
			driver_internal_info = CASE WHEN $4::text <> '' AND driver_internal_info->($4::text) IS DISTINCT FROM to_jsonb($5::int)
				THEN (driver_internal_info - $6::text[]) || jsonb_build_object($4::text, $5::int)
				ELSE driver_internal_info END,
			updated_at = now()
		WHERE uuid = $1`, u, kind, step, indexKey, index, drop)
	if err != nil {
		return dbError(err, "record %s step of node %s", kind, nodeUUID)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("record %s step of node %s: %w", kind, nodeUUID, ErrNotFound)
	}
	return nil
}
