package main

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"
)

// threadAffinities reads the CPU affinity of every thread of this process.
func threadAffinities(t *testing.T) map[int]unix.CPUSet {
	t.Helper()
	tids, err := os.ReadDir(filepath.Join("/proc", strconv.Itoa(os.Getpid()), "task"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[int]unix.CPUSet{}
	for _, e := range tids {
		tid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		var set unix.CPUSet
		if err := unix.SchedGetaffinity(tid, &set); err != nil {
			continue // the thread ended
		}
		out[tid] = set
	}
	return out
}

func TestSetAffinityPinsEveryThreadAndUndoes(t *testing.T) {
	cores, err := pinnable()
	if err != nil {
		t.Skipf("SKIP: this machine cannot run a pinned round: %v", err)
	}
	var before unix.CPUSet
	if err := unix.SchedGetaffinity(0, &before); err != nil {
		t.Fatal(err)
	}
	var one unix.CPUSet
	one.Set(cores.rest)
	p := &pinned{all: before, pids: []int{os.Getpid()}}
	if err := setAffinity(os.Getpid(), &one); err != nil {
		t.Fatal(err)
	}
	pinnedSets := threadAffinities(t)
	p.undo()
	after := threadAffinities(t)
	if len(pinnedSets) < 2 {
		t.Fatalf("read %d threads of the test process, want the Go runtime's several", len(pinnedSets))
	}
	for tid, set := range pinnedSets {
		if set != one {
			t.Errorf("thread %d pinned to %d cores (core %d set: %v), want core %d alone", tid, set.Count(), cores.rest, set.IsSet(cores.rest), cores.rest)
		}
	}
	for tid, set := range after {
		if set != before {
			t.Errorf("thread %d has %d cores after undo, want the %d it had", tid, set.Count(), before.Count())
		}
	}
}

// A round runs its sides once each, a different one first in each round
// (the rounds' two, the pinned rounds' three), and stops at the first error.
func TestRotateRunsEachSideFirstInTurn(t *testing.T) {
	for _, tc := range []struct {
		sides string
		want  []string
	}{
		{"ci", []string{"ci", "ic", "ci"}},
		{"mis", []string{"mis", "ism", "smi", "mis"}},
	} {
		for round, want := range tc.want {
			var got string
			var sides []func() error
			for _, name := range tc.sides {
				sides = append(sides, func() error { got += string(name); return nil })
			}
			if err := rotate(round, sides...); err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Errorf("sides %q, round %d ran %q, want %q", tc.sides, round, got, want)
			}
		}
	}
	var ran []string
	failing := errors.New("deploys failed")
	err := rotate(1,
		func() error { ran = append(ran, "mix"); return nil },
		func() error { ran = append(ran, "ironflow"); return failing },
		func() error { ran = append(ran, "shape"); return nil })
	if !errors.Is(err, failing) || !slices.Equal(ran, []string{"ironflow"}) {
		t.Errorf("rotate after a failing side: err %v, ran %v; want the side's error and nothing after it", err, ran)
	}
}
