package tests

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ironflow/ironflow/agent/sim"
)

// simMachine stands in for a fake-hardware machine's boots: whenever the
// node waits for its agent (wait call-back, clean wait) and no simulated
// agent runs, it "boots" one, as the machine would after its PXE boot. The
// agent is ironflow's real agent code on simulated disks (agent/sim).
type simMachine struct {
	t      *testing.T
	uuid   string
	macs   []string
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	agents []*sim.Agent
	paused atomic.Bool
	cfg    sim.Config
}

func startSimMachine(t *testing.T, uuid string, macs []string, cfg sim.Config) *simMachine {
	ctx, cancel := context.WithCancel(context.Background())
	if cfg.APIURL == "" {
		cfg.APIURL = lab.APIURL
	}
	cfg.MACs = macs
	if cfg.HeartbeatInterval == 0 {
		cfg.HeartbeatInterval = time.Second
	}
	m := &simMachine{t: t, uuid: uuid, macs: macs, cancel: cancel, done: make(chan struct{}), cfg: cfg}
	go m.run(ctx)
	t.Cleanup(m.stop)
	return m
}

func (m *simMachine) run(ctx context.Context) {
	defer close(m.done)
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(100 * time.Millisecond):
		}
		if m.paused.Load() {
			continue
		}
		// The API may be down (crash tests): a machine just tries again.
		n, ok := tryGetNode(m.uuid)
		if !ok {
			continue
		}
		if n.ProvisionState != "wait call-back" && n.ProvisionState != "clean wait" && n.ProvisionState != "inspect wait" &&
			n.ProvisionState != "rescue wait" && n.ProvisionState != "service wait" {
			continue
		}
		// A locked-down agent (disable_power_off) is gone though its
		// machine stays on: the BMC's reset boots the next one.
		if cur := m.current(); cur != nil && cur.PoweredOn() && !cur.LockedDown() {
			continue
		}
		a, err := sim.Start(ctx, m.cfg)
		if err != nil {
			m.t.Errorf("boot simulated agent: %v", err)
			return
		}
		m.mu.Lock()
		m.agents = append(m.agents, a)
		m.mu.Unlock()
	}
}

func (m *simMachine) current() *sim.Agent {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.agents) == 0 {
		return nil
	}
	return m.agents[len(m.agents)-1]
}

func (m *simMachine) boots() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.agents)
}

func (m *simMachine) stop() {
	m.cancel()
	<-m.done
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, a := range m.agents {
		if a.PoweredOn() {
			a.Stop()
		}
	}
}

// imageServer serves one random disk image and counts full downloads.
type imageServer struct {
	*httptest.Server
	data      []byte
	sha256    string
	downloads atomic.Int64
	// delay slows each response down (per 1 MiB) to stretch write_image.
	delay time.Duration
}

func newImageServer(t *testing.T, size int) *imageServer {
	s := &imageServer{data: make([]byte, size)}
	_, _ = rand.Read(s.data)
	// A whole-disk image has a partition table (the agent adds the config
	// drive partition after it): an MBR with one Linux partition from 1 MiB.
	clear(s.data[440:512])
	entry := s.data[446:462]
	entry[4] = 0x83
	binary.LittleEndian.PutUint32(entry[8:], 2048)
	binary.LittleEndian.PutUint32(entry[12:], uint32(size/512-2048))
	s.data[510], s.data[511] = 0x55, 0xaa
	sum := sha256.Sum256(s.data)
	s.sha256 = hex.EncodeToString(sum[:])
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/disk.raw" {
			http.NotFound(w, r)
			return
		}
		if r.Header.Get("Range") == "" {
			s.downloads.Add(1)
		}
		if s.delay == 0 {
			http.ServeContent(w, r, "disk.raw", time.Time{}, bytes.NewReader(s.data))
			return
		}
		w.Header().Set("Content-Length", strconv.Itoa(len(s.data)))
		for off := 0; off < len(s.data); off += 1 << 20 {
			end := min(off+1<<20, len(s.data))
			if _, err := w.Write(s.data[off:end]); err != nil {
				return
			}
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				return
			case <-time.After(s.delay):
			}
		}
	}))
	t.Cleanup(s.Close)
	return s
}

// tryGetNode reads a node without failing the test: for goroutines that
// keep going while the API restarts.
func tryGetNode(id string) (node, bool) {
	var n node
	req, err := http.NewRequest("GET", lab.APIURL+"/v1/nodes/"+id, nil)
	if err != nil {
		return n, false
	}
	req.Header.Set("X-OpenStack-Ironic-API-Version", "1.78")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return n, false
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || json.NewDecoder(resp.Body).Decode(&n) != nil {
		return n, false
	}
	return n, true
}
