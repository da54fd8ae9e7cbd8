package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
)

// compareBuild is one of the two ironflow builds the compare part runs.
type compareBuild struct {
	name, bin string
	trials    []deployTrial
}

// benchCompare deploys the same fake-hardware nodes with two ironflow
// builds on one stack (the same PostgreSQL and Temporal server): the
// current one and the one of -compare-ironflow (another commit's, built by
// `make bench-compare`). Rounds alternate the builds, restarting the api
// and the worker with the other binary between trials, and the medians are
// compared: deploy rate and CPU per deploy of every process (api, worker,
// Temporal, PostgreSQL). Between two builds of one release nothing is
// migrated (the store's schema is the same), which the part checks by
// running the baseline's `migrate` first.
func benchCompare(ctx context.Context, cfg config, st *stack, log *slog.Logger) ([]Row, error) {
	if cfg.compareBin == "" {
		return nil, errors.New("the compare part needs -compare-ironflow: the other build's ironflow binary (make bench-compare BASE=<commit> builds it)")
	}
	current := st.Bin
	builds := []*compareBuild{{name: "baseline", bin: cfg.compareBin}, {name: "this build", bin: current}}
	defer func() { st.Bin = current }()
	mode := deployMode{part: "compare", deployInterface: "fake"}
	st.Bin = current
	if err := st.restart(ctx); err != nil {
		return nil, err
	}
	nodes, err := enrollNodes(ctx, st, cfg.nodes, mode, cfg.clients)
	if err != nil {
		return nil, err
	}
	if err := settle(ctx, st); err != nil {
		return nil, err
	}
	rounds := cfg.compareRounds
	for round := range rounds {
		var sides []func() error
		for _, b := range builds {
			sides = append(sides, func() error {
				st.Bin = b.bin
				if err := st.restart(ctx); err != nil {
					return fmt.Errorf("%s: %w", b.name, err)
				}
				if err := redeployable(ctx, st, nodes, cfg, mode); err != nil {
					return fmt.Errorf("%s: %w", b.name, err)
				}
				if err := settle(ctx, st); err != nil {
					return err
				}
				tr, err := runDeployTrial(ctx, st, nodes, cfg, nil)
				if err != nil {
					return fmt.Errorf("%s: %w", b.name, err)
				}
				if tr.failed > 0 {
					return fmt.Errorf("%s: %d of %d deploys not active (first: %s)", b.name, tr.failed, len(nodes), tr.firstFailure)
				}
				log.Info("compare trial", "build", b.name, "round", round+1, "rate", fmt.Sprintf("%.2f/s", tr.rate),
					"cpu_per_deploy_ms", fmt.Sprintf("%.1f", cpuPerDeploy(tr)))
				b.trials = append(b.trials, tr)
				return nil
			})
		}
		if err := rotate(round, sides...); err != nil {
			return nil, fmt.Errorf("round %d: %w", round+1, err)
		}
	}
	return compareRows(cfg, builds[0], builds[1]), nil
}

// cpuPerDeploy is the CPU every process of the stack spent per deploy of
// one trial, in milliseconds.
func cpuPerDeploy(tr deployTrial) float64 {
	n := tr.active + tr.failed
	if n == 0 {
		return 0
	}
	u := tr.used
	return ms(u.APICPU+u.WorkerCPU+u.TemporalCPU+u.PostgresCPU) / float64(n)
}

// compareRows are the compare part's rows: this build's medians against
// the baseline's, every round's pair in the note.
func compareRows(cfg config, base, cur *compareBuild) []Row {
	measure := func(b *compareBuild, f func(deployTrial) float64) (float64, []float64) {
		var xs []float64
		for _, tr := range b.trials {
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
	label := fmt.Sprintf("%d nodes, deploy_interface fake, %d request goroutines; median of %d rounds alternating the builds", cfg.nodes, cfg.clients, cfg.compareRounds)
	rate := func(tr deployTrial) float64 { return tr.rate }
	curRate, curRates := measure(cur, rate)
	baseRate, baseRates := measure(base, rate)
	curCPU, curCPUs := measure(cur, cpuPerDeploy)
	baseCPU, baseCPUs := measure(base, cpuPerDeploy)
	return []Row{
		row("compare", "deploy rate, this build ("+label+")", curRate, "nodes/s").
			vs("the baseline build ("+cfg.compareBin+")", baseRate).
			note("this build/baseline per round: " + pairs(curRates, baseRates, "%.1f") + " nodes/s"),
		lowerBetter(row("compare", "CPU per deploy, this build (api + worker + Temporal + PostgreSQL)", curCPU, "ms"),
			"the baseline build", baseCPU).
			note("this build/baseline per round: " + pairs(curCPUs, baseCPUs, "%.1f") + " ms"),
	}
}
