package store_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/ironflow/ironflow/internal/testkit/storetest"
	"github.com/ironflow/ironflow/store"
)

const missingNode = "6a1f0c4e-0000-4000-8000-000000000000"

func TestMergeBatchOneStatement(t *testing.T) {
	s := storetest.New(t)
	a := newNode(t, s, &store.Node{DriverInternalInfo: map[string]any{"kept": "yes", "agent_url": "old", store.KeyAgentToken: "tok-a"}})
	b := newNode(t, s, &store.Node{})
	mb := s.NewMergeBatcher()

	errs := mb.WriteBatch(
		[]string{a.UUID, missingNode, a.UUID, b.UUID, a.UUID, b.UUID},
		[]string{"tok-a", "", "tok-a", "", "tok-of-an-ended-session", "tok-of-an-ended-session"},
		[]map[string]any{{"agent_url": "first", "agent_version": "1"}, {"x": 1}, {"agent_url": "second"}, {},
			{"agent_url": "late"}, {"agent_url": "late"}},
	)
	if errs[0] != nil || errs[2] != nil || errs[3] != nil {
		t.Fatalf("merges of existing nodes failed: %v", errs)
	}
	if !errors.Is(errs[1], store.ErrNotFound) {
		t.Fatalf("merge into a missing node: %v, want ErrNotFound", errs[1])
	}
	for _, i := range []int{4, 5} {
		if !errors.Is(errs[i], store.ErrAgentSessionEnded) {
			t.Fatalf("merge %d, checked against a token the node does not hold: %v, want ErrAgentSessionEnded", i, errs[i])
		}
	}
	got := mustGet(t, s, a.UUID).DriverInternalInfo
	// The later merge of the same key wins; other keys stay.
	if got["agent_url"] != "second" || got["agent_version"] != "1" || got["kept"] != "yes" {
		t.Fatalf("driver_internal_info %v: want agent_url second, agent_version 1, kept yes", got)
	}
	if _, ok := mustGet(t, s, b.UUID).DriverInternalInfo["agent_url"]; ok {
		t.Fatalf("a merge checked against another token wrote node b: %v", mustGet(t, s, b.UUID).DriverInternalInfo)
	}
}

// A heartbeat's merge that waits for the row while the node's operation
// wipes the agent session, and runs once the wipe has committed, writes
// nothing: in the batch statement and alone. The wipe holds the row in an
// open transaction until the merges wait for it, so the order is certain.
func TestMergeAfterTheSessionWipeWritesNothing(t *testing.T) {
	for _, batched := range []bool{true, false} {
		t.Run(map[bool]string{true: "batch", false: "alone"}[batched], func(t *testing.T) {
			s := storetest.New(t)
			ctx := context.Background()
			session := map[string]any{store.KeyAgentToken: "tok", store.KeyAgentURL: "http://192.0.2.7:9999"}
			a := newNode(t, s, &store.Node{DriverInternalInfo: session})
			b := newNode(t, s, &store.Node{DriverInternalInfo: session})
			mb := s.NewMergeBatcher()
			wipe, err := s.Pool().Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer wipe.Rollback(ctx)
			if _, err := wipe.Exec(ctx, `UPDATE nodes SET driver_internal_info = driver_internal_info - $2::text[] WHERE uuid = $1`,
				a.UUID, store.AgentSessionKeys()); err != nil {
				t.Fatal(err)
			}
			late := map[string]any{store.KeyAgentURL: "http://192.0.2.7:9999", store.KeyAgentVerifyCA: "ca"}
			var errs []error
			finished := make(chan struct{})
			go func() {
				defer close(finished)
				if batched {
					errs = mb.WriteBatch([]string{b.UUID, a.UUID}, []string{"tok", "tok"}, []map[string]any{late, late})
				} else {
					// One after the other: each is alone in its statement.
					errs = []error{mb.Merge(ctx, b.UUID, "tok", late), mb.Merge(ctx, a.UUID, "tok", late)}
				}
			}()
			if !storetest.WaitForLockWaiter(t, s, finished) {
				t.Fatalf("the merge did not wait for the row the wipe holds: %v", errs)
			}
			if err := wipe.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			<-finished
			if errs[0] != nil || !errors.Is(errs[1], store.ErrAgentSessionEnded) {
				t.Fatalf("merges: %v, want nil for the live session and ErrAgentSessionEnded for the wiped one", errs)
			}
			for _, k := range store.AgentSessionKeys() {
				if v, ok := mustGet(t, s, a.UUID).DriverInternalInfo[k]; ok {
					t.Errorf("the wiped node holds %s = %v again", k, v)
				}
			}
			if got := mustGet(t, s, b.UUID).DriverInternalInfo[store.KeyAgentVerifyCA]; got != "ca" {
				t.Errorf("the live session's merge in the same statement was not written: agent_verify_ca %v", got)
			}
		})
	}
}

func TestMergeBatcherUnderConcurrency(t *testing.T) {
	s := storetest.New(t)
	ctx := context.Background()
	const nodes, writers, each = 8, 32, 25
	uuids := make([]string, nodes)
	for i := range uuids {
		uuids[i] = newNode(t, s, &store.Node{}).UUID
	}
	mb := s.NewMergeBatcher()
	var wg sync.WaitGroup
	errs := make(chan error, writers*each)
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				key := fmt.Sprintf("writer_%d", w)
				if err := mb.Merge(ctx, uuids[w%nodes], "", map[string]any{key: i}); err != nil {
					errs <- err
				}
			}
			if err := mb.Merge(ctx, missingNode, "", map[string]any{"x": 1}); !errors.Is(err, store.ErrNotFound) {
				errs <- fmt.Errorf("missing node: %v, want ErrNotFound", err)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// Every writer's last merge is what its node holds: nothing lost,
	// nothing reordered within a writer.
	for w := range writers {
		got := mustGet(t, s, uuids[w%nodes]).DriverInternalInfo[fmt.Sprintf("writer_%d", w)]
		if got != float64(each-1) {
			t.Fatalf("writer %d: node holds %v, want %d", w, got, each-1)
		}
	}
}
