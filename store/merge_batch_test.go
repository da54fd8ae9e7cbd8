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
	a := newNode(t, s, &store.Node{DriverInternalInfo: map[string]any{"kept": "yes", "agent_url": "old"}})
	b := newNode(t, s, &store.Node{})
	mb := s.NewMergeBatcher()

	errs := mb.WriteBatch(
		[]string{a.UUID, missingNode, a.UUID, b.UUID},
		[]map[string]any{{"agent_url": "first", "agent_version": "1"}, {"x": 1}, {"agent_url": "second"}, {}},
	)
	if errs[0] != nil || errs[2] != nil || errs[3] != nil {
		t.Fatalf("merges of existing nodes failed: %v", errs)
	}
	if !errors.Is(errs[1], store.ErrNotFound) {
		t.Fatalf("merge into a missing node: %v, want ErrNotFound", errs[1])
	}
	got := mustGet(t, s, a.UUID).DriverInternalInfo
	// The later merge of the same key wins; other keys stay.
	if got["agent_url"] != "second" || got["agent_version"] != "1" || got["kept"] != "yes" {
		t.Fatalf("driver_internal_info %v: want agent_url second, agent_version 1, kept yes", got)
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
				if err := mb.Merge(ctx, uuids[w%nodes], map[string]any{key: i}); err != nil {
					errs <- err
				}
			}
			if err := mb.Merge(ctx, missingNode, map[string]any{"x": 1}); !errors.Is(err, store.ErrNotFound) {
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
