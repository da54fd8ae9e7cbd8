package main

import (
	"os"
	"path/filepath"
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
