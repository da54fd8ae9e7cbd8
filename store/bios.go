package store

import (
	"context"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
)

// BIOSSetting is one cached BIOS setting of a node (Ironic's
// bios_settings), with the attribute registry's fields when the BMC has a
// registry (API 1.74); nil fields are unknown.
type BIOSSetting struct {
	NodeUUID        string     `json:"node_uuid"`
	Name            string     `json:"name"`
	Value           string     `json:"value"`
	AttributeType   *string    `json:"attribute_type"`
	AllowableValues []string   `json:"allowable_values"`
	LowerBound      *int64     `json:"lower_bound"`
	UpperBound      *int64     `json:"upper_bound"`
	MinLength       *int64     `json:"min_length"`
	MaxLength       *int64     `json:"max_length"`
	ReadOnly        *bool      `json:"read_only"`
	ResetRequired   *bool      `json:"reset_required"`
	Unique          *bool      `json:"unique"`
	CreatedAt       time.Time  `json:"created_at"`
	UpdatedAt       *time.Time `json:"updated_at"`
}

func (b BIOSSetting) sameAs(o BIOSSetting) bool {
	eqS := func(a, b *string) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }
	eqI := func(a, b *int64) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }
	eqB := func(a, b *bool) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }
	return b.Value == o.Value && eqS(b.AttributeType, o.AttributeType) && slices.Equal(b.AllowableValues, o.AllowableValues) &&
		eqI(b.LowerBound, o.LowerBound) && eqI(b.UpperBound, o.UpperBound) && eqI(b.MinLength, o.MinLength) &&
		eqI(b.MaxLength, o.MaxLength) && eqB(b.ReadOnly, o.ReadOnly) && eqB(b.ResetRequired, o.ResetRequired) && eqB(b.Unique, o.Unique)
}

const biosColumns = `node_uuid, name, value, attribute_type, allowable_values, lower_bound, upper_bound,
	min_length, max_length, read_only, reset_required, is_unique, created_at, updated_at`

func scanBIOS(row pgx.Row) (BIOSSetting, error) {
	var b BIOSSetting
	err := row.Scan(&b.NodeUUID, &b.Name, &b.Value, &b.AttributeType, &b.AllowableValues, &b.LowerBound, &b.UpperBound,
		&b.MinLength, &b.MaxLength, &b.ReadOnly, &b.ResetRequired, &b.Unique, &b.CreatedAt, &b.UpdatedAt)
	return b, err
}

// ListBIOSSettings returns the node's cached BIOS settings by name.
func (s *Store) ListBIOSSettings(ctx context.Context, nodeUUID string) ([]BIOSSetting, error) {
	node, _ := canonicalUUID(nodeUUID)
	rows, err := s.pool.Query(ctx, "SELECT "+biosColumns+" FROM bios_settings WHERE node_uuid = $1 ORDER BY name", node)
	if err != nil {
		return nil, dbError(err, "list BIOS settings of node %s", nodeUUID)
	}
	defer rows.Close()
	var out []BIOSSetting
	for rows.Next() {
		b, err := scanBIOS(rows)
		if err != nil {
			return nil, dbError(err, "read BIOS setting of node %s", nodeUUID)
		}
		out = append(out, b)
	}
	return out, dbError(rows.Err(), "list BIOS settings of node %s", nodeUUID)
}

// GetBIOSSetting returns one cached setting or ErrNotFound.
func (s *Store) GetBIOSSetting(ctx context.Context, nodeUUID, name string) (*BIOSSetting, error) {
	node, _ := canonicalUUID(nodeUUID)
	b, err := scanBIOS(s.pool.QueryRow(ctx, "SELECT "+biosColumns+" FROM bios_settings WHERE node_uuid = $1 AND name = $2", node, name))
	if err != nil {
		return nil, dbError(err, "get BIOS setting %s of node %s", name, nodeUUID)
	}
	return &b, nil
}

// ReplaceBIOSSettings makes the cache the given settings, as Ironic's
// cache_bios_settings does: new ones are created, changed ones updated
// (updated_at set), unchanged ones left as they are, and the ones the BMC
// no longer reports deleted. A missing node is ErrNotFound.
func (s *Store) ReplaceBIOSSettings(ctx context.Context, nodeUUID string, settings []BIOSSetting) error {
	node, _ := canonicalUUID(nodeUUID)
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		rows, err := tx.Query(ctx, "SELECT "+biosColumns+" FROM bios_settings WHERE node_uuid = $1 FOR UPDATE", node)
		if err != nil {
			return err
		}
		old := map[string]BIOSSetting{}
		for rows.Next() {
			b, err := scanBIOS(rows)
			if err != nil {
				rows.Close()
				return err
			}
			old[b.Name] = b
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return err
		}
		keep := map[string]bool{}
		for _, b := range settings {
			keep[b.Name] = true
			prev, had := old[b.Name]
			if had && prev.sameAs(b) {
				continue
			}
			if _, err := tx.Exec(ctx, `INSERT INTO bios_settings (`+biosColumns+`)
				VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, now(), NULL)
				ON CONFLICT (node_uuid, name) DO UPDATE SET value = EXCLUDED.value, attribute_type = EXCLUDED.attribute_type,
					allowable_values = EXCLUDED.allowable_values, lower_bound = EXCLUDED.lower_bound,
					upper_bound = EXCLUDED.upper_bound, min_length = EXCLUDED.min_length, max_length = EXCLUDED.max_length,
					read_only = EXCLUDED.read_only, reset_required = EXCLUDED.reset_required, is_unique = EXCLUDED.is_unique,
					updated_at = now()`,
				node, b.Name, b.Value, b.AttributeType, b.AllowableValues, b.LowerBound, b.UpperBound,
				b.MinLength, b.MaxLength, b.ReadOnly, b.ResetRequired, b.Unique); err != nil {
				return err
			}
		}
		for name := range old {
			if !keep[name] {
				if _, err := tx.Exec(ctx, "DELETE FROM bios_settings WHERE node_uuid = $1 AND name = $2", node, name); err != nil {
					return err
				}
			}
		}
		return nil
	})
	return dbError(err, "cache BIOS settings of node %s", nodeUUID)
}
