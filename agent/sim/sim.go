// Package sim is a SIMULATED ironflow agent for tests and scale benchmarks.
// It runs the real agent code (lookup, heartbeat loop, command API, image
// download and checksum) on simulated hardware that keeps nothing but the
// first and last MiB of each disk in memory: image bytes are downloaded and
// verified but then dropped. Faults can be injected: command failures,
// latency, and a silent (non-heartbeating) agent.
//
// It must never be used where a real machine is expected.
package sim

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/ironflow/ironflow/agent"
	"github.com/ironflow/ironflow/agent/client"
)

// DefaultDiskSize is the simulated root disk (above Ironic's 4 GiB minimum).
const DefaultDiskSize = 20 << 30

// ErrInjected marks a fault the simulation injected on purpose.
var ErrInjected = errors.New("simulated agent: injected failure")

// Config configures one simulated agent.
type Config struct {
	// APIURL is the ironflow API the agent looks up and heartbeats to.
	APIURL string
	// MACs are the node's port addresses used for lookup.
	MACs []string
	// NodeUUID and AgentToken play a virtual-media boot (optional).
	NodeUUID   string
	AgentToken string
	// ListenAddr for the command API; default 127.0.0.1:0.
	ListenAddr string
	// Insecure serves plain HTTP instead of self-signed HTTPS.
	Insecure bool
	// HeartbeatInterval overrides the derived interval (tests use ~100ms).
	HeartbeatInterval time.Duration
	// DiskSize is the simulated disk (DefaultDiskSize); Disks adds more.
	DiskSize int64
	// KeepWrites makes the disk remember every byte written, not only its
	// first and last MiB (Hardware.KeepWrites).
	KeepWrites bool
	// FailureRate is the probability (0..1) that a command in FailCommands
	// fails with ErrInjected.
	FailureRate float64
	// FailCommands lists the commands subject to FailureRate; default
	// deploy.execute_deploy_step and clean.execute_clean_step.
	FailCommands []string
	// Latency is added before every command runs.
	Latency time.Duration
	// Seed makes fault injection reproducible (0: random).
	Seed uint64
	// Download tunes image downloads (retries, delays).
	Download agent.DownloadConfig
	// APIClient / DownloadClient override the HTTP clients.
	APIClient      *http.Client
	DownloadClient *http.Client
	// CustomDeploySteps are deploy steps offered besides the agent's own
	// (agent.Config CustomDeploySteps): what a custom-agent deploy runs.
	CustomDeploySteps []agent.CustomStep
	// Logger (default: discard, so 500 agents stay quiet).
	Logger *slog.Logger
}

// Agent is a running simulated agent.
type Agent struct {
	*agent.Agent
	hw        *Hardware
	cancel    context.CancelFunc
	poweredOn atomic.Bool
}

// Start starts a simulated agent; it returns once the command API listens.
// Lookup and heartbeats run in the background until ctx ends or Stop.
func Start(ctx context.Context, cfg Config) (*Agent, error) {
	if cfg.ListenAddr == "" {
		cfg.ListenAddr = "127.0.0.1:0"
	}
	if cfg.DiskSize == 0 {
		cfg.DiskSize = DefaultDiskSize
	}
	if len(cfg.FailCommands) == 0 {
		cfg.FailCommands = []string{"deploy.execute_deploy_step", "clean.execute_clean_step"}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	seed := cfg.Seed
	if seed == 0 {
		seed = rand.Uint64()
	}
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	var rngMu sync.Mutex
	hw := NewHardware(cfg.MACs, cfg.DiskSize)
	if cfg.KeepWrites {
		hw.KeepWrites()
	}
	s := &Agent{hw: hw}
	hw.onPower = func(agent.PowerAction) { s.poweredOn.Store(false); go s.Stop() }
	a, err := agent.New(agent.Config{
		APIURL: cfg.APIURL, LookupAddresses: cfg.MACs, NodeUUID: cfg.NodeUUID, AgentToken: cfg.AgentToken,
		ListenAddr: cfg.ListenAddr, Insecure: cfg.Insecure, HeartbeatInterval: cfg.HeartbeatInterval,
		APIClient: cfg.APIClient, DownloadClient: cfg.DownloadClient, Hardware: hw, Download: cfg.Download,
		CustomDeploySteps: cfg.CustomDeploySteps,
		Logger:            cfg.Logger.With("sim_agent", strings.Join(cfg.MACs, ",")),
		BeforeCommand: func(ctx context.Context, name string) error {
			if cfg.Latency > 0 {
				select {
				case <-time.After(cfg.Latency):
				case <-ctx.Done():
					return ctx.Err()
				}
			}
			if cfg.FailureRate > 0 && slices.Contains(cfg.FailCommands, name) {
				rngMu.Lock()
				fail := rng.Float64() < cfg.FailureRate
				rngMu.Unlock()
				if fail {
					return fmt.Errorf("%w in %s", ErrInjected, name)
				}
			}
			return nil
		},
	})
	if err != nil {
		return nil, err
	}
	s.Agent = a
	actx, cancel := context.WithCancel(ctx)
	s.cancel = cancel
	if err := a.Start(actx); err != nil {
		cancel()
		return nil, err
	}
	s.poweredOn.Store(true)
	return s, nil
}

// Stop stops the simulated agent (as a power-off would).
func (s *Agent) Stop() {
	s.cancel()
	<-s.Done()
}

// PoweredOn is false once standby.power_off or standby.reboot ran; Stop
// ends the agent without changing it (a machine whose agent process died
// is still powered).
func (s *Agent) PoweredOn() bool { return s.poweredOn.Load() }

// Hardware returns the simulated hardware (to inspect what was "written").
func (s *Agent) Hardware() *Hardware { return s.hw }

// Client returns an agent client for this simulated agent (after lookup).
func (s *Agent) Client(opts ...client.Option) (*client.Client, error) {
	<-s.LookedUp()
	if pem := s.CACertPEM(); pem != nil {
		opts = append([]client.Option{client.WithCAPEM(pem)}, opts...)
	}
	return client.New(s.CallbackURL(), s.Token(), opts...)
}
