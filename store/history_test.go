package store_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/ironflow/ironflow/internal/testkit/storetest"
	"github.com/ironflow/ironflow/store"
)

func TestHistoryKeepsNewestEntries(t *testing.T) {
	s := storetest.New(t)
	ctx := context.Background()
	n := newNode(t, s, &store.Node{})
	other := newNode(t, s, &store.Node{})
	if err := s.AddHistory(ctx, other.UUID, store.HistoryEvent{EventType: "power", Event: "other node"}); err != nil {
		t.Fatal(err)
	}
	const added = store.DefaultHistoryMaxEntries + 5
	for i := 0; i < added; i++ {
		e := store.HistoryEvent{EventType: "provisioning", Event: fmt.Sprintf("event %d", i), Conductor: "worker-1", User: "admin"}
		if i%10 == 0 {
			e.Severity = store.SeverityError
		}
		if err := s.AddHistory(ctx, n.UUID, e); err != nil {
			t.Fatalf("AddHistory %d: %v", i, err)
		}
	}
	events, err := s.ListHistory(ctx, n.UUID)
	if err != nil {
		t.Fatalf("ListHistory: %v", err)
	}
	if len(events) != store.DefaultHistoryMaxEntries {
		t.Fatalf("%d events kept, want %d", len(events), store.DefaultHistoryMaxEntries)
	}
	for i, e := range events {
		want := fmt.Sprintf("event %d", i+added-store.DefaultHistoryMaxEntries)
		if e.Event != want || e.NodeUUID != n.UUID || e.UUID == "" || e.Conductor != "worker-1" || e.User != "admin" {
			t.Fatalf("event %d = %+v, want %q", i, e, want)
		}
	}
	// events[0] is event 5; event 10 was recorded as an error.
	if events[0].Severity != store.SeverityInfo || events[5].Severity != store.SeverityError {
		t.Fatalf("severities %q %q, want INFO (event 5) and ERROR (event 10)", events[0].Severity, events[5].Severity)
	}
	one, err := s.GetHistoryEvent(ctx, n.UUID, events[3].UUID)
	if err != nil || one.Event != events[3].Event {
		t.Fatalf("GetHistoryEvent = %+v, %v", one, err)
	}
	if _, err := s.GetHistoryEvent(ctx, other.UUID, events[3].UUID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("event of another node: %v, want ErrNotFound", err)
	}
	if got, _ := s.ListHistory(ctx, other.UUID); len(got) != 1 {
		t.Fatalf("the other node's history was pruned: %d events", len(got))
	}

	if err := s.AddHistory(ctx, "6a1f0c4e-0000-4000-8000-000000000000", store.HistoryEvent{Event: "x"}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("history of a missing node: %v, want ErrNotFound", err)
	}
	if err := s.DeleteNode(ctx, n.UUID); err != nil {
		t.Fatal(err)
	}
	if got, err := s.ListHistory(ctx, n.UUID); err != nil || len(got) != 0 {
		t.Fatalf("history after node delete: %d events, %v", len(got), err)
	}
}
