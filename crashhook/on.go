//go:build crashhook

package crashhook

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Package crashhook is the crash hook, compiled only with -tags crashhook
// (tests build such an ironflow; production binaries never contain it). It
// lets a test kill the worker at an exact point of an exact node's activity,
// or the API between a verb's state write and its workflow start
// (StartWorkflow/<state recorded>), instead of after a timed sleep
// (docs/crash-safety.md).
//
// IRONFLOW_CRASH_AT holds rules separated by ';'. A rule is
//
//	point[:n][,after|,done][,node=UUID][,pause|,hold]
//
// The point is an activity name (SetPower) or an activity and its detail
// (SetPower/rebooting, RecordState/wait call-back, RunAgentStep/write_image,
// PrepareBoot/agent: the power action, the state recorded, the step, the
// boot kind). The rule fires at its n-th matching hit in this process
// (default 1). The phase is the start of the activity (default), after its
// effect happened (after: the BMC acted, the agent started the command, the
// row is written), or once an agent command has finished on the agent but
// before the activity reports it (done). node restricts the rule to one
// node. The action kill (default) SIGKILLs this process at once; pause
// blocks the activity until the file <state>/<i>.go exists (the test kills
// or restarts another part meanwhile); hold pauses too, and the process
// SIGKILLs itself once every hold rule has been reached, so that one kill
// lands while each of those nodes is at its own step.
//
// IRONFLOW_CRASH_STATE is a directory where the hook writes <i>.reached
// when rule i (counted from 0) is reached, and where a kill rule leaves
// <i>.fired, so that a worker started again with the same environment does
// not fire it again.
type crashRule struct {
	index       int
	point       string
	n           int
	phase       string
	node        string
	action      string
	hits        int
	reached     bool
	description string
}

var crash struct {
	once  sync.Once
	mu    sync.Mutex
	rules []*crashRule
	dir   string
	holds int
}

func loadCrashRules() {
	crash.dir = os.Getenv("IRONFLOW_CRASH_STATE")
	for i, spec := range strings.Split(os.Getenv("IRONFLOW_CRASH_AT"), ";") {
		spec = strings.TrimSpace(spec)
		if spec == "" {
			continue
		}
		r := &crashRule{index: i, n: 1, phase: "start", action: "kill", description: spec}
		fields := strings.Split(spec, ",")
		r.point = fields[0]
		if p, n, ok := strings.Cut(r.point, ":"); ok {
			if v, err := strconv.Atoi(n); err == nil && v > 0 {
				r.point, r.n = p, v
			}
		}
		for _, f := range fields[1:] {
			switch {
			case f == "after" || f == "done" || f == "start":
				r.phase = f
			case f == "pause" || f == "hold" || f == "kill":
				r.action = f
			case strings.HasPrefix(f, "node="):
				r.node = strings.TrimPrefix(f, "node=")
			default:
				fmt.Fprintf(os.Stderr, "crashhook: rule %q: unknown field %q\n", spec, f)
			}
		}
		if r.action == "hold" {
			crash.holds++
		}
		crash.rules = append(crash.rules, r)
	}
	if len(crash.rules) > 0 {
		fmt.Fprintf(os.Stderr, "crashhook: %d rules armed (state %s)\n", len(crash.rules), crash.dir)
	}
}

func (r *crashRule) file(suffix string) string {
	return filepath.Join(crash.dir, fmt.Sprintf("%d.%s", r.index, suffix))
}

func (r *crashRule) matches(node, point, phase string) bool {
	if r.phase != phase || r.node != "" && r.node != node {
		return false
	}
	act, _, _ := strings.Cut(point, "/")
	return r.point == point || r.point == act
}

// Point is where an activity (or the API) may be killed or paused: node is the
// node's UUID, point "Activity" or "Activity/detail", phase start, after
// or done.
func Point(ctx context.Context, node, point, phase string) {
	crash.once.Do(loadCrashRules)
	if len(crash.rules) == 0 {
		return
	}
	crash.mu.Lock()
	var hit *crashRule
	for _, r := range crash.rules {
		if !r.matches(node, point, phase) {
			continue
		}
		if r.reached {
			// A retry of an attempt that is held: hold it again.
			hit = r
			break
		}
		r.hits++
		if r.hits == r.n {
			hit = r
			break
		}
	}
	if hit == nil {
		crash.mu.Unlock()
		return
	}
	first := !hit.reached
	hit.reached = true
	if crash.dir != "" && hit.action == "kill" {
		if f, err := os.OpenFile(hit.file("fired"), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644); err != nil {
			crash.mu.Unlock()
			return // fired by an earlier run of this worker
		} else {
			_ = f.Close()
		}
	}
	if first && crash.dir != "" {
		_ = os.WriteFile(hit.file("reached"), []byte(fmt.Sprintf("%s %s %s %s\n", node, point, phase, time.Now().UTC().Format(time.RFC3339Nano))), 0o644)
	}
	fmt.Fprintf(os.Stderr, "crashhook: rule %q reached: node %s at %s (%s), action %s\n", hit.description, node, point, phase, hit.action)
	killNow := hit.action == "kill"
	if hit.action == "hold" && first {
		held := 0
		for _, r := range crash.rules {
			if r.action == "hold" && r.reached {
				held++
			}
		}
		killNow = held == crash.holds
	}
	crash.mu.Unlock()
	if killNow {
		fmt.Fprintf(os.Stderr, "crashhook: SIGKILL at %s of node %s\n", point, node)
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {} // the signal is on its way
	}
	// pause and hold: wait for the test's go-ahead (or the process's end).
	for {
		if _, err := os.Stat(hit.file("go")); err == nil {
			return
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(50 * time.Millisecond):
		}
	}
}
