package main

import (
	"context"
	"fmt"
	"math"
	"slices"
	"time"

	"go.temporal.io/api/workflowservice/v1"

	"github.com/ironflow/ironflow/workflows"
)

// obsGoal is the cost the obs part's goal allows: metrics and tracing on
// cost less than 3 % of the deploy rate and of the CPU per deploy.
const obsGoal = 0.03

// medianCI is a distribution-free confidence interval of the median of
// xs: the k-th smallest and the k-th largest value, k the largest rank at
// which the interval still holds the median with probability ≥ 95 % (the
// sign test's binomial, which asks nothing of the distribution but that
// the values be independent). ok is false for fewer than 6 values, where
// even the whole range holds the median with less than 95 %.
func medianCI(xs []float64) (lo, hi, coverage float64, ok bool) {
	n := len(xs)
	s := slices.Clone(xs)
	slices.Sort(s)
	// below(k) is P(Bin(n, ½) < k): the chance that fewer than k values
	// fall below the median.
	below := func(k int) float64 {
		var p float64
		for i := range k {
			p += binom(n, i)
		}
		return p / math.Pow(2, float64(n))
	}
	k := 0
	for c := 1; c <= n/2; c++ {
		if cov := 1 - 2*below(c); cov >= 0.95 {
			k, coverage = c, cov
		}
	}
	if k == 0 {
		return 0, 0, 0, false
	}
	return s[k-1], s[n-k], coverage, true
}

func binom(n, k int) float64 {
	r := 1.0
	for i := 1; i <= k; i++ {
		r = r * float64(n-k+i) / float64(i)
	}
	return r
}

// obsVerdict reads a confidence interval of a cost (on's extra share over
// off, as a fraction) against the goal: met when all of it lies under
// the goal, missed when all of it lies over, not shown otherwise.
func obsVerdict(lo, hi float64, ok bool) string {
	switch {
	case !ok:
		return "not shown (too few rounds for a 95 % interval: 6 or more)"
	case hi < obsGoal:
		return "met"
	case lo > obsGoal:
		return "missed"
	default:
		return "not shown (the interval holds the goal)"
	}
}

// costs are the per-round costs of on over off: for a measure where less
// is better (CPU) on/off − 1, for one where more is better (rate)
// 1 − on/off. Round i pairs the i-th trial of either side; the order of
// the two alternates by round, so that two rounds make an ABBA and a
// drift of the machine over the run weighs on both sides alike.
func costs(on, off []float64, lowerIsBetter bool) []float64 {
	var cs []float64
	for i := range min(len(on), len(off)) {
		if off[i] == 0 {
			continue
		}
		r := on[i] / off[i]
		if lowerIsBetter {
			cs = append(cs, r-1)
		} else {
			cs = append(cs, 1-r)
		}
	}
	return cs
}

// costRow is the row of one measure's per-round costs: their median, its
// 95 % interval and the verdict against the goal.
func costRow(measure string, cs []float64) Row {
	lo, hi, cov, ok := medianCI(cs)
	r := row("obs", measure, 100*median(cs), "%")
	note := fmt.Sprintf("goal < %.0f %%: %s; per round: %s %%", 100*obsGoal, obsVerdict(lo, hi, ok), joinFloats(scale(cs, 100), "%+.1f"))
	if ok {
		note = fmt.Sprintf("95 %% interval of the median (sign test, %.1f %% coverage): %+.1f to %+.1f %%; ", 100*cov, 100*lo, 100*hi) + note
	}
	return r.note(note)
}

func scale(xs []float64, f float64) []float64 {
	out := make([]float64, len(xs))
	for i, x := range xs {
		out[i] = x * f
	}
	return out
}

// historyPerDeploy is the mean length, in events and in bytes, of the
// histories of the deploy workflows started since since. Metrics record
// nothing in a history; tracing adds its span context to the headers of
// the workflow's starts and of its activities' schedules, which the
// Temporal server stores and sends. Unlike CPU it is exact, so it tells
// how much more work on gives the server than off.
func historyPerDeploy(ctx context.Context, st *stack, since time.Time) (events, bytes float64, n int, err error) {
	query := fmt.Sprintf("WorkflowType = '%s' AND StartTime >= '%s'", workflows.WorkflowDeployNode, since.UTC().Format(time.RFC3339Nano))
	var token []byte
	for {
		resp, err := st.tc.ListWorkflow(ctx, &workflowservice.ListWorkflowExecutionsRequest{Query: query, NextPageToken: token, PageSize: 1000})
		if err != nil {
			return 0, 0, 0, fmt.Errorf("list the trial's deploy workflows: %w", err)
		}
		for _, ex := range resp.GetExecutions() {
			events += float64(ex.GetHistoryLength())
			bytes += float64(ex.GetHistorySizeBytes())
			n++
		}
		if token = resp.GetNextPageToken(); len(token) == 0 {
			break
		}
	}
	if n == 0 {
		return 0, 0, 0, fmt.Errorf("no deploy workflow started since %s in the Temporal server's visibility", since.Format(time.RFC3339))
	}
	return events / float64(n), bytes / float64(n), n, nil
}
