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
	"strconv"
	"strings"
	"time"

	"go.temporal.io/sdk/client"

	"github.com/ironflow/ironflow/internal/testkit/devstack"
	"github.com/ironflow/ironflow/store"
)

// stack is ironflow as `make run` runs it (devstack's Stack: PostgreSQL,
// the Temporal dev server on a file-backed SQLite database, and `ironflow
// api` and `ironflow worker` as processes), with the clients the benchmark
// drives it through.
type stack struct {
	// Stack is the dev server's stack; nil for the Temporal cluster's
	// (cluster), which the benchmark runs itself.
	*devstack.Stack
	cluster *clusterParts
	// APIURL is the API's URL on either.
	APIURL string
	dir    string
	log    *slog.Logger
	tc     client.Client
	store  *store.Store
	http   *http.Client
}

func startStack(ctx context.Context, cfg config, dir string, log *slog.Logger) (*stack, error) {
	s := &stack{dir: dir, log: log, http: newHTTPClient(256)}
	var err error
	s.Stack, err = devstack.StartStack(ctx, devstack.StackConfig{
		Dir:        dir,
		Bin:        cfg.ironflowBin,
		WorkerArgs: append([]string{"--automated-clean=false"}, cfg.workerArgs...),
	})
	if err != nil {
		if s.Stack == nil {
			return nil, err
		}
		return s, err
	}
	s.APIURL = s.Stack.APIURL
	codec, err := s.Codec()
	if err != nil {
		return s, err
	}
	// The ceiling's client connects as ironflow's processes do: payloads
	// sealed by the same codec, no gRPC compression.
	opts := client.Options{HostPort: s.Temporal.Address(), Logger: quietLogger{},
		ConnectionOptions: client.ConnectionOptions{GrpcCompression: &client.GrpcCompressionNone{}}}
	codec.Apply(&opts)
	if s.tc, err = client.Dial(opts); err != nil {
		return s, fmt.Errorf("dial Temporal: %w", err)
	}
	if s.store, err = store.Open(ctx, s.Postgres.URL()); err != nil {
		return s, fmt.Errorf("open the store: %w", err)
	}
	log.Info("stack up", "api", s.APIURL, "temporal", s.Temporal.Address(), "postgres", s.Postgres.Port(), "dir", dir)
	return s, nil
}

// restart (re)starts the api and worker processes, so that each part reads
// its own peak RSS (VmHWM is a high-water mark over the process's life).
func (s *stack) restart(ctx context.Context) error {
	if s.cluster != nil {
		return s.cluster.restart(ctx)
	}
	return s.Restart(ctx)
}

// apiPID, workerPID and temporalPID are the parts' processes (0: none).
func (s *stack) apiPID() int {
	if s.cluster != nil {
		return pidOf(s.cluster.api)
	}
	if s.API == nil {
		return 0
	}
	return s.API.Pid()
}

func (s *stack) workerPID() int {
	if s.cluster != nil {
		return pidOf(s.cluster.worker)
	}
	if s.Worker == nil {
		return 0
	}
	return s.Worker.Pid()
}

func (s *stack) temporalPID() int {
	if s.cluster != nil {
		return s.cluster.temporalPID()
	}
	return s.Temporal.Pid()
}

func (s *stack) postgresDir() string {
	if s.cluster != nil {
		return s.cluster.pg.DataDir()
	}
	return s.Postgres.DataDir()
}

func (s *stack) stop() {
	if s.tc != nil {
		s.tc.Close()
	}
	if s.store != nil {
		s.store.Close()
	}
	if s.Stack != nil {
		s.Stack.Stop()
	}
	if s.cluster != nil {
		s.cluster.stop()
	}
}

// usage is the CPU and peak memory of the stack's processes.
type usage struct {
	APICPU, WorkerCPU, TemporalCPU, PostgresCPU time.Duration
	APIHWM, WorkerHWM, TemporalHWM              int64 // bytes
}

func (s *stack) usage() usage {
	var u usage
	if pid := s.apiPID(); pid != 0 {
		u.APICPU, u.APIHWM = procCPU(pid), procHWM(pid)
	}
	if pid := s.workerPID(); pid != 0 {
		u.WorkerCPU, u.WorkerHWM = procCPU(pid), procHWM(pid)
	}
	u.TemporalCPU, u.TemporalHWM = procCPU(s.temporalPID()), procHWM(s.temporalPID())
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
	pm := postmasterPID(s.postgresDir())
	if pm == 0 {
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
	return doJSON(ctx, s.http, method, s.APIURL+path, body, out)
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
