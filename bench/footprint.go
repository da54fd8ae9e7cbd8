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

// procTree is pid and every process below it.
func procTree(pid int) []int {
	if pid <= 0 {
		return nil
	}
	out := []int{pid}
	for i := 0; i < len(out); i++ {
		out = append(out, childrenOf(out[i])...)
	}
	return out
}

// treeCPUByRole is each role's CPU time: its process tree's, including
// children it already waited for (a PostgreSQL backend that exited).
func treeCPUByRole(roles map[string]int) map[string]time.Duration {
	out := map[string]time.Duration{}
	for role, pid := range roles {
		var total time.Duration
		for _, p := range procTree(pid) {
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
	for role, pid := range roles {
		for _, p := range procTree(pid) {
			rss := procRSS(p)
			pss := procPSS(p)
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

func procPSS(pid int) int64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/smaps_rollup")
	if err != nil {
		return 0
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "Pss:") {
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
