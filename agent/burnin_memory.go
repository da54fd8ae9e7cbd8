package agent

import (
	"context"
	"fmt"
	"runtime/debug"
	"strconv"
	"strings"
	"time"
	"unsafe"
)

// MemoryReporter is implemented by hardware that knows how much memory is
// free for a burn-in (MemAvailable on Linux).
type MemoryReporter interface {
	AvailableMemory() (int64, error)
}

const (
	// defaultVMBytes is the share of available memory burnin_memory tests.
	defaultVMBytes = "50%"
	// maxVMShare bounds it: the agent, its buffers and the kernel need the
	// rest.
	maxVMShare = 0.9
	// fallbackAvailable is assumed where the hardware cannot tell.
	fallbackAvailable = 64 << 20
	simAvailable      = 4 << 20
)

// parseVMBytes reads vm_bytes: "N%" of avail, or a size with an optional
// K/M/G/T suffix (powers of 1024), or bytes.
func parseVMBytes(s string, avail int64) (int64, error) {
	s = strings.TrimSpace(s)
	if p, ok := strings.CutSuffix(s, "%"); ok {
		f, err := strconv.ParseFloat(p, 64)
		if err != nil || f <= 0 || f > 100 {
			return 0, fmt.Errorf("vm_bytes %q: not a percentage in (0, 100]", s)
		}
		return int64(float64(avail) * f / 100), nil
	}
	mult := int64(1)
	if n := len(s); n > 0 {
		switch s[n-1] | 0x20 {
		case 'k':
			mult = 1 << 10
		case 'm':
			mult = 1 << 20
		case 'g':
			mult = 1 << 30
		case 't':
			mult = 1 << 40
		}
		if mult > 1 {
			s = s[:n-1]
		}
	}
	v, err := strconv.ParseInt(s, 10, 64)
	if err != nil || v <= 0 {
		return 0, fmt.Errorf("vm_bytes %q: not a size", s)
	}
	return v * mult, nil
}

// memPatterns are written over the whole buffer and verified, in turn:
// all zeros, all ones, the two checkerboards, and each word's own index
// (which catches addressing faults the constant patterns cannot).
var memPatterns = []struct {
	name string
	word func(i int, pass uint64) uint64
}{
	{"zeros", func(int, uint64) uint64 { return 0 }},
	{"ones", func(int, uint64) uint64 { return ^uint64(0) }},
	{"checkerboard", func(int, uint64) uint64 { return 0xaaaaaaaaaaaaaaaa }},
	{"inverse checkerboard", func(int, uint64) uint64 { return 0x5555555555555555 }},
	{"address", func(i int, pass uint64) uint64 { return uint64(i)*0x9e3779b97f4a7c15 ^ pass }},
}

// memPass writes pattern p over buf and verifies it, returning the words
// that read back wrong; it stops early when ctx ends.
func memPass(ctx context.Context, buf []uint64, p int, pass uint64) (bad int64, done bool) {
	word := memPatterns[p].word
	const block = 1 << 16
	for i := 0; i < len(buf); i += block {
		if ctx.Err() != nil {
			return bad, false
		}
		for j := i; j < min(i+block, len(buf)); j++ {
			buf[j] = word(j, pass)
		}
	}
	for i := 0; i < len(buf); i += block {
		if ctx.Err() != nil {
			return bad, false
		}
		for j := i; j < min(i+block, len(buf)); j++ {
			if buf[j] != word(j, pass) {
				bad++
			}
		}
	}
	return bad, true
}

// burninMemory is burnin_memory: write and verify patterns over vm_bytes
// of the available memory for timeout seconds.
func (a *Agent) burninMemory(ctx context.Context, cmd *command, args, node map[string]any) (any, error) {
	s := newStepArgs(args, node)
	total := s.seconds("timeout", "", defaultBurninMemory)
	vm := s.str("vm_bytes", "", defaultVMBytes)
	cp, err := checkpointArg(args)
	if s.err != nil {
		return nil, s.err
	}
	if err != nil {
		return nil, err
	}
	avail := int64(fallbackAvailable)
	if r, ok := a.cfg.Hardware.(MemoryReporter); ok {
		if v, err := r.AvailableMemory(); err == nil && v > 0 {
			avail = v
		}
	}
	if simulated(a.cfg.Hardware) {
		avail = simAvailable
	}
	size, err := parseVMBytes(vm, avail)
	if err != nil {
		return nil, newRESTError("InvalidCommandParamsError", 400, "Invalid command parameters", err.Error())
	}
	size = min(size, int64(float64(avail)*maxVMShare))
	words := int(size / int64(unsafe.Sizeof(uint64(0))))
	if words < 1 {
		return nil, fmt.Errorf("burnin_memory: %d bytes available, nothing to test", avail)
	}
	clock := resumeClock("burnin_memory", total, cp)
	passes := int64(cpNumber(cp, "passes"))
	errs := int64(cpNumber(cp, "errors"))
	buf := make([]uint64, words)
	defer func() {
		buf = nil
		debug.FreeOSMemory()
	}()
	rctx, cancel := context.WithTimeout(ctx, clock.remaining())
	defer cancel()
	publish := func(stage string) {
		a.publishBurnin(cmd, "burnin_memory", stage, clock, clock.fraction(), map[string]any{"passes": float64(passes), "errors": float64(errs)})
	}
	last := time.Now()
	for p := 0; rctx.Err() == nil; p = (p + 1) % len(memPatterns) {
		bad, done := memPass(rctx, buf, p, uint64(passes))
		errs += bad
		if done {
			passes++
		}
		if time.Since(last) >= progressEvery {
			publish(fmt.Sprintf("burnin_memory: %d MiB, %s", size>>20, memPatterns[p].name))
			last = time.Now()
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	publish("burnin_memory: done")
	res := map[string]any{"bytes": int64(words) * 8, "passes": passes, "errors": errs, "seconds": clock.elapsed().Seconds(),
		"bytes_per_second": float64(int64(words)*16) * float64(passes) / max(clock.elapsed().Seconds(), 1e-9)}
	a.log.Info("burnin_memory finished", "node", a.NodeUUID(), "result", res)
	if errs > 0 {
		return nil, fmt.Errorf("burnin_memory: %d words read back wrong over %d passes", errs, passes)
	}
	return res, nil
}
