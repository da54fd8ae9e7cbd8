package devstack

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ironflow/ironflow/embedded"
	"github.com/ironflow/ironflow/payload"
	"github.com/ironflow/ironflow/signature"
)

// Defaults of a Stack.
const (
	// DefaultReadyTimeout bounds the wait for a started API to answer.
	DefaultReadyTimeout = 30 * time.Second
	// DefaultStopGrace is how long a part gets between SIGTERM and SIGKILL.
	DefaultStopGrace = 10 * time.Second
	// unreachableBootURL is the boot URL of a stack without PXE: nothing
	// listens there, and no test machine fetches from it.
	unreachableBootURL = "http://127.0.0.1:1"
	// freeMetricsListen serves each part's metrics on a port of its own
	// (stacks run side by side; a test that scrapes passes its own
	// --metrics-listen in APIArgs, WorkerArgs or PXEArgs).
	freeMetricsListen = "127.0.0.1:0"
	// readyPollInterval is how often a readiness wait probes.
	readyPollInterval = 250 * time.Millisecond
)

// StackConfig says how to run a Stack. Only Dir is required.
type StackConfig struct {
	// Dir holds PostgreSQL's cluster, Temporal's database and every log.
	// As root, PostgreSQL runs as the postgres user, who must reach it.
	Dir string
	// Bin is the ironflow binary; default IronflowBinary("", Dir).
	Bin string
	// Log receives the stack's own progress lines; default: discarded.
	Log *slog.Logger
	// Command builds the command line of every process the stack runs
	// (Temporal, migrate, api, worker, pxe); default exec.Command. A test
	// lab runs them inside its network namespace this way.
	Command func(name string, args ...string) *exec.Cmd
	// Probe answers whether url serves, for the readiness waits; default
	// an HTTP GET from this process. It must be set with Command when this
	// process cannot reach the addresses the parts listen on.
	Probe func(ctx context.Context, url string) error
	// ReadyTimeout bounds each readiness wait; default DefaultReadyTimeout.
	ReadyTimeout time.Duration
	// StopGrace is how long a part gets to shut down; default DefaultStopGrace.
	StopGrace time.Duration
	// Env is added to every ironflow process's environment.
	Env []string
	// PostgresSocket makes the parts reach PostgreSQL through its unix
	// socket, which crosses network namespaces, instead of 127.0.0.1.
	PostgresSocket bool
	// TemporalPort is the dev server's port (0: a free one). It stays the
	// same across RestartTemporal.
	TemporalPort int
	// APIListen is the API's address; default 127.0.0.1 on a free port.
	APIListen string
	// AgentAPIURL is the API URL given to agents; default the API's.
	AgentAPIURL string
	// BootURL is the boot service's URL given to the worker; default an
	// address nothing listens on (a stack without PXE).
	BootURL string
	// APIArgs, WorkerArgs and PXEArgs follow the flags the stack gives
	// each part itself (the later of a repeated flag wins).
	APIArgs, WorkerArgs, PXEArgs []string
	// PXE runs `ironflow pxe` too (DHCP, TFTP, HTTP boot; PXEArgs say where).
	PXE bool
	// APIMetricsListen and WorkerMetricsListen are where the stack's own
	// API and worker serve their metrics (default: a free port each); the
	// arguments APIArgs and WorkerArgs build for further parts always
	// take a free port, so that they never meet these.
	APIMetricsListen, WorkerMetricsListen string
}

// Stack is ironflow as production runs it, each part its own process:
// PostgreSQL (package embedded's cluster), the Temporal dev server on a file-backed
// database (so that it can be killed and restarted without losing
// workflows), `ironflow migrate`, `ironflow api`, `ironflow worker` and
// optionally `ironflow pxe`. Tests, the VM tests and the benchmark all start
// it; each part can be killed as a crash would and started again.
type Stack struct {
	cfg StackConfig
	// Bin is the ironflow binary the parts run.
	Bin      string
	Postgres *embedded.Postgres
	Temporal *embedded.Temporal
	// DatabaseURL is the URL the parts use (TCP or unix socket).
	DatabaseURL string
	// APIListen is the API's address, APIURL its URL.
	APIListen, APIURL string
	// SignalKey is the key the API and the worker share to authenticate
	// heartbeat signals (made at start).
	SignalKey string
	// PayloadKey encrypts every payload the parts hand to Temporal (made at
	// start; package payload). Clients of the stack's Temporal use Codec.
	PayloadKey string
	// API, Worker and PXE are the running parts (nil while stopped).
	API, Worker, PXE *embedded.Process
	temporalCfg      embedded.TemporalConfig
	// logs are every log file of the stack, for LogTail.
	logs []string
}

// StartStack starts every part and waits until the API answers. On error
// the returned stack (if not nil) holds what did start: Stop it.
func StartStack(ctx context.Context, cfg StackConfig) (*Stack, error) {
	if cfg.Dir == "" {
		return nil, errors.New("devstack: a stack needs a directory")
	}
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	// A command of the caller's may run the parts where this process
	// cannot dial them: Temporal is then probed through it too.
	ownCommand := cfg.Command != nil
	if !ownCommand {
		cfg.Command = exec.Command
	}
	if cfg.Probe == nil {
		cfg.Probe = httpProbe
	}
	if cfg.ReadyTimeout == 0 {
		cfg.ReadyTimeout = DefaultReadyTimeout
	}
	if cfg.StopGrace == 0 {
		cfg.StopGrace = DefaultStopGrace
	}
	if cfg.BootURL == "" {
		cfg.BootURL = unreachableBootURL
	}
	s := &Stack{cfg: cfg, Bin: cfg.Bin, SignalKey: string(signature.Generate()), PayloadKey: payload.GenerateKey()}
	var err error
	if s.Bin, err = IronflowBinary(cfg.Bin, cfg.Dir); err != nil {
		return nil, err
	}
	quiet := slog.New(slog.DiscardHandler)
	if s.Postgres, err = embedded.StartPostgres(ctx, filepath.Join(cfg.Dir, "pg"), quiet); err != nil {
		return s, err
	}
	// A test binary killed by -timeout or a signal runs no cleanups.
	if err := s.Postgres.StopOnExit(false); err != nil {
		cfg.Log.Warn("no PostgreSQL exit watchdog", "err", err)
	}
	s.DatabaseURL = s.Postgres.URL()
	if cfg.PostgresSocket {
		s.DatabaseURL = s.Postgres.SocketURL()
	}
	s.temporalCfg = embedded.TemporalConfig{
		Port:             cfg.TemporalPort,
		UIPort:           -1,
		DBFile:           filepath.Join(cfg.Dir, "temporal", "temporal.db"),
		LogFile:          filepath.Join(cfg.Dir, "temporal.log"),
		SearchAttributes: embedded.WorkflowSearchAttributes(),
	}
	if ownCommand {
		s.temporalCfg.Command = cfg.Command
	}
	s.logs = append(s.logs, s.temporalCfg.LogFile)
	if s.Temporal, err = embedded.StartTemporal(ctx, s.temporalCfg, quiet); err != nil {
		return s, err
	}
	// Restarts keep the port the first start chose.
	s.temporalCfg.Port = portOf(s.Temporal.Address())
	if out, err := cfg.Command(s.Bin, "migrate", "--database-url", s.DatabaseURL).CombinedOutput(); err != nil {
		return s, fmt.Errorf("ironflow migrate: %w: %s", err, out)
	}
	s.APIListen = cfg.APIListen
	if s.APIListen == "" {
		port, err := embedded.FreePort("127.0.0.1")
		if err != nil {
			return s, err
		}
		s.APIListen = fmt.Sprintf("127.0.0.1:%d", port)
	}
	s.APIURL = "http://" + s.APIListen
	if s.cfg.AgentAPIURL == "" {
		s.cfg.AgentAPIURL = s.APIURL
	}
	if err := s.StartAPI(ctx); err != nil {
		return s, err
	}
	if cfg.PXE {
		if s.PXE, err = s.Spawn("ironflow-pxe", s.PXEArgs()); err != nil {
			return s, err
		}
	}
	if err := s.StartWorker(); err != nil {
		return s, err
	}
	cfg.Log.Info("stack up", "api", s.APIURL, "temporal", s.Temporal.Address(), "postgres", s.Postgres.Port(), "dir", cfg.Dir)
	return s, nil
}

// Codec is the payload codec of the stack's key, for clients of its
// Temporal (client options, history readers).
func (s *Stack) Codec() (*payload.Codec, error) {
	k, err := payload.LoadKeys(s.PayloadKey, "", "")
	if err != nil {
		return nil, err
	}
	return payload.NewCodec(k)
}

// APIArgs are the arguments of an `ironflow api` listening on listen.
func (s *Stack) APIArgs(listen string) []string {
	return append([]string{"api", "--listen", listen, "--database-url", s.DatabaseURL,
		"--temporal-address", s.Temporal.Address(), "--signal-key", s.SignalKey, "--metrics-listen", freeMetricsListen}, s.cfg.APIArgs...)
}

// WorkerArgs are the arguments of the stack's `ironflow worker`.
func (s *Stack) WorkerArgs() []string {
	return append([]string{"worker", "--database-url", s.DatabaseURL, "--temporal-address", s.Temporal.Address(),
		"--agent-api-url", s.cfg.AgentAPIURL, "--boot-url", s.cfg.BootURL, "--agent-insecure", "--signal-key", s.SignalKey,
		"--metrics-listen", freeMetricsListen}, s.cfg.WorkerArgs...)
}

// PXEArgs are the arguments of the stack's `ironflow pxe`.
func (s *Stack) PXEArgs() []string {
	return append([]string{"pxe", "--data-dir", s.cfg.Dir, "--database-url", s.DatabaseURL, "--metrics-listen", freeMetricsListen}, s.cfg.PXEArgs...)
}

// withMetricsListen sets --metrics-listen to addr (the later flag wins),
// unless addr is empty.
func withMetricsListen(args []string, addr string) []string {
	if addr == "" {
		return args
	}
	return append(slices.Clone(args), "--metrics-listen", addr)
}

// Spawn starts the ironflow binary with args as a process of the stack
// (one more API or worker, say), its output in <Dir>/<name>.log. It dies
// with this process; Stop does not end it unless it is one of the parts.
func (s *Stack) Spawn(name string, args []string) (*embedded.Process, error) {
	cmd := s.cfg.Command(s.Bin, args...)
	// The payload key goes in the environment, which every ironflow
	// command reads (IRONFLOW_PAYLOAD_KEY) and a binary without the codec
	// ignores; cfg.Env can still override it.
	cmd.Env = append(append(os.Environ(), "IRONFLOW_PAYLOAD_KEY="+s.PayloadKey), s.cfg.Env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	log := filepath.Join(s.cfg.Dir, name+".log")
	p, err := embedded.StartProcess(name, log, cmd)
	if err != nil {
		return nil, err
	}
	if !slices.Contains(s.logs, log) {
		s.logs = append(s.logs, log)
	}
	s.cfg.Log.Info("started", "process", name, "pid", p.Pid(), "log", log)
	return p, nil
}

// StartAPI starts `ironflow api` (again) and waits until it answers.
func (s *Stack) StartAPI(ctx context.Context) error {
	p, err := s.Spawn("ironflow-api", withMetricsListen(s.APIArgs(s.APIListen), s.cfg.APIMetricsListen))
	if err != nil {
		return err
	}
	s.API = p
	return s.WaitHTTP(ctx, s.APIURL+"/", p)
}

// StartWorker starts `ironflow worker` (again); its runs share one log.
func (s *Stack) StartWorker() error {
	p, err := s.Spawn("ironflow-worker", withMetricsListen(s.WorkerArgs(), s.cfg.WorkerMetricsListen))
	if err != nil {
		return err
	}
	s.Worker = p
	return nil
}

// KillAPI ends the API as a crash would: SIGKILL, no shutdown.
func (s *Stack) KillAPI() {
	if s.API != nil {
		s.API.Kill()
		s.API = nil
	}
}

// KillWorker ends the worker as a crash would: SIGKILL, no shutdown.
func (s *Stack) KillWorker() {
	if s.Worker != nil {
		s.Worker.Kill()
		s.Worker = nil
	}
}

// RestartTemporal kills the Temporal server as a crash would and starts it
// again on the same port and database file.
func (s *Stack) RestartTemporal(ctx context.Context) error {
	s.KillTemporal()
	return s.StartTemporal(ctx)
}

// KillTemporal ends the Temporal server as a crash would; StartTemporal
// brings it back on the same port and database file. Meanwhile
// s.Temporal keeps the stopped server, whose Address stays right.
func (s *Stack) KillTemporal() { s.Temporal.Kill() }

// StartTemporal starts the Temporal server KillTemporal ended.
func (s *Stack) StartTemporal(ctx context.Context) error {
	t, err := embedded.StartTemporal(ctx, s.temporalCfg, slog.New(slog.DiscardHandler))
	if err != nil {
		return err
	}
	s.Temporal = t
	return nil
}

// Restart stops the API and the worker the way production does (SIGTERM)
// and starts them again, e.g. so that each measure reads fresh processes.
func (s *Stack) Restart(ctx context.Context) error {
	s.stopParts()
	if err := s.StartAPI(ctx); err != nil {
		return err
	}
	return s.StartWorker()
}

func (s *Stack) stopParts() {
	for _, p := range []**embedded.Process{&s.Worker, &s.PXE, &s.API} {
		if *p != nil {
			(*p).Stop(s.cfg.StopGrace)
			*p = nil
		}
	}
}

// Stop ends the parts, Temporal and PostgreSQL.
func (s *Stack) Stop() {
	s.stopParts()
	if s.Temporal != nil {
		_ = s.Temporal.Stop()
	}
	if s.Postgres != nil {
		_ = s.Postgres.Stop()
	}
}

// WorkerLog is the worker's log file (every run of it).
func (s *Stack) WorkerLog() string { return filepath.Join(s.cfg.Dir, "ironflow-worker.log") }

// APILog is the API's log file (every run of it).
func (s *Stack) APILog() string { return filepath.Join(s.cfg.Dir, "ironflow-api.log") }

// LogTail is the end of every log of the stack, n bytes each, for
// failure messages.
func (s *Stack) LogTail(n int64) string {
	var b strings.Builder
	for _, l := range s.logs {
		fmt.Fprintf(&b, "--- %s log tail:\n%s\n", filepath.Base(l), embedded.Tail(l, n))
	}
	return b.String()
}

// WaitHTTP waits until url serves (the stack's Probe), failing when p
// exits first or the ready timeout passes.
func (s *Stack) WaitHTTP(ctx context.Context, url string, p *embedded.Process) error {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.ReadyTimeout)
	defer cancel()
	return WaitReady(ctx, s.cfg.Probe, url, p)
}

// WaitReady polls probe(url) until it succeeds, failing when p exits first
// or ctx ends.
func WaitReady(ctx context.Context, probe func(ctx context.Context, url string) error, url string, p *embedded.Process) error {
	for {
		err := probe(ctx, url)
		if err == nil {
			return nil
		}
		select {
		case <-p.Exited():
			return fmt.Errorf("%s exited: %v; log:\n%s", p.Name, p.Err(), p.Tail(4000))
		case <-ctx.Done():
			return fmt.Errorf("%s: %s does not answer: %w (%w); log:\n%s", p.Name, url, ctx.Err(), err, p.Tail(4000))
		case <-time.After(readyPollInterval):
		}
	}
}

func httpProbe(ctx context.Context, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	return nil
}

// IronflowBinary is bin if it exists, else $IRONFLOW_BIN (make test builds
// it) if it exists, else a fresh `go build` of cmd/ironflow into dir (the
// working directory must lie in ironflow's module, as a test's does).
func IronflowBinary(bin, dir string) (string, error) {
	for _, b := range []string{bin, os.Getenv("IRONFLOW_BIN")} {
		if b == "" {
			continue
		}
		if st, err := os.Stat(b); err == nil && !st.IsDir() {
			return b, nil
		}
	}
	out := filepath.Join(dir, "ironflow")
	cmd := exec.Command("go", "build", "-o", out, "github.com/ironflow/ironflow/cmd/ironflow")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build ironflow: %w\n%s", err, b)
	}
	return out, nil
}

func portOf(hostport string) int {
	_, p, _ := net.SplitHostPort(hostport)
	port, _ := strconv.Atoi(p)
	return port
}
