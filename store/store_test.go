package store_test

import (
	"context"
	"errors"
	"path/filepath"
	"sync"
	"testing"

	"github.com/ironflow/ironflow/internal/testkit/storetest"
	"github.com/ironflow/ironflow/store"
)

func TestMain(m *testing.M) { storetest.Main(m) }

func ptr[T any](v T) *T { return &v }

func newNode(t testing.TB, s *store.Store, n *store.Node) *store.Node {
	t.Helper()
	if n.Driver == "" {
		n.Driver = "ipmi"
	}
	if n.ProvisionState == "" {
		n.ProvisionState = "enroll"
	}
	if err := s.CreateNode(context.Background(), n); err != nil {
		t.Fatalf("CreateNode: %v", err)
	}
	return n
}

// migrationCount is the number of migration files Migrate applies.
func migrationCount(t *testing.T) int {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("migrations", "*.sql"))
	if err != nil || len(files) == 0 {
		t.Fatalf("list migrations: %v (%d files)", err, len(files))
	}
	return len(files)
}

func TestMigrateTwiceIsANoop(t *testing.T) {
	s := storetest.New(t) // migrated once already
	ctx := context.Background()
	if err := s.Migrate(ctx); err != nil {
		t.Fatalf("second Migrate: %v", err)
	}
	var n int
	if err := s.Pool().QueryRow(ctx, "SELECT count(*) FROM schema_migrations").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if want := migrationCount(t); n != want {
		t.Fatalf("schema_migrations has %d rows, want %d (one per file in migrations/)", n, want)
	}
}

func TestConcurrentMigrate(t *testing.T) {
	url := storetest.URL(t)
	ctx := context.Background()
	const processes = 4
	stores := make([]*store.Store, processes)
	for i := range stores {
		s, err := store.Open(ctx, url)
		if err != nil {
			t.Fatalf("Open: %v", err)
		}
		defer s.Close()
		stores[i] = s
	}
	errs := make([]error, processes)
	var wg sync.WaitGroup
	for i, s := range stores {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.Migrate(ctx)
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("Migrate %d: %v", i, err)
		}
	}
	var n int
	if err := stores[0].Pool().QueryRow(ctx, "SELECT count(*) FROM schema_migrations").Scan(&n); err != nil {
		t.Fatal(err)
	}
	if want := migrationCount(t); n != want {
		t.Fatalf("schema_migrations has %d rows, want %d", n, want)
	}
	// The schema works after the race.
	newNode(t, stores[0], &store.Node{})
}

func TestInventoryRoundTripAndCascade(t *testing.T) {
	s := storetest.New(t)
	ctx := context.Background()
	n := newNode(t, s, &store.Node{})
	if _, err := s.GetInventory(ctx, n.UUID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("GetInventory before Put: %v, want ErrNotFound", err)
	}
	inv := &store.Inventory{NodeUUID: n.UUID, Inventory: map[string]any{"cpu": map[string]any{"count": float64(4)}}}
	if err := s.PutInventory(ctx, inv); err != nil {
		t.Fatalf("PutInventory: %v", err)
	}
	got, err := s.GetInventory(ctx, n.UUID)
	if err != nil {
		t.Fatalf("GetInventory: %v", err)
	}
	if got.Inventory["cpu"].(map[string]any)["count"] != float64(4) || got.PluginData == nil {
		t.Fatalf("inventory = %+v", got)
	}
	if err := s.PutInventory(ctx, &store.Inventory{NodeUUID: "9c3ab7a4-1a77-4d3e-9d55-2d7e4f1f0000"}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("PutInventory for a missing node: %v, want ErrNotFound", err)
	}
	if err := s.DeleteNode(ctx, n.UUID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetInventory(ctx, n.UUID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("GetInventory after node delete: %v, want ErrNotFound", err)
	}
}
