package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"
)

// Sizes of the console part (docs/benchmarks.md, "Consoles").
const (
	// DefaultConsoles is how many consoles are open at once.
	DefaultConsoles = 50
	// consolePush is what each session sends and reads back (the fake
	// console echoes), in consoleChunk writes.
	consolePush  = 256 << 10
	consoleChunk = 4 << 10
	// consoleIdle is how long the open sessions sit idle while the
	// processes' CPU is read.
	consoleIdle = 10 * time.Second
	// consoleSettle lets the processes' allocators settle before a
	// footprint is read.
	consoleSettle = 2 * time.Second
)

// consoleNode is one node of the console part and its open session.
type consoleNode struct {
	uuid, addr string
	conn       net.Conn
}

// benchConsole enables the fake console of cfg.consoles fake-hardware nodes
// through the API, opens a TCP session to each endpoint (the socat URL of
// console show) and pushes bytes through every session, and reads the api's
// and worker's memory (PSS and RSS) and CPU before and after: what one
// open console costs the processes that hold and announce it.
func benchConsole(ctx context.Context, cfg config, st *stack, log *slog.Logger) ([]Row, error) {
	if err := st.restart(ctx); err != nil {
		return nil, err
	}
	n := cfg.consoles
	runID := time.Now().UnixNano() % 1_000_000
	nodes := make([]*consoleNode, n)
	for i := range nodes {
		var created struct {
			UUID string `json:"uuid"`
		}
		body := map[string]any{"name": fmt.Sprintf("bench-console-%d-%d", runID, i), "driver": "fake-hardware"}
		if _, err := st.call(ctx, http.MethodPost, "/v1/nodes", body, &created); err != nil {
			return nil, fmt.Errorf("create node: %w", err)
		}
		nodes[i] = &consoleNode{uuid: created.UUID}
	}
	defer func() {
		for _, cn := range nodes {
			if cn.conn != nil {
				cn.conn.Close()
			}
		}
	}()
	roles := func() map[string]int { return map[string]int{"api": st.apiPID(), "worker": st.workerPID()} }
	read := func() (map[string]procFootprint, map[string]time.Duration) {
		time.Sleep(consoleSettle)
		fp := map[string]procFootprint{}
		for role, pid := range roles() {
			fp[role] = procFootprint{rss: procRSS(pid), pss: procSmapsRollup(pid, "Pss:")}
		}
		return fp, treeCPUByRole(roles())
	}
	fp0, cpu0 := read()

	// Enable every console and wait for its endpoint.
	start := time.Now()
	for _, cn := range nodes {
		if _, err := st.call(ctx, http.MethodPut, "/v1/nodes/"+cn.uuid+"/states/console", map[string]any{"enabled": true}, nil); err != nil {
			return nil, fmt.Errorf("enable the console: %w", err)
		}
	}
	deadline := time.Now().Add(cfg.deployTimeout)
	for _, cn := range nodes {
		for cn.addr == "" {
			var got struct {
				Enabled bool `json:"console_enabled"`
				Info    *struct {
					Type string `json:"type"`
					URL  string `json:"url"`
				} `json:"console_info"`
			}
			if _, err := st.call(ctx, http.MethodGet, "/v1/nodes/"+cn.uuid+"/states/console", nil, &got); err != nil {
				return nil, err
			}
			if got.Enabled && got.Info != nil && strings.HasPrefix(got.Info.URL, "tcp://") {
				cn.addr = strings.TrimPrefix(got.Info.URL, "tcp://")
				break
			}
			if time.Now().After(deadline) {
				return nil, fmt.Errorf("the console of node %s not enabled within %s", cn.uuid, cfg.deployTimeout)
			}
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(DefaultPollInterval):
			}
		}
	}
	enableTook := time.Since(start)
	fp1, cpu1 := read()
	log.Info("consoles enabled", "consoles", n, "took", enableTook.Round(time.Millisecond))

	// A session to each endpoint: read the greeting, then push bytes and
	// read them back, every session at once.
	for _, cn := range nodes {
		c, err := net.DialTimeout("tcp", cn.addr, 5*time.Second)
		if err != nil {
			return nil, fmt.Errorf("connect to the console of %s at %s: %w", cn.uuid, cn.addr, err)
		}
		cn.conn = c
		_ = c.SetDeadline(time.Now().Add(time.Minute))
		if err := readUntil(c, cn.uuid); err != nil {
			return nil, fmt.Errorf("greeting of the console of %s: %w", cn.uuid, err)
		}
	}
	fp2, cpu2 := read()
	pushStart := time.Now()
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i, cn := range nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = echoThrough(cn.conn)
		}()
	}
	wg.Wait()
	pushTook := time.Since(pushStart)
	for i, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("push through the console of %s: %w", nodes[i].uuid, err)
		}
	}
	cpu3 := treeCPUByRole(roles())
	time.Sleep(consoleIdle)
	cpu4 := treeCPUByRole(roles())
	fp3, _ := read()

	per := func(d int64) float64 { return float64(d) / float64(n) / 1024 }
	mib := float64(n) * consolePush / (1 << 20)
	label := fmt.Sprintf("%d consoles", n)
	rows := []Row{
		row("console", fmt.Sprintf("worker PSS per enabled console, no session (%s)", label), per(fp1["worker"].pss-fp0["worker"].pss), "KiB").
			note(fmt.Sprintf("worker PSS %s before, %s enabled", mibOf(fp0["worker"].pss), mibOf(fp1["worker"].pss))),
		row("console", fmt.Sprintf("worker PSS per open console, session just opened (%s)", label), per(fp2["worker"].pss-fp0["worker"].pss), "KiB"),
		row("console", fmt.Sprintf("worker PSS per open console after traffic (%s, a session each)", label), per(fp3["worker"].pss-fp0["worker"].pss), "KiB").
			note(fmt.Sprintf("worker PSS %s, RSS %s with every session open after %s pushed", mibOf(fp3["worker"].pss), mibOf(fp3["worker"].rss), mibOf(int64(mib*(1<<20))))),
		row("console", fmt.Sprintf("worker RSS per open console (%s)", label), per(fp3["worker"].rss-fp0["worker"].rss), "KiB"),
		row("console", fmt.Sprintf("api PSS per open console (%s)", label), per(fp3["api"].pss-fp0["api"].pss), "KiB").
			note(fmt.Sprintf("api PSS %s before, %s after; socat sessions do not cross the API, only enable and show do", mibOf(fp0["api"].pss), mibOf(fp3["api"].pss))),
		row("console", "enable: worker+api CPU per console", ms((cpu1["worker"]-cpu0["worker"]+cpu1["api"]-cpu0["api"])/time.Duration(n)), "ms").
			note(fmt.Sprintf("%d enables and shows through the API in %s (worker %s, api %s)", n, enableTook.Round(time.Millisecond),
				(cpu1["worker"] - cpu0["worker"]).Round(time.Millisecond), (cpu1["api"] - cpu0["api"]).Round(time.Millisecond))),
		row("console", "session open: worker CPU per session", ms((cpu2["worker"]-cpu1["worker"])/time.Duration(n)), "ms"),
		row("console", "traffic: worker CPU per MiB echoed", ms(time.Duration(float64(cpu3["worker"]-cpu2["worker"])/mib)), "ms").
			note(fmt.Sprintf("%.1f MiB each way through %d sessions at once in %s", mib, n, pushTook.Round(time.Millisecond))),
		row("console", fmt.Sprintf("idle: worker CPU with %s open", label), 100*float64(cpu4["worker"]-cpu3["worker"])/float64(consoleIdle), "% of a core").
			note(fmt.Sprintf("over %s; api %.2f%%", consoleIdle, 100*float64(cpu4["api"]-cpu3["api"])/float64(consoleIdle))),
	}

	// Disable (closing every session) so that the next part starts clean.
	for _, cn := range nodes {
		if _, err := st.call(ctx, http.MethodPut, "/v1/nodes/"+cn.uuid+"/states/console", map[string]any{"enabled": false}, nil); err != nil {
			return rows, fmt.Errorf("disable the console: %w", err)
		}
	}
	return rows, nil
}

type procFootprint struct{ rss, pss int64 }

func mibOf(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

// readUntil reads c until want has arrived.
func readUntil(c net.Conn, want string) error {
	var got strings.Builder
	buf := make([]byte, 1024)
	for !strings.Contains(got.String(), want) {
		n, err := c.Read(buf)
		got.Write(buf[:n])
		if err != nil {
			return fmt.Errorf("read %q: %w", got.String(), err)
		}
	}
	return nil
}

// echoThrough writes consolePush bytes to an echoing console and reads
// them back.
func echoThrough(c net.Conn) error {
	_ = c.SetDeadline(time.Now().Add(2 * time.Minute))
	done := make(chan error, 1)
	go func() {
		chunk := []byte(strings.Repeat("x", consoleChunk))
		for sent := 0; sent < consolePush; sent += consoleChunk {
			if _, err := c.Write(chunk); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	if _, err := io.CopyN(io.Discard, c, consolePush); err != nil {
		return fmt.Errorf("read the echo: %w", err)
	}
	return <-done
}
