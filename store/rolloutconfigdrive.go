package store

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/jackc/pgx/v5"
)

// PutRolloutConfigDrive keeps a rollout's config drive template (any JSON
// value: Ironic's configdrive object or string) until
// DeleteRolloutConfigDrive.
func (s *Store) PutRolloutConfigDrive(ctx context.Context, rolloutUUID string, template any) error {
	b, err := json.Marshal(template)
	if err != nil {
		return err
	}
	_, err = s.pool.Exec(ctx, `INSERT INTO rollout_configdrives (rollout_uuid, template) VALUES ($1, $2)`, rolloutUUID, b)
	return dbError(err, "keep the config drive template of rollout %s", rolloutUUID)
}

// GetRolloutConfigDrive is a rollout's config drive template, or
// ErrNotFound.
func (s *Store) GetRolloutConfigDrive(ctx context.Context, rolloutUUID string) (any, error) {
	var b []byte
	err := s.pool.QueryRow(ctx, `SELECT template FROM rollout_configdrives WHERE rollout_uuid = $1`, rolloutUUID).Scan(&b)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, dbError(err, "read the config drive template of rollout %s", rolloutUUID)
	}
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return nil, err
	}
	return v, nil
}

// DeleteRolloutConfigDrive forgets a rollout's template (none is fine).
func (s *Store) DeleteRolloutConfigDrive(ctx context.Context, rolloutUUID string) error {
	_, err := s.pool.Exec(ctx, `DELETE FROM rollout_configdrives WHERE rollout_uuid = $1`, rolloutUUID)
	return dbError(err, "forget the config drive template of rollout %s", rolloutUUID)
}
