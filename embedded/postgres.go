package embedded

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
)

// ErrPostgresNotFound is returned when no PostgreSQL server binaries exist on
// the machine.
var ErrPostgresNotFound = errors.New("PostgreSQL server binaries not found: install Debian's postgresql package (apt-get install postgresql) or set DATABASE_URL")

// Defaults of the embedded PostgreSQL cluster.
const (
	// PostgresDatabase is the database created on first start.
	PostgresDatabase = "ironflow"
	// PostgresSuperuser is the cluster's superuser (trust auth, loopback only).
	PostgresSuperuser = "postgres"
	// PostgresStartTimeout bounds pg_ctl start and stop: generous, as a
	// machine busy with other work (VMs, builds, its disk saturated) may
	// take more than a minute to bring a cluster up.
	PostgresStartTimeout = 3 * time.Minute
	// postgresStartAttempts covers the race where the chosen free port is
	// taken by someone else before the postmaster binds it.
	postgresStartAttempts = 3
)

// Layout of a data directory: the cluster, the unix socket directory, the
// remembered port and the server log.
const (
	pgdataDir   = "pgdata"
	socketDir   = "run"
	portFile    = "port"
	postgresLog = "postgres.log"
)

// Postgres is a throwaway PostgreSQL cluster under a data directory, started
// from the machine's PostgreSQL binaries.
type Postgres struct {
	dataDir string
	port    int
	bin     string // directory of initdb, pg_ctl, postgres
	asUser  string // run the binaries as this user via runuser ("" = as ourselves)
	// userNS: as root, the binaries run in a user namespace in which root
	// is the postgres user (uid, gid below): the kernel checks the
	// directories against root, who can reach a clone under a 0700 home,
	// and PostgreSQL sees the non-root user it insists on. Chosen when the
	// postgres user cannot reach the data directory.
	userNS bool
	nsUID  int
	nsGID  int
	log    *slog.Logger
}

// StartPostgres starts (initialising on first use) a cluster under dataDir,
// listening on 127.0.0.1 on a port remembered in dataDir and on a unix
// socket inside dataDir, with trust authentication, and makes sure the
// database "ironflow" exists. A postmaster still running on dataDir from an
// earlier run is reused. As root, the cluster runs as the postgres user
// because initdb and postgres refuse to run as root; when that user cannot
// reach dataDir (a clone under /root, mode 0700), it runs as root mapped to
// that user in a user namespace instead (userNS).
func StartPostgres(ctx context.Context, dataDir string, log *slog.Logger) (*Postgres, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	bin, err := findPostgresBin()
	if err != nil {
		return nil, err
	}
	abs, err := filepath.Abs(dataDir)
	if err != nil {
		return nil, fmt.Errorf("postgres data dir %q: %w", dataDir, err)
	}
	p := &Postgres{dataDir: abs, bin: bin, log: log}
	if os.Geteuid() == 0 {
		p.asUser = PostgresSuperuser
	}
	if err := p.prepareDir(); err != nil {
		return nil, err
	}
	if err := p.initdb(ctx); err != nil {
		return nil, err
	}

	if port, ok := p.runningPostmaster(); ok {
		p.port = port
		log.Info("reusing running postgres", "data_dir", p.dataDir, "port", port)
	} else if err := p.start(ctx); err != nil {
		return nil, err
	}
	if err := p.ensureDatabase(ctx); err != nil {
		return nil, err
	}
	return p, nil
}

// URL is the libpq URL of the ironflow database.
func (p *Postgres) URL() string { return p.DatabaseURL(PostgresDatabase) }

// DatabaseURL is the libpq URL of another database on the same cluster.
func (p *Postgres) DatabaseURL(db string) string {
	u := url.URL{
		Scheme:   "postgres",
		User:     url.User(PostgresSuperuser),
		Host:     net.JoinHostPort("127.0.0.1", strconv.Itoa(p.port)),
		Path:     "/" + db,
		RawQuery: "sslmode=disable",
	}
	return u.String()
}

// Port is the TCP port the cluster listens on (127.0.0.1).
func (p *Postgres) Port() int { return p.port }

// DataDir is the directory holding the cluster, its socket and its log.
func (p *Postgres) DataDir() string { return p.dataDir }

// Stop shuts the postmaster down (fast mode: open sessions are ended).
func (p *Postgres) Stop() error {
	ctx, cancel := context.WithTimeout(context.Background(), PostgresStartTimeout+10*time.Second)
	defer cancel()
	out, err := p.run(ctx, "pg_ctl", "-D", p.pgdata(), "-m", "fast", "-w",
		"-t", strconv.Itoa(int(PostgresStartTimeout/time.Second)), "stop")
	if err != nil {
		return fmt.Errorf("stop postgres in %s: %w: %s", p.dataDir, err, out)
	}
	p.log.Info("postgres stopped", "data_dir", p.dataDir)
	return nil
}

func (p *Postgres) pgdata() string { return filepath.Join(p.dataDir, pgdataDir) }

// PostgresBin is the directory of the PostgreSQL binaries the cluster runs
// (and of their client tools: pg_dump, pg_restore).
func PostgresBin() (string, error) { return findPostgresBin() }

// findPostgresBin prefers Debian's versioned directories (newest first),
// then the PATH.
func findPostgresBin() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Slice(dirs, func(i, j int) bool {
		vi, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[i])))
		vj, _ := strconv.Atoi(filepath.Base(filepath.Dir(dirs[j])))
		return vi > vj
	})
	for _, d := range dirs {
		if hasPostgresBinaries(d) {
			return d, nil
		}
	}
	if initdb, err := exec.LookPath("initdb"); err == nil {
		// /usr/local/bin often holds symlinks: use the real directory so
		// pg_ctl finds the postgres binary next to it.
		if real, err := filepath.EvalSymlinks(initdb); err == nil && hasPostgresBinaries(filepath.Dir(real)) {
			return filepath.Dir(real), nil
		}
		if hasPostgresBinaries(filepath.Dir(initdb)) {
			return filepath.Dir(initdb), nil
		}
	}
	return "", ErrPostgresNotFound
}

func hasPostgresBinaries(dir string) bool {
	for _, b := range []string{"initdb", "pg_ctl", "postgres"} {
		fi, err := os.Stat(filepath.Join(dir, b))
		if err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			return false
		}
	}
	return true
}

// prepareDir creates the data directory; as root it hands it to the
// postgres user and makes sure that user can reach it.
func (p *Postgres) prepareDir() error {
	created, err := mkdirAllTracked(p.dataDir)
	if err != nil {
		return fmt.Errorf("create postgres data dir %s: %w", p.dataDir, err)
	}
	if p.asUser == "" {
		return nil
	}
	// Directories we created get 0755 so that the postgres user can
	// traverse them; directories that already existed are not ours to
	// loosen, so a blocking one is reported instead.
	for _, d := range created {
		if err := os.Chmod(d, 0o755); err != nil {
			return fmt.Errorf("chmod %s: %w", d, err)
		}
	}
	uid, gid, err := lookupUser(p.asUser)
	if err != nil {
		return err
	}
	if p.clusterOwnedByRoot() {
		// Created in a user namespace by an earlier run.
		p.useUserNamespace(uid, gid)
		return nil
	}
	for d := filepath.Dir(p.dataDir); ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return fmt.Errorf("stat %s: %w", d, err)
		}
		if fi.Mode().Perm()&0o001 == 0 && !ownedBy(fi, uid) {
			if _, err := os.Stat(filepath.Join(p.pgdata(), "PG_VERSION")); err == nil {
				// A cluster the postgres user owns, moved under d since.
				return fmt.Errorf("postgres data dir %s: user %s cannot traverse %s (mode %v); choose a data dir elsewhere or chmod o+x %s",
					p.dataDir, p.asUser, d, fi.Mode().Perm(), d)
			}
			p.log.Info("postgres: the postgres user cannot traverse a parent of the data dir; running PostgreSQL as root mapped to that user in a user namespace",
				"data_dir", p.dataDir, "parent", d, "mode", fi.Mode().Perm().String())
			p.useUserNamespace(uid, gid)
			return nil
		}
		if d == filepath.Dir(d) {
			break
		}
	}
	if err := os.Chown(p.dataDir, uid, gid); err != nil {
		return fmt.Errorf("chown %s to %s: %w", p.dataDir, p.asUser, err)
	}
	if err := os.Chmod(p.dataDir, 0o755); err != nil {
		return fmt.Errorf("chmod %s: %w", p.dataDir, err)
	}
	return nil
}

// clusterOwnedByRoot reports whether the data dir holds a cluster whose
// files root owns: one that ran in a user namespace.
func (p *Postgres) clusterOwnedByRoot() bool {
	fi, err := os.Stat(filepath.Join(p.pgdata(), "PG_VERSION"))
	return err == nil && ownedBy(fi, 0)
}

// useUserNamespace makes the binaries run as root mapped to uid, gid.
func (p *Postgres) useUserNamespace(uid, gid int) {
	p.userNS, p.nsUID, p.nsGID = true, uid, gid
}

// nsAttr is the SysProcAttr of a binary run in the user namespace.
func (p *Postgres) nsAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: p.nsUID, HostID: 0, Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: p.nsGID, HostID: 0, Size: 1}},
	}
}

// mkdirAllTracked is os.MkdirAll that also returns the directories it made.
func mkdirAllTracked(dir string) ([]string, error) {
	var missing []string
	for d := dir; ; d = filepath.Dir(d) {
		if _, err := os.Stat(d); err == nil {
			break
		} else if !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
		missing = append(missing, d)
		if d == filepath.Dir(d) {
			break
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	return missing, nil
}

func lookupUser(name string) (uid, gid int, err error) {
	u, err := user.Lookup(name)
	if err != nil {
		return 0, 0, fmt.Errorf("running as root, PostgreSQL must run as user %q (initdb and postgres refuse root): %w", name, err)
	}
	uid, _ = strconv.Atoi(u.Uid)
	gid, _ = strconv.Atoi(u.Gid)
	return uid, gid, nil
}

func ownedBy(fi fs.FileInfo, uid int) bool {
	st, ok := fi.Sys().(*syscall.Stat_t)
	return ok && int(st.Uid) == uid
}

// initdb creates the cluster unless it exists.
func (p *Postgres) initdb(ctx context.Context) error {
	if _, err := os.Stat(filepath.Join(p.pgdata(), "PG_VERSION")); err == nil {
		return nil
	}
	for _, d := range []string{p.pgdata(), filepath.Join(p.dataDir, socketDir)} {
		if err := p.mkdirOwned(d, 0o700); err != nil {
			return err
		}
	}
	out, err := p.run(ctx, "initdb", "-D", p.pgdata(), "-U", PostgresSuperuser,
		"--auth=trust", "--encoding=UTF8", "--locale=C", "--no-sync")
	if err != nil {
		return fmt.Errorf("initdb %s: %w: %s", p.pgdata(), err, out)
	}
	p.log.Info("postgres cluster initialised", "data_dir", p.dataDir)
	return nil
}

func (p *Postgres) mkdirOwned(d string, mode os.FileMode) error {
	if err := os.MkdirAll(d, mode); err != nil {
		return fmt.Errorf("create %s: %w", d, err)
	}
	if err := os.Chmod(d, mode); err != nil {
		return fmt.Errorf("chmod %s: %w", d, err)
	}
	if p.asUser == "" || p.userNS {
		return nil
	}
	uid, gid, err := lookupUser(p.asUser)
	if err != nil {
		return err
	}
	if err := os.Chown(d, uid, gid); err != nil {
		return fmt.Errorf("chown %s to %s: %w", d, p.asUser, err)
	}
	return nil
}

// runningPostmaster reports the port of a live postmaster on our data dir,
// from its postmaster.pid (line 1 pid, line 4 port).
func (p *Postgres) runningPostmaster() (int, bool) {
	f, err := os.Open(filepath.Join(p.pgdata(), "postmaster.pid"))
	if err != nil {
		return 0, false
	}
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	for sc.Scan() && len(lines) < 4 {
		lines = append(lines, strings.TrimSpace(sc.Text()))
	}
	if len(lines) < 4 {
		return 0, false
	}
	pid, err1 := strconv.Atoi(lines[0])
	port, err2 := strconv.Atoi(lines[3])
	if err1 != nil || err2 != nil || pid <= 0 {
		return 0, false
	}
	// A stale pid file may name a pid since reused by another program:
	// only a process that is a postgres and answers on the port counts.
	if err := syscall.Kill(pid, 0); err != nil && !errors.Is(err, syscall.EPERM) {
		return 0, false
	}
	if comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); err == nil &&
		!strings.HasPrefix(strings.TrimSpace(string(comm)), "postgres") {
		return 0, false
	}
	c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), time.Second)
	if err != nil {
		return 0, false
	}
	c.Close()
	return port, true
}

// start launches the postmaster on the remembered port, or a new free one
// when that port is taken.
func (p *Postgres) start(ctx context.Context) error {
	var lastErr error
	for attempt := 0; attempt < postgresStartAttempts; attempt++ {
		port, err := p.choosePort()
		if err != nil {
			return err
		}
		p.port = port
		opts := fmt.Sprintf("-c listen_addresses=127.0.0.1 -c port=%d -c unix_socket_directories='%s' -c synchronous_commit=off -c shared_buffers=%s",
			port, filepath.Join(p.dataDir, socketDir), postgresSharedBuffers)
		out, err := p.run(ctx, "pg_ctl", "-D", p.pgdata(), "-l", filepath.Join(p.dataDir, postgresLog),
			"-w", "-t", strconv.Itoa(int(PostgresStartTimeout/time.Second)), "-o", opts, "start")
		if err == nil {
			p.log.Info("postgres started", "data_dir", p.dataDir, "port", port)
			return nil
		}
		lastErr = fmt.Errorf("start postgres in %s on port %d: %w: %s (see %s)",
			p.dataDir, port, err, out, filepath.Join(p.dataDir, postgresLog))
		if !portTaken(port) {
			return lastErr
		}
		p.log.Warn("postgres port taken, choosing another", "port", port)
		_ = os.Remove(filepath.Join(p.dataDir, portFile))
	}
	return lastErr
}

// choosePort returns the port remembered in the data dir if it is free,
// else a new free port, which it remembers.
func (p *Postgres) choosePort() (int, error) {
	pf := filepath.Join(p.dataDir, portFile)
	if b, err := os.ReadFile(pf); err == nil {
		if port, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && port > 0 && !portTaken(port) {
			return port, nil
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("choose a free port for postgres: %w", err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	if err := os.WriteFile(pf, []byte(strconv.Itoa(port)+"\n"), 0o644); err != nil {
		return 0, fmt.Errorf("remember postgres port in %s: %w", pf, err)
	}
	return port, nil
}

func portTaken(port int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return true
	}
	l.Close()
	return false
}

// ensureDatabase creates the ironflow database on first start.
func (p *Postgres) ensureDatabase(ctx context.Context) error {
	conn, err := pgx.Connect(ctx, p.DatabaseURL("postgres"))
	if err != nil {
		return fmt.Errorf("connect to postgres on port %d: %w", p.port, err)
	}
	defer conn.Close(ctx)
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", PostgresDatabase).Scan(&exists); err != nil {
		return fmt.Errorf("look up database %s: %w", PostgresDatabase, err)
	}
	if exists {
		return nil
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{PostgresDatabase}.Sanitize()); err != nil {
		var exists bool
		// Two first starts racing: the loser finds the database made.
		if qerr := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", PostgresDatabase).Scan(&exists); qerr == nil && exists {
			return nil
		}
		return fmt.Errorf("create database %s: %w", PostgresDatabase, err)
	}
	p.log.Info("postgres database created", "database", PostgresDatabase)
	return nil
}

// run executes one of the PostgreSQL binaries, as the postgres user when we
// are root, and returns its combined output.
func (p *Postgres) run(ctx context.Context, name string, args ...string) (string, error) {
	path := filepath.Join(p.bin, name)
	var cmd *exec.Cmd
	if p.userNS {
		cmd = exec.CommandContext(ctx, path, args...)
		cmd.SysProcAttr = p.nsAttr()
	} else if p.asUser != "" {
		runuser, err := findRunuser()
		if err != nil {
			return "", err
		}
		cmd = exec.CommandContext(ctx, runuser, append([]string{"-u", p.asUser, "--", path}, args...)...)
	} else {
		cmd = exec.CommandContext(ctx, path, args...)
	}
	// The postgres user may not be able to enter our working directory.
	cmd.Dir = p.dataDir
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	// pg_ctl leaves the postmaster running; never let it hold our pipes.
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	if err != nil && p.userNS && errors.Is(err, syscall.EPERM) && len(out) == 0 {
		err = fmt.Errorf("%w: the postgres user cannot reach %s and this machine refuses a user namespace to run PostgreSQL in; choose a data dir the postgres user can traverse, or chmod o+x its parents", err, p.dataDir)
	}
	return strings.TrimSpace(string(out)), err
}

func findRunuser() (string, error) {
	if p, err := exec.LookPath("runuser"); err == nil {
		return p, nil
	}
	for _, p := range []string{"/usr/sbin/runuser", "/sbin/runuser", "/usr/bin/runuser"} {
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	return "", errors.New("running as root, PostgreSQL must run as user postgres but runuser (util-linux) was not found")
}

// StopOnExit starts a detached watchdog that stops the cluster once the
// calling process has exited, and then removes the data directory when
// removeDataDir is set. Test processes use it as a safety net: Go has no
// hook that runs at process exit, and a test binary that is killed or that
// forgets its cleanup would otherwise leave a postmaster behind.
func (p *Postgres) StopOnExit(removeDataDir bool) error {
	stop := []string{filepath.Join(p.bin, "pg_ctl"), "-D", p.pgdata(), "-m", "fast", "-w", "stop"}
	if p.asUser != "" && !p.userNS {
		runuser, err := findRunuser()
		if err != nil {
			return err
		}
		stop = append([]string{runuser, "-u", p.asUser, "--"}, stop...)
	}
	quoted := make([]string, len(stop))
	for i, a := range stop {
		quoted[i] = shellQuote(a)
	}
	script := fmt.Sprintf("while kill -0 %d 2>/dev/null; do sleep 1; done; if [ -f %s ]; then %s; fi",
		os.Getpid(), shellQuote(filepath.Join(p.pgdata(), "postmaster.pid")), strings.Join(quoted, " "))
	if removeDataDir {
		script += "; rm -rf " + shellQuote(p.dataDir)
	}
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.Dir = "/"
	// Its own session: signals to our process group must not reach it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if p.userNS {
		// The watchdog, and the pg_ctl it runs, in the namespace too.
		cmd.SysProcAttr = p.nsAttr()
		cmd.SysProcAttr.Setsid = true
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start postgres exit watchdog: %w", err)
	}
	return cmd.Process.Release()
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// SocketURL is the libpq URL of the ironflow database through the
// cluster's unix socket, which, unlike 127.0.0.1, is reachable from other
// network namespaces.
func (p *Postgres) SocketURL() string {
	return fmt.Sprintf("postgres://%s@/%s?host=%s&port=%d&sslmode=disable",
		PostgresSuperuser, PostgresDatabase, filepath.Join(p.dataDir, socketDir), p.port)
}

// postgresSharedBuffers is PostgreSQL's own cache, a quarter of its
// default: the embedded databases (ironflow's, and the Temporal cluster's
// persistence and visibility) are small enough for the kernel's page cache
// to hold what the buffers do not, and every touched buffer counts in the
// stack's memory. make bench, the cluster part at 200 nodes: PostgreSQL's
// PSS 172 -> 152 MiB, its CPU per deploy unchanged (8.1 -> 8.6 ms, within
// the run's noise); ironflow's own database never fills 32 MB (49 MiB both).
const postgresSharedBuffers = "32MB"
