package activities_test

import (
	"testing"

	"github.com/ironflow/ironflow/bmc"
	"github.com/ironflow/ironflow/store"
)

// TestSyncPowerStatesHealth: the power sync stores the health the BMC
// reports (API 1.109) and writes an INFO "monitoring" history row with
// Ironic's message on each change, and nothing when it stays the same; a
// driver that reads no health leaves health null, and clears a value read
// before; a BMC that does not answer changes nothing.
func TestSyncPowerStatesHealth(t *testing.T) {
	l := newSyncLab(t)
	n := l.node("rack-h", "manageable", "power off", bmc.PowerOff, nil)
	none := l.node("rack-h", "manageable", "power off", bmc.PowerOff, nil)
	info := func(health string) map[string]any {
		return map[string]any{"fake_id": n.UUID, "fake_health": health}
	}
	var want []string
	check := func(step, health string) {
		t.Helper()
		if got := str(l.get(n.UUID).Health); got != health {
			t.Errorf("%s: health %s, want %s", step, got, health)
		}
		h := l.history(n.UUID)
		if len(h) != len(want) {
			t.Fatalf("%s: history %+v, want %q", step, h, want)
		}
		for i, e := range h {
			if e.Event != want[i] || e.EventType != "monitoring" || e.Severity != store.SeverityInfo {
				t.Errorf("%s: history row %d %+v, want INFO monitoring %q", step, i, e, want[i])
			}
		}
	}

	l.setDriverInfo(n.UUID, info("OK"))
	l.run("rack-h", false)
	want = append(want, "Node health status changed: health='OK' (previously 'None')")
	check("first read", "OK")

	l.run("rack-h", false)
	check("unchanged", "OK")

	l.setDriverInfo(n.UUID, info("Critical"))
	if res := l.run("rack-h", false); res.Checked != 2 || res.Changed != 0 {
		t.Errorf("health change counted as a power change: %+v", res)
	}
	want = append(want, "Node health status changed: health='Critical' (previously 'OK')")
	check("critical", "Critical")
	if p := str(l.get(n.UUID).PowerState); p != "power off" {
		t.Errorf("power_state after a health change: %s", p)
	}

	// A BMC that fails leaves the health read last.
	l.setDriverInfo(n.UUID, map[string]any{"fake_id": n.UUID, "fake_health": "OK", "fake_fail_rate": 1})
	l.run("rack-h", false)
	check("BMC failing", "Critical")

	// An empty fake_health is a BMC that reports no health: unknown.
	l.setDriverInfo(n.UUID, info(""))
	l.run("rack-h", false)
	want = append(want, "Node health status changed: health='None' (previously 'Critical')")
	check("unknown", "None")

	l.setDriverInfo(n.UUID, info("Warning"))
	l.run("rack-h", false)
	want = append(want, "Node health status changed: health='Warning' (previously 'None')")
	check("warning", "Warning")

	// The driver stops reading health (fake without fake_health, as a node
	// moved to IPMI): the stale value is cleared.
	l.setDriverInfo(n.UUID, map[string]any{"fake_id": n.UUID})
	l.run("rack-h", false)
	want = append(want, "Node health status changed: health='None' (previously 'Warning')")
	check("unsupported", "None")

	if h, got := l.get(none.UUID).Health, l.history(none.UUID); h != nil || len(got) != 0 {
		t.Errorf("node without health support: health %v, history %+v; want null and none", str(h), got)
	}
}

// TestSyncPowerStatesHealthMonitoringDisabled: with health monitoring off
// (--health-monitoring=false) the sync reads no health and leaves the
// stored value and the history alone, and still syncs the power state.
func TestSyncPowerStatesHealthMonitoringDisabled(t *testing.T) {
	l := newSyncLab(t)
	l.sync.Activities.Config.DisableHealthMonitoring = true
	n := l.node("rack-nh", "manageable", "power off", bmc.PowerOn, func(n *store.Node) { n.Health = ptr("Warning") })
	l.setDriverInfo(n.UUID, map[string]any{"fake_id": n.UUID, "fake_health": "OK"})
	l.run("rack-nh", false)
	got := l.get(n.UUID)
	if str(got.Health) != "Warning" || str(got.PowerState) != "power on" {
		t.Errorf("health %s, power %s; want Warning kept and power on synced", str(got.Health), str(got.PowerState))
	}
	for _, e := range l.history(n.UUID) {
		if e.EventType == "monitoring" {
			t.Errorf("history row %+v with health monitoring off", e)
		}
	}
}
