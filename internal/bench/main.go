// Command bench measures ironflow against baselines measured in the same run
// on the same machine, and prints one markdown table (and writes it as JSON):
//
//	latency  one fake-hardware deploy at a time on the idle stack: PUT →
//	         active p50/p99, split by the workflow's history, vs one bare
//	         workflow of the same activity mix
//	ironic   Debian's Ironic 21.4 all-in-one and ironflow (its own stack, and
//	         the Temporal cluster's with -cluster) through the same client and
//	         workloads: enroll, manage, provide, deploy, undeploy, list, show;
//	         CPU and memory of every process each needs
//	footprint memory (PSS, every process summed) of ironflow dev and of
//	         Ironic at idle, with 10,000 nodes more enrolled and after 1,000
//	         deploys; CPU per deploy
//	fleet    (only when named) 10,000 nodes enrolled, managed and provided
//	         on both; list and show at that size; idle CPU per node-minute
//	obs      (only when named) what metrics and tracing cost: the control
//	         part's deploys with them off and on in alternating rounds, and
//	         the CPU of scraping every endpoint with 10,000 nodes
//	control  deploys/s of fake-hardware nodes through the real API, api and
//	         worker as processes, on the file-backed Temporal dev server, vs
//	         bare workflows running the same activity mix on the same server
//	cluster  the control part on ironflow's Temporal cluster (PostgreSQL-backed
//	         temporal-server, mTLS), its ceiling on the same cluster
//	agent    the same with deploy_interface direct and simulated agents
//	api      node list/show latency with 1,000 and 10,000 nodes, lookups and
//	         heartbeats per second, vs a trivial net/http handler
//	image    the agent's image write throughput and peak RSS vs curl | dd
//	boot     DHCP offers/s (handler and UDP socket) and kernel+initramfs
//	         downloads by 200 clients vs a plain http.FileServer
//	console  memory (PSS, RSS) of the worker and api and their CPU per
//	         open console, with 50 fake consoles enabled and a session each
//
// Every part is bounded in time and requests, listens on 127.0.0.1 only and
// stops by itself. Run: go run ./internal/bench -nodes 500 -out .data/bench/results.json
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// Named defaults, sized so that the whole run stays under 40 minutes on 2
// cores (the 1,000-node lifecycles against Ironic take about half of it).
const (
	DefaultControlNodes   = 500
	DefaultAgentNodes     = 100
	DefaultClients        = 64 // deploy request pool
	DefaultAPIClients     = 32
	DefaultAPIRequests    = 200
	DefaultAPIDuration    = 5 * time.Second
	DefaultImageMiB       = 2048
	DefaultOCIMiB         = 1024
	DefaultBootClients    = 200
	DefaultDHCPDuration   = 3 * time.Second
	DefaultDeployTimeout  = 8 * time.Minute
	DefaultAgentHeartbeat = 10 * time.Second
	DefaultHistorySample  = 5
	// DefaultRounds: the deploy parts alternate ceiling and ironflow runs
	// this many times and compare medians, because one run of either
	// moves by a quarter on a shared machine.
	DefaultRounds       = 3
	DefaultPollInterval = 500 * time.Millisecond
	allParts            = "latency,ironic,footprint,allocation,control,cluster,agent,api,image,qcow2,oci,boot,console,rollout"
	// optionalParts run only when -parts names them.
	optionalParts          = "compare,fleet,obs"
	childEnv               = "IRONFLOW_BENCH_CHILD"
	childAgentWriter       = "agent-writer"
	defaultOutFile         = ".data/bench/results.json"
	defaultWorkDirTemplate = "ironflow-bench-"
)

type config struct {
	parts          []string
	nodes          int
	agentNodes     int
	clients        int
	apiClients     int
	apiRequests    int
	apiDuration    time.Duration
	apiSizes       []int
	imageMiB       int
	ociMiB         int
	ociRounds      int
	bootClients    int
	dhcpDuration   time.Duration
	deployTimeout  time.Duration
	agentHeartbeat time.Duration
	rounds         int
	pinnedRounds   int
	shapeParts     bool
	latencyRuns    int
	out            string
	dir            string
	keep           bool
	ironflowBin    string
	profile        bool
	verbose        bool
	// The ironic part's.
	lifecycleSizes   []int
	lifecycleClients int
	lifecycleRounds  int
	// lifecycleOnceFrom: sizes from it up run one round (0: never).
	lifecycleOnceFrom int
	// cluster adds ironflow on the Temporal cluster as a third target of
	// the ironic part.
	cluster bool
	// workerArgs are added to every `ironflow worker` the bench starts
	// (a before/after of a worker option in one command).
	workerArgs []string
	// compareBin is another build's ironflow binary, which the compare part
	// deploys with in turn with this one; compareRounds its rounds.
	compareBin    string
	compareRounds int
	// consoles is how many consoles the console part opens at once.
	consoles int
	// The footprint and fleet parts' (fleet.go).
	footprintNodes, footprintDeploys int
	footprintAlso                    []string
	fleetNodes                       int
	fleetIdle                        time.Duration
	// The obs part's (obs.go).
	obsRounds, obsNodes, obsScrapes int
	// The rollout part's (rollout.go).
	rolloutNodes, rolloutWave int
	obsScrapeGap              time.Duration
}

func main() {
	if os.Getenv(childEnv) == childAgentWriter {
		if err := runAgentWriterChild(); err != nil {
			fmt.Fprintf(os.Stderr, "bench agent writer: %v\n", err)
			os.Exit(1)
		}
		return
	}
	cfg, err := parseFlags(os.Args[1:])
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return
		}
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg); err != nil {
		fmt.Fprintf(os.Stderr, "bench: %v\n", err)
		os.Exit(1)
	}
}

func parseFlags(args []string) (config, error) {
	var cfg config
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	parts := fs.String("parts", allParts, "comma-separated parts to run: "+allParts)
	fs.IntVar(&cfg.nodes, "nodes", DefaultControlNodes, "fake-hardware nodes deployed by the control part")
	fs.IntVar(&cfg.agentNodes, "agent-nodes", DefaultAgentNodes, "nodes deployed through simulated agents by the agent part")
	fs.IntVar(&cfg.clients, "clients", DefaultClients, "client goroutines sending deploy requests")
	fs.IntVar(&cfg.apiClients, "api-clients", DefaultAPIClients, "concurrent clients for lookups and heartbeats")
	fs.IntVar(&cfg.apiRequests, "api-requests", DefaultAPIRequests, "requests per latency measure")
	fs.DurationVar(&cfg.apiDuration, "api-duration", DefaultAPIDuration, "how long each requests/s measure runs")
	sizes := fs.String("api-sizes", "1000,10000", "node counts the api part measures at")
	fs.IntVar(&cfg.imageMiB, "image-mib", DefaultImageMiB, "size of the generated image the image part writes (MiB)")
	fs.IntVar(&cfg.ociMiB, "oci-mib", DefaultOCIMiB, "size of the image the oci part pushes to the registry and writes (MiB)")
	fs.IntVar(&cfg.ociRounds, "oci-rounds", 6, "rounds of the oci part's five writes (geometric means), made a multiple of 3")
	fs.IntVar(&cfg.bootClients, "boot-clients", DefaultBootClients, "concurrent kernel+initramfs downloads")
	fs.DurationVar(&cfg.dhcpDuration, "dhcp-duration", DefaultDHCPDuration, "how long each DHCP measure runs")
	fs.DurationVar(&cfg.deployTimeout, "deploy-timeout", DefaultDeployTimeout, "bound of one part's deploys (nodes not active by then count as failed)")
	fs.DurationVar(&cfg.agentHeartbeat, "agent-heartbeat", DefaultAgentHeartbeat, "heartbeat interval of the simulated agents")
	fs.IntVar(&cfg.rounds, "rounds", DefaultRounds, "rounds of ceiling and ironflow deploys the deploy parts alternate (medians are compared)")
	fs.IntVar(&cfg.pinnedRounds, "pinned-rounds", DefaultRounds, "rounds of the deploy parts (not the cluster's) with the Temporal server on a core of its own and the rest on another (0: none)")
	fs.BoolVar(&cfg.shapeParts, "shape-parts", false, "after the shape ceiling, run it once without each kind of command (version markers, upserts, timers, the signal): what each costs the Temporal server")
	fs.IntVar(&cfg.latencyRuns, "latency-runs", DefaultLatencyRuns, "single deploys the latency part times on the idle stack")
	fs.StringVar(&cfg.out, "out", defaultOutFile, "JSON results file")
	fs.StringVar(&cfg.dir, "dir", "", "work directory (default: a new temporary directory, removed at the end)")
	fs.BoolVar(&cfg.keep, "keep", false, "keep the work directory (logs of api, worker, Temporal, PostgreSQL)")
	fs.StringVar(&cfg.ironflowBin, "ironflow", os.Getenv("IRONFLOW_BIN"), "ironflow binary (default $IRONFLOW_BIN, else built into the work directory)")
	fs.BoolVar(&cfg.profile, "profile", false, "record CPU profiles (perf) of the api, worker and Temporal during the last round of deploys, and of the agent during the image write")
	fs.BoolVar(&cfg.verbose, "v", false, "log progress at debug level")
	workerArgs := fs.String("worker-args", "", "space-separated flags added to every ironflow worker the bench starts, e.g. --workflow-task-pollers=8")
	lcSizes := fs.String("lifecycle-sizes", DefaultLifecycleSizes, "node counts the ironic part runs enroll, manage, provide, deploy and undeploy at, against Ironic and ironflow")
	fs.IntVar(&cfg.lifecycleClients, "lifecycle-clients", DefaultLifecycleClients, "client goroutines of the ironic part, the same for Ironic and ironflow")
	fs.IntVar(&cfg.lifecycleRounds, "lifecycle-rounds", DefaultLifecycleRounds, "rounds per size of the ironic part (the targets' order alternates; medians are compared)")
	fs.IntVar(&cfg.lifecycleOnceFrom, "lifecycle-once-from", DefaultLifecycleOnceFrom, "lifecycle sizes from this one up run a single round (0: every size runs -lifecycle-rounds)")
	fs.BoolVar(&cfg.cluster, "cluster", true, "the ironic part drives ironflow on the Temporal cluster too (PostgreSQL-backed temporal-server, mTLS; make tools builds it); the cluster part measures its deploys against its ceiling either way")
	fs.StringVar(&cfg.compareBin, "compare-ironflow", "", "the compare part (not run unless named in -parts): another build's ironflow binary whose control deploys alternate with this build's on one stack (make bench-compare BASE=<commit>)")
	fs.IntVar(&cfg.consoles, "consoles", DefaultConsoles, "fake consoles the console part enables and opens a session to at once")
	fs.IntVar(&cfg.compareRounds, "compare-rounds", 7, "rounds of the compare part, each one trial of either build (medians are compared)")
	fs.IntVar(&cfg.footprintNodes, "footprint-nodes", DefaultFootprintNodes, "nodes the footprint part seeds into each system's database before its second memory measure")
	fs.IntVar(&cfg.footprintDeploys, "footprint-deploys", DefaultFootprintDeploys, "nodes the footprint part enrolls, manages, provides and deploys through the API on each system")
	also := fs.String("footprint-also", "", "comma-separated other ironflow binaries whose `ironflow dev` the footprint and fleet parts measure in the same run (a before/after of the embedded stack's settings)")
	fs.IntVar(&cfg.fleetNodes, "fleet-nodes", DefaultFleetNodes, "nodes the fleet part (not run unless named in -parts) enrolls, manages and provides on each system")
	fs.DurationVar(&cfg.fleetIdle, "fleet-idle", DefaultFleetIdle, "how long the fleet part measures the idle fleet's CPU")
	fs.IntVar(&cfg.rolloutNodes, "rollout-nodes", DefaultRolloutNodes, "nodes the rollout part deploys, directly and as one rollout, each round")
	fs.IntVar(&cfg.rolloutWave, "rollout-wave", DefaultRolloutWave, "the rollout part's wave size")
	fs.IntVar(&cfg.obsRounds, "obs-rounds", DefaultObsRounds, "rounds of the obs part (not run unless named in -parts), each one trial of -nodes deploys with metrics and tracing off and one with them on (medians are compared)")
	fs.IntVar(&cfg.obsNodes, "obs-nodes", DefaultObsNodes, "nodes in the store while the obs part times scrapes")
	fs.IntVar(&cfg.obsScrapes, "obs-scrapes", DefaultObsScrapes, "scrapes of each metrics endpoint the obs part times")
	fs.DurationVar(&cfg.obsScrapeGap, "obs-scrape-gap", DefaultObsScrapeGap, "pause between two timed scrapes, in which the processes' background CPU is read")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	for _, b := range strings.Split(*also, ",") {
		if b = strings.TrimSpace(b); b != "" {
			cfg.footprintAlso = append(cfg.footprintAlso, b)
		}
	}
	for _, p := range strings.Split(*parts, ",") {
		p = strings.TrimSpace(p)
		if p == "" {
			continue
		}
		if !slices.Contains(strings.Split(allParts+","+optionalParts, ","), p) {
			return cfg, fmt.Errorf("unknown part %q (want some of %s, or %s)", p, allParts, optionalParts)
		}
		cfg.parts = append(cfg.parts, p)
	}
	for _, s := range strings.Split(*sizes, ",") {
		var n int
		if _, err := fmt.Sscan(strings.TrimSpace(s), &n); err != nil || n <= 0 {
			return cfg, fmt.Errorf("-api-sizes: %q is not a positive count", s)
		}
		cfg.apiSizes = append(cfg.apiSizes, n)
	}
	slices.Sort(cfg.apiSizes)
	cfg.workerArgs = strings.Fields(*workerArgs)
	for _, s := range strings.Split(*lcSizes, ",") {
		var n int
		if _, err := fmt.Sscan(strings.TrimSpace(s), &n); err != nil || n <= 0 {
			return cfg, fmt.Errorf("-lifecycle-sizes: %q is not a positive count", s)
		}
		cfg.lifecycleSizes = append(cfg.lifecycleSizes, n)
	}
	if cfg.lifecycleClients <= 0 || cfg.lifecycleRounds <= 0 {
		return cfg, errors.New("-lifecycle-clients and -lifecycle-rounds must be positive")
	}
	if cfg.nodes <= 0 || cfg.agentNodes <= 0 || cfg.clients <= 0 || cfg.apiClients <= 0 || cfg.apiRequests <= 0 || cfg.imageMiB <= 0 || cfg.ociMiB <= 0 || cfg.ociRounds <= 0 || cfg.bootClients <= 0 || cfg.rounds <= 0 || cfg.compareRounds <= 0 || cfg.latencyRuns <= 0 || cfg.consoles <= 0 || cfg.footprintNodes <= 0 || cfg.footprintDeploys <= 0 || cfg.fleetNodes <= 0 || cfg.fleetIdle <= 0 ||
		cfg.obsRounds <= 0 || cfg.obsNodes <= 0 || cfg.obsScrapes <= 0 || cfg.obsScrapeGap <= 0 || cfg.rolloutNodes <= 0 || cfg.rolloutWave <= 0 {
		return cfg, errors.New("counts and sizes must be positive")
	}
	return cfg, nil
}

func (c config) has(part string) bool { return slices.Contains(c.parts, part) }

// needsStack: every part but boot runs against PostgreSQL, Temporal and the API.
func (c config) needsStack() bool {
	return c.has("latency") || c.has("compare") || c.has("control") || c.has("agent") || c.has("api") || c.has("image") || c.has("qcow2") || c.has("oci") || c.has("console") || c.has("obs") || c.has("rollout")
}

func run(ctx context.Context, cfg config) error {
	level := slog.LevelInfo
	if cfg.verbose {
		level = slog.LevelDebug
	}
	log := slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: level}))
	dir := cfg.dir
	if dir == "" {
		d, err := os.MkdirTemp("", defaultWorkDirTemplate)
		if err != nil {
			return fmt.Errorf("create work directory: %w", err)
		}
		dir = d
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("create work directory: %w", err)
	}
	// PostgreSQL runs as the postgres user when we are root: it must reach
	// its data directory.
	_ = os.Chmod(dir, 0o755)
	defer func() {
		if cfg.keep {
			log.Info("work directory kept", "dir", dir)
			return
		}
		_ = os.RemoveAll(dir)
	}()

	rep := &report{Started: time.Now().UTC(), Machine: machineInfo()}
	var st *stack
	if cfg.needsStack() {
		var err error
		st, err = startStack(ctx, cfg, dir, log)
		if err != nil {
			if st != nil {
				st.stop()
			}
			return fmt.Errorf("start the stack: %w", err)
		}
		defer st.stop()
	}
	type part struct {
		name string
		fn   func(context.Context) ([]Row, error)
	}
	parts := []part{
		{"latency", func(ctx context.Context) ([]Row, error) { return benchLatency(ctx, cfg, st, log) }},
		{"ironic", func(ctx context.Context) ([]Row, error) { return benchIronic(ctx, cfg, dir, log) }},
		{"footprint", func(ctx context.Context) ([]Row, error) { return benchFootprint(ctx, cfg, dir, log) }},
		{"fleet", func(ctx context.Context) ([]Row, error) { return benchFleet(ctx, cfg, dir, log) }},
		{"allocation", func(ctx context.Context) ([]Row, error) { return benchAllocation(ctx, cfg, dir, log) }},
		{"control", func(ctx context.Context) ([]Row, error) { return benchControl(ctx, cfg, st, log) }},
		{"cluster", func(ctx context.Context) ([]Row, error) { return benchCluster(ctx, cfg, dir, log) }},
		{"agent", func(ctx context.Context) ([]Row, error) { return benchAgent(ctx, cfg, st, log) }},
		{"api", func(ctx context.Context) ([]Row, error) { return benchAPI(ctx, cfg, st, log) }},
		{"image", func(ctx context.Context) ([]Row, error) { return benchImage(ctx, cfg, st, dir, log) }},
		{"qcow2", func(ctx context.Context) ([]Row, error) { return benchQcow2(ctx, cfg, st, dir, log) }},
		{"oci", func(ctx context.Context) ([]Row, error) { return benchOCI(ctx, cfg, st, dir, log) }},
		{"boot", func(ctx context.Context) ([]Row, error) { return benchBoot(ctx, cfg, dir, log) }},
		{"console", func(ctx context.Context) ([]Row, error) { return benchConsole(ctx, cfg, st, log) }},
		{"compare", func(ctx context.Context) ([]Row, error) { return benchCompare(ctx, cfg, st, log) }},
		{"obs", func(ctx context.Context) ([]Row, error) { return benchObs(ctx, cfg, st, log) }},
		{"rollout", func(ctx context.Context) ([]Row, error) { return benchRollout(ctx, cfg, st, log) }},
	}
	var failed []string
	for _, p := range parts {
		if !cfg.has(p.name) {
			continue
		}
		if ctx.Err() != nil {
			break
		}
		log.Info("part starting", "part", p.name)
		start := time.Now()
		rows, err := p.fn(ctx)
		rep.Rows = append(rep.Rows, rows...)
		if err != nil {
			log.Error("part failed", "part", p.name, "err", err)
			failed = append(failed, p.name)
			rep.Errors = append(rep.Errors, fmt.Sprintf("%s: %v", p.name, err))
		}
		log.Info("part done", "part", p.name, "took", time.Since(start).Round(time.Second))
	}
	rep.Finished = time.Now().UTC()
	printTable(os.Stdout, rep)
	if err := writeJSON(cfg.out, rep); err != nil {
		return err
	}
	if len(failed) > 0 {
		return fmt.Errorf("parts failed: %s", strings.Join(failed, ", "))
	}
	return ctx.Err()
}

func writeJSON(path string, rep *report) error {
	if path == "" {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("create results directory: %w", err)
	}
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return fmt.Errorf("encode results: %w", err)
	}
	if err := os.WriteFile(path, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("write results: %w", err)
	}
	return nil
}

// machineInfo names what the figures were measured on.
func machineInfo() string {
	cpu := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(l, "model name") {
				if _, v, ok := strings.Cut(l, ":"); ok {
					cpu = strings.TrimSpace(v)
				}
				break
			}
		}
	}
	load := ""
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		load = strings.Join(strings.Fields(string(b))[:3], " ")
	}
	return fmt.Sprintf("%d CPUs (%s), load average at start %s", numCPU(), cpu, load)
}
