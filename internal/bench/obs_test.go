package main

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
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
