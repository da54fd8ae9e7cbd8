package agent

import (
	"context"
	"crypto/sha256"
	"fmt"
	"math"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ironflow/ironflow/agent/client"
)

// Burn-ins load the machine's CPUs, memory, disks and network for a time
// and count what went wrong, as IPA's burnin_* steps do with stress-ng and
// fio; ironflow runs no external tool, so each is written here in Go.
//
// Checkpoints (a burn-in the machine's reboot interrupts resumes): a
// burn-in publishes its checkpoint in the running command's progress
// (progress.checkpoint) every progressEvery, which the workflow keeps with
// the step's progress; re-running the step with that object as its
// "checkpoint" argument resumes it (the time already spent and the counts
// so far). burnin_disk keeps its checkpoint on the disks under test as
// well — in a reserved block at the end of each, outside the tested range —
// so that it resumes by itself when it is simply run again after a reboot:
// its disks are being overwritten anyway, while the CPU, memory and
// network burn-ins must not write to disks they do not test (a burn-in may
// run while servicing an active node).

// Burn-in defaults, IPA's.
const (
	defaultBurninCPU     = 24 * time.Hour
	defaultBurninMemory  = 24 * time.Hour
	defaultBurninNetwork = 6 * time.Hour
	defaultBurninLoops   = 4
	// progressEvery is how often a burn-in publishes progress and its
	// checkpoint.
	progressEvery = time.Second
)

// burnClock is a burn-in's time: what earlier runs spent (from the
// checkpoint) plus this run's.
type burnClock struct {
	start time.Time
	prior time.Duration
	total time.Duration
}

func (c burnClock) elapsed() time.Duration { return c.prior + time.Since(c.start) }

// remaining is how long this run still has; 0 means the burn-in is done.
func (c burnClock) remaining() time.Duration { return max(c.total-c.elapsed(), 0) }

func (c burnClock) fraction() float64 {
	if c.total <= 0 {
		return 1
	}
	return min(float64(c.elapsed())/float64(c.total), 1)
}

// checkpointArg reads the "checkpoint" argument: the object a previous run
// published as progress.checkpoint.
func checkpointArg(args map[string]any) (map[string]any, error) {
	v, ok := args["checkpoint"]
	if !ok || v == nil {
		return nil, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, newRESTError("InvalidCommandParamsError", 400, "Invalid command parameters", "argument checkpoint: not an object")
	}
	return m, nil
}

func cpNumber(cp map[string]any, key string) float64 {
	f, _ := cp[key].(float64)
	if f < 0 || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0
	}
	return f
}

// resumeClock starts a clock for total, resuming the checkpoint's elapsed
// time when its step matches.
func resumeClock(step string, total time.Duration, cp map[string]any) burnClock {
	c := burnClock{start: time.Now(), total: total}
	if cp != nil && cp["step"] == step {
		c.prior = min(time.Duration(cpNumber(cp, "elapsed_seconds")*float64(time.Second)), total)
	}
	return c
}

func (a *Agent) publishBurnin(cmd *command, step, stage string, c burnClock, fraction float64, cp map[string]any) {
	cp["step"] = step
	cp["elapsed_seconds"] = c.elapsed().Seconds()
	cmd.SetResult(map[string]any{"progress": client.Progress{
		Stage: stage, Fraction: fraction, ElapsedSeconds: c.elapsed().Seconds(), Checkpoint: cp,
	}})
}

// ticker runs f every d until ctx ends or the returned stop is called;
// stop returns once f no longer runs, so that nothing publishes after it.
func ticker(ctx context.Context, d time.Duration, f func()) (stop func()) {
	quit := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(d)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-quit:
				return
			case <-t.C:
				f()
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() { close(quit) })
		<-done
	}
}

// cpuWork is one verified unit of CPU work: hashing a block whose digest
// is known, and a floating-point series whose value is known, so that a
// CPU that computes wrong is counted, not only one that stops.
type cpuWork struct {
	block  []byte
	digest [32]byte
	series float64
}

func newCPUWork() *cpuWork {
	w := &cpuWork{block: make([]byte, 64<<10)}
	for i := range w.block {
		w.block[i] = byte(i * 131)
	}
	w.digest = sha256.Sum256(w.block)
	w.series = cpuSeries()
	return w
}

func cpuSeries() float64 {
	var s float64
	for k := 1; k <= 2000; k++ {
		s += math.Sqrt(float64(k)) * math.Sin(float64(k)) / float64(k)
	}
	return s
}

// op runs one unit and reports whether its results were right.
func (w *cpuWork) op() bool {
	return sha256.Sum256(w.block) == w.digest && cpuSeries() == w.series
}

// burninCPU is burnin_cpu: every CPU runs verified work for timeout
// seconds. The result counts operations and wrong results.
func (a *Agent) burninCPU(ctx context.Context, cmd *command, args, node map[string]any) (any, error) {
	s := newStepArgs(args, node)
	total := s.seconds("timeout", "", defaultBurninCPU)
	cp, err := checkpointArg(args)
	if s.err != nil {
		return nil, s.err
	}
	if err != nil {
		return nil, err
	}
	clock := resumeClock("burnin_cpu", total, cp)
	var ops, errs atomic.Int64
	ops.Store(int64(cpNumber(cp, "ops")))
	errs.Store(int64(cpNumber(cp, "errors")))
	workers := runtime.NumCPU()
	sim := simulated(a.cfg.Hardware)
	if sim {
		workers = 1
	}
	rctx, cancel := context.WithTimeout(ctx, clock.remaining())
	defer cancel()
	publish := func() {
		a.publishBurnin(cmd, "burnin_cpu", fmt.Sprintf("burnin_cpu: %d CPUs", workers), clock, clock.fraction(),
			map[string]any{"ops": float64(ops.Load()), "errors": float64(errs.Load())})
	}
	stop := ticker(rctx, progressEvery, publish)
	defer stop()
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := newCPUWork()
			for rctx.Err() == nil {
				if !w.op() {
					errs.Add(1)
				}
				ops.Add(1)
				if sim {
					// A simulated machine shares the test's CPUs.
					select {
					case <-rctx.Done():
					case <-time.After(50 * time.Millisecond):
					}
				}
			}
		}()
	}
	wg.Wait()
	stop()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	publish()
	res := map[string]any{"cpus": workers, "ops": ops.Load(), "errors": errs.Load(),
		"seconds": clock.elapsed().Seconds(), "ops_per_second": float64(ops.Load()) / max(clock.elapsed().Seconds(), 1e-9)}
	a.log.Info("burnin_cpu finished", "node", a.NodeUUID(), "result", res)
	if errs.Load() > 0 {
		return nil, fmt.Errorf("burnin_cpu: %d of %d operations computed a wrong result", errs.Load(), ops.Load())
	}
	return res, nil
}
