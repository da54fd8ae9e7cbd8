package activities

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.temporal.io/sdk/temporal"

	"github.com/ironflow/ironflow/console"
	"github.com/ironflow/ironflow/store"
	"github.com/ironflow/ironflow/workflows"
)

// DefaultConsoleHolderTimeout: a worker whose conductor heartbeat is older
// than this holds no console any more (it is gone), as Ironic's
// [conductor]heartbeat_timeout (60 s) declares a conductor dead.
const DefaultConsoleHolderTimeout = 60 * time.Second

// The console activities (workflows/console.go, docs/console.md). The
// endpoints live in this process's console.Manager; this process is the
// holder Config.Conductor names.

func (a *Activities) consoles() (*console.Manager, error) {
	if a.Consoles == nil || a.Config.Conductor == "" {
		return nil, temporal.NewNonRetryableApplicationError("this worker holds no consoles (no console manager or conductor hostname)",
			workflows.ErrTypeInvalidConfig, nil)
	}
	return a.Consoles, nil
}

// StartConsole opens the node's console endpoints here and answers where
// they listen. The node's console interface and driver_info say what to
// bridge to.
func (a *Activities) StartConsole(ctx context.Context, in workflows.ConsoleInput) (workflows.ConsoleHeld, error) {
	m, err := a.consoles()
	if err != nil {
		return workflows.ConsoleHeld{}, err
	}
	n, err := a.Store.GetNode(ctx, in.NodeUUID)
	if err != nil {
		return workflows.ConsoleHeld{}, storeErr(err, "read node %s", in.NodeUUID)
	}
	spec, err := console.SpecFor(n.ConsoleInterface, n.UUID, n.DriverInfo)
	if err != nil {
		return workflows.ConsoleHeld{}, temporal.NewNonRetryableApplicationError(err.Error(), workflows.ErrTypeInvalidConfig, nil)
	}
	eps, err := m.Start(spec)
	if err != nil {
		return workflows.ConsoleHeld{}, err
	}
	return workflows.ConsoleHeld{Holder: a.Config.Conductor, Serial: eps.Serial, Graphical: eps.Graphical}, nil
}

// StopConsole closes the node's endpoints here and every session on them.
func (a *Activities) StopConsole(ctx context.Context, in workflows.ConsoleInput) error {
	m, err := a.consoles()
	if err != nil {
		return err
	}
	m.Stop(in.NodeUUID)
	return nil
}

// PrepareConsoleStop revokes the node's console tokens (no page opens a
// new session from now on) and answers who holds the console and whether
// that worker is alive. Local activity.
func (a *Activities) PrepareConsoleStop(ctx context.Context, in workflows.ConsoleInput) (workflows.ConsoleHeld, error) {
	if err := a.Store.RevokeConsoleTokens(ctx, in.NodeUUID); err != nil {
		return workflows.ConsoleHeld{}, storeErr(err, "revoke console tokens of node %s", in.NodeUUID)
	}
	n, err := a.Store.GetNode(ctx, in.NodeUUID)
	if err != nil {
		return workflows.ConsoleHeld{}, storeErr(err, "read node %s", in.NodeUUID)
	}
	held := heldOf(n)
	if held.Holder != "" {
		c, err := a.Store.GetConductor(ctx, held.Holder)
		switch {
		case errors.Is(err, store.ErrNotFound):
		case err != nil:
			return workflows.ConsoleHeld{}, storeErr(err, "read conductor %s", held.Holder)
		default:
			held.HolderAlive = c.Alive(time.Now(), a.consoleHolderTimeout())
		}
	}
	return held, nil
}

func (a *Activities) consoleHolderTimeout() time.Duration {
	if a.Config.ConsoleHolderTimeout > 0 {
		return a.Config.ConsoleHolderTimeout
	}
	return DefaultConsoleHolderTimeout
}

// heldOf reads where the node's console lives from driver_internal_info.
func heldOf(n *store.Node) workflows.ConsoleHeld {
	s := func(k string) string { v, _ := n.DriverInternalInfo[k].(string); return v }
	return workflows.ConsoleHeld{Holder: s(store.KeyConsoleHolder), Serial: s(store.KeyConsoleAddress), Graphical: s(store.KeyConsoleGraphicalAddress)}
}

func heldKeys(h workflows.ConsoleHeld) map[string]any {
	kv := map[string]any{store.KeyConsoleHolder: h.Holder}
	if h.Serial != "" {
		kv[store.KeyConsoleAddress] = h.Serial
	}
	if h.Graphical != "" {
		kv[store.KeyConsoleGraphicalAddress] = h.Graphical
	}
	return kv
}

// RecordConsole records a console change's outcome: console_enabled with
// the holder and its endpoints, and the node's history. A failed change
// leaves console_enabled as it was and records the error as Ironic's
// _set_console_mode does. Local activity.
func (a *Activities) RecordConsole(ctx context.Context, in workflows.RecordConsoleInput) error {
	if in.Error != "" {
		_, err := a.Store.UpdateNode(ctx, in.NodeUUID, func(n *store.Node) error {
			n.LastError = &in.Error
			return nil
		})
		if err != nil {
			return storeErr(err, "record the console error of node %s", in.NodeUUID)
		}
		return a.history(ctx, in.NodeUUID, store.SeverityError, "console", in.Error)
	}
	if err := a.Store.SetConsoleEnabled(ctx, in.NodeUUID, in.Enabled, heldKeys(in.Held)); err != nil {
		return storeErr(err, "record the console of node %s", in.NodeUUID)
	}
	event := "Console disabled"
	if in.Enabled {
		event = consoleWhere("Console enabled", in.Held)
	}
	return a.history(ctx, in.NodeUUID, store.SeverityInfo, "console", event)
}

// consoleWhere says where a console lives, for the node's history.
func consoleWhere(prefix string, h workflows.ConsoleHeld) string {
	s := fmt.Sprintf("%s on worker %s", prefix, h.Holder)
	if h.Serial != "" {
		s += ", serial endpoint tcp://" + h.Serial
	}
	if h.Graphical != "" {
		s += ", graphical endpoint " + h.Graphical
	}
	return s
}

// RestoreConsoles brings back, at the start of this worker, the consoles
// of group recorded as enabled that this worker held before it restarted
// or whose holder is gone (Ironic's conductor restarts the consoles of its
// nodes when it starts). Each is claimed with a compare and swap on the
// recorded holder, so that of two workers that start together one takes
// it; the endpoints open before the claim and close if it is lost. It
// runs before the worker polls its console queue, so that a disable sent
// meanwhile waits for the endpoints to exist. It answers the nodes
// restored.
func (a *Activities) RestoreConsoles(ctx context.Context, group string) ([]string, error) {
	m, err := a.consoles()
	if err != nil {
		return nil, err
	}
	held, err := a.Store.EnabledConsoles(ctx, group)
	if err != nil {
		return nil, err
	}
	me := a.Config.Conductor
	var restored []string
	for _, h := range held {
		if h.Holder != me && h.Holder != "" {
			c, err := a.Store.GetConductor(ctx, h.Holder)
			if err == nil && c.Alive(time.Now(), a.consoleHolderTimeout()) {
				continue
			}
			if err != nil && !errors.Is(err, store.ErrNotFound) {
				return restored, err
			}
		}
		n, err := a.Store.GetNode(ctx, h.NodeUUID)
		if err != nil {
			continue
		}
		spec, err := console.SpecFor(n.ConsoleInterface, n.UUID, n.DriverInfo)
		if err != nil {
			a.Log.Warn("console not restored", "node", n.UUID, "error", err)
			continue
		}
		eps, err := m.Start(spec)
		if err != nil {
			a.Log.Warn("console not restored", "node", n.UUID, "error", err)
			continue
		}
		now := workflows.ConsoleHeld{Holder: me, Serial: eps.Serial, Graphical: eps.Graphical}
		ok, err := a.Store.ClaimConsole(ctx, n.UUID, h.Holder, me, heldKeys(now))
		if err != nil || !ok {
			m.Stop(n.UUID)
			continue
		}
		what := "Console restored"
		if h.Holder != me && h.Holder != "" {
			what = "Console taken over from worker " + h.Holder
		}
		if err := a.history(ctx, n.UUID, store.SeverityInfo, "console", consoleWhere(what, now)); err != nil {
			a.Log.Warn("record restored console", "node", n.UUID, "error", err)
		}
		restored = append(restored, n.UUID)
	}
	return restored, nil
}

// DefaultConsoleReconcileInterval is how often a worker checks the consoles
// it holds against the store (ReconcileConsoles).
const DefaultConsoleReconcileInterval = time.Minute

// ReconcileConsoles closes the endpoints this worker opened more than
// grace ago whose node no longer records it as the holder of an enabled
// console: a node deleted with its console enabled (Ironic's destroy_node
// stops the console), a console another worker took over, an enable whose
// workflow failed after the endpoints opened. grace leaves an enable the
// time to record its holder. It answers the nodes closed.
func (a *Activities) ReconcileConsoles(ctx context.Context, grace time.Duration) ([]string, error) {
	m, err := a.consoles()
	if err != nil {
		return nil, err
	}
	held := m.HeldSince(time.Now().Add(-grace))
	if len(held) == 0 {
		return nil, nil
	}
	still, err := a.Store.ConsolesStillHeld(ctx, a.Config.Conductor, held)
	if err != nil {
		return nil, err
	}
	keep := map[string]bool{}
	for _, n := range still {
		keep[n] = true
	}
	var closed []string
	for _, n := range held {
		if !keep[n] {
			m.Stop(n)
			closed = append(closed, n)
		}
	}
	return closed, nil
}
