package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// A pinned run gives the Temporal server a core of its own and puts
// everything else (api, worker, PostgreSQL, the benchmark's clients, its
// simulated agents and the ceiling's worker) on the other, as a production
// Temporal cluster runs on hosts of its own (docs/production.md). On the
// shared cores of the rounds, every millisecond ironflow's own processes
// spend is a millisecond the server does not get, so the ratio to the
// ceiling also measures that ironflow does work beside Temporal; pinned,
// the server's core is the bound of both sides, and the ratio is how much
// of what Temporal allows ironflow's deploys use.

// pinCores are the two sides of a pinned run: the server's core and the
// rest's.
type pinCores struct{ temporal, rest int }

// pinnable reports the cores a pinned run uses, or why there is none: it
// needs two cores this process may run on.
func pinnable() (pinCores, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return pinCores{}, fmt.Errorf("read this process's CPU affinity: %w", err)
	}
	var cores []int
	for c := 0; c < runtime.NumCPU()*4 && len(cores) < 2; c++ {
		if set.IsSet(c) {
			cores = append(cores, c)
		}
	}
	if len(cores) < 2 {
		return pinCores{}, fmt.Errorf("a pinned run needs two cores, this process may use %d", set.Count())
	}
	return pinCores{temporal: cores[0], rest: cores[1]}, nil
}

// pinned holds the affinity a pinned run changed, to give back.
type pinned struct {
	all  unix.CPUSet
	pids []int
}

// pin puts the Temporal server's threads on cores.temporal and every other
// process of the stack, with this one, on cores.rest. Threads the processes
// start later inherit their creator's affinity; PostgreSQL's backends are
// forked from the postmaster, which is pinned.
func pin(st *stack, cores pinCores) (*pinned, error) {
	p := &pinned{}
	if err := unix.SchedGetaffinity(0, &p.all); err != nil {
		return nil, fmt.Errorf("read this process's CPU affinity: %w", err)
	}
	var one, rest unix.CPUSet
	one.Set(cores.temporal)
	rest.Set(cores.rest)
	tp := st.temporalPID()
	if tp == 0 {
		return nil, fmt.Errorf("no Temporal server process to pin")
	}
	others := []int{os.Getpid(), st.apiPID(), st.workerPID()}
	if pm := postmasterPID(st.postgresDir()); pm != 0 {
		others = append(others, pm)
		others = append(others, childrenOf(pm)...)
	}
	p.pids = append(p.pids, tp)
	if err := setAffinity(tp, &one); err != nil {
		p.undo()
		return nil, err
	}
	for _, pid := range others {
		if pid == 0 {
			continue
		}
		p.pids = append(p.pids, pid)
		if err := setAffinity(pid, &rest); err != nil {
			p.undo()
			return nil, err
		}
	}
	return p, nil
}

// setAffinity gives every thread of pid the cores in set.
func setAffinity(pid int, set *unix.CPUSet) error {
	tids, err := os.ReadDir(filepath.Join("/proc", strconv.Itoa(pid), "task"))
	if err != nil {
		return fmt.Errorf("list threads of process %d: %w", pid, err)
	}
	for _, t := range tids {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		// A thread that ended meanwhile is no error.
		if err := unix.SchedSetaffinity(tid, set); err != nil && err != unix.ESRCH {
			return fmt.Errorf("set CPU affinity of thread %d of process %d: %w", tid, pid, err)
		}
	}
	return nil
}

// undo gives every process pinned back the cores this one had before.
func (p *pinned) undo() {
	for _, pid := range p.pids {
		_ = setAffinity(pid, &p.all)
		// PostgreSQL backends forked while pinned inherited the pin.
		for _, c := range childrenOf(pid) {
			_ = setAffinity(c, &p.all)
		}
	}
}

// pinnedRounds alternates the ceiling and ironflow's deploys as the rounds
// do, with the Temporal server on a core of its own (pin). The cluster part
// has none: its PostgreSQL holds Temporal's store and ironflow's both.
func pinnedRounds(ctx context.Context, cfg config, st *stack, nodes []*benchNode, mode deployMode, agents *agentBooter, mix activityMix, log *slog.Logger) ([]Row, error) {
	kinds := mix.Kinds
	if cfg.pinnedRounds <= 0 || st.cluster != nil {
		return nil, nil
	}
	measure := "deploy rate, Temporal server on a core of its own (api, worker, PostgreSQL, the clients" +
		" and the ceiling's worker on the other)"
	cores, err := pinnable()
	if err != nil {
		log.Warn("no pinned rounds", "part", mode.part, "err", err)
		return []Row{row(mode.part, measure, 0, "nodes/s").note("not measured: " + err.Error())}, nil
	}
	var (
		rates, ceilRates, busy []float64
		shapeRates, shapeCPU   []float64
		shapePerRound          []string
		serverBusy, ceilBusy   []float64
		perRound               []string
		used                   usage
		ceilCPU                time.Duration
		deploys                int
	)
	for round := range cfg.pinnedRounds {
		// Taking the nodes back is not measured, and runs on both cores.
		if err := redeployable(ctx, st, nodes, cfg, mode); err != nil {
			return nil, fmt.Errorf("pinned round %d: %w", round+1, err)
		}
		p, err := pin(st, cores)
		if err != nil {
			return nil, err
		}
		var c, sc ceilingResult
		ceiling := func() error {
			var err error
			c, err = runCeiling(ctx, st, len(nodes), cfg.clients, kinds, ceilingTimeout, false)
			return err
		}
		// The deploy's whole shape in every round, on the same cores: a
		// bare workflow with every command ironflow's deploy has (its
		// search attributes, upserts, timers and signal), so that the
		// shape's cost against the mix is a median of rounds too.
		var shapeErr error
		shapeCeiling := func() error {
			sc, shapeErr = runCeiling(ctx, st, len(nodes), cfg.clients, mix.Shape, ceilingTimeout, false)
			if shapeErr != nil {
				log.Warn("pinned shape ceiling", "part", mode.part, "round", round+1, "err", shapeErr)
			}
			return nil
		}
		var tr deployTrial
		var benchCPU time.Duration
		err = rotate(round, ceiling, func() error {
			self := procCPU(os.Getpid())
			var err error
			tr, err = runDeployTrial(ctx, st, nodes, cfg, agents)
			benchCPU = procCPU(os.Getpid()) - self
			return err
		}, shapeCeiling)
		p.undo()
		if err != nil {
			return nil, fmt.Errorf("pinned round %d: %w", round+1, err)
		}
		log.Info("pinned round done", "part", mode.part, "round", round+1, "rate", fmt.Sprintf("%.2f/s", tr.rate), "ceiling", fmt.Sprintf("%.2f/s", c.Rate),
			"shape_ceiling", fmt.Sprintf("%.2f/s", sc.Rate),
			"temporal_cpu_per_deploy", tr.used.TemporalCPU/time.Duration(max(1, tr.active+tr.failed)), "temporal_cpu_per_ceiling_workflow", c.TemporalCPU,
			"temporal_cpu_per_shape_workflow", sc.TemporalCPU)
		rates, ceilRates = append(rates, tr.rate), append(ceilRates, c.Rate)
		if shapeErr == nil {
			shapeRates, shapeCPU = append(shapeRates, sc.Rate), append(shapeCPU, ms(sc.TemporalCPU))
			shapePerRound = append(shapePerRound, fmt.Sprintf("%.1f", sc.Rate))
		}
		perRound = append(perRound, fmt.Sprintf("%.1f/%.1f", tr.rate, c.Rate))
		used = used.add(tr.used)
		ceilCPU += c.TemporalCPU
		deploys += tr.active + tr.failed
		if tr.rate > 0 {
			wall := time.Duration(float64(tr.active) / tr.rate * float64(time.Second))
			rest := tr.used.APICPU + tr.used.WorkerCPU + tr.used.PostgresCPU + benchCPU
			busy = append(busy, 100*rest.Seconds()/wall.Seconds())
			serverBusy = append(serverBusy, 100*tr.used.TemporalCPU.Seconds()/wall.Seconds())
		}
		if c.Wall > 0 {
			ceilBusy = append(ceilBusy, 100*(c.TemporalCPU*time.Duration(c.Completed)).Seconds()/c.Wall.Seconds())
		}
	}
	mixCPU := ceilCPU / time.Duration(max(1, len(ceilRates)))
	rows := []Row{row(mode.part, fmt.Sprintf("%s, median of %d rounds", measure, len(rates)), median(rates), "nodes/s").
		vs("the ceiling on the same cores, alternating", median(ceilRates)).
		note(fmt.Sprintf("ironflow/ceiling per round: %s nodes/s; medians: the server's core %.0f %% busy during ironflow's deploys, %.0f %% during the ceiling's; the other core %.0f %% during ironflow's",
			strings.Join(perRound, ", "), median(serverBusy), median(ceilBusy), median(busy)))}
	if len(shapeRates) > 0 {
		rows = append(rows, row(mode.part, fmt.Sprintf("pinned: ceiling of the deploy's history shape (median of %d rounds, in turn with the mix's and ironflow's)", len(shapeRates)), median(shapeRates), "nodes/s").
			vs("pinned ceiling of the activity mix alone (median)", median(ceilRates)).
			note(fmt.Sprintf("per round %s nodes/s; ironflow pinned %.1f nodes/s = %.2f of the shape's; Temporal CPU per workflow %.1f ms (the mix's %.1f)",
				strings.Join(shapePerRound, ", "), median(rates), median(rates)/max(median(shapeRates), 1e-9), median(shapeCPU), ms(mixCPU))))
	}
	if deploys > 0 {
		r := row(mode.part, "CPU per deploy, pinned: Temporal server", ms(used.TemporalCPU)/float64(deploys), "ms")
		if ceilCPU > 0 {
			r = r.vs("bare workflow", ms(mixCPU))
		}
		rows = append(rows, r)
	}
	return rows, nil
}
