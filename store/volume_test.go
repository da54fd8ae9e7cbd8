package store_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/ironflow/ironflow/internal/testkit/storetest"
	"github.com/ironflow/ironflow/store"
)

func TestVolumeConnectorRoundTrip(t *testing.T) {
	s := storetest.New(t)
	ctx := context.Background()
	n := newNode(t, s, &store.Node{})
	c := &store.VolumeConnector{NodeUUID: n.UUID, Type: "iqn", ConnectorID: "iqn.2010-10.org.openstack:node1"}
	if err := s.CreateVolumeConnector(ctx, c); err != nil {
		t.Fatalf("CreateVolumeConnector: %v", err)
	}
	got, err := s.GetVolumeConnector(ctx, c.UUID)
	if err != nil || got.NodeUUID != n.UUID || got.Type != "iqn" || got.Extra == nil || got.UpdatedAt != nil {
		t.Fatalf("GetVolumeConnector = %+v, %v", got, err)
	}
	dup := &store.VolumeConnector{NodeUUID: n.UUID, Type: "iqn", ConnectorID: c.ConnectorID}
	if err := s.CreateVolumeConnector(ctx, dup); !errors.Is(err, store.ErrDuplicateConnector) {
		t.Errorf("same type and connector_id: %v, want ErrDuplicateConnector", err)
	}
	// The same connector_id of another type is another connector.
	if err := s.CreateVolumeConnector(ctx, &store.VolumeConnector{NodeUUID: n.UUID, Type: "ip", ConnectorID: c.ConnectorID}); err != nil {
		t.Errorf("other type: %v", err)
	}
	if err := s.CreateVolumeConnector(ctx, &store.VolumeConnector{NodeUUID: "00000000-0000-0000-0000-000000000000", Type: "mac", ConnectorID: "x"}); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown node: %v, want ErrNotFound", err)
	}

	other := newNode(t, s, &store.Node{})
	got.NodeUUID, got.Extra = other.UUID, map[string]any{"k": "v"}
	if err := s.UpdateVolumeConnector(ctx, got); err != nil || got.UpdatedAt == nil {
		t.Fatalf("UpdateVolumeConnector: %v (%+v)", err, got)
	}
	list, err := s.ListVolumeConnectors(ctx, store.VolumeFilter{NodeUUID: other.UUID})
	if err != nil || len(list) != 1 || list[0].UUID != c.UUID || list[0].Extra["k"] != "v" {
		t.Fatalf("connectors of the other node: %+v, %v", list, err)
	}
	all, err := s.ListVolumeConnectors(ctx, store.VolumeFilter{Limit: 1, SortKey: "type", SortDir: "desc"})
	if err != nil || len(all) != 1 || all[0].Type != "iqn" {
		t.Fatalf("first connector by type desc: %+v, %v", all, err)
	}
	next, err := s.ListVolumeConnectors(ctx, store.VolumeFilter{Marker: all[0].UUID, SortKey: "type", SortDir: "desc"})
	if err != nil || len(next) != 1 || next[0].Type != "ip" {
		t.Fatalf("after the marker: %+v, %v", next, err)
	}
	if _, err := s.ListVolumeConnectors(ctx, store.VolumeFilter{SortKey: "extra"}); !errors.Is(err, store.ErrInvalidSortKey) {
		t.Errorf("sort by extra: %v", err)
	}

	if err := s.DeleteVolumeConnector(ctx, c.UUID); err != nil {
		t.Fatalf("DeleteVolumeConnector: %v", err)
	}
	if err := s.DeleteVolumeConnector(ctx, c.UUID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("second delete: %v", err)
	}
}

func TestVolumeTargetRoundTripAndBootIndexPerNode(t *testing.T) {
	s := storetest.New(t)
	ctx := context.Background()
	n := newNode(t, s, &store.Node{})
	tg := &store.VolumeTarget{NodeUUID: n.UUID, VolumeType: "iscsi", BootIndex: 0, VolumeID: "vol-1",
		Properties: map[string]any{"target_lun": float64(0)}}
	if err := s.CreateVolumeTarget(ctx, tg); err != nil {
		t.Fatalf("CreateVolumeTarget: %v", err)
	}
	got, err := s.GetVolumeTarget(ctx, tg.UUID)
	if err != nil || got.NodeUUID != n.UUID || got.BootIndex != 0 || got.Properties["target_lun"] != float64(0) {
		t.Fatalf("GetVolumeTarget = %+v, %v", got, err)
	}
	if err := s.CreateVolumeTarget(ctx, &store.VolumeTarget{NodeUUID: n.UUID, VolumeType: "iscsi", BootIndex: 0, VolumeID: "vol-2"}); !errors.Is(err, store.ErrDuplicateBootIndex) {
		t.Errorf("same boot_index on the node: %v, want ErrDuplicateBootIndex", err)
	}
	other := newNode(t, s, &store.Node{})
	if err := s.CreateVolumeTarget(ctx, &store.VolumeTarget{NodeUUID: other.UUID, VolumeType: "iscsi", BootIndex: 0, VolumeID: "vol-2"}); err != nil {
		t.Errorf("same boot_index on another node: %v", err)
	}
	second := &store.VolumeTarget{NodeUUID: n.UUID, VolumeType: "iscsi", BootIndex: 1, VolumeID: "vol-3"}
	if err := s.CreateVolumeTarget(ctx, second); err != nil {
		t.Fatal(err)
	}
	second.BootIndex = 0
	if err := s.UpdateVolumeTarget(ctx, second); !errors.Is(err, store.ErrDuplicateBootIndex) {
		t.Errorf("update to a taken boot_index: %v", err)
	}
	list, err := s.ListVolumeTargets(ctx, store.VolumeFilter{NodeUUID: n.UUID})
	if err != nil || len(list) != 2 {
		t.Fatalf("targets of the node: %+v, %v", list, err)
	}
	// Deleting the node deletes its volume objects, as Ironic's destroy_node.
	if err := s.DeleteNode(ctx, n.UUID); err != nil {
		t.Fatal(err)
	}
	if _, err := s.GetVolumeTarget(ctx, tg.UUID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("target after its node's deletion: %v", err)
	}
}

func TestConductorRegistration(t *testing.T) {
	s := storetest.New(t)
	ctx := context.Background()
	c := &store.Conductor{Hostname: "w1", ConductorGroups: []string{""}, Drivers: []string{"ipmi"}}
	if err := s.RegisterConductor(ctx, c); err != nil {
		t.Fatalf("RegisterConductor: %v", err)
	}
	first := c.UpdatedAt
	live, err := s.LiveConductors(ctx, time.Minute)
	if err != nil || len(live) != 1 || live[0].Hostname != "w1" || !live[0].Alive(time.Now(), time.Minute) {
		t.Fatalf("live after register: %+v, %v", live, err)
	}
	if err := s.TouchConductor(ctx, "w1"); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.GetConductor(ctx, "w1"); !got.UpdatedAt.After(first) {
		t.Errorf("heartbeat did not move updated_at: %v then %v", first, got.UpdatedAt)
	}
	if err := s.TouchConductor(ctx, "nobody"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("heartbeat of an unknown conductor: %v", err)
	}
	// A restart registers again with new groups.
	if err := s.RegisterConductor(ctx, &store.Conductor{Hostname: "w1", ConductorGroups: []string{"rack2"}}); err != nil {
		t.Fatal(err)
	}
	if got, _ := s.GetConductor(ctx, "w1"); len(got.ConductorGroups) != 1 || got.ConductorGroups[0] != "rack2" {
		t.Errorf("groups after re-registration: %+v", got)
	}
	if err := s.UnregisterConductor(ctx, "w1"); err != nil {
		t.Fatal(err)
	}
	got, err := s.GetConductor(ctx, "w1")
	if err != nil || got.Online || got.Alive(time.Now(), time.Minute) {
		t.Errorf("after unregister: %+v, %v (want kept, offline)", got, err)
	}
	if live, _ := s.LiveConductors(ctx, time.Minute); len(live) != 0 {
		t.Errorf("live after unregister: %+v", live)
	}
	all, err := s.ListConductors(ctx, store.ConductorFilter{})
	if err != nil || len(all) != 1 {
		t.Errorf("list: %+v, %v", all, err)
	}
}
