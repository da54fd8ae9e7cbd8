package activities_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ironflow/ironflow/activities"
	"github.com/ironflow/ironflow/bmc"
	"github.com/ironflow/ironflow/internal/testkit/storetest"
	"github.com/ironflow/ironflow/provision"
	"github.com/ironflow/ironflow/store"
	"github.com/ironflow/ironflow/workflows"
)

func TestMain(m *testing.M) { storetest.Main(m) }

// syncLab is a real database with fake-hardware nodes, each its own
// in-memory machine (fake_id = node UUID).
type syncLab struct {
	t    *testing.T
	st   *store.Store
	sync *activities.PowerSync
	// held is what the node-lock check answers.
	held map[string]bool
}

func newSyncLab(t *testing.T) *syncLab {
	t.Helper()
	st := storetest.New(t)
	a := activities.New(st, activities.Config{Conductor: "test-conductor"}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	l := &syncLab{t: t, st: st, held: map[string]bool{}}
	l.sync = &activities.PowerSync{Activities: a, Held: func(ctx context.Context, uuids []string) (map[string]bool, error) {
		return l.held, nil
	}}
	return l
}

func ptr[T any](v T) *T { return &v }

// node creates a fake-hardware node; the stored power state is dbPower
// ("" for None) and its machine's is machinePower.
func (l *syncLab) node(group string, provisionState provision.State, dbPower string, machinePower bmc.PowerState, edit func(n *store.Node)) *store.Node {
	l.t.Helper()
	n := &store.Node{Driver: "fake-hardware", ProvisionState: provisionState, ConductorGroup: group}
	if dbPower != "" {
		n.PowerState = ptr(dbPower)
	}
	if edit != nil {
		edit(n)
	}
	if err := l.st.CreateNode(context.Background(), n); err != nil {
		l.t.Fatalf("create node: %v", err)
	}
	l.setDriverInfo(n.UUID, map[string]any{"fake_id": n.UUID})
	l.setMachine(n.UUID, machinePower)
	return n
}

func (l *syncLab) setDriverInfo(uuid string, info map[string]any) {
	l.t.Helper()
	if _, err := l.st.UpdateNode(context.Background(), uuid, func(n *store.Node) error {
		n.DriverInfo = info
		return nil
	}); err != nil {
		l.t.Fatalf("set driver_info: %v", err)
	}
}

// failBMC makes every call to the node's BMC fail (fake_fail_rate 1), or
// work again.
func (l *syncLab) failBMC(uuid string, fail bool) {
	info := map[string]any{"fake_id": uuid}
	if fail {
		info["fake_fail_rate"] = 1
	}
	l.setDriverInfo(uuid, info)
}

func (l *syncLab) setMachine(uuid string, s bmc.PowerState) {
	l.t.Helper()
	d, err := bmc.New("fake-hardware", map[string]any{"fake_id": uuid})
	if err != nil {
		l.t.Fatal(err)
	}
	action := bmc.ActionPowerOff
	if s == bmc.PowerOn {
		action = bmc.ActionPowerOn
	}
	if err := d.SetPower(context.Background(), action); err != nil {
		l.t.Fatal(err)
	}
}

func (l *syncLab) run(group string, recover bool) workflows.PowerSyncResult {
	l.t.Helper()
	res, err := l.sync.SyncPowerStates(context.Background(), workflows.PowerSyncBatch{
		ConductorGroup: group, MaxRetries: 3, Recover: recover, Workers: 4, NodeTimeout: 10 * time.Second,
	})
	if err != nil {
		l.t.Fatalf("SyncPowerStates: %v", err)
	}
	return res
}

func (l *syncLab) get(uuid string) *store.Node {
	l.t.Helper()
	n, err := l.st.GetNode(context.Background(), uuid)
	if err != nil {
		l.t.Fatal(err)
	}
	return n
}

func (l *syncLab) history(uuid string) []store.HistoryEvent {
	l.t.Helper()
	h, err := l.st.ListHistory(context.Background(), uuid)
	if err != nil {
		l.t.Fatal(err)
	}
	return h
}

func str(s *string) string {
	if s == nil {
		return "None"
	}
	return *s
}

func TestSyncPowerStatesStoresWhatTheBMCReports(t *testing.T) {
	l := newSyncLab(t)
	turnedOn := l.node("rack-1", "available", "power off", bmc.PowerOn, nil)
	unknown := l.node("rack-1", "manageable", "", bmc.PowerOff, nil)
	same := l.node("rack-1", "active", "power on", bmc.PowerOn, nil)
	otherGroup := l.node("rack-2", "available", "power off", bmc.PowerOn, nil)

	res := l.run("rack-1", false)
	if res.Nodes != 3 || res.Checked != 3 || res.Changed != 2 || res.Failed != 0 {
		t.Fatalf("result %+v, want 3 nodes read, 2 changed", res)
	}
	for _, c := range []struct {
		node        *store.Node
		power, hist string
	}{
		{turnedOn, "power on", "Power state changed from power off to power on (sync)"},
		{unknown, "power off", "Power state changed from None to power off (sync)"},
		{same, "power on", ""},
		{otherGroup, "power off", ""},
	} {
		if got := str(l.get(c.node.UUID).PowerState); got != c.power {
			t.Errorf("node %s power_state %s, want %s", c.node.UUID, got, c.power)
		}
		h := l.history(c.node.UUID)
		switch {
		case c.hist == "" && len(h) != 0:
			t.Errorf("node %s got history %+v, want none", c.node.UUID, h)
		case c.hist != "" && (len(h) != 1 || h[0].Event != c.hist || h[0].EventType != "power" || h[0].Severity != store.SeverityInfo || h[0].Conductor != "test-conductor"):
			t.Errorf("node %s history %+v, want one INFO power row %q", c.node.UUID, h, c.hist)
		}
	}

	// Nothing changed since: a second tick writes nothing.
	res = l.run("rack-1", false)
	if res.Checked != 3 || res.Changed != 0 {
		t.Fatalf("second tick %+v, want 3 read, none changed", res)
	}
	if h := l.history(turnedOn.UUID); len(h) != 1 {
		t.Errorf("second tick added history: %+v", h)
	}
}

func TestSyncPowerStatesMaintenanceAfterMaxRetriesThenRecovery(t *testing.T) {
	l := newSyncLab(t)
	n := l.node("", "active", "power on", bmc.PowerOn, nil)
	l.failBMC(n.UUID, true)

	for tick := 1; tick <= 2; tick++ {
		res := l.run("", true)
		got := l.get(n.UUID)
		if res.Failed != 1 || len(res.Maintenance) != 0 || got.Maintenance {
			t.Fatalf("tick %d: result %+v, maintenance %v; want a counted failure, no maintenance yet", tick, res, got.Maintenance)
		}
		if c := got.DriverInternalInfo["power_sync_failures"]; c != float64(tick) {
			t.Fatalf("tick %d: power_sync_failures = %v, want %d", tick, c, tick)
		}
		if str(got.PowerState) != "power on" {
			t.Fatalf("tick %d: power_state %s changed before the retries ran out", tick, str(got.PowerState))
		}
	}

	res := l.run("", true)
	if len(res.Maintenance) != 1 || res.Maintenance[0] != n.UUID {
		t.Fatalf("third failure: result %+v, want the node in Maintenance", res)
	}
	got := l.get(n.UUID)
	if !got.Maintenance || str(got.Fault) != "power failure" || got.PowerState != nil {
		t.Fatalf("after 3 failures: maintenance %v fault %s power %s; want maintenance, power failure, None",
			got.Maintenance, str(got.Fault), str(got.PowerState))
	}
	reason := str(got.MaintenanceReason)
	if !strings.Contains(reason, "3 reads in a row failed") || !strings.Contains(reason, "injected fault") {
		t.Errorf("maintenance_reason %q does not say how often and what the BMC said", reason)
	}
	if _, ok := got.DriverInternalInfo["power_sync_failures"]; ok {
		t.Error("failure count left behind after maintenance")
	}
	h := l.history(n.UUID)
	if len(h) != 1 || h[0].Severity != store.SeverityError || h[0].Event != reason {
		t.Fatalf("history %+v, want one ERROR row with the maintenance reason", h)
	}

	// Still failing: stays in maintenance, no new history, whether or not
	// this tick recovers.
	for _, recover := range []bool{false, true} {
		l.run("", recover)
		if got := l.get(n.UUID); !got.Maintenance || len(l.history(n.UUID)) != 1 {
			t.Fatalf("recover=%v with the BMC still down: maintenance %v, history %d rows", recover, got.Maintenance, len(l.history(n.UUID)))
		}
	}

	// The BMC answers again: only a recovery tick clears the fault.
	l.failBMC(n.UUID, false)
	if res := l.run("", false); res.Skipped != 1 || l.get(n.UUID).Maintenance == false {
		t.Fatalf("a tick without recovery touched the power-failure node: %+v", res)
	}
	res = l.run("", true)
	if len(res.Recovered) != 1 || res.Recovered[0] != n.UUID {
		t.Fatalf("recovery tick %+v, want the node Recovered", res)
	}
	got = l.get(n.UUID)
	if got.Maintenance || got.Fault != nil || got.MaintenanceReason != nil || str(got.PowerState) != "power on" {
		t.Fatalf("after recovery: maintenance %v fault %s reason %s power %s", got.Maintenance, str(got.Fault), str(got.MaintenanceReason), str(got.PowerState))
	}
	h = l.history(n.UUID)
	if len(h) != 2 || h[1].Severity != store.SeverityInfo || !strings.Contains(h[1].Event, "maintenance for power failure cleared") {
		t.Fatalf("history after recovery %+v", h)
	}
}

func TestSyncPowerStatesSuccessResetsTheFailureCount(t *testing.T) {
	l := newSyncLab(t)
	n := l.node("", "available", "power off", bmc.PowerOff, nil)
	for _, step := range []struct {
		fail bool
		want any // power_sync_failures afterwards
	}{{true, float64(1)}, {true, float64(2)}, {false, nil}, {true, float64(1)}, {true, float64(2)}} {
		l.failBMC(n.UUID, step.fail)
		l.run("", false)
		got := l.get(n.UUID)
		if got.Maintenance {
			t.Fatal("node went to maintenance although no 3 failures were consecutive")
		}
		if c := got.DriverInternalInfo["power_sync_failures"]; c != step.want {
			t.Fatalf("power_sync_failures = %v, want %v", c, step.want)
		}
	}
}

func TestSyncPowerStatesLeavesBusyAndExcludedNodesAlone(t *testing.T) {
	l := newSyncLab(t)
	// Every machine is on while the store says off: a node that is read
	// would change.
	cases := []struct {
		name  string
		state provision.State
		edit  func(n *store.Node)
		held  bool
	}{
		{"held by a workflow", "active", nil, true},
		{"operation accepted", "deploying", func(n *store.Node) { n.TargetProvisionState = ptr(provision.Active) }, false},
		{"power change accepted", "active", func(n *store.Node) { n.TargetPowerState = ptr("power off") }, false},
		{"enroll", "enroll", nil, false},
		{"wait call-back", "wait call-back", nil, false},
		{"clean wait", "clean wait", nil, false},
		{"operator maintenance", "active", func(n *store.Node) { n.Maintenance, n.MaintenanceReason = true, ptr("replacing a DIMM") }, false},
		{"other fault", "clean failed", func(n *store.Node) { n.Maintenance, n.Fault = true, ptr("clean failure") }, false},
	}
	nodes := map[string]*store.Node{}
	for _, c := range cases {
		n := l.node("", c.state, "power off", bmc.PowerOn, c.edit)
		nodes[c.name] = n
		if c.held {
			l.held[n.UUID] = true
		}
	}
	res := l.run("", true)
	if res.Checked != 0 || res.Held != 3 || res.Skipped != 5 {
		t.Fatalf("result %+v, want nothing read, 3 held, 5 skipped", res)
	}
	for _, c := range cases {
		n := nodes[c.name]
		got := l.get(n.UUID)
		if str(got.PowerState) != "power off" || got.Maintenance != n.Maintenance || str(got.MaintenanceReason) != str(n.MaintenanceReason) || len(l.history(n.UUID)) != 0 {
			t.Errorf("%s: node touched: power %s maintenance %v reason %s", c.name, str(got.PowerState), got.Maintenance, str(got.MaintenanceReason))
		}
	}
}

func TestSyncPowerStatesNodeTakenDuringTheTickIsLeftAlone(t *testing.T) {
	l := newSyncLab(t)
	n := l.node("", "available", "power off", bmc.PowerOn, nil)
	// The API accepts a deploy after the sync listed the node and before
	// Temporal's visibility shows the new workflow.
	l.sync.Held = func(ctx context.Context, uuids []string) (map[string]bool, error) {
		if _, err := l.st.SetProvisionState(ctx, n.UUID, nil, "deploying", ptr(provision.Active), nil); err != nil {
			return nil, err
		}
		return nil, nil
	}
	res := l.run("", false)
	if res.Changed != 0 || res.Held != 1 {
		t.Fatalf("result %+v, want the node counted as held, nothing changed", res)
	}
	if got := l.get(n.UUID); str(got.PowerState) != "power off" || len(l.history(n.UUID)) != 0 {
		t.Fatalf("the sync overwrote a node a deploy had taken: power %s", str(got.PowerState))
	}
}

func TestSyncPowerStatesWithoutTheNodeLockDoesNothing(t *testing.T) {
	l := newSyncLab(t)
	n := l.node("", "available", "power off", bmc.PowerOn, nil)
	l.sync.Held = func(context.Context, []string) (map[string]bool, error) {
		return nil, errors.New("temporal unavailable")
	}
	_, err := l.sync.SyncPowerStates(context.Background(), workflows.PowerSyncBatch{MaxRetries: 3, Workers: 2})
	if err == nil || !strings.Contains(err.Error(), "temporal unavailable") {
		t.Fatalf("err = %v, want the lock check's failure", err)
	}
	if got := l.get(n.UUID); str(got.PowerState) != "power off" {
		t.Fatal("the sync wrote without knowing which nodes are held")
	}
}

func TestSyncPowerStatesDefersWhatTheDeadlineLeavesNoTimeFor(t *testing.T) {
	l := newSyncLab(t)
	for range 3 {
		l.node("", "available", "power off", bmc.PowerOn, nil)
	}
	// Less time left than one node's read timeout: nothing is started.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := l.sync.SyncPowerStates(ctx, workflows.PowerSyncBatch{MaxRetries: 3, Workers: 2, NodeTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	if res.Deferred != 3 || res.Checked != 0 {
		t.Fatalf("result %+v, want all 3 deferred to the next tick", res)
	}
}

// countingDriver wraps the fake driver to see how many reads run at once.
type countingDriver struct {
	bmc.Driver
	c *concurrency
}

type concurrency struct {
	mu        sync.Mutex
	now, peak int
}

func (d countingDriver) PowerState(ctx context.Context) (bmc.PowerState, error) {
	d.c.mu.Lock()
	d.c.now++
	d.c.peak = max(d.c.peak, d.c.now)
	d.c.mu.Unlock()
	defer func() {
		d.c.mu.Lock()
		d.c.now--
		d.c.mu.Unlock()
	}()
	return d.Driver.PowerState(ctx)
}

func TestSyncPowerStatesBoundsConcurrentReads(t *testing.T) {
	l := newSyncLab(t)
	var nodes []*store.Node
	for range 30 {
		n := l.node("", "available", "power off", bmc.PowerOn, nil)
		l.setDriverInfo(n.UUID, map[string]any{"fake_id": n.UUID, "fake_latency": "5ms"})
		nodes = append(nodes, n)
	}
	c := &concurrency{}
	a := l.sync.Activities
	a.NewBMC = func(driver string, info map[string]any) (bmc.Driver, error) {
		d, err := bmc.New(driver, info)
		return countingDriver{Driver: d, c: c}, err
	}
	res := l.run("", false) // 4 workers
	if res.Changed != 30 {
		t.Fatalf("result %+v, want all 30 changed", res)
	}
	if c.peak > 4 {
		t.Fatalf("%d reads ran at once, want at most the 4 workers", c.peak)
	}
	for _, n := range nodes {
		if str(l.get(n.UUID).PowerState) != "power on" {
			t.Fatalf("node %s not synced", n.UUID)
		}
	}
}
