package main

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"
)

// The obs part runs only when named, with its own flags.
func TestObsFlags(t *testing.T) {
	cfg, err := parseFlags(nil)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.has("obs") {
		t.Errorf("the default parts %v include obs; it runs only when named", cfg.parts)
	}
	if cfg.obsRounds != DefaultObsRounds || cfg.obsNodes != DefaultObsNodes || cfg.obsScrapes != DefaultObsScrapes || cfg.obsScrapeGap != DefaultObsScrapeGap {
		t.Errorf("defaults: %d rounds, %d nodes, %d scrapes, gap %s", cfg.obsRounds, cfg.obsNodes, cfg.obsScrapes, cfg.obsScrapeGap)
	}
	cfg, err = parseFlags([]string{"-parts", "obs", "-obs-rounds", "7", "-obs-nodes", "2000", "-obs-scrapes", "10", "-obs-scrape-gap", "1s"})
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.has("obs") || !cfg.needsStack() {
		t.Errorf("-parts obs: has %v, needs the stack %v", cfg.has("obs"), cfg.needsStack())
	}
	if cfg.obsRounds != 7 || cfg.obsNodes != 2000 || cfg.obsScrapes != 10 || cfg.obsScrapeGap != time.Second {
		t.Errorf("parsed: %d rounds, %d nodes, %d scrapes, gap %s", cfg.obsRounds, cfg.obsNodes, cfg.obsScrapes, cfg.obsScrapeGap)
	}
	for _, bad := range [][]string{{"-obs-rounds", "0"}, {"-obs-nodes", "-1"}, {"-obs-scrapes", "0"}, {"-obs-scrape-gap", "0s"}} {
		if _, err := parseFlags(bad); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}

// Off gives every process no metrics endpoint and no exporter; on gives
// both, after the stack's own flags (the later flag wins).
func TestObsArgs(t *testing.T) {
	if got, want := obsArgs(false, "127.0.0.1:1", "127.0.0.1:2"), []string{"--metrics-listen", "", "--otel-endpoint", ""}; !slices.Equal(got, want) {
		t.Errorf("off: %q, want %q", got, want)
	}
	if got, want := obsArgs(true, "127.0.0.1:1", "127.0.0.1:2"), []string{"--metrics-listen", "127.0.0.1:1", "--otel-endpoint", "127.0.0.1:2"}; !slices.Equal(got, want) {
		t.Errorf("on: %q, want %q", got, want)
	}
}

// scrapeCounter sums one metric's samples, not those of metrics whose
// names start with it.
func TestScrapeCounter(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprint(w, `# HELP ironflow_nodes nodes by state
# TYPE ironflow_nodes gauge
ironflow_nodes{conductor_group="",provision_state="active"} 7
ironflow_nodes{conductor_group="rack1",provision_state="available"} 3
ironflow_nodes_maintenance{conductor_group=""} 100
ironflow_trace_spans_dropped_total{reason="queue_full"} 2
ironflow_trace_spans_dropped_total 5
`)
	}))
	defer srv.Close()
	for name, want := range map[string]float64{"ironflow_nodes": 10, "ironflow_trace_spans_dropped_total": 7, "ironflow_absent": 0} {
		got, err := scrapeCounter(context.Background(), srv.Client(), srv.URL, name)
		if err != nil || got != want {
			t.Errorf("%s: %v, %v; want %v", name, got, err, want)
		}
	}
}

// The rows compare medians, on against off: a dearer "on" shows as a
// ratio below 1 for both the rate and the CPU per deploy.
func TestObsDeployRows(t *testing.T) {
	trial := func(rate float64, cpuMS int) deployTrial {
		return deployTrial{rate: rate, active: 10, used: usage{WorkerCPU: time.Duration(cpuMS*10) * time.Millisecond}}
	}
	off := &obsSide{name: "off", trials: []deployTrial{trial(100, 20), trial(90, 22), trial(200, 10)}, spans: []float64{0, 0, 0}, dropped: []float64{0, 0, 0}}
	on := &obsSide{name: "on", on: true, trials: []deployTrial{trial(80, 25), trial(50, 30), trial(90, 24)}, spans: []float64{110, 120, 100}, dropped: []float64{0, 1, 0}}
	off.histEvents, off.histBytes = []float64{60, 60, 60}, []float64{30000, 30100, 29900}
	on.histEvents, on.histBytes = []float64{60, 60, 60}, []float64{33000, 33100, 32900}
	rows := obsDeployRows(config{nodes: 10, clients: 4}, off, on)
	if len(rows) != 9 {
		t.Fatalf("%d rows", len(rows))
	}
	if r := rows[0]; r.Value != 80 || *r.BaseVal != 100 || *r.Ratio != 0.8 {
		t.Errorf("rate: %v against %v, ratio %v; want 80 against 100, 0.8", r.Value, *r.BaseVal, *r.Ratio)
	}
	if r := rows[1]; r.Value != 25 || *r.BaseVal != 20 || *r.Ratio != 0.8 {
		t.Errorf("CPU per deploy: %v against %v, ratio %v; want 25 against 20, 0.8", r.Value, *r.BaseVal, *r.Ratio)
	}
	if r := rows[2]; r.Value != 11 {
		t.Errorf("spans per deploy: %v, want 11", r.Value)
	}
}

// Each round's cost is read against its own pair: the rate's 1 − on/off,
// the CPU's on/off − 1, so that a dearer "on" is a positive cost of both;
// the split by process shares the round's whole CPU off.
func TestObsCostRows(t *testing.T) {
	trial := func(rate float64, apiMS, temporalMS int) deployTrial {
		return deployTrial{rate: rate, active: 10, used: usage{APICPU: time.Duration(apiMS*10) * time.Millisecond, TemporalCPU: time.Duration(temporalMS*10) * time.Millisecond}}
	}
	off := &obsSide{name: "off", trials: []deployTrial{trial(100, 10, 10), trial(50, 10, 30)}}
	on := &obsSide{name: "on", on: true, trials: []deployTrial{trial(80, 11, 10), trial(60, 13, 27)}, spans: []float64{1, 1}, dropped: []float64{0, 0}}
	rows := obsDeployRows(config{nodes: 10, clients: 4}, off, on)
	want := map[string][]string{
		"deploy rate: what":                     {"+20.0", "-20.0"}, // 1 − 80/100, 1 − 60/50
		"CPU per deploy (api + worker":          {"+5.0", "+0.0"},   // 21/20 − 1, 40/40 − 1
		"CPU per deploy of ironflow's":          {"+5.0", "+7.5"},   // (11−10)/20, (13−10)/40
		"CPU per deploy of the Temporal server": {"+0.0", "-7.5"},   // (10−10)/20, (27−30)/40
	}
	for prefix, per := range want {
		var r *Row
		for i := range rows {
			if strings.HasPrefix(rows[i].Measure, prefix) {
				r = &rows[i]
			}
		}
		if r == nil {
			t.Errorf("no row %q", prefix)
			continue
		}
		if w := "per round: " + strings.Join(per, ", ") + " %"; !strings.Contains(r.Note, w) {
			t.Errorf("%s: note %q, want it to hold %q", prefix, r.Note, w)
		}
		// Two rounds are too few for an interval: never a verdict of met.
		if !strings.Contains(r.Note, "not shown (too few rounds") {
			t.Errorf("%s: note %q gives a verdict on two rounds", prefix, r.Note)
		}
	}
}

// The median's interval is the sign test's: with 6 values the whole range
// (96.9 %), with 12 the 3rd to the 10th (96.1 %), with fewer than 6 none.
func TestMedianCI(t *testing.T) {
	seq := func(n int) []float64 {
		xs := make([]float64, n)
		for i := range xs {
			xs[i] = float64(n - i) // descending: the interval is of the sorted values
		}
		return xs
	}
	if _, _, _, ok := medianCI(seq(5)); ok {
		t.Error("5 values gave an interval")
	}
	for _, c := range []struct {
		n      int
		lo, hi float64
		cov    float64
	}{{6, 1, 6, 0.96875}, {12, 3, 10, 0.9614}, {15, 4, 12, 0.9648}} {
		lo, hi, cov, ok := medianCI(seq(c.n))
		if !ok || lo != c.lo || hi != c.hi || math.Abs(cov-c.cov) > 0.0001 {
			t.Errorf("%d values: %v to %v (%.4f, %v); want %v to %v (%.4f)", c.n, lo, hi, cov, ok, c.lo, c.hi, c.cov)
		}
	}
}

// The verdict is met only when the whole interval lies under the goal,
// missed only when it lies over it.
func TestObsVerdict(t *testing.T) {
	for _, c := range []struct {
		lo, hi float64
		want   string
	}{{-0.02, 0.029, "met"}, {0.031, 0.1, "missed"}, {-0.01, 0.05, "not shown"}, {0.01, 0.03, "not shown"}} {
		if got := obsVerdict(c.lo, c.hi, true); !strings.HasPrefix(got, c.want) {
			t.Errorf("%v to %v: %q, want %q", c.lo, c.hi, got, c.want)
		}
	}
	if got := obsVerdict(-1, -1, false); !strings.HasPrefix(got, "not shown") {
		t.Errorf("no interval: %q", got)
	}
}

// A rate ratio's rounds are the base's time over the measured one's; the
// verdict is met only when the whole interval is at or above the goal.
func TestRoundRatios(t *testing.T) {
	secs := func(xs ...float64) []time.Duration {
		var ds []time.Duration
		for _, x := range xs {
			ds = append(ds, time.Duration(x*float64(time.Second)))
		}
		return ds
	}
	base := secs(1, 1, 1, 1, 1, 1)
	for _, c := range []struct {
		measured []time.Duration
		want     []string
	}{
		{secs(1, 1, 1.05, 1.1, 1, 1), []string{"round ratios 1.00, 1.00, 0.95, 0.91, 1.00, 1.00", "median 1.00", "interval 0.91 to 1.00", ": met"}},
		{secs(1.2, 1.25, 1.3, 1.2, 1.25, 1.3), []string{"median 0.80", ": missed"}},
		{secs(1, 1.25, 1, 1.25, 1, 1.25), []string{"not shown (the interval holds the goal)"}},
		{secs(1, 1), []string{"not shown (too few rounds"}},
	} {
		got := roundRatios(base[:len(c.measured)], c.measured, 0.9)
		for _, w := range c.want {
			if !strings.Contains(got, w) {
				t.Errorf("%q lacks %q", got, w)
			}
		}
	}
}
