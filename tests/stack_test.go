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
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ironflow/ironflow/embedded"
	"github.com/ironflow/ironflow/internal/testkit/baremetalcli"
	"github.com/ironflow/ironflow/internal/testkit/devstack"
	"github.com/ironflow/ironflow/internal/testkit/otlpsink"
)

// lab is one ironflow installation shared by the package's tests: the
// tests use distinct nodes and run one after another.
var lab *devstack.Stack

// labHeartbeatTimeout is the API's ramdisk heartbeat timeout in the lab.
const labHeartbeatTimeout = 10 * time.Second

func TestMain(m *testing.M) {
	code := func() int {
		dir, err := os.MkdirTemp("", "ironflow-tests-")
		if err != nil {
			fmt.Fprintf(os.Stderr, "tests: %v\n", err)
			return 1
		}
		// PostgreSQL runs as the postgres user when we are root.
		_ = os.Chmod(dir, 0o755)
		defer func() {
			if os.Getenv("IRONFLOW_KEEP_TEST_DIR") == "" {
				_ = os.RemoveAll(dir)
			}
		}()
		if labAPIMetrics, labWorkerMetrics, err = freeMetricsAddresses(); err != nil {
			fmt.Fprintf(os.Stderr, "tests: %v\n", err)
			return 1
		}
		// The lab's processes send their traces here (tracing_test.go).
		if labTraces, err = otlpsink.Start(); err != nil {
			fmt.Fprintf(os.Stderr, "tests: %v\n", err)
			return 1
		}
		defer labTraces.Stop()
		lab, err = devstack.StartStack(context.Background(), devstack.StackConfig{
			Dir:     dir,
			Env:     []string{"IRONFLOW_LOG_LEVEL=debug"},
			APIArgs: []string{"--ramdisk-heartbeat-timeout", labHeartbeatTimeout.String(), "--otel-endpoint", labTraces.Addr()},
			WorkerArgs: []string{"--deploy-callback-timeout", "3m", "--agent-heartbeat-timeout", "30s", "--operator-wait-timeout", "10m",
				"--bmc-attempts", "3", "--sync-power-state-interval", "5s", "--otel-endpoint", labTraces.Addr()},
			// Prometheus scrapes these (metrics_prometheus_test.go).
			APIMetricsListen: labAPIMetrics, WorkerMetricsListen: labWorkerMetrics,
		})
		if lab != nil {
			defer lab.Stop()
		}
		defer stopIronicOracle()
		if err != nil {
			fmt.Fprintf(os.Stderr, "tests: the integration stack did not start: %v\n", err)
			return 1
		}
		defer func() {
			if crashBuild.bin != "" {
				_ = os.RemoveAll(filepath.Dir(crashBuild.bin))
			}
		}()
		return m.Run()
	}()
	os.Exit(code)
}

// workerLog is the end of the lab worker's log, for failure messages.
func workerLog() string { return embedded.Tail(lab.WorkerLog(), 4000) }

// call sends an API request at microversion 1.78 and decodes a JSON answer.
func call(t testing.TB, method, path string, body any, out any) (int, http.Header) {
	t.Helper()
	return callAt(t, lab.APIURL, "1.78", method, path, body, out)
}

// callAt sends an API request to the API at base, at microversion version,
// and decodes a JSON answer into out.
func callAt(t testing.TB, base, version, method, path string, body any, out any) (int, http.Header) {
	t.Helper()
	var r io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, base+path, r)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-OpenStack-Ironic-API-Version", version)
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

// call2 is call without decoding, for requests whose body is empty.
func call2(t *testing.T, method, path string, body any) (int, error) {
	code, _ := call(t, method, path, body, nil)
	if code >= 300 {
		return code, fmt.Errorf("%s %s: HTTP %d", method, path, code)
	}
	return code, nil
}

type node struct {
	UUID                 string         `json:"uuid"`
	Name                 string         `json:"name"`
	ProvisionState       string         `json:"provision_state"`
	TargetProvisionState *string        `json:"target_provision_state"`
	PowerState           *string        `json:"power_state"`
	TargetPowerState     *string        `json:"target_power_state"`
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
			t.Fatalf("node %s went to %q waiting for %q: last_error %v\nworker log:\n%s", id, n.ProvisionState, state, deref(n.LastError), workerLog())
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("node %s still %q after %s waiting for %q (last_error %v)\nworker log:\n%s", id, n.ProvisionState, timeout, state, deref(n.LastError), workerLog())
	return n
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return *s
}

// baremetal runs the unmodified baremetal CLI against the stack, through
// the test process's fork server of it (baremetalcli: the CLI's own entry
// point, its imports paid once).
func baremetal(t testing.TB, args ...string) (string, string, error) {
	t.Helper()
	return baremetalAt(t, lab.APIURL, args...)
}

// baremetalAt is baremetal against the API at url.
func baremetalAt(t testing.TB, url string, args ...string) (string, string, error) {
	t.Helper()
	cli, err := baremetalcli.Shared()
	if err != nil {
		t.Fatal(err)
	}
	r, err := cli.Run(context.Background(), append(os.Environ(), "OS_ENDPOINT="+url, "OS_AUTH_TYPE=none"), args...)
	if err != nil {
		t.Fatalf("baremetal %s: %v", strings.Join(args, " "), err)
	}
	return r.Stdout, r.Stderr, r.Err()
}

func mustCLI(t testing.TB, args ...string) string {
	t.Helper()
	out, errOut, err := baremetal(t, args...)
	if err != nil {
		t.Fatalf("baremetal %s: %v\nstdout: %s\nstderr: %s\nworker log:\n%s", strings.Join(args, " "), err, out, errOut, workerLog())
	}
	return out
}
