package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ironflow/ironflow/agent/sim"
	"github.com/ironflow/ironflow/embedded"
	"github.com/ironflow/ironflow/internal/testkit/devstack"
	"github.com/ironflow/ironflow/internal/testkit/promcheck"
)

// The lab's API and worker serve their metrics here (TestMain), for the
// Prometheus this file starts.
var labAPIMetrics, labWorkerMetrics string

func freeMetricsAddresses() (api, worker string, err error) {
	a, err := embedded.FreePort("127.0.0.1")
	if err != nil {
		return "", "", err
	}
	w, err := embedded.FreePort("127.0.0.1")
	if err != nil {
		return "", "", err
	}
	return fmt.Sprintf("127.0.0.1:%d", a), fmt.Sprintf("127.0.0.1:%d", w), nil
}

// requirePrometheus finds Debian's prometheus and promtool, or skips
// loudly.
func requirePrometheus(t *testing.T) string {
	t.Helper()
	prometheus, err := exec.LookPath("prometheus")
	if err != nil {
		t.Skip("SKIPPED: prometheus is missing: scripts/install-deps.sh test installs Debian's prometheus")
	}
	if _, err := exec.LookPath("promtool"); err != nil {
		t.Skip("SKIPPED: " + promcheck.ErrNoPromtool.Error())
	}
	return prometheus
}

// startPrometheus runs a real Prometheus scraping jobs (name → host:port,
// or host:port/path for another path than /metrics)
// every second with ironflow's alert rules loaded, and waits until it has
// scraped every target once. It returns its base URL.
func startPrometheus(t *testing.T, bin string, jobs map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	rules, err := os.ReadFile("../monitoring/alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "alerts.yml"), rules, 0o644); err != nil {
		t.Fatal(err)
	}
	var cfg strings.Builder
	cfg.WriteString("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nrule_files: [alerts.yml]\nscrape_configs:\n")
	for job, target := range jobs {
		// host:port/path scrapes path instead of /metrics.
		path := "/metrics"
		if i := strings.IndexByte(target, '/'); i >= 0 {
			target, path = target[:i], target[i:]
		}
		fmt.Fprintf(&cfg, "  - job_name: %s\n    metrics_path: %s\n    static_configs: [{targets: [%q]}]\n", job, path, target)
	}
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(cfg.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	port, err := embedded.FreePort("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	listen := fmt.Sprintf("127.0.0.1:%d", port)
	cmd := exec.Command(bin, "--config.file="+filepath.Join(dir, "prometheus.yml"), "--storage.tsdb.path="+filepath.Join(dir, "data"),
		"--web.listen-address="+listen, "--log.level=warn")
	p, err := embedded.StartProcess("prometheus", filepath.Join(dir, "prometheus.log"), cmd)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Stop(5 * time.Second) })
	base := "http://" + listen
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := devstack.WaitReady(ctx, func(ctx context.Context, u string) error {
		resp, err := http.Get(u)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			return fmt.Errorf("%s: %d", u, resp.StatusCode)
		}
		return nil
	}, base+"/-/ready", p); err != nil {
		t.Fatal(err)
	}
	waitQuery(t, base, `count(up == 1)`, float64(len(jobs)), 30*time.Second)
	return base
}

// query asks Prometheus's HTTP API for an instant vector and sums it (0
// when empty: a counter nothing has touched yet).
func query(t *testing.T, base, q string) float64 {
	t.Helper()
	resp, err := http.Get(base + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r struct {
		Status string
		Error  string
		Data   struct {
			Result []struct {
				Value [2]any
			}
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || r.Status != "success" {
		t.Fatalf("query %s: %v %s", q, err, r.Error)
	}
	sum := 0.0
	for _, v := range r.Data.Result {
		s, _ := v.Value[1].(string)
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			t.Fatalf("query %s: value %v", q, v.Value)
		}
		sum += f
	}
	return sum
}

// waitQuery polls q until it equals want (scrapes come every second).
func waitQuery(t *testing.T, base, q string, want float64, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		got := query(t, base, q)
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("Prometheus: %s = %v, want %v", q, got, want)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// scrapeAndLint reads a process's /metrics as Prometheus does and runs
// `promtool check metrics` on it.
func scrapeAndLint(t *testing.T, name, addr string) string {
	t.Helper()
	body, err := promcheck.Scrape("http://" + addr + "/metrics")
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	if err := promcheck.Lint(body); err != nil {
		t.Errorf("%s's scrape: %v", name, err)
	}
	return string(body)
}

// failingBMC is a Redfish BMC that answers every request 503, as a BMC
// in the middle of a reset does, and counts them.
type failingBMC struct {
	*httptest.Server
	requests atomic.Int64
}

func newFailingBMC(t *testing.T) *failingBMC {
	b := &failingBMC{}
	b.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		b.requests.Add(1)
		w.Header().Set("Retry-After", "1")
		http.Error(w, `{"error": {"message": "BMC is resetting"}}`, http.StatusServiceUnavailable)
	}))
	t.Cleanup(b.Close)
	return b
}

// TestPrometheusScrapesTheStackWhileAgentsDeployAndABMCFails runs a real
// Prometheus against the lab's API and worker and an `ironflow pxe`, while
// two simulated agents deploy and a node's Redfish BMC answers nothing but
// 503, and reads back through Prometheus's HTTP API the deploys, the
// deploy steps' histograms, the BMC errors and the boot service's answers
// the test caused. Every process's scrape passes promtool; the alert rules
// load; a taken --metrics-listen address stops a worker at start-up.
func TestPrometheusScrapesTheStackWhileAgentsDeployAndABMCFails(t *testing.T) {
	prom := requirePrometheus(t)
	start := time.Now()

	// The boot service, with its own metrics address.
	port, err := embedded.FreePort("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	bootListen := fmt.Sprintf("127.0.0.1:%d", port)
	pxeMetrics, _, err := freeMetricsAddresses()
	if err != nil {
		t.Fatal(err)
	}
	pxe, err := lab.Spawn("ironflow-pxe-metrics", append(lab.PXEArgs(), "--boot-listen", bootListen, "--metrics-listen", pxeMetrics))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pxe.Stop(5 * time.Second) })
	if err := lab.WaitHTTP(context.Background(), "http://"+pxeMetrics+"/metrics", pxe); err != nil {
		t.Fatal(err)
	}

	base := startPrometheus(t, prom, map[string]string{
		"ironflow-api": labAPIMetrics, "ironflow-worker": labWorkerMetrics, "ironflow-pxe": pxeMetrics,
	})
	t.Logf("Prometheus up and scraping after %s", time.Since(start).Round(time.Millisecond))

	const (
		qDeploys   = `sum(ironflow_operations_finished_total{operation="deploy",outcome="succeeded"})`
		qWriteStep = `sum(ironflow_step_duration_seconds_count{operation="deploy",step="deploy.write_image",outcome="ok"})`
		qBootStep  = `sum(ironflow_step_duration_seconds_count{operation="deploy",step="deploy.boot_instance",outcome="ok"})`
		qBMCErrors = `sum(ironflow_bmc_calls_total{driver="redfish",outcome="busy"})`
		qBoot      = `sum(ironflow_boot_http_requests_total{kind="other",code="200"})`
		qProvision = `sum(ironflow_api_requests_total{route="/v1/nodes/:node/states/provision",method="PUT",code="202"})`
		qNodes     = `max(ironflow_nodes{provision_state="active"})`
		qHeartbeat = `sum(ironflow_agent_heartbeat_interval_seconds_count)`
	)
	before := map[string]float64{}
	for _, q := range []string{qDeploys, qWriteStep, qBootStep, qBMCErrors, qBoot, qProvision, qNodes, qHeartbeat} {
		before[q] = query(t, base, q)
	}

	// A node whose BMC fails: manage asks it for the power state, gets
	// 503s, and returns the node to enroll with the error.
	bmc := newFailingBMC(t)
	var broken node
	if code, _ := call(t, "POST", "/v1/nodes", map[string]any{
		"name": "metrics-broken-bmc", "driver": "redfish",
		"driver_info": map[string]any{"redfish_address": bmc.URL, "redfish_system_id": "/redfish/v1/Systems/1",
			"redfish_connection_attempts": 1},
	}, &broken); code != 201 {
		t.Fatalf("create the node with the failing BMC: %d", code)
	}
	if code, _ := call(t, "PUT", "/v1/nodes/"+broken.UUID+"/states/provision", map[string]any{"target": "manage"}, nil); code != 202 {
		t.Fatalf("manage the node with the failing BMC: %d", code)
	}

	// Two simulated agents deploy at once.
	img := newImageServer(t, 4<<20)
	macs := []string{"52:54:00:cc:a0:01", "52:54:00:cc:a0:02"}
	var uuids []string
	for i, mac := range macs {
		uuid := enrollAgentNode(t, fmt.Sprintf("metrics-sim-%d", i), mac, img)
		startSimMachine(t, uuid, []string{mac}, sim.Config{})
		uuids = append(uuids, uuid)
	}
	var wg sync.WaitGroup
	errs := make([]error, len(uuids))
	for i, uuid := range uuids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, verb := range [][]string{{"manage", uuid, "--wait", "60"}, {"provide", uuid, "--wait", "120"}, {"deploy", uuid, "--wait", "180"}} {
				if _, stderr, err := baremetal(t, append([]string{"node"}, verb...)...); err != nil {
					errs[i] = fmt.Errorf("node %s: %v: %s", verb[0], err, stderr)
					return
				}
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatalf("%v\n%s", err, workerLog())
		}
	}
	b := waitState(t, broken.UUID, "enroll", time.Minute)
	if b.LastError == nil || !strings.Contains(*b.LastError, "503") && !strings.Contains(strings.ToLower(*b.LastError), "busy") {
		t.Logf("the failing BMC's node: last_error %v", deref(b.LastError))
	}
	// One request of the boot service that no scrape makes.
	if resp, err := http.Get("http://" + bootListen + "/health"); err != nil {
		t.Fatal(err)
	} else {
		resp.Body.Close()
	}
	deployed := time.Now()

	// What the test caused, as Prometheus scraped it.
	bmcRequests := float64(bmc.requests.Load())
	if bmcRequests == 0 {
		t.Fatal("the failing BMC was never called")
	}
	for q, delta := range map[string]float64{
		qDeploys:   2,
		qWriteStep: 2,
		qBootStep:  2,
		qBMCErrors: bmcRequests, // one observation per request: the node's connection attempts are 1
		qBoot:      1,
		qProvision: 7, // manage of the broken node; manage, provide and deploy of two
		qNodes:     2,
	} {
		waitQuery(t, base, q, before[q]+delta, 20*time.Second)
	}
	// The agents heartbeated every second (sim.Config's default here), and
	// the power sync (every 5 s in the lab) keeps running.
	if n := query(t, base, qHeartbeat) - before[qHeartbeat]; n < 4 {
		t.Errorf("agent heartbeat intervals observed: %v, want the agents' heartbeats", n)
	}
	if p99 := query(t, base, `histogram_quantile(0.99, sum by (le) (ironflow_agent_heartbeat_interval_seconds_bucket))`); p99 > labHeartbeatTimeout.Seconds() {
		t.Errorf("agent heartbeat interval p99 %vs, above the %s heartbeat timeout", p99, labHeartbeatTimeout)
	}
	if lag := query(t, base, `time() - max(ironflow_power_sync_last_run_timestamp_seconds)`); lag > 30 {
		t.Errorf("power sync lag %vs with a 5 s interval", lag)
	}
	// The step histogram's buckets hold the two writes (of the successful
	// steps, as the count above: a failed deploy of an earlier test in the
	// lab has its own series).
	if n := query(t, base, `sum(ironflow_step_duration_seconds_bucket{operation="deploy",step="deploy.write_image",outcome="ok",le="+Inf"})`); n != before[qWriteStep]+2 {
		t.Errorf("write_image +Inf bucket: %v, want %v", n, before[qWriteStep]+2)
	}
	t.Logf("Prometheus read the deploys (2), their steps, %v BMC errors and the boot service's answer %s after the deploys",
		bmcRequests, time.Since(deployed).Round(time.Millisecond))

	// Every process's scrape passes Prometheus's linter.
	api := scrapeAndLint(t, "ironflow api", labAPIMetrics)
	worker := scrapeAndLint(t, "ironflow worker", labWorkerMetrics)
	scrapeAndLint(t, "ironflow pxe", pxeMetrics)
	for _, want := range []string{"ironflow_nodes{", "ironflow_api_request_duration_seconds_bucket{", "ironflow_build_info{"} {
		if !strings.Contains(api, want) {
			t.Errorf("the API's scrape has no %s", want)
		}
	}
	for _, want := range []string{"temporal_workflow_completed_total{", "ironflow_bmc_call_duration_seconds_bucket{", "ironflow_power_sync_last_run_timestamp_seconds"} {
		if !strings.Contains(worker, want) {
			t.Errorf("the worker's scrape has no %s", want)
		}
	}

	// The alert rules load and evaluate.
	resp, err := http.Get(base + "/api/v1/rules")
	if err != nil {
		t.Fatal(err)
	}
	var rules struct {
		Data struct {
			Groups []struct {
				Rules []struct{ Name, Health, LastError string }
			}
		}
	}
	_ = json.NewDecoder(resp.Body).Decode(&rules)
	resp.Body.Close()
	loaded := 0
	for _, g := range rules.Data.Groups {
		for _, r := range g.Rules {
			loaded++
			if r.Health == "err" {
				t.Errorf("alert %s: %s", r.Name, r.LastError)
			}
		}
	}
	if loaded != 9 {
		t.Errorf("Prometheus loaded %d alert rules, want 9", loaded)
	}

	// A worker whose --metrics-listen is taken does not start.
	p, err := lab.Spawn("ironflow-worker-metrics-taken", append(lab.WorkerArgs(), "--metrics-listen", labAPIMetrics))
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.Exited():
	case <-time.After(30 * time.Second):
		p.Kill()
		t.Fatalf("a worker on a taken metrics address still runs:\n%s", p.Tail(2000))
	}
	if log := p.Tail(2000); p.Err() == nil || !strings.Contains(log, "metrics: listen on "+labAPIMetrics+": the address is already in use") ||
		!strings.Contains(log, "--metrics-listen") {
		t.Errorf("worker on a taken metrics address: %v\n%s", p.Err(), log)
	}
	t.Logf("test took %s", time.Since(start).Round(time.Millisecond))
}
