package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// The footprint part: the memory (PSS of every process summed) of
// `ironflow dev` — ironflow, its PostgreSQL and its Temporal dev server,
// what `make run` starts — and of Debian's Ironic 21.4 all-in-one (one
// process, SQLite), measured in the same run at idle, right after
// -footprint-deploys deploys, idle again, and with -footprint-nodes nodes
// more seeded. -footprint-also adds other builds' `ironflow dev` as further
// targets of the same run: a before/after of a change to the embedded
// stack's settings, memory and CPU per deploy side by side.
//
// The fleet part (not in the default set: about 40 minutes on 2 cores):
// -fleet-nodes nodes enrolled (node and port), managed and provided
// through the API on both, one after the other; then list and show at
// that size, and the CPU both spend per node-minute while the fleet sits
// idle under their power sync (fake power interface, every 60 s: Ironic's
// sync_power_state_interval and ironflow's default).
const (
	DefaultFootprintNodes   = 10000
	DefaultFootprintDeploys = 1000
	DefaultFleetNodes       = 10000
	DefaultFleetIdle        = 3 * time.Minute
	// footprintSettle is how long every target sits untouched before an
	// idle measure, once the machine is quiet: the Temporal server's and
	// Ironic's periodic tasks have run by then.
	footprintSettle = 30 * time.Second
	footprintQuiet  = time.Minute
)

// fleetTargets starts Ironic and ironflow dev (this build, then each of
// cfg.footprintAlso), each in a directory of its own under dir.
func fleetTargets(ctx context.Context, cfg config, dir string, log *slog.Logger) (ironic *target, mine []*target, devs []*devServer, stop func(), err error) {
	var stops []func()
	stop = func() {
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
	}
	if !ironicInstalled() {
		return nil, nil, nil, stop, errNoIronic
	}
	ir, err := startIronic(ctx, filepath.Join(dir, "ironic"), log)
	if err != nil {
		return nil, nil, nil, stop, err
	}
	stops = append(stops, ir.stop)
	ironic = &target{name: "Ironic 21.4", url: ir.URL, hc: newHTTPClient(cfg.lifecycleClients * 2),
		procs: func() map[string]int { return map[string]int{"ironic": ir.pid()} }, seed: ir.seed}
	bins := append([]string{cfg.ironflowBin}, cfg.footprintAlso...)
	for i, bin := range bins {
		name := "ironflow dev"
		if i > 0 {
			name = fmt.Sprintf("ironflow dev (%s)", bin)
		}
		d, err := startDevServer(ctx, name, bin, filepath.Join(dir, fmt.Sprintf("ironflow-dev-%d", i)), log)
		if err != nil {
			return nil, nil, nil, stop, fmt.Errorf("%s: %w", name, err)
		}
		stops = append(stops, d.stop)
		devs = append(devs, d)
		mine = append(mine, d.target())
	}
	return ironic, mine, devs, stop, nil
}

// ironicDisk is Ironic's SQLite database with its journal.
func ironicDisk(dir string) int64 {
	var n int64
	for _, f := range []string{"ironic.db", "ironic.db-wal", "ironic.db-journal"} {
		if fi, err := os.Stat(filepath.Join(dir, "ironic", f)); err == nil {
			n += fi.Size()
		}
	}
	return n
}

// footprintSettleWait waits for a quiet machine, then footprintSettle.
func footprintSettleWait(ctx context.Context) {
	waitQuiet(ctx, footprintQuiet)
	select {
	case <-ctx.Done():
	case <-time.After(footprintSettle):
	}
}

func measureAll(ts []*target) []footprint {
	out := make([]footprint, len(ts))
	for i, t := range ts {
		out[i] = measureFootprint(t.procs())
	}
	return out
}

func benchFootprint(ctx context.Context, cfg config, dir string, log *slog.Logger) ([]Row, error) {
	ironic, mine, devs, stop, err := fleetTargets(ctx, cfg, dir, log)
	defer stop()
	if err != nil {
		return nil, err
	}
	all := append([]*target{ironic}, mine...)
	disk := func() []string {
		out := []string{fmt.Sprintf("%s %.1f MiB", ironic.name, mib(ironicDisk(dir)))}
		for _, d := range devs {
			pg, tp := d.diskBytes()
			out = append(out, fmt.Sprintf("%s PostgreSQL %.1f MiB, Temporal %.1f MiB", d.name, mib(pg), mib(tp)))
		}
		return out
	}
	footprintSettleWait(ctx)
	idle := measureAll(all)
	idleDisk := disk()
	log.Info("footprint idle", "pss", pssSummary(all, idle), "disk", strings.Join(idleDisk, "; "))

	deploys := make([]lifecycleResult, len(all))
	for i, t := range all {
		waited := waitQuiet(ctx, lifecycleQuietMax)
		log.Info("footprint deploys", "target", t.name, "nodes", cfg.footprintDeploys, "waited_for_quiet", waited.Round(time.Millisecond))
		if deploys[i], err = runLifecycleUpTo(ctx, t, cfg.footprintDeploys, cfg.lifecycleClients, "deploy", true, log); err != nil {
			return nil, fmt.Errorf("%s: %d deploys: %w", t.name, cfg.footprintDeploys, err)
		}
		log.Info("footprint deploys done", "target", t.name, "rates", deploys[i].summary(), "pss", mib(deploys[i].footprint.pss))
	}
	footprintSettleWait(ctx)
	after := measureAll(all)
	afterDisk := disk()
	log.Info("footprint idle after the deploys", "pss", pssSummary(all, after), "disk", strings.Join(afterDisk, "; "))

	// The 10,000 nodes come after the deploys: Ironic's steps slow down
	// with every node in its database (a thousand manages took it more
	// than ten minutes beside 10,000 nodes on a loaded machine), which
	// the default bench cannot afford; the fleet part runs its steps at
	// that size.
	n := cfg.footprintNodes
	for _, t := range all {
		log.Info("seeding nodes", "target", t.name, "nodes", n)
		if err := t.seed(ctx, n); err != nil {
			return nil, fmt.Errorf("%s: seed %d nodes: %w", t.name, n, err)
		}
	}
	footprintSettleWait(ctx)
	enrolled := measureAll(all)
	enrolledDisk := disk()
	log.Info("footprint enrolled", "nodes", n, "pss", pssSummary(all, enrolled), "disk", strings.Join(enrolledDisk, "; "))

	var rows []Row
	for i, t := range mine {
		j := i + 1
		rows = append(rows,
			footprintRow("footprint", t.name, ironic.name, "idle, just started", idle[j], idle[0]).note(footprintNote(idle[j], idle[0])+"; on disk: "+strings.Join(idleDisk, "; ")),
			footprintRow("footprint", t.name, ironic.name, fmt.Sprintf("right after %d deploys (nodes enrolled, managed, provided and deployed through the API)", cfg.footprintDeploys), deploys[j].footprint, deploys[0].footprint).
				note(footprintNote(deploys[j].footprint, deploys[0].footprint)),
			footprintRow("footprint", t.name, ironic.name, fmt.Sprintf("idle again after the %d deploys", cfg.footprintDeploys), after[j], after[0]).
				note(footprintNote(after[j], after[0])+"; on disk: "+strings.Join(afterDisk, "; ")),
			footprintRow("footprint", t.name, ironic.name, fmt.Sprintf("idle, %d nodes more (seeded through the database, conductor groups no conductor serves)", n), enrolled[j], enrolled[0]).
				note(footprintNote(enrolled[j], enrolled[0])+"; on disk: "+strings.Join(enrolledDisk, "; ")),
			lowerBetter(row("footprint", fmt.Sprintf("%s: CPU per deploy, every process summed (%d nodes, %d clients)", t.name, cfg.footprintDeploys, cfg.lifecycleClients), ms(deploys[j].deployCPU), "ms"),
				ironic.name, ms(deploys[0].deployCPU)).note(roleCPU(deploys[j].cpuByRole)),
			row("footprint", fmt.Sprintf("%s: deploy %d nodes (first PUT → last active)", t.name, cfg.footprintDeploys), deploys[j].steps["deploy"].rate, "nodes/s").
				vs(ironic.name+", same client", deploys[0].steps["deploy"].rate).
				note(fmt.Sprintf("enroll %.0f vs %.0f, manage %.1f vs %.1f, provide %.1f vs %.1f nodes/s", deploys[j].steps["enroll"].rate, deploys[0].steps["enroll"].rate,
					deploys[j].steps["manage"].rate, deploys[0].steps["manage"].rate, deploys[j].steps["provide"].rate, deploys[0].steps["provide"].rate)),
		)
	}
	return rows, nil
}

func footprintRow(part, name, ironic, when string, mine, theirs footprint) Row {
	return lowerBetter(row(part, fmt.Sprintf("%s: memory %s, PSS of every process summed", name, when), mib(mine.pss), "MiB"), ironic+" (its one process)", mib(theirs.pss))
}

func footprintNote(mine, theirs footprint) string {
	return fmt.Sprintf("PSS by process: %s; anonymous PSS %.0f vs %.0f MiB; RSS summed %.0f vs %.0f MiB", roleMem(mine.byRole), mib(mine.anon), mib(theirs.anon), mib(mine.rss), mib(theirs.rss))
}

func pssSummary(ts []*target, fs []footprint) string {
	var parts []string
	for i, t := range ts {
		parts = append(parts, fmt.Sprintf("%s %.0f MiB, %.0f anonymous (%s)", t.name, mib(fs[i].pss), mib(fs[i].anon), roleMem(fs[i].byRole)))
	}
	return strings.Join(parts, "; ")
}

func benchFleet(ctx context.Context, cfg config, dir string, log *slog.Logger) ([]Row, error) {
	ironic, mine, _, stop, err := fleetTargets(ctx, cfg, dir, log)
	defer stop()
	if err != nil {
		return nil, err
	}
	all := append([]*target{ironic}, mine...)
	n := cfg.fleetNodes
	res := make([]lifecycleResult, len(all))
	for i, t := range all {
		waited := waitQuiet(ctx, lifecycleQuietMax)
		log.Info("fleet enroll, manage, provide", "target", t.name, "nodes", n, "waited_for_quiet", waited.Round(time.Millisecond))
		if res[i], err = runLifecycleUpTo(ctx, t, n, cfg.lifecycleClients, "provide", true, log); err != nil {
			return nil, fmt.Errorf("%s, %d nodes: %w", t.name, n, err)
		}
		log.Info("fleet provided", "target", t.name, "rates", res[i].summary())
	}
	reads := make([]readLatencies, len(all))
	for i, t := range all {
		if reads[i], err = measureReads(ctx, t, n, cfg.lifecycleClients, log); err != nil {
			return nil, fmt.Errorf("%s, %d nodes: %w", t.name, n, err)
		}
	}
	// The idle fleet: every target's CPU over the same window, all of
	// them idle but for their power sync of the n available nodes.
	footprintSettleWait(ctx)
	cpu0 := make([]map[string]time.Duration, len(all))
	for i, t := range all {
		cpu0[i] = treeCPUByRole(t.procs())
	}
	start := time.Now()
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-time.After(cfg.fleetIdle):
	}
	minutes := time.Since(start).Minutes()
	idleCPU := make([]float64, len(all)) // ms per node-minute
	idleBy := make([]map[string]time.Duration, len(all))
	for i, t := range all {
		idleBy[i] = map[string]time.Duration{}
		var total time.Duration
		for role, c := range treeCPUByRole(t.procs()) {
			d := c - cpu0[i][role]
			idleBy[i][role] = time.Duration(float64(d) / minutes)
			total += d
		}
		idleCPU[i] = ms(total) / minutes / float64(n)
	}
	mem := measureAll(all)

	var rows []Row
	for i, t := range mine {
		j := i + 1
		for _, s := range lifecycleSteps[:3] {
			r := row("fleet", fmt.Sprintf("%s: %s %d nodes (%s; %d clients)", t.name, s.name, n, s.detail, cfg.lifecycleClients), res[j].steps[s.name].rate, "nodes/s").
				vs(ironic.name+", same client", res[0].steps[s.name].rate)
			if s.verb != "" {
				r = r.note(fmt.Sprintf("CPU per node, every process summed, %.1f ms (%s) vs %.1f ms", ms(res[j].steps[s.name].cpu), roleCPU(res[j].steps[s.name].cpuByRole), ms(res[0].steps[s.name].cpu)))
			}
			if f := failures([]lifecycleResult{res[j], res[0]}, s.name); f != "" {
				r = r.note(r.Note + "; " + f)
			}
			rows = append(rows, r)
		}
		for _, r := range readRows(t.name, ironic.name, cfg.lifecycleClients, reads[j], reads[0]) {
			r.Part = "fleet"
			rows = append(rows, r)
		}
		rows = append(rows,
			lowerBetter(row("fleet", fmt.Sprintf("%s: idle CPU per node-minute, %d available nodes under power sync (fake power, every 60 s; %.1f min)", t.name, n, minutes), idleCPU[j]*1000, "µs"),
				ironic.name, idleCPU[0]*1000).
				note(fmt.Sprintf("CPU per minute by process: %s vs %s", roleCPU(idleBy[j]), roleCPU(idleBy[0]))),
			footprintRow("fleet", t.name, ironic.name, fmt.Sprintf("with %d nodes available, idle", n), mem[j], mem[0]).note(footprintNote(mem[j], mem[0])),
		)
	}
	return rows, nil
}
