package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"go.temporal.io/api/workflowservice/v1"

	"github.com/ironflow/ironflow/provision"
	"github.com/ironflow/ironflow/workflows"
)

// The rollout part (docs/benchmarks.md, "Rollouts"): -rollout-nodes fake
// deploys started directly (the shared client pool's PUTs) and as one
// rollout in waves of -rollout-wave, alternating, -rounds times. The rate of
// each is the nodes over the time from the first request to the last
// node's provision_updated_at in active (so the poll interval does not
// count); the goal is a ratio of at least 0.9. The rollout's history stays
// bounded: it continues as new every 500 starts (the API's default), and
// the part reports the events of its longest run.
const (
	DefaultRolloutNodes = 1000
	DefaultRolloutWave  = 100
	// rolloutPoll is the rollout's poll_seconds: how soon it sees a node
	// end (the API's floor is 0.05).
	rolloutPoll = 0.2
)

func benchRollout(ctx context.Context, cfg config, st *stack, log *slog.Logger) ([]Row, error) {
	mode := deployMode{part: "rollout", deployInterface: "fake"}
	nodes, err := enrollNodes(ctx, st, cfg.rolloutNodes, mode, cfg.clients)
	if err != nil {
		return nil, err
	}
	uuids := make([]string, len(nodes))
	for i, bn := range nodes {
		uuids[i] = bn.uuid
	}
	var direct, viaRollout []float64
	var maxEvents int64
	var runs int
	measure := func(start time.Time) (float64, error) {
		var last time.Time
		for _, bn := range nodes {
			if bn.state != provision.Active {
				return 0, fmt.Errorf("node %s ended %q: %s", bn.name, bn.state, bn.lastError)
			}
			if bn.activeAt.After(last) {
				last = bn.activeAt
			}
		}
		return float64(len(nodes)) / last.Sub(start).Seconds(), nil
	}
	directRun := func() error {
		start := time.Now()
		if err := deployAll(ctx, st, nodes, cfg, nil); err != nil {
			return err
		}
		rate, err := measure(start)
		if err != nil {
			return err
		}
		direct = append(direct, rate)
		log.Info("rollout part: direct deploys", "nodes", len(nodes), "rate", fmt.Sprintf("%.1f/s", rate))
		return redeployable(ctx, st, nodes, cfg, mode)
	}
	var viaRolling []float64
	rolloutRun := func(rolling bool) error {
		start := time.Now()
		var created struct {
			UUID string `json:"uuid"`
		}
		if _, err := st.call(ctx, http.MethodPost, "/ironflow/v1/rollouts", map[string]any{
			"operation": map[string]any{"target": "active"}, "selector": map[string]any{"nodes": uuids},
			"wave_size": cfg.rolloutWave, "poll_seconds": rolloutPoll, "rolling": rolling,
		}, &created); err != nil {
			return fmt.Errorf("create the rollout: %w", err)
		}
		if err := waitStates(ctx, st, nodes, cfg.deployTimeout, deployPollInterval, func(bn *benchNode) bool {
			return bn.state == provision.Active || isFailed(bn.state)
		}, nil); err != nil {
			return err
		}
		rate, err := measure(start)
		if err != nil {
			return err
		}
		if rolling {
			viaRolling = append(viaRolling, rate)
		} else {
			viaRollout = append(viaRollout, rate)
		}
		// The rollout's own history: every run of it, bounded by
		// continue-as-new.
		ev, n, err := rolloutHistory(ctx, st, created.UUID)
		if err != nil {
			return err
		}
		maxEvents, runs = max(maxEvents, ev), n
		log.Info("rollout part: one rollout", "nodes", len(nodes), "wave", cfg.rolloutWave, "rolling", rolling, "rate", fmt.Sprintf("%.1f/s", rate),
			"runs", n, "longest_run_events", ev)
		return redeployable(ctx, st, nodes, cfg, mode)
	}
	for round := range cfg.rounds {
		if err := rotate(round, directRun, func() error { return rolloutRun(false) }, func() error { return rolloutRun(true) }); err != nil {
			return nil, fmt.Errorf("round %d: %w", round, err)
		}
	}
	d, r, rr := median(direct), median(viaRollout), median(viaRolling)
	ratio, rratio := r/d, rr/d
	per := func(xs []float64) string {
		s := ""
		for i, x := range xs {
			if i > 0 {
				s += ", "
			}
			s += fmt.Sprintf("%.1f", x)
		}
		return s
	}
	return []Row{
		{Part: "rollout", Measure: fmt.Sprintf("deploy rate of a %d-node rollout of fake deploys in waves of %d (median of %d rounds alternating with direct deploys)",
			len(nodes), cfg.rolloutWave, cfg.rounds), Value: r, Unit: "nodes/s",
			Baseline: "the same deploys started directly", BaseVal: &d, Ratio: &ratio,
			Note: fmt.Sprintf("goal: ratio ≥ 0.9; a wave starts when the one before has ended; rollout per round: %s; direct per round: %s", per(viaRollout), per(direct))},
		{Part: "rollout", Measure: fmt.Sprintf("deploy rate of the same rollout with rolling waves (%q: a wave's nodes start as the one before frees its slots, at most %d at once)",
			"rolling", cfg.rolloutWave), Value: rr, Unit: "nodes/s",
			Baseline: "the same deploys started directly", BaseVal: &d, Ratio: &rratio,
			Note: fmt.Sprintf("goal: ratio ≥ 0.9; rolling rollout per round: %s", per(viaRolling))},
		{Part: "rollout", Measure: "events in the longest run of the rollout's workflow (continue-as-new every 500 starts)", Value: float64(maxEvents), Unit: "events",
			Note: fmt.Sprintf("%d runs for %d nodes: the parent's history stays bounded", runs, len(nodes))},
	}, nil
}

// rolloutHistory is the event count of the longest run of rollout id's
// workflow, and how many runs it had.
func rolloutHistory(ctx context.Context, st *stack, id string) (int64, int, error) {
	resp, err := st.tc.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{
		Query: fmt.Sprintf("WorkflowId = '%s'", workflows.RolloutWorkflowID(id))})
	if err != nil {
		return 0, 0, fmt.Errorf("list the rollout's runs: %w", err)
	}
	var longest int64
	for _, ex := range resp.GetExecutions() {
		longest = max(longest, ex.GetHistoryLength())
	}
	return longest, len(resp.GetExecutions()), nil
}
