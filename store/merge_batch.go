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

// MergeBatcher merges into driver_internal_info like MergeDriverInternalInfo,
// but gathers the merges that arrive while one statement runs into the next
// statement: one round trip and one commit for many heartbeats (group
// commit). A lone merge is written at once by its caller, so a quiet API
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
	uuid string
	kv   map[string]any
	done chan error
}

// NewMergeBatcher returns a batcher writing through s.
func (s *Store) NewMergeBatcher() *MergeBatcher {
	return &MergeBatcher{s: s}
}

// Merge adds kv to the node's driver_internal_info. ErrNotFound when the
// node does not exist.
func (b *MergeBatcher) Merge(ctx context.Context, uuid string, kv map[string]any) error {
	if kv == nil {
		kv = map[string]any{}
	}
	u, _ := canonicalUUID(uuid)
	r := &mergeReq{uuid: u, kv: kv, done: make(chan error, 1)}
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
		r.done <- b.s.MergeDriverInternalInfo(ctx, r.uuid, r.kv)
		return
	}
	uuids := make([]string, len(batch))
	kvs := make([]map[string]any, len(batch))
	for i, r := range batch {
		uuids[i], kvs[i] = r.uuid, r.kv
	}
	// jsonb_object_agg over the batch's merges of one node, in arrival
	// order, gives the later merge's value for a repeated key.
	ctx, cancel := context.WithTimeout(context.Background(), mergeBatchTimeout)
	defer cancel()
	rows, err := b.s.pool.Query(ctx, `WITH v AS (
			SELECT u AS uuid, jsonb_object_agg(e.key, e.value ORDER BY ord, e.key) AS kv
			FROM unnest($1::text[], $2::jsonb[]) WITH ORDINALITY AS t(u, kv, ord), jsonb_each(t.kv) AS e
			GROUP BY u),
		all_uuids AS (SELECT DISTINCT u AS uuid FROM unnest($1::text[]) AS u)
		UPDATE nodes n SET driver_internal_info = n.driver_internal_info || COALESCE(v.kv, '{}'::jsonb), updated_at = now()
		FROM all_uuids a LEFT JOIN v ON v.uuid = a.uuid
		WHERE n.uuid = a.uuid
		RETURNING n.uuid`, uuids, kvs)
	found := map[string]bool{}
	if err == nil {
		for rows.Next() {
			var u string
			if err = rows.Scan(&u); err != nil {
				break
			}
			found[u] = true
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
		case !found[r.uuid]:
			r.done <- fmt.Errorf("merge driver_internal_info of node %s: %w", r.uuid, ErrNotFound)
		default:
			r.done <- nil
		}
	}
}
