package store

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// Shard is a shard name and how many nodes are in it.
type Shard struct {
	Name  string `json:"name"`
	Count int    `json:"count"`
}

// ListShards counts the nodes of each shard, largest first, as Ironic's
// get_shard_list: the nodes without a shard are one more group, whose Name
// is "None" (Ironic prints the group's null shard with Python's str).
func (s *Store) ListShards(ctx context.Context) ([]Shard, error) {
	rows, _ := s.pool.Query(ctx, "SELECT COALESCE(shard, 'None'), count(*) FROM nodes GROUP BY shard ORDER BY count(*) DESC, shard NULLS LAST")
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Shard, error) {
		var sh Shard
		err := row.Scan(&sh.Name, &sh.Count)
		return sh, err
	})
	if err != nil {
		return nil, dbError(err, "list shards")
	}
	return out, nil
}
