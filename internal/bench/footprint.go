package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// roleTrees is each role's processes: its root and every process below
// it, but not another role's root nor anything below that one. ironflow
// dev's Temporal server and PostgreSQL are its children and count as
// theirs alone, once.
func roleTrees(roles map[string]int, children func(int) []int) map[string][]int {
	roots := map[int]bool{}
	for _, pid := range roles {
		if pid > 0 {
			roots[pid] = true
		}
	}
	out := map[string][]int{}
	for role, pid := range roles {
		if pid <= 0 {
			continue
		}
		tree := []int{pid}
		for i := 0; i < len(tree); i++ {
			for _, c := range children(tree[i]) {
				if !roots[c] {
					tree = append(tree, c)
				}
			}
		}
		out[role] = tree
	}
	return out
}

// treeCPUByRole is each role's CPU time: its process tree's, including
// children it already waited for (a PostgreSQL backend that exited).
func treeCPUByRole(roles map[string]int) map[string]time.Duration {
	out := map[string]time.Duration{}
	for role, tree := range roleTrees(roles, childrenOf) {
		var total time.Duration
		for _, p := range tree {
			total += procCPU(p)
		}
		out[role] = total
	}
	return out
}

// measureFootprint sums RSS and PSS over every role's process tree. PSS
// (smaps_rollup) divides a shared page among the processes that map it,
// so PostgreSQL's shared buffers count once, not once per backend.
func measureFootprint(roles map[string]int) footprint {
	f := footprint{byRole: map[string]int64{}}
	for role, tree := range roleTrees(roles, childrenOf) {
		for _, p := range tree {
			rss := procRSS(p)
			pss := procSmapsRollup(p, "Pss:")
			f.anon += procSmapsRollup(p, "Pss_Anon:")
			if pss == 0 {
				pss = rss
			}
			f.rss += rss
			f.pss += pss
			f.byRole[role] += pss
		}
	}
	return f
}

// procSmapsRollup is one figure of the process's smaps_rollup, in bytes
// (Pss:, Pss_Anon:).
func procSmapsRollup(pid int, key string) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/smaps_rollup")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, key) {
			if f := strings.Fields(l); len(f) >= 2 {
				v, _ := strconv.ParseInt(f[1], 10, 64)
				return v * 1024
			}
		}
	}
	return 0
}

// postmasterPID reads PostgreSQL's postmaster.pid under dataDir.
func postmasterPID(dataDir string) int {
	b, err := os.ReadFile(filepath.Join(dataDir, "pgdata", "postmaster.pid"))
	if err != nil {
		return 0
	}
	pm, _ := strconv.Atoi(strings.TrimSpace(strings.SplitN(string(b), "\n", 2)[0]))
	return pm
}

// target is the stack as the ironic part drives it.
func (s *stack) target(name string) *target {
	return &target{
		name: name, url: s.APIURL, hc: newHTTPClient(64),
		procs: func() map[string]int {
			m := map[string]int{"temporal": s.temporalPID(), "postgres": postmasterPID(s.postgresDir())}
			if pid := s.apiPID(); pid != 0 {
				m["api"] = pid
			}
			if pid := s.workerPID(); pid != 0 {
				m["worker"] = pid
			}
			return m
		},
		seed: func(ctx context.Context, n int) error { return seedNodes(ctx, s.store, n) },
	}
}

// anonFile splits the Temporal server's resident memory into anonymous
// (its Go heap, SQLite's page cache) and file-backed pages (its binary).
func anonFile(pid int) string {
	return fmt.Sprintf("Temporal resident: %.0f MiB anonymous, %.0f MiB file-backed", mib(procStatusKB(pid, "RssAnon:")*1024), mib(procStatusKB(pid, "RssFile:")*1024))
}

// machineBusy reads /proc/stat's first line: the machine's busy and total
// CPU time so far, in clock ticks (busy is all but idle and iowait).
func machineBusy() (busy, total int64, ok bool) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0, false
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 6 || f[0] != "cpu" {
		return 0, 0, false
	}
	for i, s := range f[1:] {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, 0, false
		}
		total += v
		if i != 3 && i != 4 { // idle, iowait
			busy += v
		}
	}
	return busy, total, true
}

// quietBusy is the share of the machine's CPU under which it counts as
// quiet; quietWindow the time it must stay under it.
const (
	quietBusy   = 0.15
	quietWindow = time.Second
)

// waitQuiet waits until the machine's CPU has been busy less than
// quietBusy over quietWindow, at most max, and returns how long it waited:
// a round then starts once the previous one's background work (Temporal's
// visibility and history tasks of the workflows that just closed, the
// deletes of its nodes, Ironic's periodic tasks) has drained, for every
// target alike.
func waitQuiet(ctx context.Context, max time.Duration) time.Duration {
	start := time.Now()
	b0, t0, ok := machineBusy()
	if !ok {
		return 0
	}
	for time.Since(start) < max {
		select {
		case <-ctx.Done():
			return time.Since(start)
		case <-time.After(quietWindow):
		}
		b1, t1, ok := machineBusy()
		if !ok {
			return time.Since(start)
		}
		if t1 > t0 && float64(b1-b0)/float64(t1-t0) < quietBusy {
			return time.Since(start)
		}
		b0, t0 = b1, t1
	}
	return time.Since(start)
}
