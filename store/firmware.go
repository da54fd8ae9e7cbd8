package store

import (
	"context"
	"time"
)

// FirmwareComponent is one component's versions (Ironic's
// FirmwareComponent): the version first seen, the one the BMC reports now,
// and the one an update last flashed.
type FirmwareComponent struct {
	Component          string  `json:"component"`
	InitialVersion     string  `json:"initial_version"`
	CurrentVersion     string  `json:"current_version"`
	LastVersionFlashed *string `json:"last_version_flashed"`
	// Vendor, Model and SerialNumber (API 1.114) identify the hardware
	// the firmware runs on, as far as the BMC says.
	Vendor       *string    `json:"vendor"`
	Model        *string    `json:"model"`
	SerialNumber *string    `json:"serial_number"`
	CreatedAt    time.Time  `json:"created_at"`
	UpdatedAt    *time.Time `json:"updated_at"`
}

// FirmwareReading is one component as the BMC reports it: its version and
// what identifies its hardware (empty: not reported).
type FirmwareReading struct {
	Component    string
	Version      string
	Vendor       string
	Model        string
	SerialNumber string
}

// SyncFirmwareComponents records versions without hardware identity (see
// SyncFirmware).
func (s *Store) SyncFirmwareComponents(ctx context.Context, nodeUUID string, versions map[string]string) error {
	readings := make([]FirmwareReading, 0, len(versions))
	for comp, v := range versions {
		readings = append(readings, FirmwareReading{Component: comp, Version: v})
	}
	return s.SyncFirmware(ctx, nodeUUID, readings)
}

// SyncFirmware records what the BMC reported, as Ironic's redfish firmware
// interface caches it: a new component is created with its version as
// initial and current; a known one whose version changed gets it as
// current and as the last version flashed; the vendor, model and serial
// number are replaced by the reading's on every sync. Components the BMC
// no longer reports are kept.
func (s *Store) SyncFirmware(ctx context.Context, nodeUUID string, readings []FirmwareReading) error {
	node, _ := canonicalUUID(nodeUUID)
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return dbError(err, "sync firmware of node %s", nodeUUID)
	}
	defer tx.Rollback(ctx)
	for _, r := range readings {
		_, err := tx.Exec(ctx, `INSERT INTO firmware_components (node_uuid, component, initial_version, current_version,
				vendor, model, serial_number)
			VALUES ($1, $2, $3, $3, NULLIF($4, ''), NULLIF($5, ''), NULLIF($6, ''))
			ON CONFLICT (node_uuid, component) DO UPDATE SET
				current_version = EXCLUDED.current_version,
				last_version_flashed = CASE WHEN firmware_components.current_version <> EXCLUDED.current_version
					THEN EXCLUDED.current_version ELSE firmware_components.last_version_flashed END,
				vendor = EXCLUDED.vendor, model = EXCLUDED.model, serial_number = EXCLUDED.serial_number,
				updated_at = now()
			WHERE firmware_components.current_version <> EXCLUDED.current_version
				OR (firmware_components.vendor, firmware_components.model, firmware_components.serial_number)
					IS DISTINCT FROM (EXCLUDED.vendor, EXCLUDED.model, EXCLUDED.serial_number)`,
			node, r.Component, r.Version, r.Vendor, r.Model, r.SerialNumber)
		if err != nil {
			return dbError(err, "sync firmware component %s of node %s", r.Component, nodeUUID)
		}
	}
	return dbError(tx.Commit(ctx), "sync firmware of node %s", nodeUUID)
}

// ListFirmwareComponents returns the node's components by name.
func (s *Store) ListFirmwareComponents(ctx context.Context, nodeUUID string) ([]FirmwareComponent, error) {
	node, _ := canonicalUUID(nodeUUID)
	rows, err := s.pool.Query(ctx, `SELECT component, initial_version, current_version, last_version_flashed,
		vendor, model, serial_number, created_at, updated_at
		FROM firmware_components WHERE node_uuid = $1 ORDER BY component`, node)
	if err != nil {
		return nil, dbError(err, "list firmware of node %s", nodeUUID)
	}
	defer rows.Close()
	out := []FirmwareComponent{}
	for rows.Next() {
		var c FirmwareComponent
		if err := rows.Scan(&c.Component, &c.InitialVersion, &c.CurrentVersion, &c.LastVersionFlashed,
			&c.Vendor, &c.Model, &c.SerialNumber, &c.CreatedAt, &c.UpdatedAt); err != nil {
			return nil, dbError(err, "list firmware of node %s", nodeUUID)
		}
		out = append(out, c)
	}
	return out, dbError(rows.Err(), "list firmware of node %s", nodeUUID)
}
