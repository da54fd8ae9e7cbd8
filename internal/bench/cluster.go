package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"

	"go.temporal.io/sdk/client"

	"github.com/ironflow/ironflow/embedded"
	"github.com/ironflow/ironflow/internal/testkit/devstack"
	"github.com/ironflow/ironflow/payload"
	"github.com/ironflow/ironflow/signature"
	"github.com/ironflow/ironflow/store"
)

// clusterParts is ironflow on the Temporal cluster (`make run-cluster`):
// PostgreSQL holding ironflow's and Temporal's databases, the all-in-one
// temporal-server with mTLS on its frontend, `ironflow api` and `ironflow
// worker` as processes.
type clusterParts struct {
	dir, bin                                string
	pg                                      *embedded.Postgres
	temporal                                *embedded.TemporalCluster
	dbURL, apiListen, signalKey, payloadKey string
	workerArgs                              []string
	api, worker                             *embedded.Process
	serverPID                               int
}

func pidOf(p *embedded.Process) int {
	if p == nil {
		return 0
	}
	return p.Pid()
}

// startClusterStack starts ironflow on the Temporal cluster in dir. On
// error the returned stack (if not nil) holds what did start: stop it.
func startClusterStack(ctx context.Context, cfg config, dir string, log *slog.Logger) (*stack, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	_ = os.Chmod(dir, 0o755)
	c := &clusterParts{dir: dir, signalKey: string(signature.Generate()), payloadKey: payload.GenerateKey(), workerArgs: append([]string{"--automated-clean=false"}, cfg.workerArgs...)}
	s := &stack{cluster: c, dir: dir, log: log, http: newHTTPClient(256)}
	var err error
	if c.bin, err = devstack.IronflowBinary(cfg.ironflowBin, dir); err != nil {
		return nil, err
	}
	if c.pg, err = embedded.StartPostgres(ctx, filepath.Join(dir, "pg"), nil); err != nil {
		return nil, err
	}
	_ = c.pg.StopOnExit(false)
	c.dbURL = c.pg.URL()
	if c.temporal, err = embedded.StartTemporalCluster(ctx, embedded.TemporalClusterConfig{
		Dir: filepath.Join(dir, "temporal"), Postgres: c.pg, SearchAttributes: embedded.WorkflowSearchAttributes(),
	}, nil); err != nil {
		return s, err
	}
	if out, err := exec.CommandContext(ctx, c.bin, "migrate", "--database-url", c.dbURL).CombinedOutput(); err != nil {
		return s, fmt.Errorf("ironflow migrate: %w: %s", err, out)
	}
	port, err := embedded.FreePort("127.0.0.1")
	if err != nil {
		return s, err
	}
	c.apiListen = fmt.Sprintf("127.0.0.1:%d", port)
	s.APIURL = "http://" + c.apiListen
	if err := c.restart(ctx); err != nil {
		return s, err
	}
	keys, err := payload.LoadKeys(c.payloadKey, "", "")
	if err != nil {
		return s, err
	}
	codec, err := payload.NewCodec(keys)
	if err != nil {
		return s, err
	}
	tlsCfg, err := c.temporal.ClientTLS()
	if err != nil {
		return s, err
	}
	opts := client.Options{HostPort: c.temporal.Address(), Logger: quietLogger{},
		ConnectionOptions: client.ConnectionOptions{TLS: tlsCfg, GrpcCompression: &client.GrpcCompressionNone{}}}
	codec.Apply(&opts)
	if s.tc, err = client.Dial(opts); err != nil {
		return s, fmt.Errorf("dial the Temporal cluster: %w", err)
	}
	if s.store, err = store.Open(ctx, c.dbURL); err != nil {
		return s, fmt.Errorf("open the store: %w", err)
	}
	log.Info("cluster stack up", "api", s.APIURL, "temporal", c.temporal.Address(), "postgres", c.pg.Port(), "dir", dir)
	return s, nil
}

func (c *clusterParts) spawn(name string, args ...string) (*embedded.Process, error) {
	certs := c.temporal.Certs()
	full := append(args, "--database-url", c.dbURL, "--temporal-address", c.temporal.Address(), "--signal-key", c.signalKey, "--metrics-listen", "127.0.0.1:0",
		"--temporal-tls-cert", certs.ClientCertFile, "--temporal-tls-key", certs.ClientKey, "--temporal-tls-ca", certs.CAFile)
	cmd := exec.Command(c.bin, full...)
	cmd.Env = append(os.Environ(), "IRONFLOW_PAYLOAD_KEY="+c.payloadKey)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return embedded.StartProcess(name, filepath.Join(c.dir, name+".log"), cmd)
}

// restart (re)starts the api and the worker.
func (c *clusterParts) restart(ctx context.Context) error {
	c.stopParts()
	var err error
	if c.api, err = c.spawn("ironflow-api", "api", "--listen", c.apiListen); err != nil {
		return err
	}
	rctx, cancel := context.WithTimeout(ctx, devstack.DefaultReadyTimeout)
	defer cancel()
	if err := devstack.WaitReady(rctx, func(ctx context.Context, url string) error {
		_, err := doJSON(ctx, newHTTPClient(1), "GET", url, nil, nil)
		return err
	}, "http://"+c.apiListen+"/", c.api); err != nil {
		return err
	}
	c.worker, err = c.spawn("ironflow-worker", append([]string{"worker", "--agent-api-url", "http://" + c.apiListen,
		"--boot-url", "http://127.0.0.1:1", "--agent-insecure"}, c.workerArgs...)...)
	return err
}

func (c *clusterParts) stopParts() {
	for _, p := range []**embedded.Process{&c.worker, &c.api} {
		if *p != nil {
			(*p).Stop(devstack.DefaultStopGrace)
			*p = nil
		}
	}
}

func (c *clusterParts) stop() {
	c.stopParts()
	if c.temporal != nil {
		_ = c.temporal.Stop()
	}
	if c.pg != nil {
		_ = c.pg.Stop()
	}
}

// temporalPID finds the temporal-server this process started (package embedded
// does not expose it): a child of ours running that binary.
func (c *clusterParts) temporalPID() int {
	if c.serverPID != 0 {
		if _, err := os.Stat("/proc/" + strconv.Itoa(c.serverPID)); err == nil {
			return c.serverPID
		}
	}
	c.serverPID = 0
	for _, pid := range childrenOf(os.Getpid()) {
		if exe, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/exe"); err == nil && filepath.Base(exe) == "temporal-server" {
			c.serverPID = pid
		}
	}
	return c.serverPID
}

// benchCluster is the control part on the Temporal cluster: ironflow's
// deploys and the ceiling's bare workflows on the same cluster.
func benchCluster(ctx context.Context, cfg config, dir string, log *slog.Logger) ([]Row, error) {
	cl, err := startClusterStack(ctx, cfg, filepath.Join(dir, "cluster"), log)
	if err != nil {
		if cl != nil {
			cl.stop()
		}
		return nil, fmt.Errorf("start ironflow on the Temporal cluster: %w", err)
	}
	defer cl.stop()
	return benchDeploys(ctx, cfg, cl, log, cfg.nodes, deployMode{part: "cluster", deployInterface: "fake"})
}
