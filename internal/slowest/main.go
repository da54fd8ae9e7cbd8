// Command slowest reads `go test -json` on its standard input, prints what
// plain `go test` would (the failing tests' output and each package's
// ok/FAIL line, as they come), and at the end the slowest top-level tests
// with their package and seconds: make test pipes its go test through it.
// It never decides the run's outcome: go test's exit status does (make's
// pipefail), and go test's closing FAIL, when a test or build failed, is
// still the last line (go test -json does not write it; plain go test
// does).
//
// It is tooling for make test, never imported by ironflow's code.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// event is one line of `go test -json` (cmd/test2json), the fields used.
type event struct {
	Action  string
	Package string
	Test    string
	Elapsed float64
	Output  string
}

// result is one top-level test's outcome.
type result struct {
	Package string
	Test    string
	Seconds float64
}

// report turns the event stream into plain go test output, written to out as
// it comes, and keeps the top-level tests that finished (passed or failed)
// and whether any package failed, for finish.
type report struct {
	out     io.Writer
	results []result
	// held is each running top-level test's output, printed if it fails
	// (or its package does while it runs: a timeout, a panic).
	held   map[[2]string][]string
	failed bool
}

func newReport(out io.Writer) *report {
	return &report{out: out, held: map[[2]string][]string{}}
}

// line handles one line of input.
func (r *report) line(text string) {
	var ev event
	if !strings.HasPrefix(text, "{") || json.Unmarshal([]byte(text), &ev) != nil {
		// Lines of go itself, not JSON; a closing FAIL is printed by
		// finish, once.
		if text == "FAIL" {
			r.failed = true
		} else {
			fmt.Fprintln(r.out, text)
		}
		return
	}
	top, _, _ := strings.Cut(ev.Test, "/")
	key := [2]string{ev.Package, top}
	switch {
	case ev.Action == "build-output":
		fmt.Fprint(r.out, ev.Output)
	case ev.Action == "output" && ev.Test != "":
		if !strings.HasPrefix(ev.Output, "=== ") {
			r.held[key] = append(r.held[key], ev.Output)
		}
	case ev.Action == "output":
		// The package's own lines; plain go test shows no PASS for a
		// package that is ok. Before its FAIL go the tests that never
		// finished (a timeout, a panic): what they said is all there is
		// to go by.
		if strings.HasPrefix(ev.Output, "FAIL") {
			r.drop(ev.Package, true)
		}
		if ev.Output != "PASS\n" {
			fmt.Fprint(r.out, ev.Output)
		}
	case ev.Test != "" && ev.Test == top && (ev.Action == "pass" || ev.Action == "fail" || ev.Action == "skip"):
		if ev.Action != "skip" {
			r.results = append(r.results, result{Package: ev.Package, Test: ev.Test, Seconds: ev.Elapsed})
		}
		if ev.Action == "fail" {
			r.flush(key)
		}
		delete(r.held, key)
	case ev.Test == "" && (ev.Action == "pass" || ev.Action == "fail"):
		r.drop(ev.Package, ev.Action == "fail")
		r.failed = r.failed || ev.Action == "fail"
	}
}

func (r *report) flush(key [2]string) {
	for _, s := range r.held[key] {
		fmt.Fprint(r.out, s)
	}
}

// drop forgets the held output of pkg's unfinished tests, printed first
// when print is set, by test name (map order is random).
func (r *report) drop(pkg string, print bool) {
	var keys [][2]string
	for k := range r.held {
		if k[0] == pkg {
			keys = append(keys, k)
		}
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i][1] < keys[j][1] })
	for _, k := range keys {
		if print {
			r.flush(k)
		}
		delete(r.held, k)
	}
}

// slowest returns the n slowest results, slowest first; ties by package
// and name, so the list is the same for the same run.
func slowest(results []result, n int) []result {
	s := append([]result(nil), results...)
	sort.Slice(s, func(i, j int) bool {
		if s[i].Seconds != s[j].Seconds {
			return s[i].Seconds > s[j].Seconds
		}
		if s[i].Package != s[j].Package {
			return s[i].Package < s[j].Package
		}
		return s[i].Test < s[j].Test
	})
	return s[:min(n, len(s))]
}

// finish prints the slowest tests, then go test's closing FAIL if anything
// failed.
func (r *report) finish(n int) {
	if top := slowest(r.results, n); len(top) > 0 {
		fmt.Fprintf(r.out, "\nslowest %d tests:\n", len(top))
		for _, t := range top {
			fmt.Fprintf(r.out, "%9.2fs  %s  %s\n", t.Seconds, t.Package, t.Test)
		}
	}
	if r.failed {
		fmt.Fprintln(r.out, "FAIL")
	}
}

func main() {
	n := flag.Int("n", 10, "how many of the slowest tests to print")
	flag.Parse()
	out := bufio.NewWriter(os.Stdout)
	r := newReport(out)
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 0, 1<<20), 64<<20)
	for in.Scan() {
		r.line(in.Text())
		// Lines go out as they come: a long test run is watched.
		out.Flush()
	}
	if err := in.Err(); err != nil {
		fmt.Fprintf(os.Stderr, "slowest: read go test -json: %v\n", err)
	}
	r.finish(*n)
	out.Flush()
}
