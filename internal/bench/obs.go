package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/ironflow/ironflow/embedded"
	"github.com/ironflow/ironflow/internal/testkit/otlpsink"
)

// The obs part's defaults (docs/benchmarks.md, "Metrics and tracing";
// docs/metrics.md, "Cost").
const (
	// DefaultObsRounds: rounds of one trial with metrics and tracing off
	// and one with them on, the order alternating by round.
	DefaultObsRounds = 12
	// DefaultObsNodes is the fleet the scrape measure seeds.
	DefaultObsNodes = 10000
	// DefaultObsScrapes is how many scrapes of each endpoint the scrape
	// measure times (CPU ticks are 10 ms: many scrapes make the mean).
	DefaultObsScrapes = 60
	// DefaultObsScrapeGap is the pause between two scrapes, in which the
	// processes' background CPU is read.
	DefaultObsScrapeGap = 250 * time.Millisecond
	// obsScrapeInterval is the cadence the goal names: Prometheus scraping
	// every process every 15 s.
	obsScrapeInterval = 15 * time.Second
	// obsFlushWait lets the batch span processors export what a trial
	// recorded before its spans are counted (they export every 5 s).
	obsFlushWait = 6 * time.Second
)

// obsSide is one setting of the obs part: metrics and tracing off or on.
type obsSide struct {
	name   string
	on     bool
	trials []deployTrial
	// spans are the spans the receiver got per trial; dropped the
	// processes' ironflow_trace_spans_dropped_total per trial.
	spans, dropped []float64
	// histEvents and histBytes are the mean history of the trial's deploy
	// workflows, in events and in bytes.
	histEvents, histBytes []float64
}

// obsArgs are the flags of one ironflow process of a side: no metrics
// endpoint and no exporter, or a metrics endpoint on loopback and the
// bench's OTLP receiver.
func obsArgs(on bool, metricsAddr, otelAddr string) []string {
	if !on {
		return []string{"--metrics-listen", "", "--otel-endpoint", ""}
	}
	return []string{"--metrics-listen", metricsAddr, "--otel-endpoint", otelAddr}
}

// freeLoopbackAddr is a free 127.0.0.1 port, so that the bench knows
// where a process it starts serves its metrics.
func freeLoopbackAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// obsParts are the api's and the worker's metrics addresses of a side
// ("" when off).
type obsParts struct{ apiMetrics, workerMetrics string }

// startObsParts stops the stack's api and worker and starts them again
// with one side's flags (the later of a repeated flag wins).
func startObsParts(ctx context.Context, st *stack, on bool, otelAddr string) (obsParts, error) {
	var p obsParts
	for _, proc := range []**embedded.Process{&st.Worker, &st.API} {
		if *proc != nil {
			(*proc).Stop(devstackStopGrace)
			*proc = nil
		}
	}
	if on {
		var err error
		if p.apiMetrics, err = freeLoopbackAddr(); err != nil {
			return p, err
		}
		if p.workerMetrics, err = freeLoopbackAddr(); err != nil {
			return p, err
		}
	}
	api, err := st.Spawn("ironflow-api", append(st.APIArgs(st.APIListen), obsArgs(on, p.apiMetrics, otelAddr)...))
	if err != nil {
		return p, err
	}
	st.API = api
	if err := st.WaitHTTP(ctx, st.APIURL+"/", api); err != nil {
		return p, err
	}
	w, err := st.Spawn("ironflow-worker", append(st.WorkerArgs(), obsArgs(on, p.workerMetrics, otelAddr)...))
	if err != nil {
		return p, err
	}
	st.Worker = w
	if on {
		if err := st.WaitHTTP(ctx, "http://"+p.apiMetrics+"/metrics", api); err != nil {
			return p, err
		}
		if err := st.WaitHTTP(ctx, "http://"+p.workerMetrics+"/metrics", w); err != nil {
			return p, err
		}
	}
	return p, nil
}

// devstackStopGrace is how long a part gets between SIGTERM and SIGKILL
// (the stack's own default).
const devstackStopGrace = 10 * time.Second

// benchObs measures what metrics and tracing cost: the control part's
// fake-hardware deploys with them off and on in alternating rounds
// (medians of the deploy rate and of the CPU per deploy of every process),
// then a fleet of -obs-nodes seeded nodes scraped at every endpoint, the CPU
// each scrape costs every process read from /proc/<pid>/stat around it,
// as a share of one core at one scrape per 15 s.
func benchObs(ctx context.Context, cfg config, st *stack, log *slog.Logger) ([]Row, error) {
	if st.Stack == nil {
		return nil, errors.New("the obs part needs the dev server's stack")
	}
	sink, err := otlpsink.Start()
	if err != nil {
		return nil, fmt.Errorf("start the OTLP receiver: %w", err)
	}
	defer sink.Stop()
	defer func() {
		// Leave the stack as the other parts expect it.
		if err := st.restart(context.WithoutCancel(ctx)); err != nil {
			log.Warn("restart the stack after the obs part", "err", err)
		}
	}()
	mode := deployMode{part: "obs", deployInterface: "fake"}
	if _, err := startObsParts(ctx, st, false, ""); err != nil {
		return nil, err
	}
	nodes, err := enrollNodes(ctx, st, cfg.nodes, mode, cfg.clients)
	if err != nil {
		return nil, err
	}
	if err := settle(ctx, st); err != nil {
		return nil, err
	}
	// One trial unmeasured first: the first deploys of fresh nodes on a
	// fresh stack run slower than any later (caches, the server's first
	// tasks), and would weigh on whichever side ran first.
	if err := redeployable(ctx, st, nodes, cfg, mode); err != nil {
		return nil, err
	}
	if _, err := runDeployTrial(ctx, st, nodes, cfg, nil); err != nil {
		return nil, fmt.Errorf("warm-up trial: %w", err)
	}
	off, on := &obsSide{name: "off"}, &obsSide{name: "on", on: true}
	for round := range cfg.obsRounds {
		var sides []func() error
		for _, side := range []*obsSide{off, on} {
			sides = append(sides, func() error {
				parts, err := startObsParts(ctx, st, side.on, sink.Addr())
				if err != nil {
					return fmt.Errorf("metrics and tracing %s: %w", side.name, err)
				}
				if err := redeployable(ctx, st, nodes, cfg, mode); err != nil {
					return fmt.Errorf("metrics and tracing %s: %w", side.name, err)
				}
				if err := settle(ctx, st); err != nil {
					return err
				}
				// The undeploys' spans out before the trial (both sides wait
				// alike): neither their export's CPU nor their count is the
				// trial's.
				if err := sleepCtx(ctx, obsFlushWait); err != nil {
					return err
				}
				spansBefore := len(sink.Spans())
				trialStart := time.Now()
				tr, err := runDeployTrial(ctx, st, nodes, cfg, nil)
				if err != nil {
					return fmt.Errorf("metrics and tracing %s: %w", side.name, err)
				}
				if tr.failed > 0 {
					return fmt.Errorf("metrics and tracing %s: %d of %d deploys not active (first: %s)", side.name, tr.failed, len(nodes), tr.firstFailure)
				}
				// The spans of the trial, once the exporters' batches went out.
				if err := sleepCtx(ctx, obsFlushWait); err != nil {
					return err
				}
				spans := float64(len(sink.Spans()) - spansBefore)
				var dropped float64
				if side.on {
					for _, a := range []string{parts.apiMetrics, parts.workerMetrics} {
						d, err := scrapeCounter(ctx, st.http, "http://"+a+"/metrics", "ironflow_trace_spans_dropped_total")
						if err != nil {
							return err
						}
						dropped += d
					}
					if spans == 0 {
						return errors.New("metrics and tracing on: the OTLP receiver got no span of the trial's deploys")
					}
				} else if spans != 0 {
					return fmt.Errorf("metrics and tracing off: the OTLP receiver got %.0f spans", spans)
				}
				events, bytes, listed, err := historyPerDeploy(ctx, st, trialStart)
				if err != nil {
					return fmt.Errorf("metrics and tracing %s: %w", side.name, err)
				}
				if listed != len(nodes) {
					return fmt.Errorf("metrics and tracing %s: %d deploy workflows listed for %d deploys", side.name, listed, len(nodes))
				}
				n := float64(len(nodes))
				log.Info("obs trial", "metrics_and_tracing", side.name, "round", round+1, "rate", fmt.Sprintf("%.2f/s", tr.rate),
					"cpu_per_deploy_ms", fmt.Sprintf("%.1f", cpuPerDeploy(tr)), "spans", spans, "dropped", dropped,
					"api_ms", fmt.Sprintf("%.1f", ms(tr.used.APICPU)/n), "worker_ms", fmt.Sprintf("%.1f", ms(tr.used.WorkerCPU)/n),
					"temporal_ms", fmt.Sprintf("%.1f", ms(tr.used.TemporalCPU)/n), "postgres_ms", fmt.Sprintf("%.1f", ms(tr.used.PostgresCPU)/n),
					"history_events", fmt.Sprintf("%.1f", events), "history_bytes", fmt.Sprintf("%.0f", bytes))
				side.trials = append(side.trials, tr)
				side.spans = append(side.spans, spans)
				side.dropped = append(side.dropped, dropped)
				side.histEvents = append(side.histEvents, events)
				side.histBytes = append(side.histBytes, bytes)
				return nil
			})
		}
		if err := rotate(round, sides...); err != nil {
			return nil, fmt.Errorf("round %d: %w", round+1, err)
		}
	}
	rows := obsDeployRows(cfg, off, on)

	scrape, err := benchObsScrape(ctx, cfg, st, sink.Addr(), len(nodes), log)
	rows = append(rows, scrape...)
	return rows, err
}

func sleepCtx(ctx context.Context, d time.Duration) error {
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-time.After(d):
		return nil
	}
}

// obsDeployRows are the deploy measures' rows: on against off, medians,
// every round's pair in the note. The goal: on costs less than 3 %.
func obsDeployRows(cfg config, off, on *obsSide) []Row {
	pick := func(s *obsSide, f func(deployTrial) float64) (float64, []float64) {
		var xs []float64
		for _, tr := range s.trials {
			xs = append(xs, f(tr))
		}
		return median(xs), xs
	}
	pairs := func(a, b []float64, format string) string {
		var ps []string
		for i := range a {
			ps = append(ps, fmt.Sprintf(format+"/"+format, a[i], b[i]))
		}
		return strings.Join(ps, ", ")
	}
	label := fmt.Sprintf("%d nodes, deploy_interface fake, %d request goroutines; median of %d rounds alternating off and on", cfg.nodes, cfg.clients, len(on.trials))
	rate := func(tr deployTrial) float64 { return tr.rate }
	onRate, onRates := pick(on, rate)
	offRate, offRates := pick(off, rate)
	onCPU, onCPUs := pick(on, cpuPerDeploy)
	offCPU, offCPUs := pick(off, cpuPerDeploy)
	// Where the CPU goes: each process's median per deploy, on/off.
	perProc := func(f func(usage) time.Duration) string {
		m := func(s *obsSide) float64 {
			x, _ := pick(s, func(tr deployTrial) float64 {
				if n := tr.active + tr.failed; n > 0 {
					return ms(f(tr.used)) / float64(n)
				}
				return 0
			})
			return x
		}
		return fmt.Sprintf("%.1f/%.1f", m(on), m(off))
	}
	split := fmt.Sprintf("medians on/off per process: api %s, worker %s, Temporal %s, PostgreSQL %s ms",
		perProc(func(u usage) time.Duration { return u.APICPU }), perProc(func(u usage) time.Duration { return u.WorkerCPU }),
		perProc(func(u usage) time.Duration { return u.TemporalCPU }), perProc(func(u usage) time.Duration { return u.PostgresCPU }))
	// Per round: what on costs over off, the rate's and the CPU's, the
	// CPU's split into ironflow's processes (api + worker, where the
	// metrics and spans are made) and the Temporal server and PostgreSQL
	// (which only store and send the span context), each as a share of
	// the round's whole CPU per deploy off.
	split2 := func(f func(usage) time.Duration) []float64 {
		var cs []float64
		for i := range min(len(on.trials), len(off.trials)) {
			a, b := on.trials[i], off.trials[i]
			na, nb := float64(a.active+a.failed), float64(b.active+b.failed)
			if na == 0 || nb == 0 || cpuPerDeploy(b) == 0 {
				continue
			}
			cs = append(cs, (ms(f(a.used))/na-ms(f(b.used))/nb)/cpuPerDeploy(b))
		}
		return cs
	}
	costRows := []Row{
		costRow("deploy rate: what metrics and tracing on cost, median of the rounds' 1 − on/off", costs(onRates, offRates, false)),
		costRow("CPU per deploy (api + worker + Temporal + PostgreSQL): what on costs, median of the rounds' on/off − 1", costs(onCPUs, offCPUs, true)),
		costRow("CPU per deploy of ironflow's processes (api + worker): what on costs, as a share of the round's whole CPU per deploy off",
			split2(func(u usage) time.Duration { return u.APICPU + u.WorkerCPU })),
		costRow("CPU per deploy of the Temporal server and PostgreSQL: what on costs, as a share of the round's whole CPU per deploy off",
			split2(func(u usage) time.Duration { return u.TemporalCPU + u.PostgresCPU })),
		row("obs", "history of one deploy workflow, metrics and tracing on (mean events, from the Temporal server's visibility)", median(on.histEvents), "events").
			vs("metrics and tracing off", median(off.histEvents)).
			note("the same events either way: tracing records no command"),
		lowerBetter(row("obs", "history of one deploy workflow, metrics and tracing on (mean bytes, from the Temporal server's visibility)", median(on.histBytes), "bytes"),
			"metrics and tracing off", median(off.histBytes)).
			note("tracing's span context in the headers of the workflow's start and of its activities; per round on/off: " + pairs(on.histBytes, off.histBytes, "%.0f")),
	}
	var perDeploy []float64
	for i, tr := range on.trials {
		if n := tr.active + tr.failed; n > 0 {
			perDeploy = append(perDeploy, on.spans[i]/float64(n))
		}
	}
	return append([]Row{
		row("obs", "deploy rate, metrics and tracing on ("+label+")", onRate, "nodes/s").
			vs("metrics and tracing off", offRate).
			note("goal: ratio ≥ 0.97; on/off per round: " + pairs(onRates, offRates, "%.1f") + " nodes/s"),
		lowerBetter(row("obs", "CPU per deploy, metrics and tracing on (api + worker + Temporal + PostgreSQL)", onCPU, "ms"),
			"metrics and tracing off", offCPU).
			note("goal: ratio ≥ 0.97; on/off per round: " + pairs(onCPUs, offCPUs, "%.1f") + " ms; " + split),
		row("obs", "spans exported per deploy, metrics and tracing on (received by the bench's OTLP receiver)", median(perDeploy), "spans").
			note(fmt.Sprintf("per round: %s; dropped (ironflow_trace_spans_dropped_total of api + worker) per round: %s",
				joinFloats(on.spans, "%.0f"), joinFloats(on.dropped, "%.0f"))),
	}, costRows...)
}

func joinFloats(xs []float64, format string) string {
	var ss []string
	for _, x := range xs {
		ss = append(ss, fmt.Sprintf(format, x))
	}
	return strings.Join(ss, ", ")
}

// scrapeCounter sums the samples of one counter in a scrape.
func scrapeCounter(ctx context.Context, hc *http.Client, url, name string) (float64, error) {
	body, err := getBody(ctx, hc, url)
	if err != nil {
		return 0, err
	}
	var sum float64
	for _, l := range strings.Split(string(body), "\n") {
		if !strings.HasPrefix(l, name) {
			continue
		}
		rest := l[len(name):]
		if rest != "" && rest[0] != ' ' && rest[0] != '{' {
			continue // another metric whose name starts with this one
		}
		f := strings.Fields(l)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			return 0, fmt.Errorf("%s: %q: %w", url, l, err)
		}
		sum += v
	}
	return sum, nil
}

func getBody(ctx context.Context, hc *http.Client, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("scrape %s: %w", url, err)
	}
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("scrape %s: HTTP %d: %.200s", url, resp.StatusCode, b)
	}
	return b, nil
}

// obsCPU is the CPU of the processes a scrape can wake: the api, the
// worker and PostgreSQL (the api's node counts are a query).
func obsCPU(st *stack) time.Duration {
	return procCPU(st.apiPID()) + procCPU(st.workerPID()) + st.postgresCPU()
}

// scrapeCost is the scrape measure of one endpoint.
type scrapeCost struct {
	url     string
	bytes   int
	perCPU  time.Duration // CPU of api + worker + PostgreSQL per scrape, background taken out
	took    time.Duration // mean wall time of one scrape
	bgShare float64       // background CPU of the same processes, share of one core
}

// measureScrapes scrapes url n times with gap between scrapes; the CPU read
// in the gaps is the processes' background, taken out of the CPU read
// around the scrapes at the same rate.
func measureScrapes(ctx context.Context, st *stack, url string, n int, gap time.Duration) (scrapeCost, error) {
	c := scrapeCost{url: url}
	var inCPU, gapCPU time.Duration
	var inWall, gapWall time.Duration
	for range n {
		g0, gw0 := obsCPU(st), time.Now()
		if err := sleepCtx(ctx, gap); err != nil {
			return c, err
		}
		c0, w0 := obsCPU(st), time.Now()
		gapCPU += c0 - g0
		gapWall += w0.Sub(gw0)
		b, err := getBody(ctx, st.http, url)
		if err != nil {
			return c, err
		}
		inCPU += obsCPU(st) - c0
		inWall += time.Since(w0)
		c.bytes = len(b)
	}
	bgRate := float64(gapCPU) / float64(gapWall)
	net := float64(inCPU) - bgRate*float64(inWall)
	c.perCPU = time.Duration(net / float64(n))
	c.took = inWall / time.Duration(n)
	c.bgShare = bgRate
	return c, nil
}

// benchObsScrape seeds the fleet to -obs-nodes and measures the CPU of a
// scrape of every endpoint of the api and the worker, with metrics and
// tracing on.
func benchObsScrape(ctx context.Context, cfg config, st *stack, otelAddr string, have int, log *slog.Logger) ([]Row, error) {
	if more := cfg.obsNodes - have; more > 0 {
		log.Info("obs: seeding the fleet", "nodes", more)
		if err := seedNodes(ctx, st.store, more); err != nil {
			return nil, err
		}
	}
	parts, err := startObsParts(ctx, st, true, otelAddr)
	if err != nil {
		return nil, err
	}
	// The processes' start-up and first collections out of the way.
	if err := sleepCtx(ctx, 5*time.Second); err != nil {
		return nil, err
	}
	type endpoint struct{ name, url string }
	var urls []endpoint
	for _, p := range []struct{ name, addr string }{{"api", parts.apiMetrics}, {"worker", parts.workerMetrics}} {
		urls = append(urls, endpoint{p.name + " /metrics", "http://" + p.addr + "/metrics"},
			endpoint{p.name + " /metrics/sensors", "http://" + p.addr + "/metrics/sensors"})
	}
	// One scrape of each first: the fleet is counted at the size the row says.
	if n, err := scrapeCounter(ctx, st.http, "http://"+parts.apiMetrics+"/metrics", "ironflow_nodes"); err != nil {
		return nil, err
	} else if int(n) < cfg.obsNodes {
		return nil, fmt.Errorf("the api's ironflow_nodes sum to %.0f, not the %d nodes seeded", n, cfg.obsNodes)
	}
	var rows []Row
	var total time.Duration
	var notes []string
	for _, u := range urls {
		c, err := measureScrapes(ctx, st, u.url, cfg.obsScrapes, cfg.obsScrapeGap)
		if err != nil {
			return rows, err
		}
		total += max(c.perCPU, 0)
		notes = append(notes, fmt.Sprintf("%s: %.2f ms CPU, %d bytes, %.1f ms a scrape (background %.2f %% of a core)",
			u.name, ms(c.perCPU), c.bytes, ms(c.took), 100*c.bgShare))
		log.Info("obs scrape", "endpoint", u.name, "cpu_ms", fmt.Sprintf("%.2f", ms(c.perCPU)), "bytes", c.bytes)
	}
	share := 100 * float64(total) / float64(obsScrapeInterval)
	rows = append(rows, row("obs", fmt.Sprintf("scraping every endpoint of the api and the worker every 15 s, %d nodes: CPU of api + worker + PostgreSQL, %% of one core (mean of %d scrapes each, background taken out)",
		cfg.obsNodes, cfg.obsScrapes), share, "% of a core").
		note("goal: < 1 %; CPU per round of scrapes "+fmt.Sprintf("%.2f ms", ms(total))+"; "+strings.Join(notes, "; ")))
	return rows, nil
}
