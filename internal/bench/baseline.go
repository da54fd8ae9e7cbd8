package main

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/url"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ironflow/ironflow/provision"
)

// The ironic part: Debian's Ironic 21.4 all-in-one and ironflow (a stack of
// its own, and the Temporal cluster's with -cluster) driven by the same
// client code — raw HTTP, the same microversion, the same pool of client
// goroutines — through the same workloads, in alternating rounds.
const (
	// DefaultLifecycleClients is the client pool of the ironic part.
	DefaultLifecycleClients = 16
	// DefaultLifecycleRounds: each size runs this many rounds, the targets'
	// order alternating, and medians are compared. Three, so that one
	// round's stall (100 nodes take 2 s a step on ironflow; a round of the
	// same build moved by 2x in either direction) does not set the median.
	DefaultLifecycleRounds = 3
	// DefaultLifecycleSizes are the full set.
	DefaultLifecycleSizes = "100,500,1000"
	// DefaultLifecycleOnceFrom: sizes from this one up run a single round
	// whatever -lifecycle-rounds says, to keep make bench under 40 minutes
	// on 2 cores (Ironic took 7.7 minutes for the five steps of 1,000
	// nodes, the whole part 11.5 minutes at that size alone).
	DefaultLifecycleOnceFrom = 500
	lifecycleTimeout         = 10 * time.Minute
	lifecyclePoll            = time.Second
	// listRequests and showRequests are each latency measure's requests,
	// spread over the client pool.
	listRequests = 32
	showRequests = 800
)

// lifecycleSteps are the workloads in order; every step but enroll is a
// provision verb and the state that ends it.
var lifecycleSteps = []struct {
	name   string
	verb   provision.Verb
	state  provision.State
	detail string
}{
	{"enroll", "", "", "POST node + POST port"},
	{"manage", provision.VerbManage, provision.Manageable, "enroll → manageable (power read)"},
	{"provide", provision.VerbProvide, provision.Available, "manageable → available, no cleaning"},
	{"deploy", provision.VerbActive, provision.Active, "available → active, fake deploy"},
	{"undeploy", provision.VerbDeleted, provision.Available, "active → available, no cleaning"},
}

// target is one service the part drives.
type target struct {
	name string
	url  string
	hc   *http.Client
	// procs are the processes the service is made of, by role: each with
	// its descendants counts in its footprint.
	procs func() map[string]int
	// seed adds n nodes directly in the service's database (setup).
	seed func(ctx context.Context, n int) error
}

func (t *target) call(ctx context.Context, method, path string, body, out any) (int, error) {
	return doJSON(ctx, t.hc, method, t.url+path, body, out)
}

// stepResult is one step of n nodes on one target.
type stepResult struct {
	rate    float64 // nodes/s, first request → last node in the state
	p50     time.Duration
	failed  int
	failure string
	// cpu is the CPU time the target's processes used during the step,
	// per node; cpuByRole the same by process.
	cpu       time.Duration
	cpuByRole map[string]time.Duration
	// slowest is the node whose change ended last: how long its PUT
	// took, and how long from the PUT's answer to the state. It says
	// whether a straggler waited on the API or on its workflow.
	slowest straggler
	// putMax is the longest PUT round trip of the step.
	putMax time.Duration
}

// straggler is the node a step waited for last.
type straggler struct {
	name          string
	put, workflow time.Duration
}

func (s straggler) String() string {
	if s.name == "" {
		return "-"
	}
	return fmt.Sprintf("%s (PUT %s, then %s to the state)", s.name, s.put.Round(time.Millisecond), s.workflow.Round(time.Millisecond))
}

// lifecycleResult is one round of one size on one target.
type lifecycleResult struct {
	steps map[string]stepResult
	// deployCPU is the CPU time the target's processes used during the
	// deploy step, per deployed node.
	deployCPU time.Duration
	// footprint is the target's memory at the end of the deploy step.
	footprint footprint
	cpuByRole map[string]time.Duration
}

// footprint is the memory of a service's process trees.
type footprint struct {
	rss, pss int64
	// anon is the anonymous part of pss (heaps, caches): what the
	// processes hold themselves, apart from their binaries' pages, whose
	// PSS also depends on who else maps the same files.
	anon   int64
	byRole map[string]int64 // PSS
}

func benchIronic(ctx context.Context, cfg config, dir string, log *slog.Logger) ([]Row, error) {
	if !ironicInstalled() {
		return nil, errNoIronic
	}
	ir, err := startIronic(ctx, filepath.Join(dir, "ironic"), log)
	if err != nil {
		return nil, err
	}
	defer ir.stop()
	ironic := &target{name: "Ironic 21.4", url: ir.URL, hc: newHTTPClient(cfg.lifecycleClients * 2),
		procs: func() map[string]int { return map[string]int{"ironic": ir.pid()} }, seed: ir.seed}
	// ironflow on a stack of its own, so that the other parts' nodes and
	// workflows do not weigh on it, nor its on them.
	dev, err := startStack(ctx, cfg, filepath.Join(dir, "ironflow-dev"), log)
	if err != nil {
		if dev != nil {
			dev.stop()
		}
		return nil, fmt.Errorf("start ironflow's stack: %w", err)
	}
	defer dev.stop()
	targets := []*target{ironic, dev.target("ironflow")}
	// Without the cluster (make tools not run, say) the comparison with
	// the dev server's stack still runs; the part reports the error.
	var clusterErr error
	if cfg.cluster {
		cl, err := startClusterStack(ctx, cfg, filepath.Join(dir, "ironflow-cluster"), log)
		if err != nil {
			if cl != nil {
				cl.stop()
			}
			clusterErr = fmt.Errorf("ironflow on the Temporal cluster not measured: %w", err)
			log.Error("cluster target", "err", clusterErr)
		} else {
			defer cl.stop()
			targets = append(targets, cl.target("ironflow (cluster)"))
		}
	}

	var rows []Row
	for _, n := range cfg.lifecycleSizes {
		results := make(map[string][]lifecycleResult)
		rounds := cfg.lifecycleRounds
		if cfg.lifecycleOnceFrom > 0 && n >= cfg.lifecycleOnceFrom {
			rounds = 1
		}
		for round := range rounds {
			order := slices.Clone(targets)
			if round%2 == 1 {
				slices.Reverse(order)
			}
			for _, t := range order {
				waited := waitQuiet(ctx, lifecycleQuietMax)
				log.Info("lifecycle starting", "target", t.name, "nodes", n, "round", round+1, "waited_for_quiet", waited.Round(time.Millisecond))
				res, err := runLifecycle(ctx, t, n, cfg.lifecycleClients, log)
				if err != nil {
					return rows, fmt.Errorf("%s, %d nodes, round %d: %w", t.name, n, round+1, err)
				}
				log.Info("lifecycle done", "target", t.name, "nodes", n, "round", round+1, "rates", res.summary())
				results[t.name] = append(results[t.name], res)
			}
		}
		for _, t := range targets[1:] {
			rows = append(rows, lifecycleRows(t.name, ironic.name, n, cfg, results[t.name], results[ironic.name])...)
		}
	}
	for i, size := range cfg.apiSizes {
		order := slices.Clone(targets)
		if i%2 == 1 {
			slices.Reverse(order)
		}
		lat := map[string]readLatencies{}
		for _, t := range order {
			r, err := measureReads(ctx, t, size, cfg.lifecycleClients, log)
			if err != nil {
				return rows, fmt.Errorf("%s, %d nodes: %w", t.name, size, err)
			}
			lat[t.name] = r
		}
		for _, t := range targets[1:] {
			rows = append(rows, readRows(t.name, ironic.name, cfg.lifecycleClients, lat[t.name], lat[ironic.name])...)
		}
	}
	return rows, clusterErr
}

func (r lifecycleResult) summary() string {
	var parts []string
	for _, s := range lifecycleSteps {
		if st, ok := r.steps[s.name]; ok {
			parts = append(parts, fmt.Sprintf("%s %.1f/s", s.name, st.rate))
		}
	}
	return strings.Join(parts, ", ")
}

// lifecycleQuietMax bounds the wait for a quiet machine before a round
// (waitQuiet).
const lifecycleQuietMax = 30 * time.Second

// runLifecycle enrolls n nodes and takes them through every step, then
// deletes them (not measured).
func runLifecycle(ctx context.Context, t *target, n, clients int, log *slog.Logger) (lifecycleResult, error) {
	return runLifecycleUpTo(ctx, t, n, clients, lifecycleSteps[len(lifecycleSteps)-1].name, false, log)
}

// runLifecycleUpTo is runLifecycle ending with the step named last; with
// keep the nodes stay (the fleet part measures reads and idle cost on
// them, and the stack is thrown away after).
func runLifecycleUpTo(ctx context.Context, t *target, n, clients int, last string, keep bool, log *slog.Logger) (lifecycleResult, error) {
	res := lifecycleResult{steps: map[string]stepResult{}}
	runID := time.Now().UnixNano() % 1_000_000
	nodes := make([]*benchNode, n)
	for i := range nodes {
		nodes[i] = &benchNode{
			name: fmt.Sprintf("bench-lc-%d-%d", runID, i),
			mac:  fmt.Sprintf("52:56:%02x:%02x:%02x:%02x", (runID>>8)&0xff, runID&0xff, (i>>8)&0xff, i&0xff),
		}
	}
	start := time.Now()
	errs := forEach(ctx, nodes, clients, func(ctx context.Context, bn *benchNode) error {
		var created struct {
			UUID string `json:"uuid"`
		}
		if _, err := t.call(ctx, http.MethodPost, "/v1/nodes", map[string]any{
			"name": bn.name, "driver": "fake-hardware", "deploy_interface": "fake", "automated_clean": false,
			"properties": map[string]any{"cpus": 2, "memory_mb": 2048, "local_gb": 20},
		}, &created); err != nil {
			return fmt.Errorf("create node %s: %w", bn.name, err)
		}
		bn.uuid = created.UUID
		if _, err := t.call(ctx, http.MethodPost, "/v1/ports", map[string]any{"address": bn.mac, "node_uuid": bn.uuid}, nil); err != nil {
			return fmt.Errorf("create port of %s: %w", bn.name, err)
		}
		return nil
	})
	if len(errs) > 0 {
		return res, fmt.Errorf("enroll: %d of %d failed, first: %w", len(errs), n, errs[0])
	}
	res.steps["enroll"] = stepResult{rate: float64(n) / time.Since(start).Seconds()}
	if !keep {
		defer deleteNodes(context.WithoutCancel(ctx), t, nodes, clients, log)
	}
	for _, s := range lifecycleSteps[1:] {
		cpu0 := treeCPUByRole(t.procs())
		r, err := transition(ctx, t, nodes, s.verb, s.state, clients)
		if err != nil {
			return res, fmt.Errorf("%s: %w", s.name, err)
		}
		r.cpuByRole = map[string]time.Duration{}
		for role, c := range treeCPUByRole(t.procs()) {
			r.cpuByRole[role] = (c - cpu0[role]) / time.Duration(n)
			r.cpu += c - cpu0[role]
		}
		r.cpu /= time.Duration(n)
		res.steps[s.name] = r
		log.Info("lifecycle step", "target", t.name, "nodes", n, "step", s.name, "rate", fmt.Sprintf("%.1f/s", r.rate),
			"p50", r.p50.Round(time.Millisecond), "put_max", r.putMax.Round(time.Millisecond), "slowest", r.slowest.String())
		if s.verb == provision.VerbActive {
			res.cpuByRole, res.deployCPU = r.cpuByRole, r.cpu
			res.footprint = measureFootprint(t.procs())
		}
		if r.failed == n {
			return res, fmt.Errorf("%s: every node failed, first: %s", s.name, r.failure)
		}
		if s.name == last {
			break
		}
	}
	return res, nil
}

// transition asks every node for verb through the client pool and waits
// until each is in state (or failed). The step ends at the latest
// provision_updated_at of the nodes, the server's own time of the change,
// so that how often the client polls does not move the figure.
func transition(ctx context.Context, t *target, nodes []*benchNode, verb provision.Verb, state provision.State, clients int) (stepResult, error) {
	var r stepResult
	for _, bn := range nodes {
		bn.activeAt, bn.observedAt = time.Time{}, time.Time{}
	}
	start := time.Now()
	errs := forEach(ctx, nodes, clients, func(ctx context.Context, bn *benchNode) error {
		bn.requested = time.Now()
		_, err := t.call(ctx, http.MethodPut, "/v1/nodes/"+bn.uuid+"/states/provision", map[string]any{"target": verb}, nil)
		bn.accepted = time.Since(bn.requested)
		return err
	})
	if len(errs) > 0 {
		return r, fmt.Errorf("%d of %d requests refused, first: %w", len(errs), len(nodes), errs[0])
	}
	if err := waitTarget(ctx, t, nodes, func(bn *benchNode) bool { return bn.state == state || isFailed(bn.state) }); err != nil {
		return r, err
	}
	last := start
	var times []time.Duration
	for _, bn := range nodes {
		if bn.state != state {
			r.failed++
			if r.failure == "" {
				r.failure = fmt.Sprintf("%s %q: %s", bn.name, bn.state, bn.lastError)
			}
			continue
		}
		done := bn.activeAt
		if done.IsZero() || done.Before(bn.requested) {
			done = bn.observedAt
		}
		times = append(times, done.Sub(bn.requested))
		r.putMax = max(r.putMax, bn.accepted)
		if done.After(last) {
			last = done
			r.slowest = straggler{name: bn.name, put: bn.accepted, workflow: done.Sub(bn.requested) - bn.accepted}
		}
	}
	if ok := len(nodes) - r.failed; ok > 0 {
		r.rate = float64(ok) / last.Sub(start).Seconds()
	}
	r.p50 = percentile(times, 50)
	return r, nil
}

// waitTarget polls the target's node list until done holds for every node.
func waitTarget(ctx context.Context, t *target, nodes []*benchNode, done func(*benchNode) bool) error {
	ctx, cancel := context.WithTimeout(ctx, lifecycleTimeout)
	defer cancel()
	for {
		states, err := listTarget(ctx, t, "uuid,provision_state,provision_updated_at,last_error")
		if err != nil {
			return err
		}
		now := time.Now()
		pending := 0
		for _, bn := range nodes {
			l, ok := states[bn.uuid]
			if !ok {
				return fmt.Errorf("node %s is gone", bn.name)
			}
			bn.state, bn.lastError = l.ProvisionState, deref(l.LastError)
			if l.ProvisionUpdatedAt != nil {
				bn.activeAt = parseTime(*l.ProvisionUpdatedAt)
			}
			if !done(bn) {
				pending++
				continue
			}
			if bn.observedAt.IsZero() {
				bn.observedAt = now
			}
		}
		if pending == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%d of %d nodes not done: %w", pending, len(nodes), ctx.Err())
		case <-time.After(lifecyclePoll):
		}
	}
}

// apiCaller is what lists nodes: an ironflow stack or a bench target.
type apiCaller interface {
	call(ctx context.Context, method, path string, body, out any) (int, error)
}

// listTarget reads every node's fields, a page of 1,000 at a time.
func listTarget(ctx context.Context, t apiCaller, fields string) (map[string]listedNode, error) {
	out := map[string]listedNode{}
	marker := ""
	for {
		q := url.Values{"fields": {fields}, "limit": {"1000"}}
		if marker != "" {
			q.Set("marker", marker)
		}
		var page struct {
			Nodes []listedNode `json:"nodes"`
		}
		if _, err := t.call(ctx, http.MethodGet, "/v1/nodes?"+q.Encode(), nil, &page); err != nil {
			return nil, err
		}
		for _, n := range page.Nodes {
			out[n.UUID] = n
		}
		if len(page.Nodes) < 1000 {
			return out, nil
		}
		marker = page.Nodes[len(page.Nodes)-1].UUID
	}
}

// deleteNodes removes a round's nodes (setup of the next, not measured).
func deleteNodes(ctx context.Context, t *target, nodes []*benchNode, clients int, log *slog.Logger) {
	errs := forEach(ctx, nodes, clients, func(ctx context.Context, bn *benchNode) error {
		if bn.uuid == "" {
			return nil
		}
		if !slices.Contains([]provision.State{provision.Available, provision.Manageable, provision.Enroll}, bn.state) && bn.state != "" {
			// A node left elsewhere by a failed step: out of the way first.
			_, _ = t.call(ctx, http.MethodPatch, "/v1/nodes/"+bn.uuid, []map[string]any{{"op": "replace", "path": "/maintenance", "value": true}}, nil)
		}
		_, err := t.call(ctx, http.MethodDelete, "/v1/nodes/"+bn.uuid, nil, nil)
		return err
	})
	if len(errs) > 0 {
		log.Warn("delete the round's nodes", "target", t.name, "failed", len(errs), "first", errs[0])
	}
}

// medianStep is the median over rounds of one step's figure.
func medianStep(rs []lifecycleResult, step string, f func(stepResult) float64) float64 {
	var xs []float64
	for _, r := range rs {
		xs = append(xs, f(r.steps[step]))
	}
	return median(xs)
}

func medianOf(rs []lifecycleResult, f func(lifecycleResult) float64) float64 {
	var xs []float64
	for _, r := range rs {
		xs = append(xs, f(r))
	}
	return median(xs)
}

// lifecycleRows compares one ironflow target with Ironic at one size; every
// ratio reads "times better than Ironic".
func lifecycleRows(name, ironic string, n int, cfg config, mine, theirs []lifecycleResult) []Row {
	var rows []Row
	rounds := fmt.Sprintf("median of %d rounds alternating with %s's", len(mine), ironic)
	for _, s := range lifecycleSteps {
		rate := func(r stepResult) float64 { return r.rate }
		var per []string
		for i := range mine {
			per = append(per, fmt.Sprintf("%.1f/%.1f", mine[i].steps[s.name].rate, theirs[i].steps[s.name].rate))
		}
		r := row("ironic", fmt.Sprintf("%s: %s %d nodes (%s; %d clients)", name, s.name, n, s.detail, cfg.lifecycleClients), medianStep(mine, s.name, rate), "nodes/s").
			vs(fmt.Sprintf("%s, same client, %s", ironic, rounds), medianStep(theirs, s.name, rate)).
			note(fmt.Sprintf("ironflow/Ironic per round: %s nodes/s", strings.Join(per, ", ")))
		if s.verb != "" {
			p50 := func(r stepResult) float64 { return ms(r.p50) / 1000 }
			cpu := func(r stepResult) float64 { return ms(r.cpu) }
			r = r.note(r.Note + fmt.Sprintf("; per node p50 %.2f s vs %.2f s; CPU per node, every process summed, %.1f ms (%s) vs %.1f ms",
				medianStep(mine, s.name, p50), medianStep(theirs, s.name, p50),
				medianStep(mine, s.name, cpu), roleCPU(mine[len(mine)-1].steps[s.name].cpuByRole), medianStep(theirs, s.name, cpu)))
		}
		if f := failures(mine, s.name) + failures(theirs, s.name); f != "" {
			r = r.note(r.Note + "; " + f)
		}
		rows = append(rows, r)
	}
	cpu := func(r lifecycleResult) float64 { return ms(r.deployCPU) }
	rows = append(rows, lowerBetter(row("ironic", fmt.Sprintf("%s: CPU per deploy, every process summed (%d nodes)", name, n), medianOf(mine, cpu), "ms"),
		ironic+" (its one process)", medianOf(theirs, cpu)).note(roleCPU(mine[len(mine)-1].cpuByRole)))
	pss := func(r lifecycleResult) float64 { return mib(r.footprint.pss) }
	rss := func(r lifecycleResult) float64 { return mib(r.footprint.rss) }
	rows = append(rows, lowerBetter(row("ironic", fmt.Sprintf("%s: memory after %d deploys, PSS of every process summed", name, n), medianOf(mine, pss), "MiB"),
		ironic+" (its one process)", medianOf(theirs, pss)).
		note(fmt.Sprintf("RSS summed %.0f MiB vs %.0f MiB (RSS counts PostgreSQL's shared buffers once per backend; PSS splits them); PSS by process: %s",
			medianOf(mine, rss), medianOf(theirs, rss), roleMem(mine[len(mine)-1].footprint.byRole))))
	return rows
}

// lowerBetter sets the baseline of a cost (latency, CPU, memory): the
// ratio is baseline/value, "times better".
func lowerBetter(r Row, name string, base float64) Row {
	r = r.vs(name, base)
	if r.Value > 0 {
		q := base / r.Value
		r.Ratio = &q
	}
	r.LowerIsBetter = true
	return r
}

func failures(rs []lifecycleResult, step string) string {
	for _, r := range rs {
		if s := r.steps[step]; s.failed > 0 {
			return fmt.Sprintf("%d failed (first: %s)", s.failed, s.failure)
		}
	}
	return ""
}

func roleCPU(m map[string]time.Duration) string {
	var parts []string
	for _, role := range sortedKeys(m) {
		parts = append(parts, fmt.Sprintf("%s %.1f ms", role, ms(m[role])))
	}
	return strings.Join(parts, ", ")
}

func roleMem(m map[string]int64) string {
	var parts []string
	for _, role := range sortedKeys(m) {
		parts = append(parts, fmt.Sprintf("%s %.0f MiB", role, mib(m[role])))
	}
	return strings.Join(parts, ", ")
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// readLatencies are the list and show measures of one target.
type readLatencies struct {
	nodes      int
	list, show []time.Duration
	listRate   float64
	showRate   float64
}

// measureReads tops the target up to size nodes and times list (a page of
// 1,000 with details) and show requests from the client pool.
func measureReads(ctx context.Context, t *target, size, clients int, log *slog.Logger) (readLatencies, error) {
	var r readLatencies
	have, err := listTarget(ctx, t, "uuid")
	if err != nil {
		return r, err
	}
	if len(have) < size {
		log.Info("seeding nodes", "target", t.name, "have", len(have), "want", size)
		if err := t.seed(ctx, size-len(have)); err != nil {
			return r, err
		}
		if have, err = listTarget(ctx, t, "uuid"); err != nil {
			return r, err
		}
	}
	r.nodes = len(have)
	uuids := sortedKeys(have)
	if r.list, r.listRate, err = pooled(ctx, t, clients, listRequests, func(int) string { return "/v1/nodes?detail=true&limit=1000" }); err != nil {
		return r, err
	}
	if r.show, r.showRate, err = pooled(ctx, t, clients, showRequests, func(int) string { return "/v1/nodes/" + uuids[rand.IntN(len(uuids))] }); err != nil {
		return r, err
	}
	return r, nil
}

// pooled sends n GETs from a pool of clients and times each.
func pooled(ctx context.Context, t *target, clients, n int, path func(int) string) ([]time.Duration, float64, error) {
	var (
		mu    sync.Mutex
		out   []time.Duration
		first error
		wg    sync.WaitGroup
	)
	jobs := make(chan int)
	start := time.Now()
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range jobs {
				t0 := time.Now()
				_, err := t.call(ctx, http.MethodGet, path(i), nil, nil)
				mu.Lock()
				if err != nil && first == nil {
					first = err
				}
				out = append(out, time.Since(t0))
				mu.Unlock()
			}
		}()
	}
	for i := range n {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	return out, float64(n) / time.Since(start).Seconds(), first
}

func readRows(name, ironic string, clients int, mine, theirs readLatencies) []Row {
	label := fmt.Sprintf("%d nodes (%s: %d), %d clients", mine.nodes, ironic, theirs.nodes, clients)
	p := func(ds []time.Duration, q float64) float64 { return ms(percentile(ds, q)) }
	return []Row{
		lowerBetter(row("ironic", fmt.Sprintf("%s: GET /v1/nodes?detail=true&limit=1000 p50 (%s)", name, label), p(mine.list, 50), "ms"), ironic, p(theirs.list, 50)).
			note(fmt.Sprintf("p99 %.0f ms vs %.0f ms; %.1f vs %.1f lists/s", p(mine.list, 99), p(theirs.list, 99), mine.listRate, theirs.listRate)),
		lowerBetter(row("ironic", fmt.Sprintf("%s: GET /v1/nodes/{uuid} p50 (%s)", name, label), p(mine.show, 50), "ms"), ironic, p(theirs.show, 50)).
			note(fmt.Sprintf("p99 %.1f ms vs %.1f ms; %.0f vs %.0f req/s", p(mine.show, 99), p(theirs.show, 99), mine.showRate, theirs.showRate)),
	}
}
