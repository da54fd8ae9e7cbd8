package store

import (
	"context"

	"github.com/jackc/pgx/v5"
)

// ExistingNodes reports which of the UUIDs name a node, in one query: the
// reconciler asks it of the running node workflows it finds.
func (s *Store) ExistingNodes(ctx context.Context, uuids []string) (map[string]bool, error) {
	canon := make([]string, 0, len(uuids))
	for _, u := range uuids {
		c, _ := canonicalUUID(u)
		canon = append(canon, c)
	}
	rows, _ := s.pool.Query(ctx, "SELECT uuid FROM nodes WHERE uuid = ANY($1)", canon)
	found, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, dbError(err, "read which nodes exist")
	}
	out := make(map[string]bool, len(found))
	for _, u := range found {
		out[u] = true
	}
	return out, nil
}

// LastHistoryEvents returns each node's newest history event, in one query;
// nodes without history are absent.
func (s *Store) LastHistoryEvents(ctx context.Context, uuids []string) (map[string]HistoryEvent, error) {
	canon := make([]string, 0, len(uuids))
	for _, u := range uuids {
		c, _ := canonicalUUID(u)
		canon = append(canon, c)
	}
	rows, _ := s.pool.Query(ctx, "SELECT DISTINCT ON (node_uuid) "+historyColumns+
		" FROM node_history WHERE node_uuid = ANY($1) ORDER BY node_uuid, created_at DESC, id DESC", canon)
	events, err := pgx.CollectRows(rows, scanHistory)
	if err != nil {
		return nil, dbError(err, "read the last history events of %d nodes", len(uuids))
	}
	out := make(map[string]HistoryEvent, len(events))
	for _, e := range events {
		out[e.NodeUUID] = e
	}
	return out, nil
}
