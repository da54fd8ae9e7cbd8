package store

import (
	"context"
	"time"
)

// FirmwareComponent is one component's versions (Ironic's
// FirmwareComponent): the version first seen, the one the BMC reports now,
// and the one an update last flashed.
type FirmwareComponent struct {
	Component          string     `json:"component"`
	InitialVersion     string     `json:"initial_version"`
	CurrentVersion     string     `json:"current_version"`
	LastVersionFlashed *string    `json:"last_version_flashed"`
	CreatedAt          time.Time  `json:"created_at"`
	UpdatedAt          *time.Time `json:"updated_at"`
}

// SyncFirmwareComponents records the versions the BMC reported, as
// Ironic's cache_firmware_components does: a new component is created
// with its version as initial and current; a known one whose version
// changed gets it as current and as the last version flashed. Components
// the BMC no longer reports are kept.
func (s *Store) SyncFirmwareComponents(ctx context.Context, nodeUUID string, versions map[string]string) error {
	node, _ := canonicalUUID(nodeUUID)
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return dbError(err, "sync firmware of node %s", nodeUUID)
	}
	defer tx.Rollback(ctx)
	for comp, v := range versions {
		_, err := tx.Exec(ctx, `INSERT INTO firmware_components (node_uuid, component, initial_version, current_version)
			VALUES ($1, $2, $3, $3)
			ON CONFLICT (node_uuid, component) DO UPDATE SET
				current_version = EXCLUDED.current_version,
				last_version_flashed = EXCLUDED.current_version,
				updated_at = now()
			WHERE firmware_components.current_version <> EXCLUDED.current_version`, node, comp, v)
		if err != nil {
			return dbError(err, "sync firmware component %s of node %s", comp, nodeUUID)
		}
	}
	return dbError(tx.Commit(ctx), "sync firmware of node %s", nodeUUID)
}

// ListFirmwareComponents returns the node's components by name.
func (s *Store) ListFirmwareComponents(ctx context.Context, nodeUUID string) ([]FirmwareComponent, error) {
	node, _ := canonicalUUID(nodeUUID)
	rows, err := s.pool.Query(ctx, `SELECT component, initial_version, current_version, last_version_flashed, created_at, updated_at
		FROM firmware_components WHERE node_uuid = $1 ORDER BY component`, node)
	if err != nil {
		return nil, dbError(err, "list firmware of node %s", nodeUUID)
	}
	defer rows.Close()
	out := []FirmwareComponent{}
	for rows.Next() {
		var c FirmwareComponent
		if err := rows.Scan(&c.Component, &c.InitialVersion, &c.CurrentVersion, &c.LastVersionFlashed, &c.CreatedAt, &c.UpdatedAt); err != nil {
			return nil, dbError(err, "list firmware of node %s", nodeUUID)
		}
		out = append(out, c)
	}
	return out, dbError(rows.Err(), "list firmware of node %s", nodeUUID)
}
