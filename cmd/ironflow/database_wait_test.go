package main

import (
	"context"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ironflow/ironflow/embedded"
	"github.com/ironflow/ironflow/internal/testkit/syncbuf"
)

// TestProcessStartsBeforeItsDatabase: a process that starts while its
// PostgreSQL does not answer (stopped here, then started on the same
// port) waits for it, saying so in its log, and opens it once it answers;
// one that gets no answer within the wait gives up with how long it
// waited; a wrong database name fails at once.
func TestProcessStartsBeforeItsDatabase(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "pg")
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	pg, err := embedded.StartPostgres(context.Background(), dir, quiet)
	if err != nil {
		t.Skipf("SKIPPED LOUDLY: no PostgreSQL to start: %v", err)
	}
	url := pg.URL()
	if err := pg.Stop(); err != nil {
		t.Fatal(err)
	}

	// Down for good: the wait runs out, and the error says so.
	start := time.Now()
	_, err = openStoreWaiting(context.Background(), url, false, 1500*time.Millisecond, quiet)
	if err == nil || !strings.Contains(err.Error(), "did not answer in 1.5s") {
		t.Fatalf("a database that never answers: %v, want the wait named", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("gave up after %s, want about the 1.5 s wait", d)
	}

	// Up after the process started: it waits, then opens it.
	logs := &syncbuf.Buffer{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	type result struct{ err error }
	done := make(chan result, 1)
	go func() {
		st, err := openStoreWaiting(context.Background(), url, true, time.Minute, log)
		if err == nil {
			st.Close()
		}
		done <- result{err}
	}()
	deadline := time.Now().Add(20 * time.Second)
	for !strings.Contains(logs.String(), "database does not answer yet: waiting") {
		if time.Now().After(deadline) {
			t.Fatalf("the process did not say it waits for its database:\n%s", logs)
		}
		time.Sleep(50 * time.Millisecond)
	}
	pg, err = embedded.StartPostgres(context.Background(), dir, quiet)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pg.Stop() })
	if pg.URL() != url {
		t.Fatalf("PostgreSQL came back at %s, not %s", pg.URL(), url)
	}
	select {
	case r := <-done:
		if r.err != nil {
			t.Fatalf("after the database came up: %v", r.err)
		}
	case <-time.After(45 * time.Second):
		t.Fatal("the process did not open its database once it answered")
	}
	if !strings.Contains(logs.String(), "database answers") {
		t.Errorf("the log does not say the database answered:\n%s", logs)
	}

	// Answers with an error: at once, no waiting.
	bad := strings.Replace(url, "/"+embedded.PostgresDatabase, "/no_such_database", 1)
	start = time.Now()
	if _, err := openStoreWaiting(context.Background(), bad, false, time.Minute, quiet); err == nil || time.Since(start) > 5*time.Second {
		t.Fatalf("a database that answers with an error: %v after %s, want a failure at once", err, time.Since(start))
	}
}
