package embedded

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"

	"github.com/ironflow/ironflow/workflows"
)

// TemporalConfig says how to run the Temporal dev server.
type TemporalConfig struct {
	// Bin is the temporal CLI; default: $IRONFLOW_TEMPORAL_BIN, ./bin/temporal
	// next to the repository root, then PATH.
	Bin string
	// DBFile keeps workflows across restarts (file-backed SQLite). Empty
	// keeps everything in memory.
	DBFile string
	IP     string // default 127.0.0.1
	// Port for the frontend (default 7233; 0 picks a free one), UIPort for
	// the Web UI (default Port+1000; -1 runs headless).
	Port, UIPort int
	// MetricsPort serves the server's Prometheus metrics (0 picks a free
	// one, as the CLI itself would; with Command, the CLI picks it and
	// MetricsURL is empty).
	MetricsPort int
	Namespace   string // default "default"
	// LogFile receives the server's output; default: discarded.
	LogFile string
	// SearchAttributes to register at start: name → type (Keyword, Text, ...).
	SearchAttributes map[string]string
	// UICodecEndpoint is the codec server the Web UI decodes payloads
	// through (ironflow dev's; empty: none).
	UICodecEndpoint string
	// Command, when set, runs the server and its readiness probe (the
	// CLI's `operator search-attribute list`) instead of exec.Command, e.g.
	// inside another network namespace, where this process cannot dial
	// the frontend and a free port here says nothing about a port there.
	Command func(name string, args ...string) *exec.Cmd
}

// WorkflowSearchAttributes are the search attributes ironflow's workflows
// upsert, which a dev server must register at start.
func WorkflowSearchAttributes() map[string]string {
	return map[string]string{
		workflows.SearchAttrNodeUUID:       "Keyword",
		workflows.SearchAttrProvisionState: "Keyword",
		workflows.SearchAttrOperation:      "Keyword",
		workflows.SearchAttrRollout:        "Keyword",
		workflows.SearchAttrRolloutProject: "Keyword",
	}
}

// Temporal is a running dev server.
type Temporal struct {
	cmd *exec.Cmd
	bin string
	// command runs the CLI probe when the server was started through one.
	command func(name string, args ...string) *exec.Cmd
	address string
	uiURL   string
	metrics string
	// logFile is the server's log ("" when it goes nowhere), quoted when
	// the server exits during start.
	logFile string
	done    chan error
}

// Address is the frontend's host:port for client.Dial.
func (t *Temporal) Address() string { return t.address }

// UIURL is the Web UI's address ("" when headless).
func (t *Temporal) UIURL() string { return t.uiURL }

// MetricsURL is the server's Prometheus endpoint ("" when unknown): its
// request and persistence counters by operation say what a workload asks
// of the server (make bench).
func (t *Temporal) MetricsURL() string { return t.metrics }

// Pid is the server's process id.
func (t *Temporal) Pid() int { return t.cmd.Process.Pid }

// FindTemporalCLI locates the temporal CLI.
func FindTemporalCLI(bin string) (string, error) {
	candidates := []string{bin, os.Getenv("IRONFLOW_TEMPORAL_BIN")}
	if root, err := repoRoot(); err == nil {
		candidates = append(candidates, filepath.Join(root, "bin", "temporal"))
	}
	for _, c := range candidates {
		if c == "" {
			continue
		}
		if st, err := os.Stat(c); err == nil && !st.IsDir() {
			return c, nil
		}
	}
	if p, err := exec.LookPath("temporal"); err == nil {
		return p, nil
	}
	return "", errors.New("the Temporal CLI was not found: run 'make tools' (it installs github.com/temporalio/cli/cmd/temporal@v1.5.1 into ./bin), or set IRONFLOW_TEMPORAL_BIN, or point ironflow at a Temporal server with TEMPORAL_ADDRESS")
}

// repoRoot walks up from the working directory to the directory holding go.mod.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

// TaskQueueWritePartitions is the number of partitions new tasks go to.
// Partitions spread a queue over matching hosts, and a dev server is one
// host; with four, a task written to a partition where no poll is waiting
// goes to that partition's backlog until a poll happens to land there.
// Measured: 100 manages at 16 clients on the split stack, the slowest
// workflow's first task waited 2.8 to 6.8 s before a worker took it (the
// rest, about 0.65 s); with one partition the slowest took 0.85 s in five
// runs out of five (README, "Benchmarks").
const TaskQueueWritePartitions = 1

// LegacyTaskQueuePartitions is Temporal's default of four partitions,
// which releases before TaskQueueWritePartitions wrote. A task written
// there stays in its partition's backlog until that partition is read
// again: a store one of them wrote keeps being read on four, or its
// workflows stop (TestDevServerRestartKeepsTasksOfFourPartitions;
// docs/production.md, "Task-queue partitions").
const LegacyTaskQueuePartitions = 4

// PartitionsFile is the record, next to a Temporal store (the dev
// server's SQLite file, the cluster's directory), of the most partitions
// its task queues were ever written to.
func PartitionsFile(store string) string { return store + ".partitions" }

// ReadPartitions is the number of partitions to read for a store whose
// record is file, given that its server writes write partitions: a
// store created now (fresh) is read on write alone and its record
// written; an existing store on the most its record names, and on
// LegacyTaskQueuePartitions when it has none, as a release before the
// record wrote it. Reading more partitions than are written costs
// latency: a poll on an empty partition is forwarded to the one that
// holds the tasks, one at a time (the slowest of 100 manages 1.29 s after
// its PUT with four read, 0.85 s with one; README, "Benchmarks").
func ReadPartitions(file string, fresh bool, write int) (int, error) {
	if !fresh {
		b, err := os.ReadFile(file)
		switch {
		case errors.Is(err, os.ErrNotExist):
			return max(LegacyTaskQueuePartitions, write), nil
		case err != nil:
			return 0, fmt.Errorf("read the task-queue partitions of the Temporal store: %w", err)
		}
		n, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || n < 1 {
			return 0, fmt.Errorf("%s: %q is not a number of task-queue partitions: write the most partitions this store's task queues were written to, or %d when unsure", file, strings.TrimSpace(string(b)), LegacyTaskQueuePartitions)
		}
		if n >= write {
			return n, nil
		}
	}
	// The record is written before the server writes a task.
	if err := os.WriteFile(file, []byte(strconv.Itoa(write)+"\n"), 0o644); err != nil {
		return 0, fmt.Errorf("record the task-queue partitions of the Temporal store: %w", err)
	}
	return write, nil
}

// devServerPartitions is the dev server's task-queue partitions for its
// SQLite file db ("" in memory: nothing outlives the server).
var devServerPartitions = func(db string) ([]string, error) {
	read := TaskQueueWritePartitions
	if db != "" {
		_, err := os.Stat(db)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("Temporal data file: %w", err)
		}
		if read, err = ReadPartitions(PartitionsFile(db), err != nil, TaskQueueWritePartitions); err != nil {
			return nil, err
		}
	}
	return []string{
		"--dynamic-config-value", fmt.Sprintf("matching.numTaskqueueReadPartitions=%d", read),
		"--dynamic-config-value", fmt.Sprintf("matching.numTaskqueueWritePartitions=%d", TaskQueueWritePartitions),
	}, nil
}

// StartTemporal starts `temporal server start-dev` and waits until its
// frontend answers.
func StartTemporal(ctx context.Context, cfg TemporalConfig, log *slog.Logger) (*Temporal, error) {
	bin, err := FindTemporalCLI(cfg.Bin)
	if err != nil {
		return nil, err
	}
	if cfg.IP == "" {
		cfg.IP = "127.0.0.1"
	}
	if cfg.Namespace == "" {
		cfg.Namespace = "default"
	}
	if cfg.Port == 0 {
		if cfg.Port, err = heldFreePort(cfg.IP); err != nil {
			return nil, err
		}
	} else if cfg.Command == nil && !portFree(cfg.IP, cfg.Port) {
		return nil, fmt.Errorf("port %s:%d is taken: is another Temporal server (or another 'make run') running? Stop it or choose another port", cfg.IP, cfg.Port)
	}
	args := []string{"server", "start-dev", "--ip", cfg.IP, "--port", strconv.Itoa(cfg.Port),
		"--namespace", cfg.Namespace, "--log-level", "warn"}
	command := cfg.Command
	if command == nil {
		command = exec.Command
	}
	t := &Temporal{bin: bin, command: cfg.Command, address: net.JoinHostPort(cfg.IP, strconv.Itoa(cfg.Port)), logFile: cfg.LogFile, done: make(chan error, 1)}
	switch {
	case cfg.UIPort < 0:
		args = append(args, "--headless")
	default:
		if cfg.UIPort == 0 {
			cfg.UIPort = cfg.Port + 1000
		}
		args = append(args, "--ui-port", strconv.Itoa(cfg.UIPort))
		t.uiURL = "http://" + net.JoinHostPort(cfg.IP, strconv.Itoa(cfg.UIPort))
	}
	if cfg.Command == nil {
		if cfg.MetricsPort == 0 {
			if cfg.MetricsPort, err = heldFreePort(cfg.IP); err != nil {
				return nil, err
			}
		}
		args = append(args, "--metrics-port", strconv.Itoa(cfg.MetricsPort))
		t.metrics = fmt.Sprintf("http://%s/metrics", net.JoinHostPort(cfg.IP, strconv.Itoa(cfg.MetricsPort)))
	}
	if cfg.DBFile != "" {
		if err := os.MkdirAll(filepath.Dir(cfg.DBFile), 0o755); err != nil {
			return nil, fmt.Errorf("create Temporal data directory: %w", err)
		}
		// SQLite's default rollback journal with full sync makes every
		// Temporal write wait for fsync, which bounds a deploy's latency
		// and the server's throughput (make bench: about 2x in both).
		// WAL with synchronous=NORMAL loses nothing when the server is
		// killed, only the last transactions on a power loss: what a dev
		// server keeps its file for (SQLite's "Write-Ahead Logging").
		args = append(args, "--db-filename", cfg.DBFile, "--sqlite-pragma", "journal_mode=wal", "--sqlite-pragma", "synchronous=normal")
	}
	partitions, err := devServerPartitions(cfg.DBFile)
	if err != nil {
		return nil, err
	}
	args = append(args, partitions...)
	if cfg.UICodecEndpoint != "" && cfg.UIPort >= 0 {
		args = append(args, "--ui-codec-endpoint", cfg.UICodecEndpoint)
	}
	for name, typ := range cfg.SearchAttributes {
		args = append(args, "--search-attribute", name+"="+typ)
	}
	cmd := command(bin, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if cfg.LogFile != "" {
		f, err := os.OpenFile(cfg.LogFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
		if err != nil {
			return nil, fmt.Errorf("open Temporal log: %w", err)
		}
		defer f.Close()
		cmd.Stdout, cmd.Stderr = f, f
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	t.cmd = cmd
	go func() { t.done <- cmd.Wait() }()
	log.Info("temporal dev server starting", "address", t.address, "ui", t.uiURL, "db", cfg.DBFile)
	if err := t.waitReady(ctx, cfg.Namespace); err != nil {
		_ = t.Stop()
		return nil, err
	}
	return t, nil
}

func (t *Temporal) waitReady(ctx context.Context, namespace string) error {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		select {
		case err := <-t.done:
			t.done <- err
			if t.logFile == "" {
				return fmt.Errorf("the Temporal dev server exited during start: %v", err)
			}
			return fmt.Errorf("the Temporal dev server exited during start: %v; its log (%s) ends:\n%s", err, t.logFile, Tail(t.logFile, 4000))
		default:
		}
		err := t.probe(ctx, namespace)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the Temporal dev server did not answer on %s within 2 minutes: %w", t.address, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(300 * time.Millisecond):
		}
	}
}

// probe asks the frontend whether it serves: through the SDK, or through
// the CLI run by the configured command.
func (t *Temporal) probe(ctx context.Context, namespace string) error {
	if t.command != nil {
		out, err := t.command(t.bin, "operator", "search-attribute", "list", "--address", t.address, "--namespace", namespace).CombinedOutput()
		if err != nil {
			return fmt.Errorf("%w: %s", err, out)
		}
		return nil
	}
	c, err := client.Dial(client.Options{HostPort: t.address, Namespace: namespace, Logger: tlog.NewStructuredLogger(slog.New(slog.DiscardHandler))})
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.CheckHealth(ctx, &client.CheckHealthRequest{})
	return err
}

// Stop ends the server (SIGTERM, then SIGKILL after 10 s) and waits for it.
func (t *Temporal) Stop() error {
	if t.cmd == nil || t.cmd.Process == nil {
		return nil
	}
	_ = syscall.Kill(-t.cmd.Process.Pid, syscall.SIGTERM)
	select {
	case <-t.done:
	case <-time.After(10 * time.Second):
		_ = syscall.Kill(-t.cmd.Process.Pid, syscall.SIGKILL)
		<-t.done
	}
	return nil
}

// Kill ends the server at once, as a crash would (fault-injection tests).
func (t *Temporal) Kill() {
	if t.cmd != nil && t.cmd.Process != nil {
		_ = syscall.Kill(-t.cmd.Process.Pid, syscall.SIGKILL)
		<-t.done
	}
}

// FreePort asks the kernel for a free TCP port on ip.
func FreePort(ip string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		return 0, fmt.Errorf("find a free port on %s: %w", ip, err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// heldFreePort is a free port on ip that the kernel will not hand out
// again to a bind on port 0 for about a minute, for a Go server (which
// binds with SO_REUSEADDR) started next. The Temporal CLI's dev server
// picks the ports of its own services with bind(0), and Linux randomises
// ephemeral ports, so a port FreePort found and closed can be handed to
// one of those services too, and the server then exits at start on
// "address already in use". The connection closed from the listening
// side leaves the port in TIME_WAIT, which keeps bind(0) off it: the
// technique of the Temporal CLI's own devserver.GetFreePort.
func heldFreePort(ip string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		return 0, fmt.Errorf("find a free port on %s: %w", ip, err)
	}
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	c, err := net.Dial("tcp", net.JoinHostPort(ip, strconv.Itoa(port)))
	if err != nil {
		return 0, fmt.Errorf("hold free port %s:%d: %w", ip, port, err)
	}
	defer c.Close()
	s, err := l.Accept()
	if err != nil {
		return 0, fmt.Errorf("hold free port %s:%d: %w", ip, port, err)
	}
	// The server's side closes first: its end goes to TIME_WAIT.
	s.Close()
	return port, nil
}

func portFree(ip string, port int) bool {
	l, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(port)))
	if err != nil {
		return false
	}
	l.Close()
	return true
}

// TaskQueuePartitionsWritten asks the temporal CLI (cli) for the partitions
// of task queue queue that new tasks go to: how many for workflow tasks and
// how many for activity tasks. args name the server (--address, TLS flags).
func TaskQueuePartitionsWritten(ctx context.Context, cli, queue string, args ...string) (workflow, activity int, err error) {
	out, err := exec.CommandContext(ctx, cli, append([]string{"task-queue", "list-partition", "--task-queue", queue, "-o", "json"}, args...)...).CombinedOutput()
	if err != nil {
		return 0, 0, fmt.Errorf("temporal task-queue list-partition: %w: %s", err, out)
	}
	var parts struct {
		Activity []struct{ Key string } `json:"activityTaskQueuePartitions"`
		Workflow []struct{ Key string } `json:"workflowTaskQueuePartitions"`
	}
	if err := json.Unmarshal(out, &parts); err != nil {
		return 0, 0, fmt.Errorf("list-partition output %s: %w", out, err)
	}
	return len(parts.Workflow), len(parts.Activity), nil
}
