package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/ironflow/ironflow/embedded"
	"github.com/ironflow/ironflow/internal/testkit/devstack"
	"github.com/ironflow/ironflow/store"
)

// devServer is `ironflow dev` as `make run` starts it: one ironflow
// process (API, worker, boot service, codec server) with the embedded
// PostgreSQL and Temporal dev server (Web UI on) as its children, every
// port on 127.0.0.1. The footprint and fleet parts measure it against
// Ironic's all-in-one: what a user runs on one machine.
type devServer struct {
	name, dir, url string
	cmd            *exec.Cmd
	logFile        *os.File
	exited         chan error
	store          *store.Store
}

const devReadyTimeout = 3 * time.Minute

func startDevServer(ctx context.Context, name, bin, dir string, log *slog.Logger) (*devServer, error) {
	bin, err := devstack.IronflowBinary(bin, dir)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	ports := make([]int, 4)
	for i := range ports {
		if ports[i], err = embedded.FreePort("127.0.0.1"); err != nil {
			return nil, err
		}
	}
	api := fmt.Sprintf("127.0.0.1:%d", ports[0])
	args := []string{"dev",
		"--data-dir", filepath.Join(dir, "data"),
		"--listen", api,
		"--agent-api-url", "http://" + api,
		"--boot-listen", fmt.Sprintf("127.0.0.1:%d", ports[1]),
		// 0: ironflow dev picks the frontend's port as the Temporal CLI
		// itself would (embedded.StartTemporal).
		"--temporal-port", "0",
		"--temporal-ui-port", strconv.Itoa(ports[2]),
		"--codec-listen", fmt.Sprintf("127.0.0.1:%d", ports[3]),
		"--metrics-listen", "",
	}
	d := &devServer{name: name, dir: dir, url: "http://" + api, exited: make(chan error, 1)}
	if d.logFile, err = os.Create(filepath.Join(dir, "ironflow-dev.log")); err != nil {
		return nil, err
	}
	d.cmd = exec.Command(bin, args...)
	d.cmd.Stdout, d.cmd.Stderr = d.logFile, d.logFile
	// SIGTERM if the bench dies: ironflow dev then stops its PostgreSQL
	// and Temporal, which a SIGKILL would leave running.
	d.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM, Setpgid: true}
	if err := d.cmd.Start(); err != nil {
		d.logFile.Close()
		return nil, fmt.Errorf("start ironflow dev: %w", err)
	}
	go func() { d.exited <- d.cmd.Wait() }()
	rctx, cancel := context.WithTimeout(ctx, devReadyTimeout)
	defer cancel()
	for {
		if err := probeAPI(rctx, d.url+"/v1/"); err == nil {
			break
		}
		select {
		case err := <-d.exited:
			d.exited <- err
			d.stop()
			return nil, fmt.Errorf("ironflow dev exited: %v\n%s", err, embedded.Tail(d.logFile.Name(), 3000))
		case <-rctx.Done():
			d.stop()
			return nil, fmt.Errorf("ironflow dev did not answer within %s\n%s", devReadyTimeout, embedded.Tail(d.logFile.Name(), 3000))
		case <-time.After(250 * time.Millisecond):
		}
	}
	if d.store, err = store.Open(ctx, d.postgresURL()); err != nil {
		d.stop()
		return nil, fmt.Errorf("open ironflow dev's store: %w", err)
	}
	log.Info("ironflow dev up", "name", name, "api", d.url, "pid", d.cmd.Process.Pid, "temporal", d.temporalPID(), "dir", dir)
	return d, nil
}

func probeAPI(ctx context.Context, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return errors.New(resp.Status)
	}
	return nil
}

func (d *devServer) pgDir() string { return filepath.Join(d.dir, "data", "pg") }

// postgresURL is the embedded cluster's URL, from the port it recorded.
func (d *devServer) postgresURL() string {
	b, _ := os.ReadFile(filepath.Join(d.pgDir(), "port"))
	return fmt.Sprintf("postgres://%s@127.0.0.1:%s/%s?sslmode=disable", embedded.PostgresSuperuser, strings.TrimSpace(string(b)), embedded.PostgresDatabase)
}

// temporalPID is the Temporal CLI's dev server below ironflow dev.
func (d *devServer) temporalPID() int {
	for _, c := range childrenOf(d.cmd.Process.Pid) {
		if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", c)); err == nil && strings.TrimSpace(string(b)) == "temporal" {
			return c
		}
	}
	return 0
}

func (d *devServer) procs() map[string]int {
	m := map[string]int{"ironflow": d.cmd.Process.Pid, "postgres": postmasterPID(d.pgDir())}
	if t := d.temporalPID(); t != 0 {
		m["temporal"] = t
	}
	return m
}

func (d *devServer) target() *target {
	return &target{name: d.name, url: d.url, hc: newHTTPClient(64), procs: d.procs,
		seed: func(ctx context.Context, n int) error { return seedNodes(ctx, d.store, n) }}
}

// diskBytes is what ironflow dev keeps on disk: PostgreSQL's cluster and
// the Temporal dev server's SQLite file with its write-ahead log.
func (d *devServer) diskBytes() (postgres, temporal int64) {
	return dirBytes(filepath.Join(d.pgDir(), "pgdata")), dirBytes(filepath.Join(d.dir, "data", "temporal"))
}

func dirBytes(dir string) int64 {
	var n int64
	_ = filepath.Walk(dir, func(_ string, fi os.FileInfo, err error) error {
		if err == nil && fi.Mode().IsRegular() {
			n += fi.Size()
		}
		return nil
	})
	return n
}

func (d *devServer) stop() {
	if d.store != nil {
		d.store.Close()
	}
	if d.cmd != nil && d.cmd.Process != nil {
		_ = d.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-d.exited:
		case <-time.After(30 * time.Second):
			_ = syscall.Kill(-d.cmd.Process.Pid, syscall.SIGKILL)
			<-d.exited
		}
	}
	if d.logFile != nil {
		d.logFile.Close()
	}
}
