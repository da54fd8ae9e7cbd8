package tests

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/ironflow/ironflow/agent/sim"
	"github.com/ironflow/ironflow/embedded"
	"github.com/ironflow/ironflow/internal/testkit/devstack"
	"github.com/ironflow/ironflow/payload"
	"github.com/ironflow/ironflow/signature"
	"github.com/ironflow/ironflow/workflows"
)

// clusterLab is ironflow on the Temporal server built from
// go.temporal.io/server (make tools): PostgreSQL persistence and SQL
// visibility, mTLS on the frontend (docs/production.md).
type clusterLab struct {
	dir, bin, dbURL, apiURL string
	// api2URL is a second API on the same cluster, the one agents use.
	api2URL               string
	signalKey, payloadKey string
	pg                    *embedded.Postgres
	temporal              *embedded.TemporalCluster
	api, worker           *embedded.Process
	api2, worker2         *embedded.Process
}

func startClusterLab(t *testing.T) *clusterLab {
	t.Helper()
	return startClusterLabWith(t, false)
}

// startClusterLabWith starts the lab; separate: Temporal's four services
// as four processes.
func startClusterLabWith(t *testing.T, separate bool) *clusterLab {
	t.Helper()
	dir, err := os.MkdirTemp("", "ironflow-cluster-")
	if err != nil {
		t.Fatal(err)
	}
	_ = os.Chmod(dir, 0o755) // PostgreSQL runs as the postgres user when we are root
	l := &clusterLab{dir: dir, signalKey: string(signature.Generate()), payloadKey: payload.GenerateKey()}
	t.Cleanup(func() {
		for _, p := range []*embedded.Process{l.worker, l.worker2, l.api2} {
			if p != nil {
				p.Stop(5 * time.Second)
			}
		}
		if l.api != nil {
			l.api.Stop(5 * time.Second)
		}
		if l.temporal != nil {
			_ = l.temporal.Stop()
		}
		if l.pg != nil {
			_ = l.pg.Stop()
		}
		if !t.Failed() && os.Getenv("IRONFLOW_KEEP_TEST_DIR") == "" {
			_ = os.RemoveAll(dir)
		}
	})
	if l.bin, err = devstack.IronflowBinary("", dir); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if l.pg, err = embedded.StartPostgres(ctx, filepath.Join(dir, "pg"), nil); err != nil {
		t.Fatal(err)
	}
	_ = l.pg.StopOnExit(true)
	l.dbURL = l.pg.URL()
	uiPort, err := embedded.FreePort("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	l.temporal, err = embedded.StartTemporalCluster(ctx, embedded.TemporalClusterConfig{
		Dir: filepath.Join(dir, "temporal"), Postgres: l.pg, SearchAttributes: embedded.WorkflowSearchAttributes(), UIPort: uiPort,
		SeparateServices: separate,
	}, nil)
	if err != nil {
		t.Fatalf("the Temporal cluster did not start: %v", err)
	}
	t.Logf("Temporal cluster (schemas, server, namespace, search attributes) up in %s on %s", time.Since(start).Round(time.Millisecond), l.temporal.Address())
	if out, err := exec.Command(l.bin, "migrate", "--database-url", l.dbURL).CombinedOutput(); err != nil {
		t.Fatalf("migrate: %v: %s", err, out)
	}
	port, err := embedded.FreePort("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	listen := fmt.Sprintf("127.0.0.1:%d", port)
	l.apiURL = "http://" + listen
	c := l.temporal.Certs()
	if l.api, err = l.spawn("cluster-api", "api", "--listen", listen, "--ramdisk-heartbeat-timeout", "10s",
		"--temporal-tls-cert", c.ClientCertFile, "--temporal-tls-key", c.ClientKey, "--temporal-tls-ca", c.CAFile); err != nil {
		t.Fatal(err)
	}
	if err := devstack.WaitReady(ctx, probe, l.apiURL+"/", l.api); err != nil {
		t.Fatalf("API on the cluster: %v\n%s", err, l.api.Tail(3000))
	}
	// Two APIs and two workers, as production runs them.
	if port, err = embedded.FreePort("127.0.0.1"); err != nil {
		t.Fatal(err)
	}
	listen2 := fmt.Sprintf("127.0.0.1:%d", port)
	l.api2URL = "http://" + listen2
	if l.api2, err = l.spawn("cluster-api-2", "api", "--listen", listen2, "--ramdisk-heartbeat-timeout", "10s",
		"--temporal-tls-cert", c.ClientCertFile, "--temporal-tls-key", c.ClientKey, "--temporal-tls-ca", c.CAFile); err != nil {
		t.Fatal(err)
	}
	if err := devstack.WaitReady(ctx, probe, l.api2URL+"/", l.api2); err != nil {
		t.Fatalf("second API on the cluster: %v\n%s", err, l.api2.Tail(3000))
	}
	for i, w := range []**embedded.Process{&l.worker, &l.worker2} {
		name := fmt.Sprintf("cluster-worker-%d", i+1)
		if *w, err = l.spawn(name, "worker", "--agent-api-url", l.api2URL, "--boot-url", "http://127.0.0.1:1", "--agent-insecure",
			"--deploy-callback-timeout", "3m", "--agent-heartbeat-timeout", "30s", "--conductor-hostname", name,
			"--temporal-tls-cert", c.ClientCertFile, "--temporal-tls-key", c.ClientKey, "--temporal-tls-ca", c.CAFile); err != nil {
			t.Fatal(err)
		}
	}
	return l
}

func probe(ctx context.Context, url string) error {
	resp, err := http.Get(url)
	if err == nil {
		resp.Body.Close()
	}
	return err
}

// baremetal runs the unmodified baremetal CLI against the cluster's
// first API (through the test process's fork server of it, baremetalcli).
func (l *clusterLab) baremetal(t *testing.T, args ...string) {
	t.Helper()
	out, errOut, err := baremetalAt(t, l.apiURL, args...)
	if err != nil {
		t.Fatalf("baremetal %s: %v\n%s%s\nworker:\n%s", strings.Join(args, " "), err, out, errOut, l.worker.Tail(3000))
	}
}

// spawn runs an ironflow command against the cluster's databases and
// frontend; args follow the common ones.
func (l *clusterLab) spawn(name, verb string, args ...string) (*embedded.Process, error) {
	// Two APIs and several workers share this machine: each serves its
	// metrics on a port of its own.
	full := append([]string{verb, "--database-url", l.dbURL, "--temporal-address", l.temporal.Address(), "--signal-key", l.signalKey,
		"--metrics-listen", "127.0.0.1:0"}, args...)
	cmd := exec.Command(l.bin, full...)
	cmd.Env = append(os.Environ(), "IRONFLOW_PAYLOAD_KEY="+l.payloadKey, "IRONFLOW_LOG_LEVEL=debug")
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return embedded.StartProcess(name, filepath.Join(l.dir, name+".log"), cmd)
}

func (l *clusterLab) call(t *testing.T, method, path string, body, out any) int {
	t.Helper()
	code, _ := callAt(t, l.apiURL, "1.78", method, path, body, out)
	return code
}

// deployToCallback enrolls a direct-deploy node with a port of mac and
// img as its image, makes it available with the baremetal CLI, deploys it
// and waits until it waits for its agent's call-back.
func (l *clusterLab) deployToCallback(t *testing.T, name, mac string, img *imageServer) node {
	t.Helper()
	var n node
	if code := l.call(t, "POST", "/v1/nodes", map[string]any{"name": name, "driver": "fake-hardware", "deploy_interface": "direct",
		"automated_clean": false, "properties": map[string]any{"cpus": 2, "memory_mb": 2048, "local_gb": 20}}, &n); code != 201 {
		t.Fatalf("create node: %d", code)
	}
	if code := l.call(t, "POST", "/v1/ports", map[string]any{"address": mac, "node_uuid": n.UUID}, nil); code != 201 {
		t.Fatalf("create port: %d", code)
	}
	if code := l.call(t, "PATCH", "/v1/nodes/"+n.UUID, []map[string]any{
		{"op": "add", "path": "/instance_info/image_source", "value": img.URL + "/disk.raw"},
		{"op": "add", "path": "/instance_info/image_os_hash_algo", "value": "sha256"},
		{"op": "add", "path": "/instance_info/image_os_hash_value", "value": img.sha256},
	}, nil); code != 200 {
		t.Fatalf("instance_info: %d", code)
	}
	l.baremetal(t, "node", "manage", n.UUID, "--wait", "60")
	l.baremetal(t, "node", "provide", n.UUID, "--wait", "60")
	l.baremetal(t, "node", "deploy", n.UUID)
	l.waitState(t, n.UUID, "wait call-back", 60*time.Second)
	return n
}

func (l *clusterLab) waitState(t *testing.T, id, state string, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var n node
	for time.Now().Before(deadline) {
		if l.call(t, "GET", "/v1/nodes/"+id, nil, &n) == 200 {
			if n.ProvisionState == state {
				return
			}
			if strings.HasSuffix(n.ProvisionState, "failed") {
				t.Fatalf("node went to %q waiting for %q: %s\nworker:\n%s", n.ProvisionState, state, deref(n.LastError), l.worker.Tail(4000))
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("node still %q after %s waiting for %q (last_error %s)\nworker:\n%s\ntemporal:\n%s", n.ProvisionState, timeout, state,
		deref(n.LastError), l.worker.Tail(4000), embedded.Tail(l.temporal.LogFile(), 3000))
}

// TestTemporalCluster runs ironflow (two APIs, two workers) on the
// all-in-one Temporal server on PostgreSQL with mTLS: a deploy driven by
// the baremetal CLI through the simulated agent survives the server's
// kill -9 mid-deploy, and an ironflow process holding a
// certificate of another CA, or none, is refused at startup.
func TestTemporalCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a Temporal cluster")
	}
	start := time.Now()
	l := startClusterLab(t)

	// One matching service, so tasks are written to one partition per
	// task queue (TemporalClusterConfig.TaskQueueWritePartitions): with
	// Temporal's four, a task can wait in a partition no poll reaches. The
	// CLI lists the partitions written to.
	t.Run("task queues are written to one partition", func(t *testing.T) {
		cli, err := embedded.FindTemporalCLI("")
		if err != nil {
			t.Fatal(err)
		}
		c := l.temporal.Certs()
		wf, act, err := embedded.TaskQueuePartitionsWritten(context.Background(), cli, workflows.TaskQueue,
			"--address", l.temporal.Address(), "--tls-ca-path", c.CAFile, "--tls-cert-path", c.ClientCertFile,
			"--tls-key-path", c.ClientKey, "--tls-server-name", c.ServerName)
		if err != nil {
			t.Fatal(err)
		}
		if wf != 1 || act != 1 {
			t.Errorf("task queue %s is written to %d workflow and %d activity partitions, want 1 and 1", workflows.TaskQueue, wf, act)
		}
	})

	// The cluster's database is new, so it is read on the one partition it
	// is written to, and the record beside it says so (package embedded's
	// ReadPartitions; docs/production.md, "Task-queue partitions").
	t.Run("a new database is read on one partition", func(t *testing.T) {
		dir := filepath.Dir(l.temporal.LogFile())
		dyn, err := os.ReadFile(filepath.Join(dir, "config", "dynamicconfig.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(dyn), "matching.numTaskqueueReadPartitions:\n  - value: 1\n") {
			t.Errorf("dynamic config of a new cluster:\n%s", dyn)
		}
		if rec, err := os.ReadFile(embedded.PartitionsFile(filepath.Join(dir, embedded.TemporalDatabase))); err != nil || string(rec) != "1\n" {
			t.Errorf("record of the partitions: %q, %v", rec, err)
		}
	})

	t.Run("deploy survives the server killed mid-deploy", func(t *testing.T) {
		img := newImageServer(t, 8<<20)
		img.delay = 300 * time.Millisecond // a few seconds of writing
		mac := "52:54:00:cc:00:01"
		n := l.deployToCallback(t, "cluster-node-0", mac, img)

		// The whole cluster dies while the node waits for its agent.
		l.temporal.Kill()
		time.Sleep(time.Second)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		if err := l.temporal.Restart(ctx); err != nil {
			t.Fatal(err)
		}
		if _, err := sim.Start(ctx, sim.Config{APIURL: l.api2URL, MACs: []string{mac}, HeartbeatInterval: time.Second}); err != nil {
			t.Fatal(err)
		}
		// And again while the agent writes the image.
		deadline := time.Now().Add(90 * time.Second)
		for img.downloads.Load() == 0 && time.Now().Before(deadline) {
			time.Sleep(50 * time.Millisecond)
		}
		if img.downloads.Load() == 0 {
			t.Fatalf("write_image never started\n%s", l.worker.Tail(4000))
		}
		l.temporal.Kill()
		time.Sleep(time.Second)
		if err := l.temporal.Restart(ctx); err != nil {
			t.Fatal(err)
		}
		l.waitState(t, n.UUID, "active", 3*time.Minute)
		if got := img.downloads.Load(); got != 1 {
			t.Errorf("image written %d times across the kills, want 1", got)
		}
	})

	// The figures docs/production.md quotes: what one deploy costs
	// Temporal's PostgreSQL (transactions and WAL, the whole cluster's
	// WAL, ironflow's database included) and the rate on this machine.
	t.Run("deploys through the cluster and their load on PostgreSQL", func(t *testing.T) {
		const n = 20
		var uuids []string
		for i := range n {
			var nd node
			if code := l.call(t, "POST", "/v1/nodes", map[string]any{"name": fmt.Sprintf("cluster-fake-%d", i), "driver": "fake-hardware",
				"deploy_interface": "fake", "automated_clean": false}, &nd); code != 201 {
				t.Fatalf("create node: %d", code)
			}
			for _, step := range [][2]string{{"manage", "manageable"}, {"provide", "available"}} {
				if code := l.call(t, "PUT", "/v1/nodes/"+nd.UUID+"/states/provision", map[string]any{"target": step[0]}, nil); code != 202 {
					t.Fatalf("%s: %d", step[0], code)
				}
				l.waitState(t, nd.UUID, step[1], 60*time.Second)
			}
			uuids = append(uuids, nd.UUID)
		}
		ctx := context.Background()
		conn, err := pgx.Connect(ctx, l.pg.DatabaseURL(embedded.TemporalDatabase))
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close(ctx)
		sample := func() (commits int64, wal int64) {
			time.Sleep(1500 * time.Millisecond) // statistics reach pg_stat_database within a second
			if err := conn.QueryRow(ctx, `SELECT xact_commit, pg_current_wal_lsn() - '0/0'::pg_lsn FROM pg_stat_database WHERE datname = $1`,
				embedded.TemporalDatabase).Scan(&commits, &wal); err != nil {
				t.Fatal(err)
			}
			return commits, wal
		}
		c0, w0 := sample()
		start := time.Now()
		for _, u := range uuids {
			if code := l.call(t, "PUT", "/v1/nodes/"+u+"/states/provision", map[string]any{"target": "active"}, nil); code != 202 {
				t.Fatalf("deploy: %d", code)
			}
		}
		for _, u := range uuids {
			l.waitState(t, u, "active", 2*time.Minute)
		}
		took := time.Since(start)
		c1, w1 := sample()
		t.Logf("%d fake deploys through the cluster in %s (%.1f deploys/s); per deploy: %.0f transactions committed in database %s, %.0f KiB of WAL",
			n, took.Round(time.Millisecond), float64(n)/took.Seconds(), float64(c1-c0)/n, embedded.TemporalDatabase, float64(w1-w0)/n/1024)
	})

	t.Run("the Web UI reads the cluster over mTLS", func(t *testing.T) {
		deadline := time.Now().Add(30 * time.Second)
		for {
			resp, err := http.Get(l.temporal.UIURL() + "/api/v1/namespaces/default/workflows")
			if err == nil {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				// The deploys above are listed: the UI reached the
				// frontend with the client certificate.
				if resp.StatusCode == 200 && strings.Contains(string(b), "DeployNode") {
					return
				}
				err = fmt.Errorf("HTTP %d: %.300s", resp.StatusCode, b)
			}
			if time.Now().After(deadline) {
				t.Fatalf("the Web UI does not list the deploys: %v", err)
			}
			time.Sleep(500 * time.Millisecond)
		}
	})

	// refused runs `ironflow worker` with args and wants it to exit at
	// startup with an error that says why.
	refused := func(t *testing.T, name string, args []string, want ...string) {
		t.Helper()
		p, err := l.spawn(name, "worker", args...)
		if err != nil {
			t.Fatal(err)
		}
		select {
		case <-p.Exited():
		case <-time.After(60 * time.Second):
			p.Kill()
			t.Fatalf("the worker still runs after 60 s\n%s", p.Tail(3000))
		}
		if p.Err() == nil {
			t.Fatalf("the worker exited without an error\n%s", p.Tail(3000))
		}
		out := p.Tail(3000)
		for _, w := range want {
			if !strings.Contains(out, w) {
				t.Errorf("the worker's error does not say %q:\n%s", w, out)
			}
		}
	}
	c := l.temporal.Certs()
	t.Run("certificate of another CA refused", func(t *testing.T) {
		other, err := embedded.NewTestCA(filepath.Join(l.dir, "other-ca"), "another CA")
		if err != nil {
			t.Fatal(err)
		}
		cert, key := filepath.Join(l.dir, "other-ca", "ironflow.pem"), filepath.Join(l.dir, "other-ca", "ironflow.key")
		if err := other.Issue(cert, key, "ironflow", false); err != nil {
			t.Fatal(err)
		}
		refused(t, "worker-other-ca", []string{"--temporal-tls-cert", cert, "--temporal-tls-key", key, "--temporal-tls-ca", c.CAFile},
			"connect to Temporal at "+l.temporal.Address(), "ironflow's client certificate", "--temporal-tls-cert must be signed by a CA the frontend trusts")
	})
	t.Run("TLS without a client certificate refused", func(t *testing.T) {
		refused(t, "worker-no-cert", []string{"--temporal-tls-ca", c.CAFile}, "connect to Temporal at "+l.temporal.Address(), "requires a client certificate", "give --temporal-tls-cert")
	})
	t.Run("plain gRPC refused", func(t *testing.T) {
		refused(t, "worker-plain", nil, "connect to Temporal at "+l.temporal.Address(), "as one that requires TLS does")
	})
	t.Logf("whole test: %s", time.Since(start).Round(time.Second))
}
