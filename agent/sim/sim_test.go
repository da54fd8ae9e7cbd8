package sim

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ironflow/ironflow/agent/client"
)

// fakeAPI answers lookup by MAC (one node per MAC) and counts heartbeats.
type fakeAPI struct {
	*httptest.Server
	mu         sync.Mutex
	heartbeats map[string]int
}

func newFakeAPI(t *testing.T) *fakeAPI {
	f := &fakeAPI{heartbeats: map[string]int{}}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/lookup", func(w http.ResponseWriter, r *http.Request) {
		mac := strings.Split(r.URL.Query().Get("addresses"), ",")[0]
		node := "node-" + strings.ReplaceAll(mac, ":", "")
		json.NewEncoder(w).Encode(map[string]any{
			"node":   map[string]any{"uuid": node},
			"config": map[string]any{"heartbeat_timeout": 300, "agent_token": "token-for-" + node + "-0123456789abcdefghijklmn"},
		})
	})
	mux.HandleFunc("POST /v1/heartbeat/{node}", func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		json.NewDecoder(r.Body).Decode(&body)
		if body["agent_token"] != "token-for-"+r.PathValue("node")+"-0123456789abcdefghijklmn" {
			w.WriteHeader(400)
			return
		}
		f.mu.Lock()
		f.heartbeats[r.PathValue("node")]++
		f.mu.Unlock()
		w.WriteHeader(202)
	})
	f.Server = httptest.NewServer(mux)
	t.Cleanup(f.Close)
	return f
}

func (f *fakeAPI) count(node string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.heartbeats[node]
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestManySimulatedAgents(t *testing.T) {
	api := newFakeAPI(t)
	img := bytes.Repeat([]byte("ironflow"), 1<<18) // 2 MiB
	sum := sha256.Sum256(img)
	images := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.ServeContent(w, r, "img", time.Time{}, bytes.NewReader(img))
	}))
	t.Cleanup(images.Close)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const n = 20
	var sims []*Agent
	for i := range n {
		s, err := Start(ctx, Config{APIURL: api.URL, MACs: []string{fmt.Sprintf("52:54:00:00:00:%02x", i)}, HeartbeatInterval: 50 * time.Millisecond, Insecure: i%2 == 0})
		if err != nil {
			t.Fatal(err)
		}
		sims = append(sims, s)
	}
	for _, s := range sims {
		<-s.LookedUp()
		waitFor(t, "heartbeats", func() bool { return api.count(s.NodeUUID()) >= 2 })
	}
	// Deploy on every simulated agent concurrently.
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for _, s := range sims {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := s.Client()
			if err != nil {
				errs <- err
				return
			}
			r, err := c.ExecuteDeployStep(ctx, client.Step{Step: "write_image", Args: map[string]any{
				"image_source": images.URL + "/disk.img", "image_checksum": hex.EncodeToString(sum[:])}}, nil, nil)
			if err == nil {
				_, err = c.WaitCommand(ctx, r.ID, 20*time.Millisecond, nil)
			}
			if err == nil && s.Hardware().Disks()[0].BytesWritten() != int64(len(img)) {
				err = fmt.Errorf("simulated disk saw %d bytes", s.Hardware().Disks()[0].BytesWritten())
			}
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	// Power off stops the simulated machine.
	c, _ := sims[0].Client()
	if err := c.PowerOff(ctx); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "power off", func() bool { return !sims[0].PoweredOn() })
	<-sims[0].Done()
}

func TestSimulatedFaults(t *testing.T) {
	api := newFakeAPI(t)
	ctx := context.Background()
	s, err := Start(ctx, Config{APIURL: api.URL, MACs: []string{"52:54:00:aa:00:01"}, HeartbeatInterval: 20 * time.Millisecond, FailureRate: 1, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	c, err := s.Client()
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.ExecuteCleanStep(ctx, client.Step{Step: "erase_devices_metadata"}, nil, nil)
	if err == nil {
		_, err = c.WaitCommand(ctx, r.ID, 10*time.Millisecond, nil)
	}
	if !errors.Is(err, client.ErrCommandFailed) || !strings.Contains(err.Error(), "injected failure") {
		t.Fatalf("want injected failure, got %v", err)
	}
	// A silent agent stops heartbeating.
	waitFor(t, "first heartbeats", func() bool { return api.count(s.NodeUUID()) > 0 })
	s.SetHeartbeating(false)
	before := api.count(s.NodeUUID())
	time.Sleep(200 * time.Millisecond)
	if after := api.count(s.NodeUUID()); after != before {
		t.Fatalf("paused agent heartbeated %d times", after-before)
	}
	s.SetHeartbeating(true)
	waitFor(t, "resumed heartbeats", func() bool { return api.count(s.NodeUUID()) > before })
}
