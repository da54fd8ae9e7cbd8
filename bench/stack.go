package main

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
	"strconv"
	"strings"
	"syscall"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/ironflow/ironflow/devstack"
	"github.com/ironflow/ironflow/store"
	"github.com/ironflow/ironflow/workflows"
)

// apiStartTimeout bounds the wait for a restarted API to answer.
const apiStartTimeout = 30 * time.Second

// stack is ironflow as `make run` runs it: PostgreSQL, the Temporal dev
// server on a file-backed SQLite database, and `ironflow api` and `ironflow
// worker` as processes.
type stack struct {
	dir         string
	bin         string
	log         *slog.Logger
	pg          *devstack.Postgres
	temporal    *devstack.Temporal
	temporalPID int
	tc          client.Client
	store       *store.Store
	apiURL      string
	apiAddr     string
	api, worker *exec.Cmd
	apiArgs     []string
	workerArgs  []string
	http        *http.Client
}

func startStack(ctx context.Context, cfg config, dir string, log *slog.Logger) (*stack, error) {
	s := &stack{dir: dir, log: log, http: newHTTPClient(256)}
	var err error
	if s.bin, err = ironflowBinary(cfg.ironflowBin, dir); err != nil {
		return s, err
	}
	quiet := slog.New(slog.DiscardHandler)
	if s.pg, err = devstack.StartPostgres(ctx, filepath.Join(dir, "pg"), quiet); err != nil {
		return s, err
	}
	if s.temporal, err = devstack.StartTemporal(ctx, devstack.TemporalConfig{
		DBFile:  filepath.Join(dir, "temporal", "temporal.db"),
		UIPort:  -1,
		LogFile: filepath.Join(dir, "temporal.log"),
		SearchAttributes: map[string]string{
			workflows.SearchAttrNodeUUID: "Keyword", workflows.SearchAttrProvisionState: "Keyword", workflows.SearchAttrOperation: "Keyword",
		},
	}, quiet); err != nil {
		return s, err
	}
	s.temporalPID = childPID("temporal")
	if s.tc, err = client.Dial(client.Options{HostPort: s.temporal.Address(), Logger: quietLogger{}}); err != nil {
		return s, fmt.Errorf("dial Temporal: %w", err)
	}
	if out, err := exec.CommandContext(ctx, s.bin, "migrate", "--database-url", s.pg.URL()).CombinedOutput(); err != nil {
		return s, fmt.Errorf("migrate: %w: %s", err, out)
	}
	if s.store, err = store.Open(ctx, s.pg.URL()); err != nil {
		return s, fmt.Errorf("open the store: %w", err)
	}
	port, err := devstack.FreePort("127.0.0.1")
	if err != nil {
		return s, err
	}
	s.apiAddr = fmt.Sprintf("127.0.0.1:%d", port)
	s.apiURL = "http://" + s.apiAddr
	s.apiArgs = []string{"api", "--listen", s.apiAddr, "--database-url", s.pg.URL(), "--temporal-address", s.temporal.Address()}
	s.workerArgs = []string{"worker", "--database-url", s.pg.URL(), "--temporal-address", s.temporal.Address(),
		"--agent-api-url", s.apiURL, "--boot-url", "http://127.0.0.1:1", "--agent-insecure", "--automated-clean=false"}
	if err := s.restart(ctx); err != nil {
		return s, err
	}
	log.Info("stack up", "api", s.apiURL, "temporal", s.temporal.Address(), "postgres", s.pg.Port(), "dir", dir)
	return s, nil
}

// ironflowBinary uses the given binary or builds one.
func ironflowBinary(bin, dir string) (string, error) {
	if bin != "" {
		if _, err := os.Stat(bin); err == nil {
			return bin, nil
		}
	}
	out := filepath.Join(dir, "ironflow")
	cmd := exec.Command("go", "build", "-o", out, "./cmd/ironflow")
	cmd.Dir = repoRoot()
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build ironflow: %w\n%s", err, b)
	}
	return out, nil
}

func repoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(filepath.Dir(file))
}

// restart (re)starts the api and worker processes, so that each part reads
// its own peak RSS (VmHWM is a high-water mark over the process's life).
func (s *stack) restart(ctx context.Context) error {
	s.stopProcs()
	var err error
	if s.api, err = s.spawn(s.apiArgs, "api.log"); err != nil {
		return err
	}
	deadline := time.Now().Add(apiStartTimeout)
	for {
		resp, err := s.http.Get(s.apiURL + "/")
		if err == nil {
			resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the API did not answer on %s within %s; log: %s", s.apiURL, apiStartTimeout, tail(filepath.Join(s.dir, "api.log")))
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
	if s.worker, err = s.spawn(s.workerArgs, "worker.log"); err != nil {
		return err
	}
	return nil
}

func (s *stack) spawn(args []string, logName string) (*exec.Cmd, error) {
	f, err := os.OpenFile(filepath.Join(s.dir, logName), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open %s: %w", logName, err)
	}
	defer f.Close()
	cmd := exec.Command(s.bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start ironflow %s: %w", args[0], err)
	}
	go func() { _ = cmd.Wait() }()
	return cmd, nil
}

func (s *stack) stopProcs() {
	for _, c := range []*exec.Cmd{s.worker, s.api} {
		if c != nil && c.Process != nil {
			_ = syscall.Kill(-c.Process.Pid, syscall.SIGTERM)
		}
	}
	// Give them the shutdown they do in production, then make sure.
	deadline := time.Now().Add(10 * time.Second)
	for _, c := range []*exec.Cmd{s.worker, s.api} {
		if c == nil || c.Process == nil {
			continue
		}
		for time.Now().Before(deadline) && syscall.Kill(c.Process.Pid, 0) == nil {
			time.Sleep(50 * time.Millisecond)
		}
		_ = syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
	}
	s.api, s.worker = nil, nil
}

func (s *stack) stop() {
	s.stopProcs()
	if s.tc != nil {
		s.tc.Close()
	}
	if s.store != nil {
		s.store.Close()
	}
	if s.temporal != nil {
		_ = s.temporal.Stop()
	}
	if s.pg != nil {
		_ = s.pg.Stop()
	}
}

// usage is the CPU and peak memory of the stack's processes.
type usage struct {
	APICPU, WorkerCPU, TemporalCPU, PostgresCPU time.Duration
	APIHWM, WorkerHWM, TemporalHWM              int64 // bytes
}

func (s *stack) usage() usage {
	var u usage
	if s.api != nil {
		u.APICPU, u.APIHWM = procCPU(s.api.Process.Pid), procHWM(s.api.Process.Pid)
	}
	if s.worker != nil {
		u.WorkerCPU, u.WorkerHWM = procCPU(s.worker.Process.Pid), procHWM(s.worker.Process.Pid)
	}
	if s.temporalPID > 0 {
		u.TemporalCPU, u.TemporalHWM = procCPU(s.temporalPID), procHWM(s.temporalPID)
	}
	u.PostgresCPU = s.postgresCPU()
	return u
}

func (u usage) add(o usage) usage {
	u.APICPU += o.APICPU
	u.WorkerCPU += o.WorkerCPU
	u.TemporalCPU += o.TemporalCPU
	u.PostgresCPU += o.PostgresCPU
	return u
}

func (u usage) sub(before usage) usage {
	u.APICPU -= before.APICPU
	u.WorkerCPU -= before.WorkerCPU
	u.TemporalCPU -= before.TemporalCPU
	u.PostgresCPU -= before.PostgresCPU
	return u
}

// postgresCPU sums the postmaster and its backends.
func (s *stack) postgresCPU() time.Duration {
	b, err := os.ReadFile(filepath.Join(s.pg.DataDir(), "pgdata", "postmaster.pid"))
	if err != nil {
		return 0
	}
	pm, err := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
	if err != nil {
		return 0
	}
	total := procCPU(pm)
	for _, pid := range childrenOf(pm) {
		total += procCPU(pid)
	}
	return total
}

// clkTck is USER_HZ, 100 on every Linux the project runs on.
const clkTck = 100

// procStat returns the fields of /proc/<pid>/stat after the command name.
func procStat(pid int) []string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(string(b[i+1:]))
}

// procCPU is user+system time of a process and its waited-for children.
func procCPU(pid int) time.Duration {
	f := procStat(pid)
	if len(f) < 15 {
		return 0
	}
	var ticks int64
	for _, i := range []int{11, 12, 13, 14} { // utime stime cutime cstime
		v, _ := strconv.ParseInt(f[i], 10, 64)
		ticks += v
	}
	return time.Duration(ticks) * time.Second / clkTck
}

// procHWM is VmHWM, the peak resident set size.
func procHWM(pid int) int64 { return procStatusKB(pid, "VmHWM:") * 1024 }

func procRSS(pid int) int64 { return procStatusKB(pid, "VmRSS:") * 1024 }

func procStatusKB(pid int, key string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, key) {
			f := strings.Fields(l)
			if len(f) >= 2 {
				v, _ := strconv.ParseInt(f[1], 10, 64)
				return v
			}
		}
	}
	return 0
}

// childrenOf lists the processes whose parent is ppid.
func childrenOf(ppid int) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		f := procStat(pid)
		if len(f) > 1 && f[1] == strconv.Itoa(ppid) {
			out = append(out, pid)
		}
	}
	return out
}

// childPID finds our child process with the given command name (the
// Temporal dev server devstack started).
func childPID(comm string) int {
	for _, pid := range childrenOf(os.Getpid()) {
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); err == nil && strings.TrimSpace(string(b)) == comm {
			return pid
		}
	}
	return 0
}

func tail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 3000 {
		b = b[len(b)-3000:]
	}
	return string(b)
}

func newHTTPClient(conns int) *http.Client {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns = conns
	tr.MaxIdleConnsPerHost = conns
	return &http.Client{Transport: tr, Timeout: time.Minute}
}

// apiVersion is what the baremetal CLI sends.
const apiVersion = "1.78"

// call sends one API request and decodes a JSON answer into out.
func (s *stack) call(ctx context.Context, method, path string, body, out any) (int, error) {
	return doJSON(ctx, s.http, method, s.apiURL+path, body, out)
}

func doJSON(ctx context.Context, hc *http.Client, method, url string, body, out any) (int, error) {
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return 0, err
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, url, r)
	if err != nil {
		return 0, err
	}
	req.Header.Set("X-OpenStack-Ironic-API-Version", apiVersion)
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, fmt.Errorf("%s %s: %w", method, url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, fmt.Errorf("%s %s: read body: %w", method, url, err)
	}
	if out != nil && len(b) > 0 && resp.StatusCode < 300 {
		if err := json.Unmarshal(b, out); err != nil {
			return resp.StatusCode, fmt.Errorf("%s %s: decode %.200q: %w", method, url, b, err)
		}
	}
	if resp.StatusCode >= 300 {
		return resp.StatusCode, fmt.Errorf("%s %s: HTTP %d: %.300s", method, url, resp.StatusCode, b)
	}
	return resp.StatusCode, nil
}

// quietLogger drops the Temporal SDK's chatter.
type quietLogger struct{}

func (quietLogger) Debug(string, ...any) {}
func (quietLogger) Info(string, ...any)  {}
func (quietLogger) Warn(string, ...any)  {}
func (quietLogger) Error(string, ...any) {}
