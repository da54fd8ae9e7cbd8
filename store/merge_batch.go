package store

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// MaxMergeBatch bounds how many driver_internal_info merges one statement
// carries.
const MaxMergeBatch = 256

// mergeBatchTimeout bounds one batch statement: a hung database fails the
// waiting requests instead of holding them forever.
const mergeBatchTimeout = 30 * time.Second

// MergeBatcher records what agents' heartbeats say: it merges into
// driver_internal_info like MergeDriverInternalInfo, but only while the
// node's agent token is the one the heartbeat was checked against (a
// heartbeat that read its node before the operation ended must not write
// the wiped session back: ErrAgentSessionEnded), and it gathers the merges
// that arrive while one statement runs into the next statement: one round
// trip and one commit for many heartbeats (group commit). A lone merge is written at once by its caller, so a quiet API
// adds no delay, and no goroutine runs while there is nothing to write.
// Each caller returns only once its own merge is committed or has failed.
//
// One statement runs at a time: two batch UPDATEs could lock the same rows
// in different orders and deadlock.
type MergeBatcher struct {
	s        *Store
	mu       sync.Mutex
	pending  []*mergeReq
	flushing bool
}

type mergeReq struct {
	uuid  string
	token string
	kv    map[string]any
	done  chan error
}

// NewMergeBatcher returns a batcher writing through s.
func (s *Store) NewMergeBatcher() *MergeBatcher {
	return &MergeBatcher{s: s}
}

// Merge adds kv to the node's driver_internal_info if the node's agent
// token is token ("" for none). ErrAgentSessionEnded when it is not,
// ErrNotFound when the node does not exist.
func (b *MergeBatcher) Merge(ctx context.Context, uuid, token string, kv map[string]any) error {
	if kv == nil {
		kv = map[string]any{}
	}
	u, _ := canonicalUUID(uuid)
	r := &mergeReq{uuid: u, token: token, kv: kv, done: make(chan error, 1)}
	b.mu.Lock()
	b.pending = append(b.pending, r)
	lead := !b.flushing
	b.flushing = true
	b.mu.Unlock()
	if lead {
		// This caller writes what is pending now, itself included; what
		// arrives meanwhile is written by a goroutine that lives only
		// while there is more.
		if b.flush() {
			go b.drain()
		}
	}
	// Once queued the merge is written whatever the caller does next; the
	// caller still learns how it went unless it gives up waiting.
	select {
	case err := <-r.done:
		return err
	case <-ctx.Done():
		return fmt.Errorf("merge driver_internal_info of node %s: %w", uuid, ctx.Err())
	}
}

// flush writes up to MaxMergeBatch pending merges and reports whether more
// are pending (the caller then keeps the flushing role); otherwise the role
// is released.
func (b *MergeBatcher) flush() bool {
	b.mu.Lock()
	n := min(len(b.pending), MaxMergeBatch)
	batch := b.pending[:n:n]
	b.pending = b.pending[n:]
	b.mu.Unlock()
	b.write(batch)
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.pending) == 0 {
		b.pending = nil
		b.flushing = false
		return false
	}
	return true
}

func (b *MergeBatcher) drain() {
	for b.flush() {
	}
}

// write runs one statement for batch and answers every request. A node
// that appears twice gets its merges in arrival order.
func (b *MergeBatcher) write(batch []*mergeReq) {
	if len(batch) == 1 {
		// Alone: the plain statement is cheaper than the batch's.
		r := batch[0]
		ctx, cancel := context.WithTimeout(context.Background(), mergeBatchTimeout)
		defer cancel()
		r.done <- b.s.mergeInSession(ctx, r.uuid, r.token, r.kv)
		return
	}
	uuids := make([]string, len(batch))
	tokens := make([]string, len(batch))
	kvs := make([]map[string]any, len(batch))
	for i, r := range batch {
		uuids[i], tokens[i], kvs[i] = r.uuid, r.token, r.kv
	}
	// jsonb_object_agg over the batch's merges of one node and token, in
	// arrival order, gives the later merge's value for a repeated key. Of
	// a node's groups (one per token its heartbeats were checked against)
	// at most one holds the node's token and is written; the rows of
	// nodes tell a session that ended from a node that is gone.
	ctx, cancel := context.WithTimeout(context.Background(), mergeBatchTimeout)
	defer cancel()
	rows, err := b.s.pool.Query(ctx, `WITH v AS (
			SELECT t.u AS uuid, t.tok,
				COALESCE(jsonb_object_agg(e.key, e.value ORDER BY t.ord, e.key) FILTER (WHERE e.key IS NOT NULL), '{}'::jsonb) AS kv
			FROM unnest($1::text[], $2::text[], $3::jsonb[]) WITH ORDINALITY AS t(u, tok, kv, ord)
				LEFT JOIN LATERAL jsonb_each(t.kv) AS e ON true
			GROUP BY t.u, t.tok),
		upd AS (
			UPDATE nodes n SET driver_internal_info = n.driver_internal_info || v.kv, updated_at = now()
			FROM v
			WHERE n.uuid = v.uuid AND COALESCE(n.driver_internal_info->>$4::text, '') = v.tok
			RETURNING n.uuid, v.tok)
		SELECT uuid, tok FROM upd
		UNION ALL
		SELECT uuid, NULL FROM nodes WHERE uuid = ANY($1::text[])`, uuids, tokens, kvs, KeyAgentToken)
	written := map[[2]string]bool{}
	exists := map[string]bool{}
	if err == nil {
		for rows.Next() {
			var u string
			var tok *string
			if err = rows.Scan(&u, &tok); err != nil {
				break
			}
			if tok != nil {
				written[[2]string{u, *tok}] = true
			} else {
				exists[u] = true
			}
		}
		rows.Close()
		if err == nil {
			err = rows.Err()
		}
	}
	for _, r := range batch {
		switch {
		case err != nil:
			r.done <- dbError(err, "merge driver_internal_info of node %s", r.uuid)
		case written[[2]string{r.uuid, r.token}]:
			r.done <- nil
		case exists[r.uuid]:
			r.done <- fmt.Errorf("merge driver_internal_info of node %s: %w", r.uuid, ErrAgentSessionEnded)
		default:
			r.done <- fmt.Errorf("merge driver_internal_info of node %s: %w", r.uuid, ErrNotFound)
		}
	}
}

// mergeInSession is one merge alone: Merge's conditional write in the
// plain statement, and whether the node exists, in one round trip.
func (s *Store) mergeInSession(ctx context.Context, uuid, token string, kv map[string]any) error {
	var written, exists bool
	err := s.pool.QueryRow(ctx, `WITH upd AS (
			UPDATE nodes SET driver_internal_info = driver_internal_info || $2::jsonb, updated_at = now()
			WHERE uuid = $1 AND `+agentTokenIs(3)+`
			RETURNING 1)
		SELECT EXISTS (SELECT 1 FROM upd), EXISTS (SELECT 1 FROM nodes WHERE uuid = $1)`, uuid, kv, token).Scan(&written, &exists)
	switch {
	case err != nil:
		return dbError(err, "merge driver_internal_info of node %s", uuid)
	case written:
		return nil
	case exists:
		return fmt.Errorf("merge driver_internal_info of node %s: %w", uuid, ErrAgentSessionEnded)
	}
	return fmt.Errorf("merge driver_internal_info of node %s: %w", uuid, ErrNotFound)
}
