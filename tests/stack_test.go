// Package tests holds ironflow's integration tests on real parts: a real
// PostgreSQL cluster, a real Temporal dev server, the ironflow binary's api
// and worker processes, and the unmodified baremetal CLI.
package tests

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ironflow/ironflow/devstack"
	"github.com/ironflow/ironflow/workflows"
)

// stack is one ironflow installation shared by the package's tests: the
// tests use distinct nodes and run one after another.
type stack struct {
	dir          string
	bin          string
	pgURL        string
	pg           *devstack.Postgres
	temporal     *devstack.Temporal
	temporalCfg  devstack.TemporalConfig
	apiURL       string
	apiAddr      string
	api, worker  *exec.Cmd
	workerArgs   []string
	apiArgs      []string
	workerLog    string
	apiLog       string
	setupErr     error
	heartbeatSec int
}

var lab *stack

func TestMain(m *testing.M) {
	code := func() int {
		var err error
		lab, err = startStack()
		if err != nil {
			fmt.Fprintf(os.Stderr, "tests: the integration stack did not start: %v\n", err)
			if lab != nil {
				lab.stop()
			}
			return 1
		}
		defer lab.stop()
		return m.Run()
	}()
	os.Exit(code)
}

func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(filepath.Dir(file))
}

// buildIronflow uses $IRONFLOW_BIN (make test builds it) or builds one.
func buildIronflow(dir string) (string, error) {
	if b := os.Getenv("IRONFLOW_BIN"); b != "" {
		if _, err := os.Stat(b); err == nil {
			return b, nil
		}
	}
	out := filepath.Join(dir, "ironflow")
	cmd := exec.Command("go", "build", "-o", out, "./cmd/ironflow")
	cmd.Dir = repoRoot()
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build ironflow: %v\n%s", err, b)
	}
	return out, nil
}

func startStack() (*stack, error) {
	dir, err := os.MkdirTemp("", "ironflow-tests-")
	if err != nil {
		return nil, err
	}
	_ = os.Chmod(dir, 0o755)
	s := &stack{dir: dir, heartbeatSec: 10}
	if s.bin, err = buildIronflow(dir); err != nil {
		return s, err
	}
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	if s.pg, err = devstack.StartPostgres(ctx, filepath.Join(dir, "pg"), log); err != nil {
		return s, err
	}
	s.pgURL = s.pg.URL()
	// File-backed, as `make run` uses it, so that a test can kill and
	// restart the Temporal server without losing workflows.
	port, err := devstack.FreePort("127.0.0.1")
	if err != nil {
		return s, err
	}
	s.temporalCfg = devstack.TemporalConfig{
		Port:    port,
		UIPort:  -1,
		DBFile:  filepath.Join(dir, "temporal", "temporal.db"),
		LogFile: filepath.Join(dir, "temporal.log"),
		SearchAttributes: map[string]string{
			workflows.SearchAttrNodeUUID: "Keyword", workflows.SearchAttrProvisionState: "Keyword", workflows.SearchAttrOperation: "Keyword",
		},
	}
	if s.temporal, err = devstack.StartTemporal(ctx, s.temporalCfg, log); err != nil {
		return s, err
	}
	if out, err := exec.Command(s.bin, "migrate", "--database-url", s.pgURL).CombinedOutput(); err != nil {
		return s, fmt.Errorf("migrate: %v: %s", err, out)
	}
	if port, err = devstack.FreePort("127.0.0.1"); err != nil {
		return s, err
	}
	s.apiAddr = fmt.Sprintf("127.0.0.1:%d", port)
	s.apiURL = "http://" + s.apiAddr
	s.apiLog = filepath.Join(dir, "api.log")
	s.workerLog = filepath.Join(dir, "worker.log")
	s.apiArgs = []string{"api", "--listen", s.apiAddr, "--database-url", s.pgURL, "--temporal-address", s.temporal.Address(),
		"--ramdisk-heartbeat-timeout", fmt.Sprintf("%ds", s.heartbeatSec)}
	s.workerArgs = []string{"worker", "--database-url", s.pgURL, "--temporal-address", s.temporal.Address(),
		"--agent-api-url", s.apiURL, "--boot-url", "http://127.0.0.1:1",
		"--deploy-callback-timeout", "3m", "--agent-heartbeat-timeout", "30s", "--operator-wait-timeout", "10m",
		"--bmc-attempts", "3", "--agent-insecure", "--sync-power-state-interval", "5s"}
	if err := s.startAPI(); err != nil {
		return s, err
	}
	if err := s.startWorker(); err != nil {
		return s, err
	}
	return s, nil
}

func (s *stack) spawn(args []string, logFile string) (*exec.Cmd, error) {
	f, err := os.OpenFile(logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	cmd := exec.Command(s.bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = append(os.Environ(), "IRONFLOW_LOG_LEVEL=debug")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start ironflow %s: %w", args[0], err)
	}
	go func() { _ = cmd.Wait() }()
	return cmd, nil
}

func (s *stack) startAPI() error {
	cmd, err := s.spawn(s.apiArgs, s.apiLog)
	if err != nil {
		return err
	}
	s.api = cmd
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if resp, err := http.Get(s.apiURL + "/"); err == nil {
			resp.Body.Close()
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("the API did not answer on %s within 30 s; log: %s", s.apiURL, tail(s.apiLog))
}

func (s *stack) startWorker() error {
	cmd, err := s.spawn(s.workerArgs, s.workerLog)
	if err != nil {
		return err
	}
	s.worker = cmd
	return nil
}

// killWorker ends the worker as a crash would: SIGKILL, no shutdown.
func (s *stack) killWorker() {
	if s.worker != nil && s.worker.Process != nil {
		_ = syscall.Kill(-s.worker.Process.Pid, syscall.SIGKILL)
		s.worker = nil
	}
}

func (s *stack) killAPI() {
	if s.api != nil && s.api.Process != nil {
		_ = syscall.Kill(-s.api.Process.Pid, syscall.SIGKILL)
		s.api = nil
	}
}

// restartTemporal kills the Temporal server as a crash would and starts it
// again on the same port and database file.
func (s *stack) restartTemporal() error {
	s.temporal.Kill()
	t, err := devstack.StartTemporal(context.Background(), s.temporalCfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		return err
	}
	s.temporal = t
	return nil
}

func (s *stack) stop() {
	s.killWorker()
	s.killAPI()
	if s.temporal != nil {
		_ = s.temporal.Stop()
	}
	if s.pg != nil {
		_ = s.pg.Stop()
	}
	if os.Getenv("IRONFLOW_KEEP_TEST_DIR") == "" {
		_ = os.RemoveAll(s.dir)
	}
}

func tail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// call sends an API request at microversion 1.78 and decodes a JSON answer.
func call(t testing.TB, method, path string, body any, out any) (int, http.Header) {
	t.Helper()
	var r io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, lab.apiURL+path, r)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-OpenStack-Ironic-API-Version", "1.78")
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil && len(b) > 0 {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: decode %q: %v", method, path, b, err)
		}
	}
	return resp.StatusCode, resp.Header
}

type node struct {
	UUID                 string         `json:"uuid"`
	Name                 string         `json:"name"`
	ProvisionState       string         `json:"provision_state"`
	TargetProvisionState *string        `json:"target_provision_state"`
	PowerState           *string        `json:"power_state"`
	LastError            *string        `json:"last_error"`
	InstanceInfo         map[string]any `json:"instance_info"`
	DriverInternalInfo   map[string]any `json:"driver_internal_info"`
}

func getNode(t testing.TB, id string) node {
	t.Helper()
	var n node
	if code, _ := call(t, "GET", "/v1/nodes/"+id, nil, &n); code != 200 {
		t.Fatalf("GET node %s: %d", id, code)
	}
	return n
}

// waitState polls the node until it reaches state, failing on a failure
// state (unless that is the one asked for) or after timeout.
func waitState(t testing.TB, id, state string, timeout time.Duration) node {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var n node
	for time.Now().Before(deadline) {
		n = getNode(t, id)
		if n.ProvisionState == state {
			return n
		}
		if strings.HasSuffix(n.ProvisionState, "failed") && !strings.HasSuffix(state, "failed") {
			t.Fatalf("node %s went to %q waiting for %q: last_error %v\nworker log:\n%s", id, n.ProvisionState, state, deref(n.LastError), tail(lab.workerLog))
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("node %s still %q after %s waiting for %q (last_error %v)\nworker log:\n%s", id, n.ProvisionState, timeout, state, deref(n.LastError), tail(lab.workerLog))
	return n
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

// baremetal runs the unmodified baremetal CLI against the stack.
func baremetal(t testing.TB, args ...string) (string, string, error) {
	t.Helper()
	cli := "/usr/bin/baremetal"
	if _, err := os.Stat(cli); err != nil {
		t.Fatalf("the baremetal CLI is missing: install Debian's python3-ironicclient (make test does): %v", err)
	}
	cmd := exec.Command("/usr/bin/python3", append([]string{cli}, args...)...)
	cmd.Env = append(os.Environ(), "OS_ENDPOINT="+lab.apiURL, "OS_AUTH_TYPE=none")
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	return stdout.String(), stderr.String(), err
}

func mustCLI(t testing.TB, args ...string) string {
	t.Helper()
	out, errOut, err := baremetal(t, args...)
	if err != nil {
		t.Fatalf("baremetal %s: %v\nstdout: %s\nstderr: %s\nworker log:\n%s", strings.Join(args, " "), err, out, errOut, tail(lab.workerLog))
	}
	return out
}
