package activities_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ironflow/ironflow/activities"
	"github.com/ironflow/ironflow/bmc"
	"github.com/ironflow/ironflow/internal/testkit/storetest"
	"github.com/ironflow/ironflow/metrics"
	"github.com/ironflow/ironflow/store"
)

// sensorDriver is a fake-hardware driver with one CPU temperature, or a
// BMC that does not answer (driver_info sensor_fail).
type sensorDriver struct {
	bmc.Driver
	fail bool
}

func (d sensorDriver) Sensors(context.Context) ([]bmc.Sensor, error) {
	if d.fail {
		return nil, fmt.Errorf("read sensors: %w", bmc.ErrUnreachable)
	}
	return []bmc.Sensor{{Kind: bmc.SensorTemperature, ID: "0@1", Context: "CPU", Value: 40, HasValue: true, Health: "OK"}}, nil
}

// sensorNodes are the node UUIDs metrics.Sensors exports.
func sensorNodes(t *testing.T) map[string]bool {
	t.Helper()
	fams, err := metrics.SensorRegistry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, f := range fams {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "node_uuid" {
					out[l.GetValue()] = true
				}
			}
		}
	}
	return out
}

// TestSensorPollerReadsItsGroupsNodesUpToTheCap: the poller reads the
// nodes of its conductor groups that are not in maintenance, at most
// MaxNodes of them (the others counted as skipped_over_cap), and a node
// whose BMC stops answering loses its series; a driver without sensors is
// not counted as a read.
func TestSensorPollerReadsItsGroupsNodesUpToTheCap(t *testing.T) {
	st := storetest.New(t)
	a := activities.New(st, activities.Config{Conductor: "test-conductor"}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	a.NewBMC = func(driver string, info map[string]any) (bmc.Driver, error) {
		d, err := bmc.New(driver, info)
		if err != nil || info["plain"] == true {
			return d, err
		}
		return sensorDriver{Driver: d, fail: info["sensor_fail"] == true}, nil
	}
	ctx := context.Background()
	mk := func(group string, maintenance bool, info map[string]any) *store.Node {
		n := &store.Node{Driver: "fake-hardware", ProvisionState: "manageable", ConductorGroup: group, Maintenance: maintenance, DriverInfo: info}
		if err := st.CreateNode(ctx, n); err != nil {
			t.Fatal(err)
		}
		return n
	}
	n1 := mk("sens", false, map[string]any{})
	n2 := mk("sens", false, map[string]any{})
	mk("sens", true, map[string]any{})               // maintenance: not read
	mk("other", false, map[string]any{})             // another group
	mk("sens", false, map[string]any{"plain": true}) // no sensors

	reads := func(outcome string) float64 { return testutil.ToFloat64(metrics.SensorReads.WithLabelValues(outcome)) }
	ok0, over0, unreach0 := reads("ok"), reads("skipped_over_cap"), reads("unreachable")
	p := &activities.SensorPoller{Activities: a, Groups: []string{"sens"}, MaxNodes: 2, Log: slog.New(slog.NewTextHandler(io.Discard, nil))}
	p.Poll(ctx)
	got := sensorNodes(t)
	if len(got) != 2 || !got[n1.UUID] || !got[n2.UUID] {
		t.Fatalf("nodes with sensor series after the first poll: %v, want %s and %s", got, n1.UUID, n2.UUID)
	}
	if d := reads("ok") - ok0; d != 2 {
		t.Errorf("ok reads: %v, want 2", d)
	}
	if d := reads("skipped_over_cap") - over0; d != 1 {
		t.Errorf("skipped_over_cap: %v, want 1 (three nodes not in maintenance, cap 2)", d)
	}

	if _, err := st.UpdateNode(ctx, n2.UUID, func(n *store.Node) error { n.DriverInfo = map[string]any{"sensor_fail": true}; return nil }); err != nil {
		t.Fatal(err)
	}
	p.Poll(ctx)
	if got := sensorNodes(t); len(got) != 1 || !got[n1.UUID] {
		t.Errorf("after %s's BMC stopped answering: %v, want %s only", n2.UUID, got, n1.UUID)
	}
	if d := reads("unreachable") - unreach0; d != 1 {
		t.Errorf("unreachable reads: %v, want 1", d)
	}
}
