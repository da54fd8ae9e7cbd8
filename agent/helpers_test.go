package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ironflow/ironflow/agent/client"
)

const testToken = "tok-0123456789abcdefghijklmnopqrstuvwxyz-ABC"

// fakeAPI answers lookup and heartbeat like ironflow's API does.
type fakeAPI struct {
	*httptest.Server
	mu         sync.Mutex
	node       string
	token      string
	issued     bool
	heartbeats []map[string]any
	lookups    int
	hbCh       chan map[string]any
	instance   map[string]any
	properties map[string]any
	// down makes both endpoints answer 503, as an API outage.
	down       atomic.Bool
	hbFailures atomic.Int32
}

func newFakeAPI(t *testing.T) *fakeAPI {
	f := &fakeAPI{node: "1be26c0b-03f2-4d2e-ae87-c02d7f33c123", token: testToken, hbCh: make(chan map[string]any, 100)}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/lookup", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.lookups++
		if f.down.Load() {
			w.WriteHeader(503)
			return
		}
		if r.Header.Get("X-OpenStack-Ironic-API-Version") == "" || r.URL.Query().Get("addresses") == "" {
			http.Error(w, "bad lookup", 400)
			return
		}
		tok := f.token
		if f.issued {
			tok = "******"
		}
		f.issued = true
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{
			"node":   map[string]any{"uuid": f.node, "properties": f.properties, "instance_info": f.instance, "driver_internal_info": map[string]any{}},
			"config": map[string]any{"heartbeat_timeout": 300, "agent_token": tok, "agent_token_required": true},
		})
	})
	mux.HandleFunc("POST /v1/heartbeat/{node}", func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		json.NewDecoder(r.Body).Decode(&body)
		if f.down.Load() {
			f.hbFailures.Add(1)
			w.WriteHeader(503)
			return
		}
		if r.PathValue("node") != f.node || body["agent_token"] != f.token {
			w.WriteHeader(400)
			fmt.Fprint(w, `{"error_message": "{\"faultstring\": \"Invalid or missing agent token received.\", \"faultcode\": \"Client\", \"debuginfo\": null}"}`)
			return
		}
		f.mu.Lock()
		f.heartbeats = append(f.heartbeats, body)
		f.mu.Unlock()
		select {
		case f.hbCh <- body:
		default:
		}
		w.WriteHeader(202)
	})
	f.Server = httptest.NewServer(mux)
	t.Cleanup(f.Close)
	return f
}

// waitHeartbeat returns the next heartbeat body.
func (f *fakeAPI) waitHeartbeat(t *testing.T) map[string]any {
	t.Helper()
	select {
	case hb := <-f.hbCh:
		return hb
	case <-time.After(30 * time.Second):
		t.Fatal("no heartbeat within 30s")
	}
	return nil
}

// fileHardware uses regular files as disks.
type fileHardware struct {
	disks []BlockDevice
	paths map[string]string
	power []PowerAction
	mu    sync.Mutex
}

func newFileHardware(t *testing.T, sizes ...int64) *fileHardware {
	h := &fileHardware{paths: map[string]string{}}
	dir := t.TempDir()
	for i, s := range sizes {
		name := fmt.Sprintf("/dev/vd%c", 'a'+i)
		p := filepath.Join(dir, fmt.Sprintf("disk%d.img", i))
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(p, s); err != nil {
			t.Fatal(err)
		}
		h.disks = append(h.disks, BlockDevice{Name: name, Size: s, Kind: "disk", Serial: fmt.Sprintf("SER%d", i)})
		h.paths[name] = p
	}
	return h
}

func (h *fileHardware) path(i int) string { return h.paths[h.disks[i].Name] }

func (h *fileHardware) BlockDevices(context.Context) ([]BlockDevice, error) { return h.disks, nil }

type fileDevice struct {
	*os.File
	size int64
}

func (d fileDevice) Size() int64 { return d.size }

func (h *fileHardware) Open(bd BlockDevice) (Device, error) {
	f, err := os.OpenFile(h.paths[bd.Name], os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	return fileDevice{File: f, size: bd.Size}, nil
}

func (h *fileHardware) Inventory(context.Context) (client.Inventory, error) {
	return client.Inventory{CPU: client.CPU{Count: 1}}, nil
}

func (h *fileHardware) Power(_ context.Context, a PowerAction) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.power = append(h.power, a)
	return nil
}
func (h *fileHardware) SyncAll() error { return nil }
func (h *fileHardware) AddUEFIBootEntry(context.Context, BlockDevice, UEFIPartition, string) error {
	return ErrNotUEFI
}

func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(strings.TrimRight(string(p), "\n"))
	return len(p), nil
}

// startAgent runs an agent with file disks against a fake API and returns a
// client for it once lookup succeeded.
func startAgent(t *testing.T, api *fakeAPI, hw Hardware, mod func(*Config)) (*Agent, *client.Client) {
	t.Helper()
	cfg := Config{
		APIURL: api.URL, LookupAddresses: []string{"52:54:00:12:34:56"}, ListenAddr: "127.0.0.1:0",
		HeartbeatInterval: time.Hour, Hardware: hw, MinRootDiskSize: 1 << 20, Logger: testLogger(t),
		Download: DownloadConfig{RetryDelay: 10 * time.Millisecond, Retries: 3},
	}
	if mod != nil {
		mod(&cfg)
	}
	a, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	if err := a.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cancel(); <-a.Done() })
	select {
	case <-a.LookedUp():
	case <-time.After(30 * time.Second):
		t.Fatal("lookup did not succeed")
	}
	var opts []client.Option
	if pem := a.CACertPEM(); pem != nil {
		opts = append(opts, client.WithCAPEM(pem))
	}
	c, err := client.New(a.CallbackURL(), a.Token(), opts...)
	if err != nil {
		t.Fatal(err)
	}
	return a, c
}
