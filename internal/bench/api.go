package main

import (
	"context"
	crand "crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"go.temporal.io/api/serviceerror"

	"github.com/ironflow/ironflow/provision"
	"github.com/ironflow/ironflow/store"
	"github.com/ironflow/ironflow/workflows"
)

// Sizes of the api part's setup.
const (
	// agentNodes wait for a call-back with a known token: the lookups and
	// heartbeats are spread over them.
	ramdiskNodes = 256
	// seedWorkers insert the bulk nodes (setup, not measured).
	seedWorkers = 8
	// apiPageLimit is the API's largest page (its --max-limit default).
	apiPageLimit = 1000
)

// ramdiskNode is a node an agent looks up and heartbeats for.
type ramdiskNode struct {
	uuid, mac, token, callback string
}

func benchAPI(ctx context.Context, cfg config, st *stack, log *slog.Logger) ([]Row, error) {
	if err := st.restart(ctx); err != nil {
		return nil, err
	}
	ramdisk, err := seedRamdiskNodes(ctx, st.store, ramdiskNodes)
	if err != nil {
		return nil, err
	}
	trivial, err := startTrivialServer()
	if err != nil {
		return nil, err
	}
	defer trivial.Close()
	hc := newHTTPClient(cfg.apiClients * 2)
	var rows []Row
	for _, size := range cfg.apiSizes {
		have, err := st.store.CountNodes(ctx, store.NodeFilter{})
		if err != nil {
			return rows, fmt.Errorf("count nodes: %w", err)
		}
		if have > size {
			log.Warn("more nodes enrolled than the size asked for", "size", size, "nodes", have)
		}
		if err := seedNodes(ctx, st.store, size-have); err != nil {
			return rows, err
		}
		if have, err = st.store.CountNodes(ctx, store.NodeFilter{}); err != nil {
			return rows, fmt.Errorf("count nodes: %w", err)
		}
		uuids, err := nodeUUIDs(ctx, st.store)
		if err != nil {
			return rows, err
		}
		log.Info("api measures", "nodes", have)
		label := fmt.Sprintf("%d nodes", have)

		trivialLat, err := latencies(ctx, hc, cfg.apiRequests, func(int) (string, string, any) { return http.MethodGet, trivial.URL, nil })
		if err != nil {
			return rows, err
		}
		apiCPU := func() time.Duration { return procCPU(st.apiPID()) }
		cpu0 := apiCPU()
		list, err := latencies(ctx, hc, cfg.apiRequests, func(int) (string, string, any) {
			return http.MethodGet, fmt.Sprintf("%s/v1/nodes?detail=true&limit=%d", st.APIURL, apiPageLimit), nil
		})
		if err != nil {
			return rows, err
		}
		listCPU := (apiCPU() - cpu0) / time.Duration(cfg.apiRequests)
		show, err := latencies(ctx, hc, cfg.apiRequests, func(i int) (string, string, any) {
			return http.MethodGet, st.APIURL + "/v1/nodes/" + uuids[rand.IntN(len(uuids))], nil
		})
		if err != nil {
			return rows, err
		}
		tp50, tp99 := ms(percentile(trivialLat, 50)), ms(percentile(trivialLat, 99))
		rows = append(rows,
			row("api", fmt.Sprintf("GET /v1/nodes?detail=true&limit=%d p50 (%s)", apiPageLimit, label), ms(percentile(list, 50)), "ms").vs("trivial handler p50", tp50).
				note(fmt.Sprintf("api CPU %.1f ms per request", ms(listCPU))),
			row("api", fmt.Sprintf("GET /v1/nodes?detail=true&limit=%d p99 (%s)", apiPageLimit, label), ms(percentile(list, 99)), "ms").vs("trivial handler p99", tp99),
			row("api", fmt.Sprintf("GET /v1/nodes/{uuid} p50 (%s)", label), ms(percentile(show, 50)), "ms").vs("trivial handler p50", tp50),
			row("api", fmt.Sprintf("GET /v1/nodes/{uuid} p99 (%s)", label), ms(percentile(show, 99)), "ms").vs("trivial handler p99", tp99),
		)

		trivialRate, _, err := throughput(ctx, hc, cfg.apiClients, cfg.apiDuration, func(int) (string, string, any) { return http.MethodGet, trivial.URL, nil })
		if err != nil {
			return rows, err
		}
		cpu0 = apiCPU()
		lookups, lookupErrs, err := throughput(ctx, hc, cfg.apiClients, cfg.apiDuration, func(i int) (string, string, any) {
			return http.MethodGet, st.APIURL + "/v1/lookup?addresses=" + ramdisk[i%len(ramdisk)].mac, nil
		})
		if err != nil {
			return rows, err
		}
		lookupCPU := perRequest(apiCPU()-cpu0, lookups, cfg.apiDuration)
		cpu0 = apiCPU()
		heartbeat := func(i int) (string, string, any) {
			n := ramdisk[i%len(ramdisk)]
			return http.MethodPost, st.APIURL + "/v1/heartbeat/" + n.uuid, map[string]any{
				"callback_url": n.callback, "agent_token": n.token, "agent_version": "ironflow-bench",
			}
		}
		heartbeats, hbErrs, err := throughput(ctx, hc, cfg.apiClients, cfg.apiDuration, heartbeat)
		if err != nil {
			return rows, err
		}
		heartbeatCPU := perRequest(apiCPU()-cpu0, heartbeats, cfg.apiDuration)
		// The common case in a fleet: the agent heartbeats while a long
		// step (image write, disk erase) runs. The API then signals the
		// workflow at most once per fifth of the heartbeat timeout.
		if err := setRamdiskState(ctx, st.store, ramdisk, provision.Deploying); err != nil {
			return rows, err
		}
		cpu0 = apiCPU()
		stepBeats, stepErrs, err := throughput(ctx, hc, cfg.apiClients, cfg.apiDuration, heartbeat)
		if err != nil {
			return rows, err
		}
		stepBeatCPU := perRequest(apiCPU()-cpu0, stepBeats, cfg.apiDuration)
		if err := setRamdiskState(ctx, st.store, ramdisk, provision.DeployWait); err != nil {
			return rows, err
		}
		clients := fmt.Sprintf("%d clients, %s", cfg.apiClients, label)
		lr := row("api", "lookups accepted ("+clients+")", lookups, "req/s").vs("trivial handler", trivialRate).
			note(fmt.Sprintf("api CPU %.2f ms per request", ms(lookupCPU)))
		if lookupErrs > 0 {
			lr = lr.note(fmt.Sprintf("%s; %d refused", lr.Note, lookupErrs))
		}
		hr := row("api", "heartbeats accepted, 202 ("+clients+")", heartbeats, "req/s").vs("trivial handler", trivialRate).
			note(fmt.Sprintf("api CPU %.2f ms per request; node in wait call-back without a workflow: a store write and a Temporal signal that finds no workflow", ms(heartbeatCPU)))
		if hbErrs > 0 {
			hr = hr.note(fmt.Sprintf("%s; %d refused", hr.Note, hbErrs))
		}
		sr := row("api", "heartbeats accepted, 202, during an agent step ("+clients+")", stepBeats, "req/s").vs("trivial handler", trivialRate).
			note(fmt.Sprintf("api CPU %.2f ms per request; node in deploying: a store write per heartbeat, a Temporal signal per node at most once per fifth of its heartbeat timeout (%d nodes)", ms(stepBeatCPU), len(ramdisk)))
		if stepErrs > 0 {
			sr = sr.note(fmt.Sprintf("%s; %d refused", sr.Note, stepErrs))
		}
		// What a heartbeat is made of, each alone from this process with
		// the same concurrency: its store write and its Temporal signal.
		merges, err := loopRate(ctx, cfg.apiDuration, cfg.apiClients, func(i int) bool {
			n := ramdisk[i%len(ramdisk)]
			return st.store.MergeDriverInternalInfo(ctx, n.uuid, map[string]any{"agent_last_heartbeat": time.Now().UTC().Format(time.RFC3339Nano)}) == nil
		})
		if err != nil {
			return rows, fmt.Errorf("store writes: %w", err)
		}
		signals, err := loopRate(ctx, cfg.apiDuration, cfg.apiClients, func(i int) bool {
			err := st.tc.SignalWorkflow(ctx, workflows.WorkflowID(ramdisk[i%len(ramdisk)].uuid), "", workflows.SignalHeartbeat, nil)
			var nf *serviceerror.NotFound
			return errors.As(err, &nf)
		})
		if err != nil {
			return rows, fmt.Errorf("Temporal signals: %w", err)
		}
		// A heartbeat is at least one store write and, in the wait states,
		// one signal: those alone are the fair baselines.
		hr = hr.vs("Temporal SignalWorkflow alone (below)", signals)
		sr = sr.vs("store MergeDriverInternalInfo alone (below)", merges)
		rows = append(rows, lr, hr, sr,
			row("api", "  heartbeat part: store MergeDriverInternalInfo alone ("+clients+", from the bench process)", merges, "req/s"),
			row("api", "  heartbeat part: Temporal SignalWorkflow to a missing workflow alone ("+clients+", from the bench process)", signals, "req/s"),
		)
	}
	rows = append(rows, row("api", "peak RSS api (VmHWM)", mib(st.usage().APIHWM), "MiB"))
	return rows, nil
}

// seedRamdiskNodes creates nodes waiting for their agent, each with a port
// and a known agent token, directly in the store (setup).
func seedRamdiskNodes(ctx context.Context, s *store.Store, n int) ([]ramdiskNode, error) {
	out := make([]ramdiskNode, n)
	base := time.Now().UnixNano() % 1_000_000
	target := provision.Active
	for i := range out {
		tok := make([]byte, 32)
		_, _ = crand.Read(tok)
		rn := ramdiskNode{
			mac:      fmt.Sprintf("52:55:%02x:%02x:%02x:%02x", (base>>8)&0xff, base&0xff, (i>>8)&0xff, i&0xff),
			token:    base64.RawURLEncoding.EncodeToString(tok),
			callback: fmt.Sprintf("https://127.0.0.1:%d", 20000+i),
		}
		name := fmt.Sprintf("bench-ramdisk-%d-%d", base, i)
		node := &store.Node{
			Name: &name, Driver: "fake-hardware", DeployInterface: "direct", ProvisionState: provision.DeployWait,
			TargetProvisionState: &target,
			DriverInternalInfo:   map[string]any{store.KeyAgentToken: rn.token, store.KeyAgentURL: rn.callback},
			Properties:           map[string]any{"cpus": 2, "memory_mb": 2048, "local_gb": 20},
		}
		if err := s.CreateNode(ctx, node); err != nil {
			return nil, fmt.Errorf("seed ramdisk node: %w", err)
		}
		rn.uuid = node.UUID
		if err := s.CreatePort(ctx, &store.Port{Address: rn.mac, NodeUUID: node.UUID, PXEEnabled: true}); err != nil {
			return nil, fmt.Errorf("seed port of ramdisk node: %w", err)
		}
		out[i] = rn
	}
	return out, nil
}

// setRamdiskState moves the ramdisk nodes to state (setup, not measured).
func setRamdiskState(ctx context.Context, s *store.Store, nodes []ramdiskNode, state provision.State) error {
	for _, n := range nodes {
		if _, err := s.SetProvisionState(ctx, n.uuid, nil, state, nil, nil); err != nil {
			return fmt.Errorf("move ramdisk node %s to %s: %w", n.uuid, state, err)
		}
	}
	return nil
}

// seedNodes adds n enrolled nodes with realistic fields through CreateNode.
func seedNodes(ctx context.Context, s *store.Store, n int) error {
	base := time.Now().UnixNano() % 1_000_000
	return createNodes(ctx, s, n, func(i int) *store.Node {
		name := fmt.Sprintf("bench-fleet-%d-%d", base, i)
		rc := "baremetal"
		return &store.Node{
			Name: &name, Driver: "redfish", ProvisionState: []provision.State{provision.Enroll, provision.Manageable, provision.Available, provision.Active}[i%4],
			ConductorGroup: fmt.Sprintf("rack%d", i%8), ResourceClass: &rc, DeployInterface: "direct",
			DriverInfo: map[string]any{
				"redfish_address": fmt.Sprintf("https://10.0.%d.%d", i/250%250, i%250), "redfish_username": "admin",
				"redfish_password": "secret", "redfish_system_id": fmt.Sprintf("/redfish/v1/Systems/%d", i),
			},
			Properties:   map[string]any{"cpus": 64, "memory_mb": 262144, "local_gb": 960, "cpu_arch": "x86_64"},
			InstanceInfo: map[string]any{"image_source": "http://images.example/ubuntu.raw", "root_gb": 100},
			Traits:       []string{fmt.Sprintf("CUSTOM_RACK_%d", i%8)},
		}
	})
}

// createNodes adds the n nodes node(0..n-1) makes through CreateNode, with
// seedWorkers at once (setup, not measured).
func createNodes(ctx context.Context, s *store.Store, n int, node func(i int) *store.Node) error {
	if n <= 0 {
		return nil
	}
	var next atomic.Int64
	var wg sync.WaitGroup
	errs := make([]error, seedWorkers)
	for w := range seedWorkers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1) - 1
				if i >= int64(n) || ctx.Err() != nil {
					return
				}
				nd := node(int(i))
				if err := s.CreateNode(ctx, nd); err != nil {
					errs[w] = fmt.Errorf("seed node %s: %w", deref(nd.Name), err)
					return
				}
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

func nodeUUIDs(ctx context.Context, s *store.Store) ([]string, error) {
	nodes, err := s.ListNodes(ctx, store.NodeFilter{Fields: []string{"uuid"}})
	if err != nil {
		return nil, fmt.Errorf("list node UUIDs: %w", err)
	}
	out := make([]string, len(nodes))
	for i, n := range nodes {
		out[i] = n.UUID
	}
	return out, nil
}

// request is the i-th request of a measure: method, URL, JSON body.
type request func(i int) (method, url string, body any)

// latencies sends n requests one after another and times each.
func latencies(ctx context.Context, hc *http.Client, n int, req request) ([]time.Duration, error) {
	out := make([]time.Duration, 0, n)
	for i := range n {
		m, u, b := req(i)
		start := time.Now()
		if _, err := doJSON(ctx, hc, m, u, b, nil); err != nil {
			return out, err
		}
		out = append(out, time.Since(start))
	}
	return out, nil
}

// throughput runs clients closed-loop for d: accepted (2xx) requests per
// second and the count of refused ones.
func throughput(ctx context.Context, hc *http.Client, clients int, d time.Duration, req request) (float64, int64, error) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	var ok, refused atomic.Int64
	var seq atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				m, u, b := req(int(seq.Add(1)))
				code, _ := doJSON(ctx, hc, m, u, b, nil)
				switch {
				case ctx.Err() != nil:
				case code >= 200 && code < 300:
					ok.Add(1)
				default:
					refused.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	return float64(ok.Load()) / time.Since(start).Seconds(), refused.Load(), nil
}

// trivialServer answers 200 with a tiny body: the HTTP client and loopback
// ceiling the API's figures are read against.
type trivialServer struct {
	URL string
	srv *http.Server
}

func startTrivialServer() (*trivialServer, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen for the trivial server: %w", err)
	}
	s := &trivialServer{URL: "http://" + ln.Addr().String() + "/", srv: &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte("{}"))
		}),
		ReadHeaderTimeout: 10 * time.Second,
	}}
	go func() { _ = s.srv.Serve(ln) }()
	return s, nil
}

func (s *trivialServer) Close() { _ = s.srv.Close() }

// perRequest divides CPU time by the requests a rate over d stands for.
func perRequest(cpu time.Duration, rate float64, d time.Duration) time.Duration {
	n := rate * d.Seconds()
	if n < 1 {
		return 0
	}
	return time.Duration(float64(cpu) / n)
}
