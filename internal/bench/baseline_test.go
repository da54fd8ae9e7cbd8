package main

import (
	"context"
	"os"
	"runtime"
	"testing"
)

// A cost's ratio reads as a rate's does: above 1 is ironflow doing better.
func TestLowerBetterRatioIsTimesBetter(t *testing.T) {
	r := lowerBetter(row("ironic", "show p50", 4, "ms"), "Ironic", 100)
	if r.Ratio == nil || *r.Ratio != 25 || !r.LowerIsBetter || *r.BaseVal != 100 {
		t.Fatalf("ratio of 4 ms against 100 ms: got %+v, want 25 (times better)", r)
	}
	slow := lowerBetter(row("ironic", "memory", 200, "MiB"), "Ironic", 100)
	if *slow.Ratio != 0.5 {
		t.Fatalf("twice Ironic's memory: ratio %v, want 0.5", *slow.Ratio)
	}
}

func TestLifecycleFlags(t *testing.T) {
	cfg, err := parseFlags([]string{"-lifecycle-sizes", "100, 500,1000", "-worker-args", "--workflow-task-pollers=8 --x=1"})
	if err != nil {
		t.Fatal(err)
	}
	if len(cfg.lifecycleSizes) != 3 || cfg.lifecycleSizes[2] != 1000 || cfg.lifecycleClients != DefaultLifecycleClients {
		t.Fatalf("sizes %v clients %d", cfg.lifecycleSizes, cfg.lifecycleClients)
	}
	if len(cfg.workerArgs) != 2 || cfg.workerArgs[0] != "--workflow-task-pollers=8" {
		t.Fatalf("worker args %q", cfg.workerArgs)
	}
	if _, err := parseFlags([]string{"-lifecycle-sizes", "0"}); err == nil {
		t.Fatal("a size of 0 was accepted")
	}
}

// The footprint of a process tree counts the process itself: this test's.
func TestFootprintCountsTheProcess(t *testing.T) {
	f := measureFootprint(map[string]int{"self": os.Getpid()})
	if f.rss <= 0 || f.pss <= 0 || f.byRole["self"] != f.pss {
		t.Fatalf("footprint of this process: %+v", f)
	}
}

// waitQuiet waits while the machine is busy: a goroutine spinning on one
// of its cores keeps it above quietBusy (on a machine of up to six cores),
// so the wait runs to its bound. (That it returns early on a quiet machine
// shows in the bench's log, waited_for_quiet: CI's machine is never quiet.)
func TestWaitQuietWaitsWhileBusy(t *testing.T) {
	if _, _, ok := machineBusy(); !ok {
		t.Skip("no /proc/stat: waitQuiet does not wait here")
	}
	if runtime.NumCPU() > 6 {
		t.Skipf("one spinning core is under %.0f %% of %d cores", quietBusy*100, runtime.NumCPU())
	}
	stop := make(chan struct{})
	go func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
		}
	}()
	if waited := waitQuiet(context.Background(), 3*quietWindow); waited < 3*quietWindow {
		close(stop)
		t.Fatalf("waitQuiet returned after %v with a core spinning, want its bound %v", waited, 3*quietWindow)
	}
	close(stop)
}
