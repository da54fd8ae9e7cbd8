package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"sync"
	"time"

	"github.com/ironflow/ironflow/internal/testkit/ironic"
	"github.com/ironflow/ironflow/provision"
	"github.com/ironflow/ironflow/store"
)

// The allocation part: Ironic's allocation API (at the bench's 1.78) on ironflow and on
// Debian's Ironic in the same run, each with allocationFleet available
// nodes of one resource class: one allocation at a time (POST → the
// allocation active, allocationSingles of them), then allocationBurst at
// once (the first POST → the last active).
const (
	allocationFleet   = 10_000
	allocationSingles = 3
	allocationBurst   = 100
	allocationClass   = "bench-allocation"
	// allocationTimeout bounds a target's burst: Debian's Ironic, one
	// process, takes minutes over 10,000 nodes; what did not finish by
	// then is counted as such, and the figure is a lower bound.
	allocationTimeout = 10 * time.Minute
)

// ironicAllocationSeedScript adds n available nodes of the allocation
// class through Ironic's own database API (setup, not measured).
const ironicAllocationSeedScript = `import sys, uuid
conf, n, cls = sys.argv[1], int(sys.argv[2]), sys.argv[3]
from ironic.common import service as ironic_service
ironic_service.prepare_service("ironic-bench-seed", ["seed", "--config-file", conf])
from ironic import objects
from ironic.db import api as dbapi
objects.register_all()
db = dbapi.get_instance()
for i in range(n):
    db.create_node({
        "uuid": str(uuid.uuid4()), "name": "bench-allocation-%d" % i, "driver": "fake-hardware",
        "version": objects.Node.VERSION, "provision_state": "available", "power_state": "power off",
        "resource_class": cls, "properties": {"cpus": 64, "memory_mb": 262144, "local_gb": 960, "cpu_arch": "x86_64"},
        "boot_interface": "fake", "console_interface": "no-console", "deploy_interface": "fake",
        "inspect_interface": "no-inspect", "management_interface": "fake", "network_interface": "noop",
        "power_interface": "fake", "raid_interface": "no-raid", "rescue_interface": "no-rescue",
        "storage_interface": "noop", "vendor_interface": "no-vendor", "bios_interface": "no-bios",
    })
`

// allocationTarget is one side of the part: where its API is.
type allocationTarget struct {
	name string
	url  string
	hc   *http.Client
}

// allocationResult is one side's figures.
type allocationResult struct {
	singles []time.Duration
	burst   time.Duration
	active  int
	failed  int
	// unfinished allocations were still allocating at allocationTimeout.
	unfinished int
	first      string
}

func benchAllocation(ctx context.Context, cfg config, dir string, log *slog.Logger) ([]Row, error) {
	if !ironic.Installed() {
		return nil, errNoIronic
	}
	// ironflow on a stack of its own, so that its 10,000 nodes weigh on
	// no other part.
	st, err := startStack(ctx, cfg, filepath.Join(dir, "ironflow-allocation"), log)
	if err != nil {
		if st != nil {
			st.stop()
		}
		return nil, fmt.Errorf("start ironflow's stack: %w", err)
	}
	defer st.stop()
	ir, err := ironic.Start(ctx, filepath.Join(dir, "ironic-allocation"), log)
	if err != nil {
		return nil, err
	}
	defer ir.Stop()
	if out, err := ironic.Python(ctx, ironicAllocationSeedScript, ir.Conf, fmt.Sprint(allocationFleet), allocationClass).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("seed Ironic's database: %w\n%s", err, ironic.Tail(string(out), 3000))
	}
	if err := seedAvailableNodes(ctx, st.store, allocationFleet); err != nil {
		return nil, err
	}
	log.Info("allocation fleets seeded", "nodes", allocationFleet)
	slow := func() *http.Client {
		hc := newHTTPClient(allocationBurst * 2)
		hc.Timeout = allocationTimeout
		return hc
	}
	targets := []allocationTarget{
		{name: "Ironic 21.4", url: ir.URL, hc: slow()},
		{name: "ironflow", url: st.APIURL, hc: slow()},
	}
	results := make([]allocationResult, len(targets))
	for i, t := range targets {
		r, err := allocate(ctx, t)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", t.name, err)
		}
		log.Info("allocations done", "target", t.name, "single_p50", percentile(r.singles, 50), "burst", r.burst, "active", r.active, "failed", r.failed)
		results[i] = r
	}
	ir0, fl := results[0], results[1]
	note := func(r allocationResult) string {
		s := fmt.Sprintf("%d of %d active", r.active, r.active+r.failed+r.unfinished)
		if r.unfinished > 0 {
			s += fmt.Sprintf(", %d still allocating after %v (the time is a lower bound)", r.unfinished, allocationTimeout)
		}
		if r.first != "" {
			s += "; first failure: " + r.first
		}
		return s
	}
	return []Row{
		lowerBetter(row("allocation", fmt.Sprintf("one allocation among %d available nodes (POST → active, p50 of %d)", allocationFleet, allocationSingles),
			ms(percentile(fl.singles, 50)), "ms"), "Ironic 21.4, same fleet, same client", ms(percentile(ir0.singles, 50))),
		lowerBetter(row("allocation", fmt.Sprintf("%d allocations at once among %d available nodes (first POST → last active)", allocationBurst, allocationFleet),
			ms(fl.burst), "ms"), "Ironic 21.4 ("+note(ir0)+")", ms(ir0.burst)).note("ironflow: " + note(fl)),
	}, nil
}

// seedAvailableNodes adds n available, powered-off nodes of the
// allocation class through the store (setup, not measured).
func seedAvailableNodes(ctx context.Context, s *store.Store, n int) error {
	return createNodes(ctx, s, n, func(i int) *store.Node {
		name := fmt.Sprintf("bench-allocation-%d", i)
		rc, power := allocationClass, "power off"
		return &store.Node{Name: &name, Driver: "fake-hardware", ProvisionState: provision.Available, ResourceClass: &rc,
			PowerState: &power, DeployInterface: "fake",
			Properties: map[string]any{"cpus": 64, "memory_mb": 262144, "local_gb": 960, "cpu_arch": "x86_64"}}
	})
}

// allocate runs the singles, then the burst, on one target.
func allocate(ctx context.Context, t allocationTarget) (allocationResult, error) {
	var r allocationResult
	ctx, cancel := context.WithTimeout(ctx, allocationTimeout)
	defer cancel()
	for range allocationSingles {
		start := time.Now()
		state, lastErr, err := allocateOne(ctx, t)
		if err != nil {
			return r, err
		}
		if state != "active" {
			return r, fmt.Errorf("a single allocation ended %q: %s", state, lastErr)
		}
		r.singles = append(r.singles, time.Since(start))
	}
	var mu sync.Mutex
	var wg sync.WaitGroup
	var firstErr error
	start := time.Now()
	for range allocationBurst {
		wg.Add(1)
		go func() {
			defer wg.Done()
			state, lastErr, err := allocateOne(ctx, t)
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err != nil && ctx.Err() != nil:
				r.unfinished++
			case err != nil:
				if firstErr == nil {
					firstErr = err
				}
			case state == "active":
				r.active++
			default:
				r.failed++
				if r.first == "" {
					r.first = lastErr
				}
			}
		}()
	}
	wg.Wait()
	r.burst = time.Since(start)
	return r, firstErr
}

// allocateOne creates an allocation and polls it until it is no longer
// allocating, every 20 ms.
func allocateOne(ctx context.Context, t allocationTarget) (state, lastError string, err error) {
	ctx, cancel := context.WithTimeout(ctx, allocationTimeout)
	defer cancel()
	var a struct {
		UUID      string  `json:"uuid"`
		State     string  `json:"state"`
		LastError *string `json:"last_error"`
	}
	code, err := doJSON(ctx, t.hc, http.MethodPost, t.url+"/v1/allocations", map[string]any{"resource_class": allocationClass}, &a)
	if err != nil || code != http.StatusCreated {
		return "", "", fmt.Errorf("POST /v1/allocations: %d %v", code, err)
	}
	for a.State == "allocating" {
		select {
		case <-ctx.Done():
			return a.State, "", fmt.Errorf("allocation %s still allocating: %w", a.UUID, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
		if code, err := doJSON(ctx, t.hc, http.MethodGet, t.url+"/v1/allocations/"+a.UUID, nil, &a); err != nil || code != http.StatusOK {
			return "", "", fmt.Errorf("GET /v1/allocations/%s: %d %v", a.UUID, code, err)
		}
	}
	if a.LastError != nil {
		lastError = *a.LastError
	}
	return a.State, lastError, nil
}
