package store_test

import (
	"context"
	"errors"
	"testing"

	"github.com/ironflow/ironflow/internal/testkit/storetest"
	"github.com/ironflow/ironflow/store"
)

func TestPortgroupRoundTripAndRules(t *testing.T) {
	s := storetest.New(t)
	ctx := context.Background()
	n1 := newNode(t, s, &store.Node{})
	n2 := newNode(t, s, &store.Node{})
	g := &store.Portgroup{NodeUUID: n1.UUID, Address: ptr("52:54:00:CC:00:01"), Name: ptr("bond0"), StandalonePortsSupported: true}
	if err := s.CreatePortgroup(ctx, g); err != nil {
		t.Fatalf("CreatePortgroup: %v", err)
	}
	if g.UUID == "" || g.NodeID != n1.ID || *g.Address != "52:54:00:cc:00:01" || g.Mode != store.DefaultPortgroupMode {
		t.Fatalf("CreatePortgroup filled %+v", g)
	}
	for _, ident := range []string{g.UUID, "bond0"} {
		if got, err := s.GetPortgroup(ctx, ident); err != nil || got.UUID != g.UUID || got.NodeUUID != n1.UUID {
			t.Errorf("GetPortgroup(%s): %+v, %v", ident, got, err)
		}
	}
	if err := s.CreatePortgroup(ctx, &store.Portgroup{NodeUUID: n1.UUID, Address: ptr("52:54:00:cc:00:01")}); !errors.Is(err, store.ErrDuplicateMAC) {
		t.Errorf("duplicate address: %v", err)
	}
	if err := s.CreatePortgroup(ctx, &store.Portgroup{NodeUUID: n1.UUID, Name: ptr("bond0")}); !errors.Is(err, store.ErrDuplicateName) {
		t.Errorf("duplicate name: %v", err)
	}

	p := &store.Port{NodeUUID: n2.UUID, Address: "52:54:00:aa:00:01", PortgroupUUID: &g.UUID}
	if err := s.CreatePort(ctx, p); !errors.Is(err, store.ErrPortgroupOtherNode) {
		t.Errorf("port of another node into the group: %v", err)
	}
	p.PortgroupUUID = ptr("00000000-0000-0000-0000-000000000000")
	if err := s.CreatePort(ctx, p); !errors.Is(err, store.ErrPortgroupNotFound) {
		t.Errorf("unknown group: %v", err)
	}
	p.NodeUUID, p.PortgroupUUID = n1.UUID, &g.UUID
	if err := s.CreatePort(ctx, p); err != nil {
		t.Fatalf("CreatePort into the group: %v", err)
	}
	if err := s.DeletePortgroup(ctx, g.UUID); !errors.Is(err, store.ErrPortgroupNotEmpty) {
		t.Errorf("delete a group with ports: %v", err)
	}
	if _, err := s.UpdatePortgroup(ctx, g.UUID, func(g *store.Portgroup) error { g.NodeUUID = n2.UUID; return nil }); !errors.Is(err, store.ErrPortgroupNotEmpty) {
		t.Errorf("move a group with ports: %v", err)
	}
	if ports, err := s.ListPorts(ctx, store.PortFilter{PortgroupUUID: g.UUID}); err != nil || len(ports) != 1 {
		t.Errorf("ports of the group: %v, %v", ports, err)
	}

	// UpdateNodeNetwork writes back what fn changed.
	err := s.UpdateNodeNetwork(ctx, n1.UUID, func(ports []*store.Port, groups []*store.Portgroup) error {
		if len(ports) != 1 || len(groups) != 1 {
			t.Errorf("locked %d ports, %d groups", len(ports), len(groups))
		}
		groups[0].InternalInfo["tenant_vif_port_id"] = "vif-1"
		return nil
	})
	if err != nil {
		t.Fatalf("UpdateNodeNetwork: %v", err)
	}
	if got, _ := s.GetPortgroup(ctx, g.UUID); got.InternalInfo["tenant_vif_port_id"] != "vif-1" || got.UpdatedAt == nil {
		t.Errorf("group after UpdateNodeNetwork %+v", got)
	}
	if got, _ := s.GetPort(ctx, p.UUID); got.UpdatedAt != nil {
		t.Errorf("an unchanged port was written: %+v", got)
	}
	if err := s.UpdateNodeNetwork(ctx, "00000000-0000-0000-0000-000000000000", func([]*store.Port, []*store.Portgroup) error { return nil }); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("unknown node: %v", err)
	}

	if err := s.DeletePort(ctx, p.UUID); err != nil {
		t.Fatal(err)
	}
	if err := s.DeletePortgroup(ctx, g.UUID); err != nil {
		t.Errorf("delete an empty group: %v", err)
	}
	if err := s.DeletePortgroup(ctx, g.UUID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("delete twice: %v", err)
	}
}
