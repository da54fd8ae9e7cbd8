package main

import (
	"fmt"
	"io"
	"math"
	"runtime"
	"slices"
	"strings"
	"time"
)

// Row is one measure: ironflow's figure and, where one exists, the baseline
// measured in the same run. Higher-is-better says how to read the ratio.
type Row struct {
	Part     string   `json:"part"`
	Measure  string   `json:"measure"`
	Value    float64  `json:"value"`
	Unit     string   `json:"unit"`
	Baseline string   `json:"baseline,omitempty"`
	BaseVal  *float64 `json:"baseline_value,omitempty"`
	// Ratio is Value / BaseVal, or BaseVal / Value for a cost
	// (LowerIsBetter): either way above 1 means ironflow does better.
	Ratio         *float64 `json:"ratio,omitempty"`
	LowerIsBetter bool     `json:"lower_is_better,omitempty"`
	Note          string   `json:"note,omitempty"`
	// Reference rows are recorded elsewhere, not measured in this run.
	Reference bool `json:"reference,omitempty"`
}

type report struct {
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
	Machine  string    `json:"machine"`
	Rows     []Row     `json:"rows"`
	Errors   []string  `json:"errors,omitempty"`
}

func row(part, measure string, v float64, unit string) Row {
	return Row{Part: part, Measure: measure, Value: v, Unit: unit}
}

// vs sets the baseline and the ratio.
func (r Row) vs(name string, base float64) Row {
	r.Baseline = name
	b := base
	r.BaseVal = &b
	if base != 0 {
		q := r.Value / base
		r.Ratio = &q
	}
	return r
}

func (r Row) note(s string) Row { r.Note = s; return r }

func printTable(w io.Writer, rep *report) {
	fmt.Fprintf(w, "\nironflow benchmarks, %s, %s (%s)\n\n", rep.Started.Format(time.RFC3339), rep.Machine, rep.Finished.Sub(rep.Started).Round(time.Second))
	fmt.Fprintln(w, "| part | measure | ironflow | baseline (same run) | ratio | note |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|")
	for _, r := range rep.Rows {
		val := formatValue(r.Value, r.Unit)
		if r.Reference {
			val = "—"
		}
		base := ""
		if r.BaseVal != nil {
			base = r.Baseline + ": " + formatValue(*r.BaseVal, r.Unit)
		} else if r.Baseline != "" {
			base = r.Baseline
		}
		ratio := ""
		if r.Ratio != nil {
			ratio = fmt.Sprintf("%.2f", *r.Ratio)
		}
		fmt.Fprintf(w, "| %s | %s | %s | %s | %s | %s |\n", r.Part, esc(r.Measure), val, esc(base), ratio, esc(r.Note))
	}
	for _, e := range rep.Errors {
		fmt.Fprintf(w, "\nERROR %s\n", e)
	}
	fmt.Fprintln(w)
}

func esc(s string) string { return strings.ReplaceAll(s, "|", `\|`) }

func formatValue(v float64, unit string) string {
	switch {
	case math.IsNaN(v):
		return "n/a"
	case v == math.Trunc(v) && math.Abs(v) < 1e6:
		return fmt.Sprintf("%.0f %s", v, unit)
	case math.Abs(v) >= 100:
		return fmt.Sprintf("%.0f %s", v, unit)
	case math.Abs(v) >= 10:
		return fmt.Sprintf("%.1f %s", v, unit)
	default:
		return fmt.Sprintf("%.2f %s", v, unit)
	}
}

// percentile returns the p-th percentile (0..100) of ds by the nearest-rank
// method; NaN-free: an empty sample gives 0.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	rank := int(math.Ceil(p / 100 * float64(len(s))))
	rank = min(max(rank, 1), len(s))
	return s[rank-1]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func numCPU() int { return runtime.NumCPU() }
