package store_test

import (
	"context"
	"testing"

	"github.com/ironflow/ironflow/internal/testkit/storetest"
	"github.com/ironflow/ironflow/store"
)

func TestExistingNodesAndLastHistoryEvents(t *testing.T) {
	st := storetest.New(t)
	ctx := context.Background()
	a, b := &store.Node{Driver: "fake-hardware"}, &store.Node{Driver: "fake-hardware"}
	for _, n := range []*store.Node{a, b} {
		if err := st.CreateNode(ctx, n); err != nil {
			t.Fatal(err)
		}
	}
	gone := "0b7e0000-0000-4000-8000-000000000000"
	exist, err := st.ExistingNodes(ctx, []string{a.UUID, gone, b.UUID})
	if err != nil {
		t.Fatal(err)
	}
	if !exist[a.UUID] || !exist[b.UUID] || exist[gone] || len(exist) != 2 {
		t.Fatalf("ExistingNodes = %v, want %s and %s only", exist, a.UUID, b.UUID)
	}
	for _, ev := range []string{"first", "second", "third"} {
		if err := st.AddHistory(ctx, a.UUID, store.HistoryEvent{Event: ev}); err != nil {
			t.Fatal(err)
		}
	}
	last, err := st.LastHistoryEvents(ctx, []string{a.UUID, b.UUID, gone})
	if err != nil {
		t.Fatal(err)
	}
	if len(last) != 1 || last[a.UUID].Event != "third" {
		t.Fatalf("LastHistoryEvents = %+v, want only %s's \"third\"", last, a.UUID)
	}
}
