package main

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	ds := func(ms ...int) []time.Duration {
		out := make([]time.Duration, len(ms))
		for i, m := range ms {
			out[i] = time.Duration(m) * time.Millisecond
		}
		return out
	}
	cases := []struct {
		name string
		in   []time.Duration
		p    float64
		want time.Duration
	}{
		{"empty", nil, 50, 0},
		{"one", ds(7), 99, 7 * time.Millisecond},
		{"median of unsorted", ds(5, 1, 4, 2, 3), 50, 3 * time.Millisecond},
		{"p99 of 100 is the 99th", ds(seq(1, 100)...), 99, 99 * time.Millisecond},
		{"p100 is the max", ds(3, 9, 1), 100, 9 * time.Millisecond},
		{"p0 is the min", ds(3, 9, 1), 0, 1 * time.Millisecond},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := percentile(c.in, c.p); got != c.want {
				t.Errorf("percentile(%v, %v) = %v, want %v", c.in, c.p, got, c.want)
			}
		})
	}
}

func seq(from, to int) []int {
	var out []int
	for i := from; i <= to; i++ {
		out = append(out, i)
	}
	return out
}

// The generated image must be the same bytes however it is read: whole,
// in odd-sized pieces, or from a range (the agent resumes with Range).
func TestPatternReaderServesTheSameBytes(t *testing.T) {
	block := []byte("0123456789abcdef")
	const size = 1000
	want := bytes.Repeat(block, size/len(block)+1)[:size]
	whole, err := io.ReadAll(&patternReader{block: block, size: size})
	if err != nil || !bytes.Equal(whole, want) {
		t.Fatalf("whole read: %v, equal %v", err, bytes.Equal(whole, want))
	}
	r := &patternReader{block: block, size: size}
	var got []byte
	buf := make([]byte, 7)
	for {
		n, err := r.Read(buf)
		got = append(got, buf[:n]...)
		if err == io.EOF {
			break
		}
	}
	if !bytes.Equal(got, want) {
		t.Fatal("piecewise read differs")
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.ServeContent(w, r, "disk.raw", time.Time{}, &patternReader{block: block, size: size})
	}))
	defer srv.Close()
	req, _ := http.NewRequest(http.MethodGet, srv.URL, nil)
	req.Header.Set("Range", "bytes=333-")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	part, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusPartialContent || !bytes.Equal(part, want[333:]) {
		t.Fatalf("range read: HTTP %d, %d bytes, equal %v", resp.StatusCode, len(part), bytes.Equal(part, want[333:]))
	}
}

func TestTableMarksReferenceRowsAndRatios(t *testing.T) {
	rep := &report{Rows: []Row{
		row("control", "deploy rate", 4, "nodes/s").vs("ceiling", 8),
		{Part: "control", Measure: "Ironic", Unit: "nodes/s", Baseline: "recorded elsewhere", Reference: true},
	}}
	var b strings.Builder
	printTable(&b, rep)
	out := b.String()
	for _, want := range []string{"| control | deploy rate | 4 nodes/s | ceiling: 8 nodes/s | 0.50 |", "| control | Ironic | — | recorded elsewhere |"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}

// A workflow task that failed or timed out is retried: the split names
// it, since its retry is time no other figure shows.
func TestBreakdownDescribeNamesFailedWorkflowTasks(t *testing.T) {
	b := latencyBreakdown{tasks: 3, taskQueue: 30 * time.Millisecond}
	if got := b.describe(1); strings.Contains(got, "failed") {
		t.Errorf("describe without failures = %q, mentions failures", got)
	}
	b = b.add(latencyBreakdown{tasks: 2, taskFailures: 1})
	if got := b.describe(1); !strings.Contains(got, "; 1.0 workflow tasks failed or timed out") || !strings.Contains(got, "5.0 workflow tasks") {
		t.Errorf("describe = %q, want 5 tasks and 1 failed or timed out", got)
	}
}
