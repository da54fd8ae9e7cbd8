package metrics

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/ironflow/ironflow/internal/testkit/promcheck"
)

func gather(t *testing.T, g prometheus.Gatherer) map[string]*dto.MetricFamily {
	t.Helper()
	fams, err := g.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*dto.MetricFamily{}
	for _, f := range fams {
		out[f.GetName()] = f
	}
	return out
}

func labels(m *dto.Metric) map[string]string {
	l := map[string]string{}
	for _, p := range m.GetLabel() {
		l[p.GetName()] = p.GetValue()
	}
	return l
}

// The SDK's counters, timers and gauges, tagged at will, come out as
// Prometheus counters (_total), histograms in seconds and gauges, one
// series per tag set.
func TestTemporalHandlerTurnsSDKMetricsIntoPrometheusSeries(t *testing.T) {
	reg := prometheus.NewRegistry()
	h := newTemporalHandler(reg, map[string]string{"ironflow_step_duration_seconds": "steps"})
	wf := h.WithTags(map[string]string{"workflow_type": "DeployNode", "task_queue": "ironflow"})
	wf.Counter("temporal_workflow_completed").Inc(2)
	wf.Counter("temporal_workflow_completed").Inc(1)
	h.WithTags(map[string]string{"workflow_type": "CleanNode", "task_queue": "ironflow"}).Counter("temporal_workflow_completed").Inc(1)
	h.Gauge("temporal_worker_task_slots_available").Update(7)
	step := wf.WithTags(map[string]string{"step": "deploy.write_image", "operation": "deploy"})
	step.Timer("ironflow_step_duration").Record(90 * time.Second)
	step.Timer("ironflow_step_duration").Record(2 * time.Second)
	h.Timer("temporal_request_latency").Record(30 * time.Millisecond)

	fams := gather(t, reg)
	c := fams["temporal_workflow_completed_total"]
	if c == nil || c.GetType() != dto.MetricType_COUNTER || len(c.GetMetric()) != 2 {
		t.Fatalf("temporal_workflow_completed_total: %v", c)
	}
	for _, m := range c.GetMetric() {
		want := map[string]float64{"DeployNode": 3, "CleanNode": 1}[labels(m)["workflow_type"]]
		if m.GetCounter().GetValue() != want {
			t.Errorf("%v: %v, want %v", labels(m), m.GetCounter().GetValue(), want)
		}
	}
	if g := fams["temporal_worker_task_slots_available"]; g == nil || g.GetMetric()[0].GetGauge().GetValue() != 7 {
		t.Errorf("gauge: %v", g)
	}
	s := fams["ironflow_step_duration_seconds"]
	if s == nil || s.GetType() != dto.MetricType_HISTOGRAM || s.GetHelp() != "steps" {
		t.Fatalf("ironflow_step_duration_seconds: %v", s)
	}
	hist := s.GetMetric()[0].GetHistogram()
	if hist.GetSampleCount() != 2 || hist.GetSampleSum() != 92 {
		t.Errorf("step histogram: count %d sum %v", hist.GetSampleCount(), hist.GetSampleSum())
	}
	if l := labels(s.GetMetric()[0]); l["step"] != "deploy.write_image" || l["workflow_type"] != "DeployNode" {
		t.Errorf("step labels: %v", l)
	}
	for _, b := range hist.GetBucket() {
		want := uint64(0)
		switch {
		case b.GetUpperBound() >= 90:
			want = 2
		case b.GetUpperBound() >= 2:
			want = 1
		}
		if b.GetCumulativeCount() != want {
			t.Errorf("bucket le=%v: %d, want %d", b.GetUpperBound(), b.GetCumulativeCount(), want)
		}
	}
	if r := fams["temporal_request_latency_seconds"]; r == nil || len(r.GetMetric()[0].GetHistogram().GetBucket()) != len(temporalBuckets) {
		t.Errorf("SDK timer: %v", r)
	}
	promtoolCheck(t, reg)
}

// promtoolCheck runs `promtool check metrics` (Debian's prometheus) on
// reg's exposition, as Prometheus's own linter sees a scrape.
func promtoolCheck(t *testing.T, reg prometheus.Gatherer) {
	t.Helper()
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	enc := expfmt.NewEncoder(&buf, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, f := range fams {
		if err := enc.Encode(f); err != nil {
			t.Fatal(err)
		}
	}
	switch err := promcheck.Lint(buf.Bytes()); {
	case errors.Is(err, promcheck.ErrNoPromtool):
		t.Skip("SKIPPED: " + err.Error())
	case err != nil:
		t.Fatalf("%v\n--- exposition:\n%s", err, buf.String())
	}
}

// Every series of the process's registry passes Prometheus's linter, with
// each vector given a value (an unused vector exports nothing).
func TestRegistryPassesPromtool(t *testing.T) {
	APIRequests.WithLabelValues("/v1/nodes", "GET", "200").Inc()
	APIRequestDuration.WithLabelValues("/v1/nodes", "GET").Observe(0.01)
	AgentHeartbeatInterval.Observe(12)
	ObserveBMC("redfish", "dell", "GET Systems", OutcomeOK, time.Now())
	PowerSyncNodes.WithLabelValues("", "in_sync").Inc()
	PowerSyncLastRun.WithLabelValues("").SetToCurrentTime()
	PowerSyncBatchDuration.WithLabelValues("").Observe(1)
	ReconcileRepairs.WithLabelValues("", "fail").Inc()
	ImageCacheRequests.WithLabelValues("hit").Inc()
	ImageCacheConversions.WithLabelValues(OutcomeOK).Inc()
	DHCPReplies.WithLabelValues("offer").Inc()
	TFTPTransfers.WithLabelValues("ok").Inc()
	BootHTTPRequests.WithLabelValues("images", "200").Inc()
	BootHTTPSentBytes.WithLabelValues("images").Add(10)
	promtoolCheck(t, Registry)
}

func TestErrorOutcome(t *testing.T) {
	unreachable := errors.New("unreachable")
	classes := []ErrorClass{{OutcomeUnreachable, unreachable}}
	for _, c := range []struct {
		err  error
		want string
	}{
		{nil, OutcomeOK},
		{unreachable, OutcomeUnreachable},
		{errors.Join(errors.New("power on"), unreachable), OutcomeUnreachable},
		{errors.New("other"), OutcomeError},
	} {
		if got := ErrorOutcome(c.err, classes); got != c.want {
			t.Errorf("ErrorOutcome(%v) = %q, want %q", c.err, got, c.want)
		}
	}
}

// The fleet's counts by state and group, by hardware health (every health
// of a group, 0 included; a value outside Ironic's three is unknown), its
// unhealthy nodes by reason
// and the nodes waiting for an operator, from the store's grouped rows.
func TestNodeCollectorCountsTheFleet(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(&NodeCollector{timeout: time.Second, count: func(context.Context) ([]NodeGroup, error) {
		return []NodeGroup{
			{ProvisionState: "active", ConductorGroup: "", Health: "OK", Count: 5},
			{ProvisionState: "active", ConductorGroup: "", Maintenance: true, Fault: "power failure", Count: 2},
			{ProvisionState: "deploy failed", ConductorGroup: "rack2", Failed: true, Health: "Critical", Count: 3},
			{ProvisionState: "available", ConductorGroup: "rack2", Health: "Warning", Count: 4},
			{ProvisionState: "available", ConductorGroup: "rack2", Health: "bogus", Count: 1},
		}, nil
	}})
	want := `
# HELP ironflow_nodes Nodes by provision state and conductor group (the default group is "").
# TYPE ironflow_nodes gauge
ironflow_nodes{conductor_group="",provision_state="active"} 7
ironflow_nodes{conductor_group="rack2",provision_state="available"} 5
ironflow_nodes{conductor_group="rack2",provision_state="deploy failed"} 3
# HELP ironflow_nodes_health Nodes by hardware health, as their BMC last reported it to the power sync (OK, Warning, Critical; unknown when the driver reads none), and conductor group.
# TYPE ironflow_nodes_health gauge
ironflow_nodes_health{conductor_group="",health="Critical"} 0
ironflow_nodes_health{conductor_group="",health="OK"} 5
ironflow_nodes_health{conductor_group="",health="Warning"} 0
ironflow_nodes_health{conductor_group="",health="unknown"} 2
ironflow_nodes_health{conductor_group="rack2",health="Critical"} 3
ironflow_nodes_health{conductor_group="rack2",health="OK"} 0
ironflow_nodes_health{conductor_group="rack2",health="Warning"} 4
ironflow_nodes_health{conductor_group="rack2",health="unknown"} 1
`
	if err := testutil.GatherAndCompare(reg, strings.NewReader(want), "ironflow_nodes", "ironflow_nodes_health"); err != nil {
		t.Error(err)
	}
	fams := gather(t, reg)
	got := map[string]float64{}
	for _, name := range []string{"ironflow_nodes_unhealthy", "ironflow_nodes_waiting_for_operator", "ironflow_nodes_maintenance"} {
		for _, m := range fams[name].GetMetric() {
			l := labels(m)
			got[name+"/"+l["conductor_group"]+"/"+l["reason"]] = m.GetGauge().GetValue()
		}
	}
	for k, v := range map[string]float64{
		"ironflow_nodes_unhealthy//power failure":     2,
		"ironflow_nodes_unhealthy/rack2/failed_state": 3,
		"ironflow_nodes_waiting_for_operator/rack2/":  3,
		"ironflow_nodes_waiting_for_operator//":       0,
		"ironflow_nodes_maintenance//":                2,
		"ironflow_nodes_maintenance/rack2/":           0,
	} {
		if got[k] != v {
			t.Errorf("%s = %v, want %v (all: %v)", k, got[k], v, got)
		}
	}
	promtoolCheck(t, reg)
}

// A failed count is a 0 on ironflow_nodes_count_up, not a failed scrape.
func TestNodeCollectorReportsAFailedCount(t *testing.T) {
	reg := prometheus.NewRegistry()
	reg.MustRegister(&NodeCollector{timeout: time.Second, count: func(context.Context) ([]NodeGroup, error) {
		return nil, errors.New("database down")
	}})
	fams := gather(t, reg)
	if up := fams["ironflow_nodes_count_up"]; up == nil || up.GetMetric()[0].GetGauge().GetValue() != 0 {
		t.Errorf("count_up: %v", up)
	}
	if fams["ironflow_nodes"] != nil {
		t.Error("ironflow_nodes exported without a count")
	}
}

// A taken --metrics-listen address fails with a message naming the flag.
func TestServeRefusesATakenAddress(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, err = Serve(context.Background(), l.Addr().String(), nil)
	if err == nil || !strings.Contains(err.Error(), "already in use") || !strings.Contains(err.Error(), "--metrics-listen") {
		t.Fatalf("Serve on a taken address: %v", err)
	}
}

// Serve answers /metrics in the text format; an empty address serves
// nothing.
func TestServeServesTheRegistry(t *testing.T) {
	if addr, err := Serve(context.Background(), "", nil); addr != "" || err != nil {
		t.Fatalf("empty address: %q, %v", addr, err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	addr, err := Serve(ctx, "127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(resp.Body)
	if resp.StatusCode != 200 || !strings.Contains(buf.String(), "go_goroutines") {
		t.Fatalf("GET /metrics: %d\n%s", resp.StatusCode, buf.String())
	}
}
