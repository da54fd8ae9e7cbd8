package agent

import (
	"context"
	"testing"
	"time"
)

// TestLockdownStopsTheAgentAndKeepsThePower: system.lockdown (for a node
// with disable_power_off) answers, then the agent stops serving and
// heartbeating; no power action reaches the machine.
func TestLockdownStopsTheAgentAndKeepsThePower(t *testing.T) {
	api := newFakeAPI(t)
	hw := newFileHardware(t, 8<<20)
	a, c := startAgent(t, api, hw, nil)
	api.waitHeartbeat(t)
	if err := c.Lockdown(context.Background()); err != nil {
		t.Fatalf("lockdown: %v", err)
	}
	select {
	case <-a.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the agent still runs after its lockdown")
	}
	if !a.LockedDown() {
		t.Fatal("LockedDown is false")
	}
	if _, err := c.ListCommands(context.Background()); err == nil {
		t.Fatal("the locked-down agent still answers")
	}
	hw.mu.Lock()
	defer hw.mu.Unlock()
	if len(hw.power) != 0 {
		t.Fatalf("power actions %v after a lockdown, want none", hw.power)
	}
}
