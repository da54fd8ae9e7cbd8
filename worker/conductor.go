package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/ironflow/ironflow/hardware"
	"github.com/ironflow/ironflow/store"
)

// DefaultHeartbeatInterval is how often a worker records that it is alive,
// as Ironic's [conductor]heartbeat_interval.
const DefaultHeartbeatInterval = 10 * time.Second

// Conductor is how a worker process appears in GET /v1/conductors.
type Conductor struct {
	// Hostname names the worker; unique among the workers of a
	// deployment (default: the host's name).
	Hostname string
	// ConductorGroups it serves (Options.ConductorGroups; "" is the
	// default group).
	ConductorGroups []string
	// Interval between heartbeats; 0 is DefaultHeartbeatInterval.
	Interval time.Duration
}

// Announce registers the worker as a conductor that runs every hardware
// type of the registry, then heartbeats every Interval until ctx ends or
// stop is called. stop unregisters it (a clean shutdown: the API shows it
// not alive at once); when ctx ends first the heartbeats just stop, as
// when a process dies, and the API shows it not alive once the heartbeat
// timeout has passed.
func Announce(ctx context.Context, st *store.Store, c Conductor, log *slog.Logger) (stop func(), err error) {
	if c.Hostname == "" {
		return nil, errors.New("worker: a conductor needs a hostname")
	}
	if c.Interval <= 0 {
		c.Interval = DefaultHeartbeatInterval
	}
	groups := c.ConductorGroups
	if len(groups) == 0 {
		groups = []string{""}
	}
	row := &store.Conductor{Hostname: c.Hostname, ConductorGroups: groups, Drivers: hardware.Names()}
	if err := st.RegisterConductor(ctx, row); err != nil {
		return nil, fmt.Errorf("worker: register conductor: %w", err)
	}
	hctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(c.Interval)
		defer t.Stop()
		for {
			select {
			case <-hctx.Done():
				return
			case <-t.C:
			}
			err := st.TouchConductor(hctx, c.Hostname)
			if errors.Is(err, store.ErrNotFound) {
				// The row was removed (by hand): register again.
				err = st.RegisterConductor(hctx, row)
			}
			if err != nil && hctx.Err() == nil {
				log.Warn("conductor heartbeat failed", "hostname", c.Hostname, "error", err)
			}
		}
	}()
	var once sync.Once
	return func() {
		once.Do(func() {
			cancel()
			<-done
			uctx, ucancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer ucancel()
			if err := st.UnregisterConductor(uctx, c.Hostname); err != nil {
				log.Warn("conductor not unregistered", "hostname", c.Hostname, "error", err)
			}
		})
	}, nil
}
