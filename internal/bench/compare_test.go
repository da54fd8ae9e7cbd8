package main

import (
	"strings"
	"testing"
	"time"
)

// The compare part's rows are the medians of either build's trials, this
// build against the baseline, with every round's pair in the note.
func TestCompareRowsAreMediansOfEitherBuild(t *testing.T) {
	trial := func(rate float64, cpu time.Duration) deployTrial {
		return deployTrial{rate: rate, active: 10, used: usage{APICPU: cpu / 2, WorkerCPU: cpu / 2}}
	}
	base := &compareBuild{name: "baseline", trials: []deployTrial{trial(10, 100*time.Millisecond), trial(30, 300*time.Millisecond), trial(20, 200*time.Millisecond)}}
	cur := &compareBuild{name: "this build", trials: []deployTrial{trial(12, 90*time.Millisecond), trial(11, 80*time.Millisecond), trial(40, 70*time.Millisecond)}}
	rows := compareRows(config{nodes: 10, clients: 4, compareRounds: 3, compareBin: "/base/ironflow"}, base, cur)
	if len(rows) != 2 {
		t.Fatalf("rows = %d, want 2", len(rows))
	}
	rate, cpu := rows[0], rows[1]
	if rate.Value != 12 || *rate.BaseVal != 20 {
		t.Errorf("deploy rate = %v vs %v, want the medians 12 vs 20", rate.Value, *rate.BaseVal)
	}
	// 80 ms over 10 deploys is 8 ms; the baseline's median 200 ms is 20.
	if cpu.Value != 8 || *cpu.BaseVal != 20 {
		t.Errorf("CPU per deploy = %v vs %v ms, want 8 vs 20", cpu.Value, *cpu.BaseVal)
	}
	if !cpu.LowerIsBetter || *cpu.Ratio != 2.5 {
		t.Errorf("CPU per deploy is a cost: ratio %v (want baseline/this build, 2.5), lower is better %v", *cpu.Ratio, cpu.LowerIsBetter)
	}
	if !strings.Contains(rate.Note, "12.0/10.0, 11.0/30.0, 40.0/20.0") || !strings.Contains(rate.Baseline, "/base/ironflow") {
		t.Errorf("rate row's note %q or baseline %q lacks a round or the binary", rate.Note, rate.Baseline)
	}
}
