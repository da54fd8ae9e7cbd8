package main

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.temporal.io/api/workflowservice/v1"

	"github.com/ironflow/ironflow/agent/sim"
	"github.com/ironflow/ironflow/provision"
	"github.com/ironflow/ironflow/workflows"
)

// Sizes and bounds of the deploy parts.
const (
	// enrollTimeout bounds manage and provide of all nodes.
	enrollTimeout = 5 * time.Minute
	// agentImageSize is the small image the agent part's nodes write.
	agentImageSize = 1 << 20
	// agentPollInterval: the agent part boots a simulated agent at most this
	// long after its node enters wait call-back.
	agentPollInterval = 250 * time.Millisecond
	// deployPollInterval: how often the control part lists its nodes'
	// states while they deploy.
	deployPollInterval = 2 * time.Second
	// ceilingTimeout bounds the ceiling workflows.
	ceilingTimeout = 8 * time.Minute
)

// deployMode is what distinguishes the control and agent parts.
type deployMode struct {
	part            string
	deployInterface string
	img             *imageServer // direct only
}

// benchNode is one node of a deploy run.
type benchNode struct {
	uuid, name, mac string
	requested       time.Time     // before the PUT
	accepted        time.Duration // PUT round trip
	state           provision.State
	lastError       string
	activeAt        time.Time // provision_updated_at when active
	observedAt      time.Time // first poll that saw it terminal
	agent           *sim.Agent
}

func benchControl(ctx context.Context, cfg config, st *stack, log *slog.Logger) ([]Row, error) {
	return benchDeploys(ctx, cfg, st, log, cfg.nodes, deployMode{part: "control", deployInterface: "fake"})
}

func benchAgent(ctx context.Context, cfg config, st *stack, log *slog.Logger) ([]Row, error) {
	img, err := newImageServer(agentImageSize)
	if err != nil {
		return nil, err
	}
	defer img.Close()
	return benchDeploys(ctx, cfg, st, log, cfg.agentNodes, deployMode{part: "agent", deployInterface: "direct", img: img})
}

func benchDeploys(ctx context.Context, cfg config, st *stack, log *slog.Logger, n int, mode deployMode) ([]Row, error) {
	if err := st.restart(ctx); err != nil {
		return nil, err
	}
	// One more node than measured: the pilot deploys alone first, so that
	// its history gives the ceiling's activity mix before the run.
	all, err := enrollNodes(ctx, st, n+1, mode, cfg.clients)
	if err != nil {
		return nil, err
	}
	if err := settle(ctx, st); err != nil {
		return nil, err
	}
	pilot, nodes := all[:1], all[1:]
	log.Info("nodes available", "part", mode.part, "nodes", n)
	var agents *agentBooter
	if mode.img != nil {
		agents = &agentBooter{st: st, interval: cfg.agentHeartbeat}
		defer agents.stopAll()
	}
	if err := deployAll(ctx, st, pilot, cfg, agents); err != nil {
		return nil, fmt.Errorf("pilot deploy: %w", err)
	}
	if pilot[0].state != provision.Active {
		return nil, fmt.Errorf("pilot deploy ended %q: %s", pilot[0].state, pilot[0].lastError)
	}
	pilotMix, err := readMix(ctx, st.tc, workflows.WorkflowID(pilot[0].uuid))
	if err != nil {
		return nil, err
	}
	kinds := pilotMix.Kinds
	// Rounds alternate the ceiling and ironflow's deploys (even rounds
	// ceiling first, odd rounds ironflow first): the machine is shared and
	// the server's state moves, so each side's median over the rounds is
	// compared, and every round's figures are printed.
	var (
		lastFootprint footprint
		ceilings      []ceilingResult
		trials        []deployTrial
		used          usage
		prof          *profiler
	)
	for round := range cfg.rounds {
		if round > 0 {
			if err := redeployable(ctx, st, nodes, cfg, mode); err != nil {
				return nil, fmt.Errorf("round %d: %w", round+1, err)
			}
		}
		ceiling := func() error {
			log.Info("ceiling starting", "part", mode.part, "round", round+1, "workflows", n, "mix", mixOf(kinds))
			c, err := runCeiling(ctx, st, n, cfg.clients, kinds, ceilingTimeout, false)
			if err != nil {
				return err
			}
			ceilings = append(ceilings, c)
			return nil
		}
		trial := func() error {
			if cfg.profile && round == cfg.rounds-1 {
				prof = startProfiles(ctx, st, log)
			}
			tr, err := runDeployTrial(ctx, st, nodes, cfg, agents)
			if prof != nil {
				prof.stop()
			}
			lastFootprint = measureFootprint(st.target(mode.part).procs())
			if err != nil {
				return err
			}
			log.Info("deploys done", "part", mode.part, "round", round+1, "active", tr.active, "failed", tr.failed, "rate", fmt.Sprintf("%.2f/s", tr.rate))
			trials = append(trials, tr)
			used = used.add(tr.used)
			return nil
		}
		if err := rotate(round, ceiling, trial); err != nil {
			return nil, err
		}
	}
	mixes, mixErr := sampleHistories(ctx, st, nodes, DefaultHistorySample)
	// What eager workflow start gives on this server: the ceiling once
	// more, its starts eager (its worker shares the starting client, as
	// ironflow dev's API and worker do).
	eager, eagerErr := runCeiling(ctx, st, n, cfg.clients, kinds, ceilingTimeout, true)
	if eagerErr != nil {
		log.Warn("eager ceiling", "err", eagerErr)
	}
	// The same once more with the rest of the deploy's history (ceiling.go,
	// ceilingWorkflowFn): what Temporal allows for the deploy's shape,
	// its signals, timers and upserts included.
	shapeCeil, shapeErr := runCeiling(ctx, st, n, cfg.clients, pilotMix.Shape, ceilingTimeout, false)
	if shapeErr != nil {
		log.Warn("shape ceiling", "err", shapeErr)
	}
	// With -shape-parts: the shape again without each kind of command in
	// turn, for what each costs the server.
	var partRows []Row
	for _, kind := range []string{kindVersion, kindUpsert, kindTimer, kindSignal} {
		if !cfg.shapeParts || shapeErr != nil || !slices.Contains(pilotMix.Shape, kind) {
			continue
		}
		c, err := runCeiling(ctx, st, n, cfg.clients, shapeWithout(pilotMix.Shape, kind), ceilingTimeout, false)
		if err != nil {
			log.Warn("shape ceiling without "+kind, "err", err)
			continue
		}
		partRows = append(partRows, row(mode.part, fmt.Sprintf("ceiling of the deploy's shape without its %s commands (one run)", kind), c.Rate, "nodes/s").
			vs("the whole shape", shapeCeil.Rate).
			note(fmt.Sprintf("%d history events; Temporal CPU per workflow %.1f ms (the whole shape %.1f)", c.Events, ms(c.TemporalCPU), ms(shapeCeil.TemporalCPU))))
	}
	pinRows, pinErr := pinnedRounds(ctx, cfg, st, nodes, mode, agents, pilotMix, log)

	var (
		active, failed, deploys int
		times, accepts          []time.Duration
		firstFailure            string
		rates, ceilRates        []float64
		perRound                []string
		ceilCPU                 time.Duration
		ceilStarts              []time.Duration
		ceilEvents              int
	)
	for i, tr := range trials {
		active += tr.active
		failed += tr.failed
		deploys += tr.active + tr.failed
		times = append(times, tr.times...)
		accepts = append(accepts, tr.accepts...)
		if firstFailure == "" {
			firstFailure = tr.firstFailure
		}
		rates = append(rates, tr.rate)
		c := ceilings[i]
		ceilRates = append(ceilRates, c.Rate)
		ceilCPU += c.TemporalCPU
		ceilStarts = append(ceilStarts, c.Starts...)
		ceilEvents = c.Events
		perRound = append(perRound, fmt.Sprintf("%.1f/%.1f", tr.rate, c.Rate))
	}
	rate, ceilRate := median(rates), median(ceilRates)
	ceil := ceilingResult{Rate: ceilRate, Events: ceilEvents, TemporalCPU: ceilCPU / time.Duration(len(ceilings)), Starts: ceilStarts}
	part := mode.part
	var rows []Row
	label := fmt.Sprintf("%d nodes, deploy_interface %s", n, mode.deployInterface)
	rateRow := row(part, fmt.Sprintf("deploy rate (%s, %d request goroutines; first request → last workflow closed; median of %d rounds)", label, cfg.clients, len(trials)), rate, "nodes/s").
		vs(fmt.Sprintf("bare workflows, same mix (%s), same server, median of %d rounds alternating with ironflow's", mixOf(kinds), len(ceilings)), ceil.Rate).
		note("ironflow/ceiling per round: " + strings.Join(perRound, ", ") + " nodes/s")
	if mode.img != nil {
		rateRow = rateRow.note(rateRow.Note + fmt.Sprintf("; %d simulated agents booted; the ceiling has no agent, no image download, no callback wait and none of the %.0f heartbeat signals per deploy", agents.boots.Load(), meanSignals(mixes)))
	}
	if failed > 0 {
		rateRow = rateRow.note(strings.TrimSpace(rateRow.Note + fmt.Sprintf("; %d of %d deploys not active (first: %s)", failed, deploys, firstFailure)))
	}
	rows = append(rows, rateRow)
	if eagerErr == nil {
		rows = append(rows, row(part, "ceiling with eager workflow start (EnableEagerStart, worker on the starting client; one run after the rounds)", eager.Rate, "nodes/s").
			vs("ceiling, plain starts (median above)", ceil.Rate).
			note(fmt.Sprintf("start p50 %.0f ms vs %.0f ms", ms(percentile(eager.Starts, 50)), ms(percentile(ceil.Starts, 50)))))
	}
	if shapeErr == nil {
		rows = append(rows, row(part, fmt.Sprintf("ceiling of the deploy's history shape (%s; one run after the rounds)", describeShape(pilotMix)), shapeCeil.Rate, "nodes/s").
			vs("ceiling of the activity mix alone (median above)", ceil.Rate).
			note(fmt.Sprintf("%d history events (bare mix %d); Temporal CPU per workflow %.1f ms (bare mix %.1f)",
				shapeCeil.Events, ceil.Events, ms(shapeCeil.TemporalCPU), ms(ceil.TemporalCPU))))
	}
	rows = append(rows, partRows...)
	rows = append(rows, callRows(part, trials, ceilings, shapeCeil, shapeErr == nil, log)...)
	put50 := row(part, "provision request (PUT target active) p50", ms(percentile(accepts, 50)), "ms")
	put99 := row(part, "provision request p99", ms(percentile(accepts, 99)), "ms")
	if len(ceil.Starts) > 0 {
		put50 = put50.vs("bare workflow start (ExecuteWorkflow) p50", ms(percentile(ceil.Starts, 50)))
		put99 = put99.vs("bare workflow start p99", ms(percentile(ceil.Starts, 99)))
	}
	rows = append(rows,
		row(part, "time per deploy p50 (PUT → active, provision_updated_at)", ms(percentile(times, 50))/1000, "s"),
		row(part, "time per deploy p99", ms(percentile(times, 99))/1000, "s"),
		put50, put99,
	)
	if len(mixes) > 0 {
		r := row(part, fmt.Sprintf("Temporal history events per deploy (mean of %d)", len(mixes)), meanEvents(mixes), "events")
		if ceil.Events > 0 {
			r = r.vs("bare workflow", float64(ceil.Events))
		}
		bytes := fmt.Sprintf("; history %.1f KiB", meanBytes(mixes)/1024)
		if shapeErr == nil && shapeCeil.Bytes > 0 {
			bytes += fmt.Sprintf(" (the shape ceiling's %.1f KiB)", float64(shapeCeil.Bytes)/1024)
		}
		rows = append(rows, r.note(fmt.Sprintf("%s, %.0f signals, %.0f timers per deploy", mixOf(mixes[0].Kinds), meanSignals(mixes), meanTimers(mixes))+bytes))
		var sum latencyBreakdown
		for _, m := range mixes {
			sum = sum.add(m.split)
		}
		rows = append(rows, row(part, fmt.Sprintf("mean split of a deploy of the last round (history, %d sampled)", len(mixes)), ms(sum.closed/time.Duration(len(mixes))), "ms").
			note("PUT → workflow closed; "+sum.describe(len(mixes))))
	}
	after := st.usage()
	if fp := lastFootprint; fp.pss > 0 {
		rows = append(rows, row(part, "memory after the last round's deploys, PSS of every process summed (api, worker, Temporal, PostgreSQL)", mib(fp.pss), "MiB").
			note(roleMem(fp.byRole)+"; "+anonFile(st.temporalPID())))
	}
	if active > 0 {
		per := func(d time.Duration) float64 { return ms(d) / float64(deploys) }
		tcpu := row(part, "CPU per deploy: Temporal server", per(used.TemporalCPU), "ms")
		if ceil.TemporalCPU > 0 {
			tcpu = tcpu.vs("bare workflow", ms(ceil.TemporalCPU))
		}
		rows = append(rows,
			row(part, "CPU per deploy: api", per(used.APICPU), "ms"),
			row(part, "CPU per deploy: worker", per(used.WorkerCPU), "ms"),
			tcpu,
			row(part, "CPU per deploy: PostgreSQL", per(used.PostgresCPU), "ms"),
		)
	}
	rows = append(rows,
		row(part, "peak RSS api (VmHWM)", mib(after.APIHWM), "MiB"),
		row(part, "peak RSS worker (VmHWM)", mib(after.WorkerHWM), "MiB"),
	)
	rows = append(rows, pinRows...)
	if prof != nil {
		rows = append(rows, prof.rows(part)...)
	}
	return rows, errors.Join(mixErr, pinErr)
}

// callRows compare what ironflow's deploys ask of the Temporal server with
// what the bare workflows ask: requests to its services and calls to its
// store per deploy, against the shape ceiling's (the same history) where it
// ran, else the mix ceiling's, and the operations where the deploys ask
// more. None without the server's counters (the cluster part).
func callRows(part string, trials []deployTrial, ceilings []ceilingResult, shape ceilingResult, haveShape bool, log *slog.Logger) []Row {
	var own, mix []serverCalls
	for _, tr := range trials {
		own = append(own, tr.calls)
	}
	for _, c := range ceilings {
		mix = append(mix, c.Calls)
	}
	ironflow, base, label := meanCalls(own), meanCalls(mix), "bare workflows of the mix (mean of the rounds)"
	if haveShape && shape.Calls != nil {
		base, label = shape.Calls, "bare workflows of the deploy's shape (one run)"
	}
	if ironflow == nil || base == nil {
		return nil
	}
	log.Debug("Temporal server calls per deploy", "part", part, "ironflow", ironflow.String(), "baseline", base.String())
	rpc := row(part, "Temporal server: requests per deploy (frontend, history and matching services; mean of the rounds)", ironflow.total("rpc"), "requests").
		vs(label, base.total("rpc")).note("most more: " + ironflow.moreThan(base, "rpc", 6))
	db := row(part, "Temporal server: store calls per deploy (persistence requests)", ironflow.total("db"), "calls").
		vs(label, base.total("db")).note("most more: " + ironflow.moreThan(base, "db", 6))
	return []Row{rpc, db}
}

// rotate runs one round of a deploy part's sides (the ceiling and
// ironflow's deploys; pinned, the shape's ceiling too), each first in turn:
// round 0 in the order given, round 1 from the second side, and so on,
// since the machine is shared and the server's state moves over a part. The
// first error ends the round.
func rotate(round int, sides ...func() error) error {
	for i := range sides {
		if err := sides[(i+round)%len(sides)](); err != nil {
			return err
		}
	}
	return nil
}

// deployTrial is one run of ironflow's deploys of every node.
type deployTrial struct {
	rate           float64
	active, failed int
	times, accepts []time.Duration
	firstFailure   string
	used           usage
	// calls are the Temporal server's requests and store calls per deploy
	// (nil without a metrics endpoint).
	calls serverCalls
}

// runDeployTrial deploys every node at once through the API and measures
// the rate from the first request to the last deploy workflow's close.
func runDeployTrial(ctx context.Context, st *stack, nodes []*benchNode, cfg config, agents *agentBooter) (deployTrial, error) {
	var tr deployTrial
	for _, bn := range nodes {
		bn.requested, bn.accepted, bn.activeAt, bn.observedAt = time.Time{}, 0, time.Time{}, time.Time{}
	}
	callsBefore := st.serverCallsBefore(ctx)
	before := st.usage()
	start := time.Now()
	waitErr := deployAll(ctx, st, nodes, cfg, agents)
	tr.used = st.usage().sub(before)
	callsAfter := st.serverCallsAfter(ctx, callsBefore)
	if waitErr != nil && !errors.Is(waitErr, context.DeadlineExceeded) {
		return tr, waitErr
	}
	last := start
	var ids []string
	for _, bn := range nodes {
		tr.accepts = append(tr.accepts, bn.accepted)
		if bn.state != provision.Active {
			tr.failed++
			if tr.firstFailure == "" {
				tr.firstFailure = fmt.Sprintf("%s %q: %s", bn.name, bn.state, bn.lastError)
			}
			continue
		}
		tr.active++
		done := bn.activeAt
		if done.IsZero() || done.Before(bn.requested) {
			done = bn.observedAt
		}
		tr.times = append(tr.times, done.Sub(bn.requested))
		if done.After(last) {
			last = done
		}
		ids = append(ids, workflows.WorkflowID(bn.uuid))
	}
	// The run ends when the last deploy's workflow closed (after it
	// recorded active), measured as the ceiling's workflows are.
	if closed, _, _, err := closeInfo(ctx, st, ids); err != nil {
		st.log.Warn("read deploy workflows' close times; the rate ends at the last active instead", "err", err)
	} else if closed.After(last) {
		last = closed
	}
	if tr.active > 0 {
		tr.rate = float64(tr.active) / last.Sub(start).Seconds()
	}
	tr.calls = callsAfter.per(callsBefore, tr.active+tr.failed)
	return tr, nil
}

// redeployable takes the nodes back to available between rounds (not
// measured): undeploy without cleaning, and for agent deploys the image
// again, which undeploy clears.
func redeployable(ctx context.Context, st *stack, nodes []*benchNode, cfg config, mode deployMode) error {
	errs := forEach(ctx, nodes, cfg.clients, func(ctx context.Context, bn *benchNode) error {
		if bn.state != provision.Active && !isFailed(bn.state) {
			return nil
		}
		_, err := st.call(ctx, http.MethodPut, "/v1/nodes/"+bn.uuid+"/states/provision", map[string]any{"target": provision.VerbDeleted}, nil)
		return err
	})
	if len(errs) > 0 {
		return fmt.Errorf("undeploy: %d refused, first: %w", len(errs), errs[0])
	}
	if err := waitStates(ctx, st, nodes, enrollTimeout, DefaultPollInterval, func(bn *benchNode) bool {
		return bn.state == provision.Available || isFailed(bn.state)
	}, nil); err != nil {
		return fmt.Errorf("wait for available: %w", err)
	}
	for _, bn := range nodes {
		if bn.state != provision.Available {
			return fmt.Errorf("node %s went to %q instead of available: %s", bn.name, bn.state, bn.lastError)
		}
	}
	if err := settle(ctx, st); err != nil {
		return err
	}
	if mode.img == nil {
		return nil
	}
	errs = forEach(ctx, nodes, cfg.clients, func(ctx context.Context, bn *benchNode) error {
		_, err := st.call(ctx, http.MethodPatch, "/v1/nodes/"+bn.uuid, []map[string]any{
			{"op": "add", "path": "/instance_info", "value": mode.instanceInfo()},
		}, nil)
		return err
	})
	if len(errs) > 0 {
		return fmt.Errorf("set instance_info again: %d refused, first: %w", len(errs), errs[0])
	}
	return nil
}

// settle waits until no lifecycle workflow of the nodes runs any more: a
// workflow records its node's new state just before it closes, so nodes
// seen available still have their workflows' last tasks queued on the
// server, and the next measured run would start behind that backlog (the
// ceiling, run after a run that waited for its closes, does not).
func settle(ctx context.Context, st *stack) error {
	query := fmt.Sprintf("WorkflowType IN ('%s', '%s', '%s', '%s') AND ExecutionStatus = 'Running'",
		workflows.WorkflowManageNode, workflows.WorkflowProvideNode, workflows.WorkflowDeployNode, workflows.WorkflowUndeployNode)
	ctx, cancel := context.WithTimeout(ctx, enrollTimeout)
	defer cancel()
	for {
		resp, err := st.tc.CountWorkflow(ctx, &workflowservice.CountWorkflowExecutionsRequest{Query: query})
		if err != nil {
			return fmt.Errorf("count running lifecycle workflows: %w", err)
		}
		if resp.GetCount() == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d lifecycle workflows still running: %w", resp.GetCount(), ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// instanceInfo is what an agent deploy's nodes write.
func (m deployMode) instanceInfo() map[string]any {
	return map[string]any{
		"image_source": m.img.URL + "/disk.raw", "image_os_hash_algo": "sha256", "image_os_hash_value": m.img.sha256,
	}
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

func isFailed(state provision.State) bool {
	return state.Failed() || state == provision.Error
}

func meanEvents(ms []activityMix) float64 {
	t := 0
	for _, m := range ms {
		t += m.Events
	}
	return float64(t) / float64(len(ms))
}

func meanBytes(ms []activityMix) float64 {
	var t float64
	for _, m := range ms {
		t += float64(m.Bytes)
	}
	return t / float64(max(len(ms), 1))
}

func meanSignals(ms []activityMix) float64 {
	t := 0
	for _, m := range ms {
		t += m.Signals
	}
	return float64(t) / float64(len(ms))
}

func meanTimers(ms []activityMix) float64 {
	t := 0
	for _, m := range ms {
		t += m.Timers
	}
	return float64(t) / float64(len(ms))
}

// sampleHistories reads the histories of up to k active nodes' deploys.
func sampleHistories(ctx context.Context, st *stack, nodes []*benchNode, k int) ([]activityMix, error) {
	var out []activityMix
	step := max(len(nodes)/k, 1)
	for i := 0; i < len(nodes) && len(out) < k; i += step {
		if nodes[i].state != provision.Active {
			continue
		}
		m, err := readMix(ctx, st.tc, workflows.WorkflowID(nodes[i].uuid))
		if err != nil {
			return out, err
		}
		if m.split, err = readBreakdown(ctx, st.tc, workflows.WorkflowID(nodes[i].uuid), nodes[i].requested); err != nil {
			return out, err
		}
		out = append(out, m)
	}
	return out, nil
}

// enrollNodes creates n nodes through the API and takes them to available:
// create (with a port for agent deploys), manage, provide.
func enrollNodes(ctx context.Context, st *stack, n int, mode deployMode, clients int) ([]*benchNode, error) {
	runID := time.Now().UnixNano() % 1_000_000
	nodes := make([]*benchNode, n)
	for i := range nodes {
		nodes[i] = &benchNode{
			name: fmt.Sprintf("bench-%s-%d-%d", mode.part, runID, i),
			mac:  fmt.Sprintf("52:54:%02x:%02x:%02x:%02x", (runID>>8)&0xff, runID&0xff, (i>>8)&0xff, i&0xff),
		}
	}
	errs := forEach(ctx, nodes, clients, func(ctx context.Context, bn *benchNode) error {
		body := map[string]any{
			"name": bn.name, "driver": "fake-hardware", "deploy_interface": mode.deployInterface, "automated_clean": false,
			"properties": map[string]any{"cpus": 2, "memory_mb": 2048, "local_gb": 20},
		}
		if mode.img != nil {
			body["instance_info"] = mode.instanceInfo()
		}
		var created struct {
			UUID string `json:"uuid"`
		}
		if _, err := st.call(ctx, http.MethodPost, "/v1/nodes", body, &created); err != nil {
			return fmt.Errorf("create node %s: %w", bn.name, err)
		}
		bn.uuid = created.UUID
		if mode.img != nil {
			if _, err := st.call(ctx, http.MethodPost, "/v1/ports", map[string]any{"address": bn.mac, "node_uuid": bn.uuid}, nil); err != nil {
				return fmt.Errorf("create port of %s: %w", bn.name, err)
			}
		}
		return nil
	})
	if len(errs) > 0 {
		return nil, fmt.Errorf("%d nodes not created, first: %w", len(errs), errs[0])
	}
	for _, step := range []struct {
		verb  provision.Verb
		state provision.State
	}{{provision.VerbManage, provision.Manageable}, {provision.VerbProvide, provision.Available}} {
		errs := forEach(ctx, nodes, clients, func(ctx context.Context, bn *benchNode) error {
			_, err := st.call(ctx, http.MethodPut, "/v1/nodes/"+bn.uuid+"/states/provision", map[string]any{"target": step.verb}, nil)
			return err
		})
		if len(errs) > 0 {
			return nil, fmt.Errorf("%s: %d refused, first: %w", step.verb, len(errs), errs[0])
		}
		if err := waitStates(ctx, st, nodes, enrollTimeout, DefaultPollInterval, func(bn *benchNode) bool {
			return bn.state == step.state || isFailed(bn.state)
		}, nil); err != nil {
			return nil, fmt.Errorf("wait for %s: %w", step.state, err)
		}
		for _, bn := range nodes {
			if bn.state != step.state {
				return nil, fmt.Errorf("node %s went to %q instead of %q: %s", bn.name, bn.state, step.state, bn.lastError)
			}
		}
	}
	return nodes, nil
}

// forEach runs fn on every node with a pool of workers and returns the errors.
func forEach(ctx context.Context, nodes []*benchNode, workers int, fn func(context.Context, *benchNode) error) []error {
	var (
		mu   sync.Mutex
		errs []error
		wg   sync.WaitGroup
	)
	jobs := make(chan *benchNode)
	for range min(workers, len(nodes)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for bn := range jobs {
				if err := fn(ctx, bn); err != nil {
					mu.Lock()
					errs = append(errs, err)
					mu.Unlock()
				}
			}
		}()
	}
	for _, bn := range nodes {
		if ctx.Err() != nil {
			break
		}
		jobs <- bn
	}
	close(jobs)
	wg.Wait()
	return errs
}

// listedNode is the part of a listed node the polling reads.
type listedNode struct {
	UUID               string          `json:"uuid"`
	ProvisionState     provision.State `json:"provision_state"`
	ProvisionUpdatedAt *string         `json:"provision_updated_at"`
	LastError          *string         `json:"last_error"`
}

// listStates reads every node's state, a page of 1,000 at a time: one
// request per page rather than one per node keeps the poller's own load on
// the API small.
func listStates(ctx context.Context, st *stack) (map[string]listedNode, error) {
	return listTarget(ctx, st, "uuid,provision_state,provision_updated_at,last_error")
}

// waitStates polls until done holds for every node or timeout; onPoll sees
// each node not yet done after every poll.
func waitStates(ctx context.Context, st *stack, nodes []*benchNode, timeout, every time.Duration, done func(*benchNode) bool, onPoll func(*benchNode)) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for {
		states, err := listStates(ctx, st)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return err
		}
		now := time.Now()
		pending := 0
		for _, bn := range nodes {
			l, ok := states[bn.uuid]
			if !ok {
				return fmt.Errorf("node %s is gone", bn.name)
			}
			if bn.state != l.ProvisionState || bn.observedAt.IsZero() {
				bn.state = l.ProvisionState
				bn.lastError = deref(l.LastError)
				if l.ProvisionUpdatedAt != nil {
					bn.activeAt = parseTime(*l.ProvisionUpdatedAt)
				}
			}
			if done(bn) {
				if bn.observedAt.IsZero() {
					bn.observedAt = now
				}
				continue
			}
			bn.observedAt = time.Time{}
			pending++
			if onPoll != nil {
				onPoll(bn)
			}
		}
		if pending == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d of %d nodes not done: %w", pending, len(nodes), ctx.Err())
		case <-time.After(every):
		}
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// parseTime reads the API's timestamps (ISO 8601 with offset).
func parseTime(s string) time.Time {
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.999999-07:00", "2006-01-02T15:04:05.999999"} {
		if t, err := time.Parse(layout, s); err == nil {
			return t
		}
	}
	return time.Time{}
}

// agentBooter plays the machines of the agent part: when a node waits for
// its call-back and no simulated agent runs for it, it boots one, as the
// machine would after its network boot.
type agentBooter struct {
	st       *stack
	interval time.Duration
	mu       sync.Mutex
	all      []*sim.Agent
	boots    atomic.Int64
}

func (b *agentBooter) boot(ctx context.Context, bn *benchNode) {
	if bn.agent != nil && bn.agent.PoweredOn() {
		return
	}
	a, err := sim.Start(ctx, sim.Config{APIURL: b.st.APIURL, MACs: []string{bn.mac}, HeartbeatInterval: b.interval})
	if err != nil {
		b.st.log.Warn("boot simulated agent", "node", bn.name, "err", err)
		return
	}
	bn.agent = a
	b.boots.Add(1)
	b.mu.Lock()
	b.all = append(b.all, a)
	b.mu.Unlock()
}

func (b *agentBooter) stopAll() {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, a := range b.all {
		if a.PoweredOn() {
			a.Stop()
		}
	}
}

// imageServer serves one random image from memory on 127.0.0.1.
type imageServer struct {
	URL    string
	sha256 string
	srv    *http.Server
}

func newImageServer(size int) (*imageServer, error) {
	data := make([]byte, size)
	_, _ = crand.Read(data)
	sum := sha256.Sum256(data)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen for the image server: %w", err)
	}
	s := &imageServer{URL: "http://" + ln.Addr().String(), sha256: hex.EncodeToString(sum[:])}
	s.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.ServeContent(w, r, "disk.raw", time.Time{}, bytes.NewReader(data))
	}), ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

func (s *imageServer) Close() { _ = s.srv.Close() }

// deployAll asks for every node's deploy through the API with a pool of
// clients and polls until each is active or failed; with agents, it boots a
// simulated agent for each node that waits for its call-back.
func deployAll(ctx context.Context, st *stack, nodes []*benchNode, cfg config, agents *agentBooter) error {
	if agents != nil {
		// Agents are booted as soon as their node waits, as a machine
		// would, by a watcher that asks only for the waiting nodes.
		wctx, stop := context.WithCancel(ctx)
		defer stop()
		byUUID := make(map[string]*benchNode, len(nodes))
		for _, bn := range nodes {
			byUUID[bn.uuid] = bn
		}
		go agents.watch(ctx, wctx, byUUID)
	}
	errs := forEach(ctx, nodes, cfg.clients, func(ctx context.Context, bn *benchNode) error {
		bn.requested = time.Now()
		_, err := st.call(ctx, http.MethodPut, "/v1/nodes/"+bn.uuid+"/states/provision", map[string]any{"target": provision.VerbActive}, nil)
		bn.accepted = time.Since(bn.requested)
		return err
	})
	if len(errs) > 0 {
		return fmt.Errorf("%d deploy requests refused, first: %w", len(errs), errs[0])
	}
	// The rate ends at the workflows' close times on the server, so how
	// often the nodes are polled does not move it; polling less keeps the
	// bench's own list requests from loading the API and PostgreSQL that
	// the deploys use.
	return waitStates(ctx, st, nodes, cfg.deployTimeout, deployPollInterval, func(bn *benchNode) bool {
		return bn.state == provision.Active || isFailed(bn.state)
	}, nil)
}

// watch boots an agent for every node of nodes that waits for its
// call-back, checking every agentPollInterval until wctx ends; the agents
// live on with ctx.
func (b *agentBooter) watch(ctx, wctx context.Context, nodes map[string]*benchNode) {
	q := url.Values{"provision_state": {string(provision.DeployWait)}, "fields": {"uuid"}, "limit": {"1000"}}
	for {
		var page struct {
			Nodes []listedNode `json:"nodes"`
		}
		if _, err := b.st.call(wctx, http.MethodGet, "/v1/nodes?"+q.Encode(), nil, &page); err == nil {
			for _, n := range page.Nodes {
				if bn, ok := nodes[n.UUID]; ok {
					b.boot(ctx, bn)
				}
			}
		}
		select {
		case <-wctx.Done():
			return
		case <-time.After(agentPollInterval):
		}
	}
}
