package activities

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"go.temporal.io/sdk/activity"
	"go.temporal.io/sdk/client"

	"github.com/ironflow/ironflow/bmc"
	"github.com/ironflow/ironflow/nodelock"
	"github.com/ironflow/ironflow/provision"
	"github.com/ironflow/ironflow/store"
	"github.com/ironflow/ironflow/workflows"
)

// keyPowerSyncFailures in driver_internal_info counts a node's consecutive
// failed power-state reads. It lives with the node, not in workflow state,
// so that it survives continue-as-new, a restarted sync workflow and a
// node moving between conductor groups, and so that an operator sees it.
const keyPowerSyncFailures = "power_sync_failures"

// syncExcludedStates are never read, as Ironic's SYNC_EXCLUDED_STATES: an
// enrolled node's driver_info is not verified yet, and a node waiting for
// its agent must not have its BMC raced.
var syncExcludedStates = map[provision.State]bool{
	provision.Enroll:     true,
	provision.DeployWait: true,
	provision.CleanWait:  true,
	// A node waiting for its agent during servicing, as in clean wait.
	provision.ServiceWait: true,
}

// HeldFunc reports which of the given nodes a provisioning workflow holds
// (Ironic's node lock). Nodes absent from the map are free.
type HeldFunc func(ctx context.Context, nodeUUIDs []string) (map[string]bool, error)

// PowerSync is the power-state sync activity: Activities for the store and
// the BMC drivers, and Held for the node lock.
type PowerSync struct {
	Activities *Activities
	Held       HeldFunc
}

// NewPowerSync returns the sync activity with the node lock read from
// Temporal through c.
func NewPowerSync(a *Activities, c client.Client) *PowerSync {
	return &PowerSync{Activities: a, Held: TemporalHeld(c)}
}

// errNodeMoved: between the listing and the write, something else changed
// the node (an operation started, an operator edited it). The sync never
// overwrites that; the next tick sees the new state.
var errNodeMoved = errors.New("node changed during power sync")

// SyncPowerStates is one tick of a conductor group's power sync. It reads
// every node of the group from its BMC, Workers at a time, and:
//   - stores a changed power state with a history row;
//   - counts consecutive failed reads; at MaxRetries the node goes to
//     maintenance with fault "power failure" and power_state None, as
//     Ironic does;
//   - with Recover, reads power-failure nodes too and takes them out of
//     maintenance when their BMC answers (power_failure_recovery).
//
// It leaves alone nodes a workflow holds or that have an operation in flight
// (target_provision_state or target_power_state set), nodes in enroll and
// the wait states, and nodes in maintenance for any other reason: an
// operator put them there and their BMC may be under repair, so Ironic does
// not read them either. Regular activity on the group's hardware queue.
func (p *PowerSync) SyncPowerStates(ctx context.Context, in workflows.PowerSyncBatch) (workflows.PowerSyncResult, error) {
	a := p.Activities
	var res workflows.PowerSyncResult
	group := in.ConductorGroup
	nodes, err := a.Store.ListNodes(ctx, store.NodeFilter{ConductorGroup: &group, Fields: []string{
		"provision_state", "target_provision_state", "power_state", "target_power_state", "maintenance", "fault",
	}})
	if err != nil {
		return res, storeErr(err, "list nodes of conductor group %q", group)
	}
	res.Nodes = len(nodes)
	var candidates []*store.Node
	for _, n := range nodes {
		switch {
		case n.TargetProvisionState != nil || n.TargetPowerState != nil:
			res.Held++
		case syncExcludedStates[n.ProvisionState]:
			res.Skipped++
		case n.Maintenance && (!in.Recover || deref(n.Fault) != workflows.FaultPowerFailure):
			res.Skipped++
		default:
			candidates = append(candidates, n)
		}
	}
	if len(candidates) == 0 {
		observePowerSync(group, time.Now(), nil, nil)
		return res, nil
	}
	uuids := make([]string, len(candidates))
	for i, n := range candidates {
		uuids[i] = n.UUID
	}
	held, err := p.Held(ctx, uuids)
	if err != nil {
		// Without the lock the sync could overwrite a deploy's power state:
		// do nothing this tick.
		return res, fmt.Errorf("find nodes held by a workflow in conductor group %q: %w", group, err)
	}
	free := candidates[:0]
	for _, n := range candidates {
		if held[n.UUID] {
			res.Held++
		} else {
			free = append(free, n)
		}
	}

	start := time.Now()
	outcomes, err := p.syncNodes(ctx, free, in)
	observePowerSync(group, start, outcomes, err)
	for _, o := range outcomes {
		o.addTo(&res)
	}
	if err != nil {
		return res, err
	}
	a.Log.Debug("power sync", "conductor_group", group, "nodes", res.Nodes, "checked", res.Checked,
		"changed", res.Changed, "failed", res.Failed, "held", res.Held, "skipped", res.Skipped, "deferred", res.Deferred)
	return res, nil
}

// outcome is what happened to one node.
type outcome int

const (
	outDeferred outcome = iota
	outUnchanged
	outChanged
	outFailed
	outMaintenance
	outRecovered
	outMoved
)

type nodeOutcome struct {
	uuid string
	what outcome
}

func (o nodeOutcome) addTo(r *workflows.PowerSyncResult) {
	switch o.what {
	case outDeferred:
		r.Deferred++
	case outUnchanged:
		r.Checked++
	case outChanged:
		r.Checked++
		r.Changed++
	case outFailed:
		r.Failed++
	case outMaintenance:
		r.Failed++
		r.Maintenance = append(r.Maintenance, o.uuid)
	case outRecovered:
		r.Checked++
		r.Recovered = append(r.Recovered, o.uuid)
	case outMoved:
		r.Held++
	}
}

// syncNodes reads the nodes Workers at a time and returns one outcome per
// node, in the nodes' order. Nodes not started before the batch's soft
// deadline (its deadline less one NodeTimeout) are deferred. A store
// failure stops the batch: the database is what is broken, and every other
// write would fail the same way.
func (p *PowerSync) syncNodes(ctx context.Context, nodes []*store.Node, in workflows.PowerSyncBatch) ([]nodeOutcome, error) {
	workers := max(in.Workers, 1)
	nodeTimeout := in.NodeTimeout
	if nodeTimeout <= 0 {
		nodeTimeout = workflows.DefaultPowerSyncNodeTimeout
	}
	softDeadline, hasDeadline := ctx.Deadline()
	softDeadline = softDeadline.Add(-nodeTimeout)

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	out := make([]nodeOutcome, len(nodes))
	var (
		mu       sync.Mutex
		firstErr error
		wg       sync.WaitGroup
		done     atomic.Int64
	)
	stopBeat := heartbeatEvery(ctx, func() string { return fmt.Sprintf("%d/%d nodes read", done.Load(), len(nodes)) })
	defer stopBeat()
	next := make(chan int)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				o, err := p.syncNode(ctx, nodes[i], in, nodeTimeout)
				out[i] = o
				done.Add(1)
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
						cancel()
					}
					mu.Unlock()
				}
			}
		}()
	}
	for i, n := range nodes {
		out[i] = nodeOutcome{uuid: n.UUID, what: outDeferred}
		if ctx.Err() != nil || (hasDeadline && time.Now().After(softDeadline)) {
			continue
		}
		select {
		case next <- i:
		case <-ctx.Done():
		}
	}
	close(next)
	wg.Wait()
	return out, firstErr
}

// syncNode reads one node's power state and records what follows from it.
// Only store failures are returned as errors.
func (p *PowerSync) syncNode(ctx context.Context, seen *store.Node, in workflows.PowerSyncBatch, timeout time.Duration) (nodeOutcome, error) {
	a := p.Activities
	o := nodeOutcome{uuid: seen.UUID}
	reading, readErr := p.readPower(ctx, seen.UUID, timeout)
	state := reading.power
	if ctx.Err() != nil {
		// The batch is ending (a store failure elsewhere, or the activity
		// was cancelled): a read cut short says nothing about the BMC.
		o.what = outDeferred
		return o, nil
	}
	var event, severity, healthEvent string
	_, err := a.Store.UpdateNode(ctx, seen.UUID, func(n *store.Node) error {
		event, severity, healthEvent = "", "", ""
		if moved(seen, n) {
			return errNodeMoved
		}
		failures := intValue(n.DriverInternalInfo[keyPowerSyncFailures])
		if readErr != nil {
			if n.Maintenance {
				// Still down: stays in maintenance, nothing new to say.
				o.what = outFailed
				return errUnchanged
			}
			failures++
			if failures < in.MaxRetries {
				n.DriverInternalInfo[keyPowerSyncFailures] = failures
				o.what = outFailed
				return nil
			}
			reason := fmt.Sprintf("During power state sync, %d reads in a row failed: %s. Power state set to None; "+
				"maintenance ends by itself when the BMC answers again", failures, errorMessage(readErr))
			delete(n.DriverInternalInfo, keyPowerSyncFailures)
			n.Maintenance = true
			n.MaintenanceReason = &reason
			n.Fault = optional(workflows.FaultPowerFailure)
			n.PowerState = nil
			event, severity = reason, store.SeverityError
			o.what = outMaintenance
			return nil
		}
		delete(n.DriverInternalInfo, keyPowerSyncFailures)
		healthEvent = syncHealth(n, reading)
		old := n.PowerState
		n.PowerState = optional(state)
		if n.Maintenance {
			n.Maintenance, n.MaintenanceReason, n.Fault = false, nil, nil
			event = fmt.Sprintf("The BMC answers again (power state %s): maintenance for power failure cleared", orNone(n.PowerState))
			severity, o.what = store.SeverityInfo, outRecovered
			return nil
		}
		if deref(old) != state {
			event = fmt.Sprintf("Power state changed from %s to %s (sync)", orNone(old), orNone(n.PowerState))
			severity, o.what = store.SeverityInfo, outChanged
			return nil
		}
		o.what = outUnchanged
		if failures == 0 && healthEvent == "" {
			// Nothing to write: end the transaction without an UPDATE.
			return errUnchanged
		}
		return nil
	})
	switch {
	case errors.Is(err, errUnchanged):
		return o, nil
	case errors.Is(err, errNodeMoved), errors.Is(err, store.ErrNotFound):
		o.what = outMoved
		return o, nil
	case err != nil:
		o.what = outDeferred
		return o, storeErr(err, "record synced power state of node %s", seen.UUID)
	}
	if healthEvent != "" {
		// Ironic records it as a "monitoring" event at INFO level, whatever
		// the health; the log says more when it is bad.
		if h := reading.health; h != nil && *h != string(bmc.HealthOK) {
			a.Log.Warn("power sync: node health indicates a problem", "node", seen.UUID, "health", *h)
		} else {
			a.Log.Info("power sync", "node", seen.UUID, "event", healthEvent)
		}
		if err := a.history(ctx, seen.UUID, store.SeverityInfo, "monitoring", healthEvent); err != nil {
			return o, err
		}
	}
	if event != "" {
		if o.what == outMaintenance {
			a.Log.Error("power sync: node put in maintenance", "node", seen.UUID, "error", errorMessage(readErr))
		} else {
			a.Log.Info("power sync", "node", seen.UUID, "event", event)
		}
		if err := a.history(ctx, seen.UUID, severity, "power", event); err != nil {
			return o, err
		}
	}
	return o, nil
}

// errUnchanged ends an UpdateNode that has nothing to write.
var errUnchanged = errors.New("power state unchanged")

// bmcReading is what one node's BMC said in a tick.
type bmcReading struct {
	power string
	// health is the hardware health (API 1.109), nil when unknown;
	// healthRead is false when it was not read (a driver without health,
	// or a failed read), which leaves the stored value alone.
	health     *string
	healthRead bool
}

// readPower asks the node's BMC for its power state and, after it answered,
// its hardware health, with the same driver within timeout, as Ironic's
// do_sync_power_state reads health (node_cache_health) once the power
// state is read. A health read that fails is logged and changes nothing:
// it never counts as a failed power read.
func (p *PowerSync) readPower(ctx context.Context, nodeUUID string, timeout time.Duration) (bmcReading, error) {
	var r bmcReading
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	d, err := p.Activities.driver(ctx, workflows.NodeInfo{UUID: nodeUUID})
	if err != nil {
		return r, err
	}
	defer d.Close()
	s, err := d.PowerState(ctx)
	if err != nil {
		return r, bmcErr(err, "get power state of node %s", nodeUUID)
	}
	r.power = string(s)
	if !p.Activities.Config.DisableHealthMonitoring {
		r.health, r.healthRead = p.readHealth(ctx, d, nodeUUID)
	}
	return r, nil
}

// readHealth reads the node's hardware health where its driver can. A
// driver that is no bmc.HealthReader (IPMI) or says ErrUnsupported reads
// as unknown (nil), so that a node that moved to such a driver does not
// keep a stale value (Ironic's health documentation: "nodes using drivers
// without health monitoring support ... have their health field set to
// None").
func (p *PowerSync) readHealth(ctx context.Context, d bmc.Driver, nodeUUID string) (*string, bool) {
	hr, ok := d.(bmc.HealthReader)
	if !ok {
		return nil, true
	}
	h, err := hr.Health(ctx)
	switch {
	case errors.Is(err, bmc.ErrUnsupported):
		return nil, true
	case err != nil:
		p.Activities.Log.Warn("power sync: could not read health", "node", nodeUUID, "error", err)
		return nil, false
	case h == bmc.HealthUnknown:
		return nil, true
	}
	return optional(string(h)), true
}

// syncHealth stores a changed health on n and returns the history event
// for it (Ironic's node_cache_health message), or "" when unchanged.
func syncHealth(n *store.Node, r bmcReading) string {
	if !r.healthRead || deref(n.Health) == deref(r.health) {
		return ""
	}
	old := n.Health
	n.Health = r.health
	return fmt.Sprintf("Node health status changed: health='%s' (previously '%s')", orNone(r.health), orNone(old))
}

// moved reports whether the node changed, since it was listed, in a way
// that means someone else now acts on it.
func moved(seen, now *store.Node) bool {
	return now.TargetProvisionState != nil || now.TargetPowerState != nil ||
		now.ProvisionState != seen.ProvisionState || now.Maintenance != seen.Maintenance ||
		deref(now.Fault) != deref(seen.Fault) || deref(now.PowerState) != deref(seen.PowerState)
}

// heartbeatEvery records progress at a third of the heartbeat timeout until
// stopped, so that a tick waiting on slow BMCs is not taken for a dead
// worker.
func heartbeatEvery(ctx context.Context, progress func() string) (stop func()) {
	if !activity.IsActivity(ctx) {
		return func() {}
	}
	every := activity.GetInfo(ctx).HeartbeatTimeout / 3
	if every <= 0 {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				activity.RecordHeartbeat(ctx, progress())
			}
		}
	}()
	return func() { close(done) }
}

// TemporalHeld reads Ironic's node lock from Temporal (nodelock.HeldAmong).
// Visibility lags starts by a moment, which is why the sync also rechecks
// the node's state in its write.
func TemporalHeld(c client.Client) HeldFunc {
	return func(ctx context.Context, nodeUUIDs []string) (map[string]bool, error) {
		return nodelock.HeldAmong(ctx, c, nodeUUIDs)
	}
}

// errorMessage is an activity error's own words, without Temporal's
// wrapping.
func errorMessage(err error) string {
	var app interface{ Message() string }
	if errors.As(err, &app) {
		return app.Message()
	}
	return err.Error()
}

func intValue(v any) int {
	switch x := v.(type) {
	case float64:
		return int(x)
	case int:
		return x
	case int64:
		return int(x)
	}
	return 0
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func orNone(s *string) string {
	if s == nil {
		return "None"
	}
	return *s
}
