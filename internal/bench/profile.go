package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// perfFrequency samples each profiled process 99 times a second: enough to
// rank functions over a deploy run, cheap enough not to move the figures.
const perfFrequency = "99"

// profiler records CPU profiles of the api, worker and Temporal server with
// perf(1) while a part runs: the processes expose no pprof endpoint, and
// perf needs none. Go binaries keep their symbols, so reports name functions.
type profiler struct {
	log   *slog.Logger
	procs map[string]*exec.Cmd // name → perf record
	files map[string]string    // name → perf.data
	dir   string
	top   map[string][]string
}

func startProfiles(ctx context.Context, st *stack, log *slog.Logger) *profiler {
	return startPerf(ctx, st.dir, log, map[string]int{"api": st.apiPID(), "worker": st.workerPID(), "temporal": st.temporalPID()})
}

// startPerf records the named processes until stop.
func startPerf(ctx context.Context, dir string, log *slog.Logger, pids map[string]int) *profiler {
	p := &profiler{log: log, procs: map[string]*exec.Cmd{}, files: map[string]string{}, dir: dir, top: map[string][]string{}}
	if _, err := exec.LookPath("perf"); err != nil {
		log.Warn("perf not found: no profiles (Debian package linux-perf)")
		return p
	}
	for name, pid := range pids {
		if pid == 0 {
			continue
		}
		file := filepath.Join(dir, "perf-"+name+".data")
		cmd := exec.CommandContext(ctx, "perf", "record", "-q", "-F", perfFrequency, "-g", "-p", fmt.Sprint(pid), "-o", file)
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			log.Warn("start perf", "process", name, "err", err)
			continue
		}
		p.procs[name], p.files[name] = cmd, file
	}
	return p
}

// stop ends the recordings and keeps each process's top functions.
func (p *profiler) stop() {
	for name, cmd := range p.procs {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		out, err := exec.Command("perf", "report", "-i", p.files[name], "--stdio", "--no-children", "-g", "none",
			"--sort", "sym", "--percent-limit", "2").Output()
		if err != nil {
			p.log.Warn("perf report", "process", name, "err", err)
			continue
		}
		for _, l := range strings.Split(string(out), "\n") {
			l = strings.TrimSpace(l)
			if l == "" || strings.HasPrefix(l, "#") {
				continue
			}
			p.top[name] = append(p.top[name], strings.Join(strings.Fields(l), " "))
			if len(p.top[name]) == 8 {
				break
			}
		}
		p.log.Info("profile", "process", name, "top", strings.Join(p.top[name], "; "))
	}
}

// rows gives each profile as one row whose note lists the top functions.
func (p *profiler) rows(part string) []Row {
	var rows []Row
	for _, name := range []string{"api", "worker", "temporal", "agent"} {
		if len(p.top[name]) == 0 {
			continue
		}
		r := row(part, "CPU profile of "+name+" (perf, top functions, self time)", float64(len(p.top[name])), "entries")
		rows = append(rows, r.note(strings.Join(p.top[name], "; ")))
	}
	return rows
}
