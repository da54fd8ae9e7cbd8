package agent

import (
	"context"
	"encoding/json"
	"time"
)

// lockdown is IPA's system.lockdown, which Ironic sends instead of
// standby.power_off to the agent of a node with disable_power_off (Ironic's
// agent_client lockdown, agent_base tear_down_service, the agent deploy's
// tear_down_agent): the machine must stay powered, so the agent makes
// itself unusable instead. It syncs the disks, answers, then stops
// heartbeating and serving its command API; its token dies with it. The
// caller sees the agent unreachable from then on, which is how Ironic knows
// the lockdown took effect. The process stays up (cmd/ironflow-agent), as
// after a rescue, so that PID 1 does not exit.
func (a *Agent) lockdown(ctx context.Context, _ *command, _ json.RawMessage) (any, error) {
	if err := a.cfg.Hardware.SyncAll(); err != nil {
		a.log.Warn("sync before lockdown failed", "err", err)
	}
	a.lockedDown.Store(true)
	a.log.Info("lockdown: the agent stops heartbeating and serving its API; the machine stays on", "node", a.NodeUUID())
	go func() {
		// Answer first: the caller is waiting for the result.
		time.Sleep(powerDelay)
		a.cancel()
	}()
	return "lockdown requested", nil
}

// LockedDown reports whether system.lockdown stopped the agent.
func (a *Agent) LockedDown() bool { return a.lockedDown.Load() }
