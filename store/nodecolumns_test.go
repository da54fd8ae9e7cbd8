package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ironflow/ironflow/internal/testkit/storetest"
	"github.com/ironflow/ironflow/store"
)

// agentNode is a node as an agent deploy has it: a BMC, an agent's
// session and step plan, an image, hardware properties.
func agentNode() *store.Node {
	return &store.Node{
		Name:           ptr("narrow-0"),
		Driver:         "redfish",
		ProvisionState: "deploying",
		DriverInfo: map[string]any{"redfish_address": "https://127.0.0.1:8443", "redfish_username": "admin",
			"redfish_password": "secret", "redfish_system_id": "/redfish/v1/Systems/1"},
		DriverInternalInfo: map[string]any{"agent_url": "https://127.0.0.1:9999", "agent_secret_token": "t0k3n",
			"agent_verify_ca": "-----BEGIN CERTIFICATE-----\nMIIBszCCAVmgAwIBAgIUQ3x0\n-----END CERTIFICATE-----\n",
			"power_call":      map[string]any{"run": "r", "seq": float64(3)},
			"deploy_steps": []any{map[string]any{"step": "write_image", "interface": "deploy", "priority": float64(80), "args": map[string]any{}},
				map[string]any{"step": "prepare_instance_boot", "interface": "deploy", "priority": float64(60), "args": map[string]any{}}}},
		InstanceInfo: map[string]any{"image_source": "http://127.0.0.1/disk.qcow2", "image_os_hash_algo": "sha256",
			"image_os_hash_value": "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", "root_gb": float64(20)},
		Properties: map[string]any{"cpus": float64(64), "memory_mb": float64(262144), "local_gb": float64(960),
			"cpu_arch": "x86_64", "capabilities": "boot_mode:uefi"},
		Extra:  map[string]any{"rack": "r12", "owner_team": "platform"},
		Traits: []string{"CUSTOM_GPU", "CUSTOM_RACK_12"},
	}
}

// storedAgentNode stores agentNode in a new store and gives the columns a
// BMC call reads (activities' driverColumns).
func storedAgentNode(tb testing.TB) (*store.Store, *store.Node, store.NodeColumns) {
	tb.Helper()
	s := storetest.New(tb)
	in := agentNode()
	if err := s.CreateNode(context.Background(), in); err != nil {
		tb.Fatal(err)
	}
	return s, in, store.MustNodeColumns("driver", "driver_info", "driver_internal_info")
}

// TestGetNodeColumnsReadsOnlyItsColumns: a narrow read sets id, uuid and
// the columns it names, as GetNode reads them, and leaves every other
// field zero; by name as by UUID; an unknown column is refused.
func TestGetNodeColumnsReadsOnlyItsColumns(t *testing.T) {
	s, in, cols := storedAgentNode(t)
	ctx := context.Background()
	full, err := s.GetNode(ctx, in.UUID)
	if err != nil {
		t.Fatal(err)
	}
	for _, key := range []string{in.UUID, "narrow-0"} {
		got, err := s.GetNodeColumns(ctx, key, cols)
		if err != nil {
			t.Fatalf("GetNodeColumns(%s): %v", key, err)
		}
		if got.ID != full.ID || got.UUID != full.UUID || got.Driver != "redfish" {
			t.Errorf("GetNodeColumns(%s): id %d uuid %s driver %q, want %d %s redfish", key, got.ID, got.UUID, got.Driver, full.ID, full.UUID)
		}
		if got.DriverInfo["redfish_password"] != "secret" || got.DriverInternalInfo["agent_secret_token"] != "t0k3n" ||
			len(got.DriverInternalInfo) != len(full.DriverInternalInfo) {
			t.Errorf("GetNodeColumns(%s): driver_info %v, driver_internal_info %v", key, got.DriverInfo, got.DriverInternalInfo)
		}
		if got.InstanceInfo != nil || got.Properties != nil || got.Extra != nil || got.Traits != nil ||
			got.Name != nil || got.ProvisionState != "" || !got.CreatedAt.IsZero() {
			t.Errorf("GetNodeColumns(%s) read columns it was not asked for: %+v", key, got)
		}
	}
	if _, err := store.NewNodeColumns("driver", "no_such_column"); !errors.Is(err, store.ErrInvalidInput) {
		t.Errorf("NewNodeColumns with an unknown column: %v, want ErrInvalidInput", err)
	}
	if _, err := s.GetNodeColumns(ctx, "00000000-0000-4000-8000-000000000000", cols); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("GetNodeColumns of a missing node: %v, want ErrNotFound", err)
	}
	// The zero NodeColumns reads the whole node.
	if got, err := s.GetNodeColumns(ctx, in.UUID, store.NodeColumns{}); err != nil || got.InstanceInfo["root_gb"] != float64(20) {
		t.Errorf("GetNodeColumns with no columns: %v, %+v", err, got)
	}
}

// BenchmarkGetNodeForBMCCall: what reading a node for a BMC call costs, the
// whole row (GetNode) against the driver's columns alone (activities'
// driverColumns), on a node as an agent deploy has it. The two reads
// alternate in one loop, so that both meet the same state of the machine;
// narrow/whole is the narrow read's time over the whole row's.
func BenchmarkGetNodeForBMCCall(b *testing.B) {
	s, in, cols := storedAgentNode(b)
	ctx := context.Background()
	readWhole := func() {
		if _, err := s.GetNode(ctx, in.UUID); err != nil {
			b.Fatal(err)
		}
	}
	readNarrow := func() {
		if _, err := s.GetNodeColumns(ctx, in.UUID, cols); err != nil {
			b.Fatal(err)
		}
	}
	var whole, narrow time.Duration
	for b.Loop() {
		t0 := time.Now()
		readWhole()
		t1 := time.Now()
		readNarrow()
		whole, narrow = whole+t1.Sub(t0), narrow+time.Since(t1)
	}
	b.StopTimer()
	b.ReportMetric(float64(whole.Nanoseconds())/float64(b.N), "whole-ns/read")
	b.ReportMetric(float64(narrow.Nanoseconds())/float64(b.N), "narrow-ns/read")
	b.ReportMetric(float64(narrow)/float64(whole), "narrow/whole")
	b.ReportMetric(testing.AllocsPerRun(20, readWhole), "whole-allocs/read")
	b.ReportMetric(testing.AllocsPerRun(20, readNarrow), "narrow-allocs/read")
}
