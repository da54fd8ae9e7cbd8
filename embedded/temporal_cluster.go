package embedded

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	mrand "math/rand/v2"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	enumspb "go.temporal.io/api/enums/v1"
	"go.temporal.io/api/operatorservice/v1"
	"go.temporal.io/api/serviceerror"
	"go.temporal.io/api/workflowservice/v1"
	"go.temporal.io/sdk/client"
	tlog "go.temporal.io/sdk/log"
	"google.golang.org/protobuf/types/known/durationpb"
)

// Databases of the Temporal cluster on the embedded PostgreSQL: its
// persistence and its SQL visibility store, beside ironflow's own database
// (docs/production.md).
const (
	TemporalDatabase           = "temporal"
	TemporalVisibilityDatabase = "temporal_visibility"
)

// TemporalClusterConfig says how to run the Temporal server built from
// go.temporal.io/server (make tools: ./bin/temporal-server and
// ./bin/temporal-sql-tool) on PostgreSQL.
type TemporalClusterConfig struct {
	// ServerBin and SQLToolBin default to $IRONFLOW_TEMPORAL_SERVER_BIN and
	// $IRONFLOW_TEMPORAL_SQL_TOOL_BIN, then ./bin next to the repository root.
	ServerBin, SQLToolBin string
	// Dir holds the generated config, the certificates (unless Certs is
	// given) and the server log.
	Dir string
	// Postgres is the cluster the two databases live on.
	Postgres *Postgres
	// Port of the frontend (0: a free one). The other services take free
	// ports on 127.0.0.1.
	Port int
	// Namespace to register (default "default") and its retention
	// (default 72h).
	Namespace string
	Retention time.Duration
	// SearchAttributes to register: name → type (Keyword, Text, ...).
	SearchAttributes map[string]string
	// Certs are the frontend's TLS files; nil: a CA and certificates are
	// generated under Dir/tls on the first start and reused afterwards.
	Certs *TemporalCerts
	// HistoryShards is fixed for the life of the cluster (default 4).
	HistoryShards int
	// UIPort, when above 0, runs the Temporal Web UI (ui-server, make
	// tools: ./bin/temporal-ui-server) on 127.0.0.1 there, dialing the
	// frontend with ironflow's client certificate; UICodecEndpoint is the
	// codec server it decodes payloads through (empty: none).
	UIPort          int
	UIBin           string
	UICodecEndpoint string
	// SeparateServices runs frontend, history, matching and worker as four
	// processes of the same binary (Temporal's `start --service X`), each
	// with its own log (Dir/<service>.log), as a production cluster runs
	// them on separate machines; false: one process with all four.
	SeparateServices bool
	// TaskQueueWritePartitions is the number of partitions of each task
	// queue new tasks go to (matching.numTaskqueueWritePartitions); 0:
	// TaskQueueWritePartitions (one), as the cluster runs one matching
	// service. A cluster whose database existed before Dir's record of its
	// partitions (PartitionsFile) is read on four, so that tasks an earlier
	// release wrote there are still found (ReadPartitions;
	// docs/production.md, "Task-queue partitions").
	TaskQueueWritePartitions int
}

// TemporalServices are the cluster's services in the order they start
// (history and matching before the frontend that routes to them, the
// worker service, a frontend client, last).
var TemporalServices = []string{"history", "matching", "frontend", "worker"}

// TemporalCerts are the files of the cluster's mTLS: the CA that signs the
// frontend and its clients, the frontend's certificate, one client
// certificate for ironflow, and the internode certificate the services
// present to each other (Temporal's tls.internode, mutual).
type TemporalCerts struct {
	CAFile, CAKeyFile         string
	ServerCertFile, ServerKey string
	ClientCertFile, ClientKey string
	// InternodeCertFile and InternodeKey: empty, the frontend's
	// certificate serves internode traffic too.
	InternodeCertFile, InternodeKey string
	// ServerName is the name in the frontend's certificate.
	ServerName string
}

// TemporalCluster is a running Temporal server: frontend, history,
// matching and worker services in one process, or in four
// (SeparateServices).
type TemporalCluster struct {
	cfg     TemporalClusterConfig
	bin     string
	cfgDir  string
	logFile string
	address string
	procs   []*temporalProc
	// grpcPorts are the services' gRPC ports (a restarted service is up
	// once its port listens).
	grpcPorts map[string]int
	log       *slog.Logger
	ui        *Process
	// readPartitions is the partitions every task queue is read on.
	readPartitions int
}

// temporalProc is one server process: the services it runs (nil: all).
type temporalProc struct {
	services []string
	logFile  string
	cmd      *exec.Cmd
	done     chan error
}

// UIURL is the Web UI's address ("" without one).
func (t *TemporalCluster) UIURL() string {
	if t.ui == nil {
		return ""
	}
	return fmt.Sprintf("http://127.0.0.1:%d", t.cfg.UIPort)
}

// Address is the frontend's host:port.
func (t *TemporalCluster) Address() string { return t.address }

// Certs are the TLS files clients use.
func (t *TemporalCluster) Certs() TemporalCerts { return *t.cfg.Certs }

// LogFile is the server's log (the frontend's with SeparateServices).
func (t *TemporalCluster) LogFile() string { return t.logFile }

// ServiceLogFile is the log of the process running service.
func (t *TemporalCluster) ServiceLogFile(service string) string {
	for _, p := range t.procs {
		if p.services == nil || slices.Contains(p.services, service) {
			return p.logFile
		}
	}
	return ""
}

// ClientTLS is the TLS configuration of a client holding ironflow's
// certificate.
func (t *TemporalCluster) ClientTLS() (*tls.Config, error) {
	return ClientTLSConfig(*t.cfg.Certs)
}

// ClientTLSConfig builds a client's TLS configuration from c.
func ClientTLSConfig(c TemporalCerts) (*tls.Config, error) {
	pemCA, err := os.ReadFile(c.CAFile)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pemCA)
	kp, err := tls.LoadX509KeyPair(c.ClientCertFile, c.ClientKey)
	if err != nil {
		return nil, err
	}
	return &tls.Config{RootCAs: pool, ServerName: c.ServerName, Certificates: []tls.Certificate{kp}, MinVersion: tls.VersionTLS12}, nil
}

func findTool(explicit, env, name string) (string, error) {
	candidates := []string{explicit, os.Getenv(env)}
	if root, err := repoRoot(); err == nil {
		candidates = append(candidates, filepath.Join(root, "bin", name))
	}
	for _, c := range candidates {
		if c == "" {
			continue
		}
		if st, err := os.Stat(c); err == nil && !st.IsDir() {
			return c, nil
		}
	}
	return "", fmt.Errorf("%s was not found: run 'make tools' (it builds go.temporal.io/server from tools/temporal-server into ./bin), or set %s", name, env)
}

// StartTemporalCluster sets up the cluster's databases and schemas with
// Temporal's SQL tool, writes the server's config (PostgreSQL persistence,
// SQL visibility, TLS on the frontend requiring client certificates),
// starts the server, waits until the frontend answers over mTLS and
// registers the namespace and search attributes. A second start on the same
// Dir and databases reuses them: workflows survive.
func StartTemporalCluster(ctx context.Context, cfg TemporalClusterConfig, log *slog.Logger) (*TemporalCluster, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.Postgres == nil {
		return nil, errors.New("temporal cluster: no PostgreSQL")
	}
	bin, err := findTool(cfg.ServerBin, "IRONFLOW_TEMPORAL_SERVER_BIN", "temporal-server")
	if err != nil {
		return nil, err
	}
	sqlTool, err := findTool(cfg.SQLToolBin, "IRONFLOW_TEMPORAL_SQL_TOOL_BIN", "temporal-sql-tool")
	if err != nil {
		return nil, err
	}
	if cfg.Namespace == "" {
		cfg.Namespace = "default"
	}
	if cfg.Retention == 0 {
		cfg.Retention = 72 * time.Hour
	}
	if cfg.HistoryShards == 0 {
		cfg.HistoryShards = 4
	}
	if cfg.Dir, err = filepath.Abs(cfg.Dir); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("create %s: %w", cfg.Dir, err)
	}
	if cfg.Certs == nil {
		c, err := ensureTemporalCerts(filepath.Join(cfg.Dir, "tls"))
		if err != nil {
			return nil, err
		}
		cfg.Certs = &c
	}
	created, err := setupTemporalSchemas(ctx, sqlTool, cfg.Postgres, log)
	if err != nil {
		return nil, err
	}
	if cfg.TaskQueueWritePartitions <= 0 {
		cfg.TaskQueueWritePartitions = TaskQueueWritePartitions
	}
	read, err := ReadPartitions(PartitionsFile(filepath.Join(cfg.Dir, TemporalDatabase)), created, cfg.TaskQueueWritePartitions)
	if err != nil {
		return nil, err
	}
	if cfg.Port == 0 {
		if cfg.Port, err = heldFreePort("127.0.0.1"); err != nil {
			return nil, err
		}
	} else if !portFree("127.0.0.1", cfg.Port) {
		return nil, fmt.Errorf("port 127.0.0.1:%d is taken: is another Temporal server running? Stop it or choose another port", cfg.Port)
	}
	t := &TemporalCluster{cfg: cfg, bin: bin, cfgDir: filepath.Join(cfg.Dir, "config"), logFile: filepath.Join(cfg.Dir, "server.log"),
		address: net.JoinHostPort("127.0.0.1", strconv.Itoa(cfg.Port)), log: log, readPartitions: read}
	if cfg.SeparateServices {
		for _, svc := range TemporalServices {
			t.procs = append(t.procs, &temporalProc{services: []string{svc}, logFile: filepath.Join(cfg.Dir, svc+".log")})
		}
		t.logFile = t.ServiceLogFile("frontend")
	} else {
		t.procs = []*temporalProc{{logFile: t.logFile}}
	}
	if err := t.writeConfig(); err != nil {
		return nil, err
	}
	if err := t.start(ctx); err != nil {
		return nil, err
	}
	if err := t.register(ctx); err != nil {
		_ = t.Stop()
		return nil, err
	}
	if cfg.UIPort > 0 {
		if err := t.startUI(); err != nil {
			_ = t.Stop()
			return nil, err
		}
	}
	return t, nil
}

// startUI writes the ui-server's config (its own development.yaml under
// Dir/ui/config) and starts it.
func (t *TemporalCluster) startUI() error {
	bin, err := findTool(t.cfg.UIBin, "IRONFLOW_TEMPORAL_UI_BIN", "temporal-ui-server")
	if err != nil {
		return err
	}
	if !portFree("127.0.0.1", t.cfg.UIPort) {
		return fmt.Errorf("port 127.0.0.1:%d for the Temporal Web UI is taken: choose another with --temporal-ui-port (-1: none)", t.cfg.UIPort)
	}
	dir := filepath.Join(t.cfg.Dir, "ui")
	if err := os.MkdirAll(filepath.Join(dir, "config"), 0o755); err != nil {
		return err
	}
	c := t.cfg.Certs
	yaml := fmt.Sprintf(`temporalGrpcAddress: %q
host: "127.0.0.1"
port: %d
enableUi: true
defaultNamespace: %q
notifyOnNewVersion: false
tls:
  caFile: %q
  certFile: %q
  keyFile: %q
  serverName: %q
  enableHostVerification: true
codec:
  endpoint: %q
`, t.address, t.cfg.UIPort, t.cfg.Namespace, c.CAFile, c.ClientCertFile, c.ClientKey, c.ServerName, t.cfg.UICodecEndpoint)
	if err := os.WriteFile(filepath.Join(dir, "config", "development.yaml"), []byte(yaml), 0o644); err != nil {
		return err
	}
	cmd := exec.Command(bin, "--root", dir, "--config", "config", "--env", "development", "start")
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if t.ui, err = StartProcess("temporal-ui", filepath.Join(dir, "ui.log"), cmd); err != nil {
		return err
	}
	t.log.Info("temporal web ui starting", "url", t.UIURL())
	return nil
}

// setupTemporalSchemas creates the two databases (when missing) and brings
// their schemas to this server's version: setup-schema installs the
// version table, update-schema the embedded versioned schema, as Temporal's
// own auto-setup does on every start. created: the persistence database
// (TemporalDatabase) did not exist before.
func setupTemporalSchemas(ctx context.Context, sqlTool string, pg *Postgres, log *slog.Logger) (created bool, err error) {
	base := []string{"--plugin", "postgres12", "--endpoint", "127.0.0.1", "--port", strconv.Itoa(pg.Port()), "--user", PostgresSuperuser}
	run := func(args ...string) error {
		cmd := exec.CommandContext(ctx, sqlTool, append(append([]string{}, base...), args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("temporal-sql-tool %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
		}
		return nil
	}
	conn, err := pgx.Connect(ctx, pg.DatabaseURL("postgres"))
	if err != nil {
		return false, fmt.Errorf("connect to postgres: %w", err)
	}
	defer conn.Close(ctx)
	for db, schema := range map[string]string{TemporalDatabase: "postgresql/v12/temporal", TemporalVisibilityDatabase: "postgresql/v12/visibility"} {
		var exists bool
		if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", db).Scan(&exists); err != nil {
			return false, fmt.Errorf("look up database %s: %w", db, err)
		}
		if !exists {
			if err := run("--database", db, "create-database"); err != nil {
				return false, err
			}
			created = created || db == TemporalDatabase
		}
		if err := run("--database", db, "setup-schema", "--version", "0.0"); err != nil {
			return false, err
		}
		if err := run("--database", db, "update-schema", "--schema-name", schema); err != nil {
			return false, err
		}
		log.Info("temporal schema ready", "database", db)
	}
	return created, nil
}

// writeConfig writes config/development.yaml, the file the server reads
// with --config config --env development.
func (t *TemporalCluster) writeConfig() error {
	// Membership ports are kept in a smallint column of the cluster
	// metadata (Temporal's SQL schema): below 32768, under the kernel's
	// ephemeral range FreePort draws from; the internal gRPC ports come
	// from the same range for simplicity.
	ports := make([]int, 7)
	seen := map[int]bool{t.cfg.Port: true}
	for i := range ports {
		for {
			p := 20000 + mrand.IntN(12000)
			if !seen[p] && portFree("127.0.0.1", p) {
				seen[p] = true
				ports[i] = p
				break
			}
		}
	}
	c, pg := t.cfg.Certs, t.cfg.Postgres
	store := func(db string, conns int) string {
		return fmt.Sprintf(`      sql:
        pluginName: "postgres12"
        databaseName: %q
        connectAddr: "127.0.0.1:%d"
        connectProtocol: "tcp"
        user: %q
        maxConns: %d
        maxIdleConns: %d
        maxConnLifetime: "1h"
`, db, pg.Port(), PostgresSuperuser, conns, conns)
	}
	rpc := func(grpc, membership int) string {
		return fmt.Sprintf("    rpc:\n      grpcPort: %d\n      membershipPort: %d\n      bindOnIP: \"127.0.0.1\"\n", grpc, membership)
	}
	t.grpcPorts = map[string]int{"frontend": t.cfg.Port, "history": ports[1], "matching": ports[3], "worker": ports[5]}
	// The frontend requires a client certificate signed by the CA; the
	// system worker (the worker service) presents the server's own
	// certificate, which carries clientAuth too. Internode gRPC (frontend →
	// history/matching, history ↔ matching) is mutual TLS under the same
	// CA (Temporal's tls.internode: the internode certificate is both the
	// services' server certificate and the client one they present).
	// Membership gossip (ringpop) is not encrypted by Temporal:
	// docs/production.md.
	nodeCert, nodeKey := c.InternodeCertFile, c.InternodeKey
	if nodeCert == "" {
		nodeCert, nodeKey = c.ServerCertFile, c.ServerKey
	}
	yaml := fmt.Sprintf(`log:
  stdout: true
  level: warn

persistence:
  defaultStore: postgres-default
  visibilityStore: postgres-visibility
  numHistoryShards: %d
  datastores:
    postgres-default:
%s    postgres-visibility:
%s
global:
  membership:
    maxJoinDuration: 30s
    broadcastAddress: "127.0.0.1"
  tls:
    internode:
      server:
        certFile: %q
        keyFile: %q
        requireClientAuth: true
        clientCaFiles: [%q]
      client:
        serverName: %q
        rootCaFiles: [%q]
    frontend:
      server:
        certFile: %q
        keyFile: %q
        requireClientAuth: true
        clientCaFiles: [%q]
      client:
        serverName: %q
        rootCaFiles: [%q]
    systemWorker:
      certFile: %q
      keyFile: %q
      client:
        serverName: %q
        rootCaFiles: [%q]

services:
  frontend:
%s  history:
%s  matching:
%s  worker:
%s
clusterMetadata:
  enableGlobalNamespace: false
  failoverVersionIncrement: 10
  masterClusterName: "active"
  currentClusterName: "active"
  clusterInformation:
    active:
      enabled: true
      initialFailoverVersion: 1
      rpcName: "frontend"
      rpcAddress: %q

dcRedirectionPolicy:
  policy: "noop"

dynamicConfigClient:
  filepath: %q
  pollInterval: "10s"
`, t.cfg.HistoryShards, store(TemporalDatabase, 20), store(TemporalVisibilityDatabase, 4),
		nodeCert, nodeKey, c.CAFile, c.ServerName, c.CAFile,
		c.ServerCertFile, c.ServerKey, c.CAFile, c.ServerName, c.CAFile,
		c.ServerCertFile, c.ServerKey, c.ServerName, c.CAFile,
		rpc(t.cfg.Port, ports[0]), rpc(ports[1], ports[2]), rpc(ports[3], ports[4]), rpc(ports[5], ports[6]), t.address, filepath.Join(t.cfgDir, "dynamicconfig.yaml"))
	if err := os.MkdirAll(t.cfgDir, 0o755); err != nil {
		return err
	}
	// A namespace's new search attributes reach the frontend's cache at its
	// next refresh (10 s by default): 2 s keeps registration at start short.
	dyn := "system.namespaceCacheRefreshInterval:\n  - value: 2s\n"
	dyn += fmt.Sprintf("matching.numTaskqueueReadPartitions:\n  - value: %d\nmatching.numTaskqueueWritePartitions:\n  - value: %d\n",
		t.readPartitions, t.cfg.TaskQueueWritePartitions)
	if err := os.WriteFile(filepath.Join(t.cfgDir, "dynamicconfig.yaml"), []byte(dyn), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(t.cfgDir, "development.yaml"), []byte(yaml), 0o644)
}

// launch starts p (its services only, with SeparateServices).
func (t *TemporalCluster) launch(p *temporalProc) error {
	args := []string{"--root", t.cfg.Dir, "--config", "config", "--env", "development", "--allow-no-auth", "start"}
	for _, svc := range p.services {
		args = append(args, "--service", svc)
	}
	cmd := exec.Command(t.bin, args...)
	cmd.Dir = t.cfg.Dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	f, err := os.OpenFile(p.logFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("open Temporal log: %w", err)
	}
	defer f.Close()
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start %s: %w", t.bin, err)
	}
	p.cmd, p.done = cmd, make(chan error, 1)
	go func() { p.done <- cmd.Wait() }()
	t.log.Info("temporal server starting", "address", t.address, "services", orAll(p.services), "log", p.logFile)
	return nil
}

func orAll(services []string) string {
	if services == nil {
		return "all"
	}
	return strings.Join(services, ",")
}

// start launches every process not running, one after the other (the
// first one initializes the cluster's metadata in a fresh database; two at
// once race on it), each once its services' gRPC ports listen, and waits
// until the frontend answers over mTLS.
func (t *TemporalCluster) start(ctx context.Context) error {
	for _, p := range t.procs {
		if p.cmd != nil {
			continue
		}
		if err := t.launch(p); err != nil {
			_ = t.Stop()
			return err
		}
		if err := t.waitUp(ctx, p); err != nil {
			return err
		}
	}
	return nil
}

// waitUp waits until p's services (but the worker) listen and the
// frontend answers.
func (t *TemporalCluster) waitUp(ctx context.Context, p *temporalProc) error {
	services := p.services
	if services == nil {
		services = TemporalServices
	}
	deadline := time.Now().Add(3 * time.Minute)
	for {
		select {
		case err := <-p.done:
			p.done <- err
			_ = t.Stop()
			return fmt.Errorf("the Temporal server (%s) exited during start: %v; its log ends:\n%s", orAll(p.services), err, Tail(p.logFile, 4000))
		default:
		}
		var err error
		for _, svc := range services {
			// The worker service serves no gRPC of its own: it is up
			// once the frontend answers.
			if err == nil && svc != "worker" && portFree("127.0.0.1", t.grpcPorts[svc]) {
				err = fmt.Errorf("temporal %s not listening on 127.0.0.1:%d yet", svc, t.grpcPorts[svc])
			}
		}
		if err == nil && (p.services == nil || slices.Contains(p.services, "frontend") || t.procs[len(t.procs)-1] == p) {
			err = t.probe(ctx)
		}
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			_ = t.Stop()
			return fmt.Errorf("the Temporal server did not answer on %s within 3 minutes: %w; its log ends:\n%s", t.address, err, Tail(p.logFile, 4000))
		}
		select {
		case <-ctx.Done():
			_ = t.Stop()
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// Restart starts the server again on the same config, e.g. after Kill
// (after KillService: that service's process only).
func (t *TemporalCluster) Restart(ctx context.Context) error { return t.start(ctx) }

// Dial connects to the frontend with ironflow's client certificate.
func (t *TemporalCluster) Dial(namespace string) (client.Client, error) {
	tc, err := t.ClientTLS()
	if err != nil {
		return nil, err
	}
	return client.Dial(client.Options{HostPort: t.address, Namespace: namespace,
		ConnectionOptions: client.ConnectionOptions{TLS: tc},
		Logger:            tlog.NewStructuredLogger(slog.New(slog.DiscardHandler))})
}

func (t *TemporalCluster) probe(ctx context.Context) error {
	c, err := t.Dial("temporal-system")
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.CheckHealth(ctx, &client.CheckHealthRequest{})
	return err
}

// register makes the namespace and the search attributes exist (both
// calls tolerate an earlier run's registration).
func (t *TemporalCluster) register(ctx context.Context) error {
	c, err := t.Dial(t.cfg.Namespace)
	if err != nil {
		return err
	}
	defer c.Close()
	_, err = c.WorkflowService().RegisterNamespace(ctx, &workflowservice.RegisterNamespaceRequest{
		Namespace: t.cfg.Namespace, WorkflowExecutionRetentionPeriod: durationpb.New(t.cfg.Retention),
	})
	var exists *serviceerror.NamespaceAlreadyExists
	if err != nil && !errors.As(err, &exists) {
		return fmt.Errorf("register namespace %s: %w", t.cfg.Namespace, err)
	}
	if len(t.cfg.SearchAttributes) == 0 {
		return nil
	}
	attrs := map[string]enumspb.IndexedValueType{}
	for name, typ := range t.cfg.SearchAttributes {
		v, ok := enumspb.IndexedValueType_value["INDEXED_VALUE_TYPE_"+strings.ToUpper(typ)]
		if !ok {
			return fmt.Errorf("search attribute %s: unknown type %s", name, typ)
		}
		attrs[name] = enumspb.IndexedValueType(v)
	}
	// A namespace just registered reaches every service's cache within
	// seconds; until then the operator call answers NotFound.
	deadline := time.Now().Add(time.Minute)
	for {
		_, err = c.OperatorService().AddSearchAttributes(ctx, &operatorservice.AddSearchAttributesRequest{
			SearchAttributes: attrs, Namespace: t.cfg.Namespace,
		})
		var already *serviceerror.AlreadyExists
		if err == nil || errors.As(err, &already) {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("register search attributes: %w", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
		}
	}
	// Registered is not yet usable: wait until a visibility query naming
	// every attribute passes the frontend's validation, so that the first
	// workflow ironflow starts does not fail on an unmapped attribute.
	var q []string
	for name := range attrs {
		q = append(q, name+" IS NOT NULL")
	}
	for {
		_, err = c.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{Namespace: t.cfg.Namespace, Query: strings.Join(q, " AND ")})
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("search attributes registered but not usable: %w", err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// Stop ends the Web UI and the server processes (SIGTERM, then SIGKILL
// after 15 s; the worker and frontend first) and waits.
func (t *TemporalCluster) Stop() error {
	if t.ui != nil {
		t.ui.Stop(5 * time.Second)
		t.ui = nil
	}
	for i := len(t.procs) - 1; i >= 0; i-- {
		p := t.procs[i]
		if p.cmd == nil || p.cmd.Process == nil {
			continue
		}
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-p.done:
		case <-time.After(15 * time.Second):
			_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
			<-p.done
		}
		p.cmd = nil // a second Stop signals no process group that may be another's by now
	}
	return nil
}

// Kill ends every server process at once, as a crash would.
func (t *TemporalCluster) Kill() {
	for _, p := range t.procs {
		p.kill()
	}
}

// KillService ends the process running service at once (kill -9), the
// others running on; with one process that is the whole server.
func (t *TemporalCluster) KillService(service string) {
	for _, p := range t.procs {
		if p.services == nil || slices.Contains(p.services, service) {
			p.kill()
		}
	}
}

// ServiceAddress is the gRPC address (host:port) of service.
func (t *TemporalCluster) ServiceAddress(service string) string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(t.grpcPorts[service]))
}

// ServicePID is the pid of the process running service (0: not running).
func (t *TemporalCluster) ServicePID(service string) int {
	for _, p := range t.procs {
		if (p.services == nil || slices.Contains(p.services, service)) && p.cmd != nil && p.cmd.Process != nil {
			return p.cmd.Process.Pid
		}
	}
	return 0
}

func (p *temporalProc) kill() {
	if p.cmd != nil && p.cmd.Process != nil {
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
		p.cmd = nil
	}
}

// ensureTemporalCerts makes (once) a CA, the frontend's certificate for
// localhost and 127.0.0.1, and ironflow's client certificate under dir.
func ensureTemporalCerts(dir string) (TemporalCerts, error) {
	c := TemporalCerts{
		CAFile: filepath.Join(dir, "ca.pem"), CAKeyFile: filepath.Join(dir, "ca.key"),
		ServerCertFile: filepath.Join(dir, "frontend.pem"), ServerKey: filepath.Join(dir, "frontend.key"),
		ClientCertFile: filepath.Join(dir, "ironflow.pem"), ClientKey: filepath.Join(dir, "ironflow.key"),
		InternodeCertFile: filepath.Join(dir, "internode.pem"), InternodeKey: filepath.Join(dir, "internode.key"),
		ServerName: "localhost",
	}
	if _, err := os.Stat(c.ClientKey); err == nil {
		if _, err := os.Stat(c.InternodeKey); err == nil {
			return c, nil
		}
		// A cluster directory from before internode TLS: its CA signs
		// the internode certificate too.
		ca, err := LoadTestCA(dir)
		if err != nil {
			return c, err
		}
		return c, ca.Issue(c.InternodeCertFile, c.InternodeKey, "temporal-internode", true)
	}
	ca, err := NewTestCA(dir, "ironflow temporal CA")
	if err != nil {
		return c, err
	}
	if err := ca.Issue(c.ServerCertFile, c.ServerKey, "temporal-frontend", true); err != nil {
		return c, err
	}
	if err := ca.Issue(c.ClientCertFile, c.ClientKey, "ironflow", false); err != nil {
		return c, err
	}
	if err := ca.Issue(c.InternodeCertFile, c.InternodeKey, "temporal-internode", true); err != nil {
		return c, err
	}
	return c, nil
}

// LoadTestCA reads the CA NewTestCA made under dir.
func LoadTestCA(dir string) (*TestCA, error) {
	ca := &TestCA{CertFile: filepath.Join(dir, "ca.pem")}
	pc, err := os.ReadFile(ca.CertFile)
	if err != nil {
		return nil, err
	}
	pk, err := os.ReadFile(filepath.Join(dir, "ca.key"))
	if err != nil {
		return nil, err
	}
	bc, _ := pem.Decode(pc)
	bk, _ := pem.Decode(pk)
	if bc == nil || bk == nil {
		return nil, fmt.Errorf("%s: not a PEM CA and key", dir)
	}
	if ca.cert, err = x509.ParseCertificate(bc.Bytes); err != nil {
		return nil, err
	}
	if ca.key, err = x509.ParseECPrivateKey(bk.Bytes); err != nil {
		return nil, err
	}
	return ca, nil
}

// TestCA is a certificate authority on disk for development clusters and
// tests (ca.pem, ca.key under its directory).
type TestCA struct {
	CertFile string
	cert     *x509.Certificate
	key      *ecdsa.PrivateKey
}

// NewTestCA makes a CA named name under dir.
func NewTestCA(dir, name string) (*TestCA, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().AddDate(10, 0, 0),
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature, IsCA: true, BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, _ := x509.ParseCertificate(der)
	ca := &TestCA{CertFile: filepath.Join(dir, "ca.pem"), cert: cert, key: key}
	if err := writePEM(ca.CertFile, "CERTIFICATE", der, 0o644); err != nil {
		return nil, err
	}
	kd, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	return ca, writePEM(filepath.Join(dir, "ca.key"), "EC PRIVATE KEY", kd, 0o600)
}

// Issue writes a certificate for cn signed by the CA and its key. A server
// certificate names localhost and 127.0.0.1 and may also act as a client
// (the system worker presents it to the frontend).
func (ca *TestCA) Issue(certFile, keyFile, cn string, server bool) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().AddDate(1, 0, 0),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if server {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
		tmpl.DNSNames = []string{"localhost"}
		tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return err
	}
	kd, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	if err := writePEM(certFile, "CERTIFICATE", der, 0o644); err != nil {
		return err
	}
	return writePEM(keyFile, "EC PRIVATE KEY", kd, 0o600)
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	return n
}

func writePEM(path, typ string, der []byte, mode os.FileMode) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), mode)
}
