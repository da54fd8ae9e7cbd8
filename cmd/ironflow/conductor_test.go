package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/ironflow/ironflow/apiserver"
	"github.com/ironflow/ironflow/embedded"
	"github.com/ironflow/ironflow/internal/testkit/storetest"
)

func TestMain(m *testing.M) { storetest.Main(m) }

// TestWorkerRegistersAsConductor starts a worker through the same flags and
// wiring as `ironflow worker` (and `ironflow dev`) on real PostgreSQL and
// Temporal: GET /v1/conductors lists it alive with its group and the
// registry's drivers, it stays alive past the heartbeat timeout because it
// heartbeats, and a clean stop leaves it listed, not alive.
func TestWorkerRegistersAsConductor(t *testing.T) {
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	st := storetest.New(t)
	srv, err := embedded.StartTemporal(ctx, embedded.TemporalConfig{UIPort: -1}, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Stop() })
	tc, err := dialTemporal(srv.Address(), "default", temporalTLSFlags{}, testCodec(t), log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tc.Close)

	s := newSettings("worker")
	f := addWorkerFlags(s, nil)
	if err := s.parse([]string{"--conductor-hostname", "wiring-test", "--conductor-groups", "rack1",
		"--conductor-heartbeat-interval", "100ms", "--sync-power-state-interval", "0",
		"--signal-key", "conductor-wiring-test-signal-key"}); err != nil {
		t.Fatal(err)
	}
	stop, err := startWorker(st, tc, f, nil, log)
	if err != nil {
		t.Fatal(err)
	}
	stopped := false
	defer func() {
		if !stopped {
			stop()
		}
	}()

	const timeout = 500 * time.Millisecond
	cfg := apiserver.DefaultConfig()
	cfg.ConductorHeartbeatTimeout = timeout
	h, err := apiserver.New(cfg, st, &apiserver.TemporalEngine{Client: tc}, log)
	if err != nil {
		t.Fatal(err)
	}
	api := httptest.NewServer(h)
	defer api.Close()
	get := func(path string) map[string]any {
		t.Helper()
		req, _ := http.NewRequest("GET", api.URL+path, nil)
		req.Header.Set("X-OpenStack-Ironic-API-Version", "1.49")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		var m map[string]any
		if err := json.NewDecoder(res.Body).Decode(&m); err != nil || res.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %d %v", path, res.StatusCode, err)
		}
		return m
	}

	list := get("/v1/conductors?detail=True")["conductors"].([]any)
	if len(list) != 1 {
		t.Fatalf("conductors: %v", list)
	}
	c := list[0].(map[string]any)
	drivers, _ := c["drivers"].([]any)
	if c["hostname"] != "wiring-test" || c["conductor_group"] != "rack1" || c["alive"] != true || len(drivers) == 0 {
		t.Errorf("conductor %v", c)
	}
	time.Sleep(3 * timeout)
	if c := get("/v1/conductors/wiring-test"); c["alive"] != true {
		t.Errorf("not alive past the timeout although the worker heartbeats: %v", c)
	}
	stop()
	stopped = true
	if c := get("/v1/conductors/wiring-test"); c["alive"] != false {
		t.Errorf("alive after the worker stopped: %v", c)
	}
}
