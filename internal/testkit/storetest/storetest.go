// Package storetest gives tests a migrated, empty ironflow database of their
// own on a real PostgreSQL server.
//
// With IRONFLOW_TEST_DATABASE_URL set, each test gets a fresh database on
// that server. Without it, the first test of the process starts a throwaway
// cluster under os.TempDir (embedded.StartPostgres) that all the tests of
// the process share, each in its own database. Packages using it should
// stop that cluster when their tests end, with Main:
//
//	func TestMain(m *testing.M) { storetest.Main(m) }
//
// A watchdog also stops it once the test process has exited, so a killed or
// forgetful test binary does not leave a postmaster running.
//
// It is tooling beside the store, not part of it: only tests import it.
package storetest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ironflow/ironflow/embedded"
	"github.com/ironflow/ironflow/store"
)

// EnvDatabaseURL names the variable pointing tests at an existing server;
// its user must be allowed to CREATE DATABASE.
const EnvDatabaseURL = "IRONFLOW_TEST_DATABASE_URL"

// setupTimeout bounds starting the shared cluster and creating a database.
const setupTimeout = 2 * time.Minute

var (
	mu       sync.Mutex
	cluster  *embedded.Postgres
	startErr error
	started  bool
)

// New returns a store on a fresh, migrated database dropped at t.Cleanup.
// It fails the test when no PostgreSQL server can be had. From the
// process's second New on, the database is a copy of a template the
// process migrated once (CREATE DATABASE … TEMPLATE, much cheaper than
// running every migration per test; Migrate then finds nothing to do);
// the first New migrates its own, so that a process with one database (a
// fuzz worker) makes no template.
func New(t testing.TB) *store.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	tmpl, err := migratedTemplate(ctx)
	if err != nil {
		t.Fatalf("storetest: %v", err)
	}
	dbURL := freshDatabase(t, tmpl)
	s, err := store.Open(ctx, dbURL)
	if err != nil {
		t.Fatalf("storetest: %v", err)
	}
	// Cleanups run last-in first-out: the pool closes before URL's DROP.
	t.Cleanup(s.Close)
	if err := s.Migrate(ctx); err != nil {
		t.Fatalf("storetest: %v", err)
	}
	return s
}

// URL returns the URL of a fresh, empty (unmigrated) database dropped at
// t.Cleanup, for tests of migrations or of code that opens its own pool.
func URL(t testing.TB) string {
	t.Helper()
	return freshDatabase(t, "")
}

// freshDatabase creates a database dropped at t.Cleanup, a copy of
// template (PostgreSQL's template1 when empty), and returns its URL.
func freshDatabase(t testing.TB, template string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	serverURL, err := serverURL(ctx)
	if err != nil {
		t.Fatalf("storetest: %v", err)
	}
	name := "ironflow_test_" + randomHex(8)
	create := "CREATE DATABASE " + pgx.Identifier{name}.Sanitize()
	if template != "" {
		create += " TEMPLATE " + pgx.Identifier{template}.Sanitize()
	}
	if err := adminExec(ctx, serverURL, create); err != nil {
		t.Fatalf("storetest: create database %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
		defer cancel()
		if err := adminExec(ctx, serverURL, "DROP DATABASE IF EXISTS "+pgx.Identifier{name}.Sanitize()+" WITH (FORCE)"); err != nil {
			t.Errorf("storetest: drop database %s: %v", name, err)
		}
	})
	u, err := withDatabase(serverURL, name)
	if err != nil {
		t.Fatalf("storetest: %v", err)
	}
	return u
}

var (
	tmplMu   sync.Mutex
	tmplName string
	// tmplNext: a New came before; the next one makes the template.
	tmplNext bool
)

// migratedTemplate is the name of the process's migrated template
// database, created and migrated at its first use, or "" for the
// process's first New. No session stays on it: PostgreSQL copies a
// database only while nobody is connected to it.
func migratedTemplate(ctx context.Context) (string, error) {
	tmplMu.Lock()
	defer tmplMu.Unlock()
	if tmplName != "" {
		return tmplName, nil
	}
	if !tmplNext {
		tmplNext = true
		return "", nil
	}
	serverURL, err := serverURL(ctx)
	if err != nil {
		return "", err
	}
	name := "ironflow_test_template_" + randomHex(8)
	if err := adminExec(ctx, serverURL, "CREATE DATABASE "+pgx.Identifier{name}.Sanitize()); err != nil {
		return "", fmt.Errorf("create template database %s: %w", name, err)
	}
	u, err := withDatabase(serverURL, name)
	if err != nil {
		return "", err
	}
	s, err := store.Open(ctx, u)
	if err != nil {
		return "", err
	}
	err = s.Migrate(ctx)
	s.Close()
	if err != nil {
		return "", fmt.Errorf("migrate template database %s: %w", name, err)
	}
	tmplName = name
	return name, nil
}

// dropTemplate drops the process's template database, if any.
func dropTemplate() {
	tmplMu.Lock()
	defer tmplMu.Unlock()
	if tmplName == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	if u, err := serverURL(ctx); err == nil {
		if err := adminExec(ctx, u, "DROP DATABASE IF EXISTS "+pgx.Identifier{tmplName}.Sanitize()+" WITH (FORCE)"); err != nil {
			fmt.Fprintf(os.Stderr, "storetest: drop template database %s: %v\n", tmplName, err)
		}
	}
	tmplName = ""
}

// Main runs the tests of m, stops the cluster (Shutdown) and exits with
// the tests' status: a package's TestMain.
func Main(m *testing.M) {
	code := m.Run()
	Shutdown()
	os.Exit(code)
}

// Shutdown drops the process's template database and stops the cluster
// this process started, if any, and removes it.
func Shutdown() {
	dropTemplate()
	mu.Lock()
	defer mu.Unlock()
	if cluster == nil {
		return
	}
	if err := cluster.Stop(); err != nil {
		fmt.Fprintf(os.Stderr, "storetest: %v\n", err)
	}
	os.RemoveAll(cluster.DataDir())
	cluster, started, startErr = nil, false, nil
}

// serverURL is the server tests create their databases on, starting the
// process's cluster on first use.
func serverURL(ctx context.Context) (string, error) {
	if u := os.Getenv(EnvDatabaseURL); u != "" {
		return u, nil
	}
	mu.Lock()
	defer mu.Unlock()
	if !started {
		started = true
		cluster, startErr = startCluster(ctx)
	}
	if startErr != nil {
		return "", startErr
	}
	return cluster.URL(), nil
}

func startCluster(ctx context.Context) (*embedded.Postgres, error) {
	dir, err := os.MkdirTemp("", "ironflow-storetest-")
	if err != nil {
		return nil, fmt.Errorf("create cluster dir: %w", err)
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	// StartPostgres hands dir to the postgres user when we are root.
	p, err := embedded.StartPostgres(ctx, dir, log)
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("start a PostgreSQL cluster for tests (or set %s): %w", EnvDatabaseURL, err)
	}
	if err := p.StopOnExit(true); err != nil {
		p.Stop()
		os.RemoveAll(dir)
		return nil, err
	}
	return p, nil
}

func adminExec(ctx context.Context, serverURL, sql string) error {
	conn, err := pgx.Connect(ctx, serverURL)
	if err != nil {
		return fmt.Errorf("connect to test server: %w", err)
	}
	defer conn.Close(context.Background())
	_, err = conn.Exec(ctx, sql)
	return err
}

// withDatabase points a libpq URL or key=value DSN at another database.
func withDatabase(serverURL, db string) (string, error) {
	if strings.Contains(serverURL, "://") {
		u, err := url.Parse(serverURL)
		if err != nil {
			// url's error repeats the URL, password included: drop it.
			return "", fmt.Errorf("parse %s: not a valid URL", EnvDatabaseURL)
		}
		u.Path = "/" + db
		return u.String(), nil
	}
	return serverURL + " dbname=" + db, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// WaitForLockWaiter returns true once a session on s's database waits for a
// lock (a row another transaction holds), false if finished is closed
// first: tests that hold a row in an open transaction use it to know that
// the code under test now waits in its write, before they commit. No
// deadline of its own: the test binary's bounds it.
func WaitForLockWaiter(t testing.TB, s *store.Store, finished <-chan struct{}) bool {
	t.Helper()
	for {
		select {
		case <-finished:
			return false
		default:
		}
		var waiting int
		err := s.Pool().QueryRow(context.Background(), `SELECT count(*) FROM pg_stat_activity
			WHERE datname = current_database() AND wait_event_type = 'Lock'`).Scan(&waiting)
		if err != nil {
			t.Fatalf("storetest: look for a session waiting for a lock: %v", err)
		}
		if waiting > 0 {
			return true
		}
		time.Sleep(5 * time.Millisecond)
	}
}
