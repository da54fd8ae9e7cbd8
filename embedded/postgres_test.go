package embedded

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// postgresTestDir returns a directory the postgres user can reach when the
// test runs as root (t.TempDir is 0700 and owned by root).
func postgresTestDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "ironflow-embedded-test-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return filepath.Join(dir, "pg")
}

func startPostgres(t *testing.T, dir string) *Postgres {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	p, err := StartPostgres(ctx, dir, nil)
	if errors.Is(err, ErrPostgresNotFound) {
		t.Fatalf("%v (the test machine must have PostgreSQL)", err)
	}
	if err != nil {
		t.Fatalf("StartPostgres: %v", err)
	}
	return p
}

func connect(t *testing.T, url string) *pgx.Conn {
	t.Helper()
	conn, err := pgx.Connect(context.Background(), url)
	if err != nil {
		t.Fatalf("connect %s: %v", url, err)
	}
	t.Cleanup(func() { conn.Close(context.Background()) })
	return conn
}

func exec1(t *testing.T, url, sql string) {
	t.Helper()
	if _, err := connect(t, url).Exec(context.Background(), sql); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
}

func queryInt(t *testing.T, url, sql string) int {
	t.Helper()
	var n int
	if err := connect(t, url).QueryRow(context.Background(), sql).Scan(&n); err != nil {
		t.Fatalf("%s: %v", sql, err)
	}
	return n
}

func TestPostgresStartStopRestartKeepsData(t *testing.T) {
	dir := postgresTestDir(t)
	p := startPostgres(t, dir)
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			p.Stop()
		}
	})
	exec1(t, p.URL(), "CREATE TABLE kept (v int)")
	exec1(t, p.URL(), "INSERT INTO kept VALUES (42)")
	firstPort := p.Port()

	// A second start while the first postmaster runs reuses it.
	again := startPostgres(t, dir)
	if again.Port() != firstPort {
		t.Fatalf("start on a running cluster: port %d, want the running %d", again.Port(), firstPort)
	}

	if err := p.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	stopped = true
	if _, err := os.Stat(filepath.Join(dir, pgdataDir, "postmaster.pid")); !os.IsNotExist(err) {
		t.Fatalf("postmaster.pid after Stop: %v", err)
	}

	p2 := startPostgres(t, dir)
	stopped = false
	p = p2
	if p2.Port() != firstPort {
		t.Fatalf("restart chose port %d, want the remembered %d", p2.Port(), firstPort)
	}
	if got := queryInt(t, p2.URL(), "SELECT v FROM kept"); got != 42 {
		t.Fatalf("data after restart: %d, want 42", got)
	}
}

func TestPostgresRestartOnTakenPortChoosesAnother(t *testing.T) {
	dir := postgresTestDir(t)
	p := startPostgres(t, dir)
	port := p.Port()
	if err := p.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		t.Fatalf("occupy port %d: %v", port, err)
	}
	defer l.Close()

	p2 := startPostgres(t, dir)
	t.Cleanup(func() { p2.Stop() })
	if p2.Port() == port {
		t.Fatalf("restart used the taken port %d", port)
	}
	if n := queryInt(t, p2.URL(), "SELECT 1"); n != 1 {
		t.Fatalf("SELECT 1 = %d", n)
	}
	b, err := os.ReadFile(filepath.Join(dir, portFile))
	if err != nil {
		t.Fatal(err)
	}
	if want := strconv.Itoa(p2.Port()) + "\n"; string(b) != want {
		t.Fatalf("remembered port %q, want %q", b, want)
	}
}

// TestPostgresUnderAPrivateRootDirectory: as root, a data dir the postgres
// user cannot reach (a clone under /root, mode 0700) still gets a cluster:
// PostgreSQL runs in a user namespace as root mapped to the postgres user,
// keeps its data across a restart, and is stopped by the exit watchdog's
// path too.
func TestPostgresUnderAPrivateRootDirectory(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only root hands the cluster to the postgres user; as another user the directory is ours (CI runs this as root)")
	}
	base, err := os.MkdirTemp("", "ironflow-embedded-test-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	// MkdirTemp made base 0700: the postgres user cannot traverse it.
	dir := filepath.Join(base, "pg")
	p := startPostgres(t, dir)
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			p.Stop()
		}
	})
	if !p.userNS {
		t.Fatalf("a cluster under a 0700 directory runs as the postgres user, who cannot reach it")
	}
	exec1(t, p.URL(), "CREATE TABLE kept (v int)")
	exec1(t, p.URL(), "INSERT INTO kept VALUES (7)")
	if err := p.Stop(); err != nil {
		t.Fatalf("Stop: %v", err)
	}
	stopped = true
	// The restart finds the root-owned cluster and runs it the same way.
	p2 := startPostgres(t, dir)
	stopped = false
	p = p2
	if !p2.userNS {
		t.Fatal("restart: the cluster created in a user namespace is not run in one")
	}
	if got := queryInt(t, p2.URL(), "SELECT v FROM kept"); got != 7 {
		t.Fatalf("data after restart: %d, want 7", got)
	}
}
