package store_test

import (
	"context"
	"errors"
	"slices"
	"testing"

	"github.com/ironflow/ironflow/internal/testkit/storetest"
	"github.com/ironflow/ironflow/store"
)

func newPort(t testing.TB, s *store.Store, node *store.Node, mac string) *store.Port {
	t.Helper()
	p := &store.Port{NodeUUID: node.UUID, Address: mac, PXEEnabled: true}
	if err := s.CreatePort(context.Background(), p); err != nil {
		t.Fatalf("CreatePort %s: %v", mac, err)
	}
	return p
}

func TestPortRoundTrip(t *testing.T) {
	s := storetest.New(t)
	ctx := context.Background()
	n := newNode(t, s, &store.Node{})
	p := &store.Port{
		NodeUUID:            n.UUID,
		Address:             "52:54:00:AB:CD:EF",
		PXEEnabled:          true,
		LocalLinkConnection: map[string]any{"switch_id": "0a:1b:2c:3d:4e:5f", "port_id": "Ethernet3/1"},
		PhysicalNetwork:     ptr("physnet1"),
	}
	if err := s.CreatePort(ctx, p); err != nil {
		t.Fatalf("CreatePort: %v", err)
	}
	if p.UUID == "" || p.ID == 0 || p.NodeID != n.ID || p.Address != "52:54:00:ab:cd:ef" {
		t.Fatalf("CreatePort filled %+v", p)
	}
	got, err := s.GetPort(ctx, p.UUID)
	if err != nil {
		t.Fatalf("GetPort: %v", err)
	}
	if got.Address != "52:54:00:ab:cd:ef" || got.NodeUUID != n.UUID || !got.PXEEnabled ||
		got.LocalLinkConnection["port_id"] != "Ethernet3/1" || *got.PhysicalNetwork != "physnet1" || got.Extra == nil {
		t.Fatalf("GetPort = %+v", got)
	}

	other := newNode(t, s, &store.Node{})
	moved, err := s.UpdatePort(ctx, p.UUID, func(p *store.Port) error {
		p.NodeUUID = other.UUID
		p.Extra = map[string]any{"vlan": float64(10)}
		p.PXEEnabled = false
		return nil
	})
	if err != nil {
		t.Fatalf("UpdatePort: %v", err)
	}
	if moved.NodeUUID != other.UUID || moved.NodeID != other.ID || moved.PXEEnabled || moved.Extra["vlan"] != float64(10) || moved.UpdatedAt == nil {
		t.Fatalf("UpdatePort = %+v", moved)
	}
	if _, err := s.UpdatePort(ctx, p.UUID, func(p *store.Port) error { p.NodeUUID = "6a1f0c4e-0000-4000-8000-000000000000"; return nil }); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("move to a missing node: %v, want ErrNotFound", err)
	}
	if _, err := s.UpdatePort(ctx, p.UUID, func(p *store.Port) error { p.Address = "zz"; return nil }); !errors.Is(err, store.ErrInvalidInput) {
		t.Fatalf("invalid address: %v, want ErrInvalidInput", err)
	}

	if err := s.DeletePort(ctx, p.UUID); err != nil {
		t.Fatalf("DeletePort: %v", err)
	}
	if _, err := s.GetPort(ctx, p.UUID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("GetPort after delete: %v, want ErrNotFound", err)
	}
	if err := s.DeletePort(ctx, p.UUID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("second DeletePort: %v, want ErrNotFound", err)
	}
}

func TestPortErrors(t *testing.T) {
	s := storetest.New(t)
	ctx := context.Background()
	n := newNode(t, s, &store.Node{})
	first := newPort(t, s, n, "52:54:00:00:00:01")
	second := newPort(t, s, n, "52:54:00:00:00:02")
	cases := []struct {
		name string
		port store.Port
		want error
	}{
		{"same MAC", store.Port{NodeUUID: n.UUID, Address: "52:54:00:00:00:01"}, store.ErrDuplicateMAC},
		{"same MAC upper case", store.Port{NodeUUID: n.UUID, Address: "52:54:00:00:00:0A"}, nil},
		{"same MAC other case", store.Port{NodeUUID: n.UUID, Address: "52:54:00:00:00:0a"}, store.ErrDuplicateMAC},
		{"same uuid", store.Port{UUID: first.UUID, NodeUUID: n.UUID, Address: "52:54:00:00:00:03"}, store.ErrDuplicateUUID},
		{"invalid MAC", store.Port{NodeUUID: n.UUID, Address: "52:54:00"}, store.ErrInvalidInput},
		{"missing node", store.Port{NodeUUID: "6a1f0c4e-0000-4000-8000-000000000000", Address: "52:54:00:00:00:04"}, store.ErrNotFound},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := c.port
			if err := s.CreatePort(ctx, &p); !errors.Is(err, c.want) && !(c.want == nil && err == nil) {
				t.Fatalf("CreatePort: %v, want %v", err, c.want)
			}
		})
	}
	if _, err := s.UpdatePort(ctx, second.UUID, func(p *store.Port) error { p.Address = "52:54:00:00:00:01"; return nil }); !errors.Is(err, store.ErrDuplicateMAC) {
		t.Fatalf("readdress onto a taken MAC: %v, want ErrDuplicateMAC", err)
	}
}

func TestListPortsAndLookupByMAC(t *testing.T) {
	s := storetest.New(t)
	ctx := context.Background()
	a := newNode(t, s, &store.Node{Name: ptr("a")})
	b := newNode(t, s, &store.Node{Name: ptr("b")})
	newNode(t, s, &store.Node{Name: ptr("no-ports")})
	pa1 := newPort(t, s, a, "52:54:00:00:0a:01")
	pa2 := newPort(t, s, a, "52:54:00:00:0a:02")
	pb1 := newPort(t, s, b, "52:54:00:00:0b:01")

	byNode, err := s.ListPorts(ctx, store.PortFilter{NodeUUID: a.UUID})
	if err != nil || len(byNode) != 2 || byNode[0].UUID != pa1.UUID || byNode[1].UUID != pa2.UUID {
		t.Fatalf("ListPorts(node a) = %v, %v", byNode, err)
	}
	byAddr, err := s.ListPorts(ctx, store.PortFilter{Address: "52:54:00:00:0B:01"})
	if err != nil || len(byAddr) != 1 || byAddr[0].UUID != pb1.UUID || byAddr[0].NodeUUID != b.UUID {
		t.Fatalf("ListPorts(address) = %v, %v", byAddr, err)
	}
	desc, err := s.ListPorts(ctx, store.PortFilter{SortKey: "address", SortDir: "desc", Limit: 2})
	if err != nil || len(desc) != 2 || desc[0].UUID != pb1.UUID || desc[1].UUID != pa2.UUID {
		t.Fatalf("ListPorts(address desc, limit 2) = %v, %v", desc, err)
	}
	rest, err := s.ListPorts(ctx, store.PortFilter{SortKey: "address", SortDir: "desc", Marker: desc[1].UUID})
	if err != nil || len(rest) != 1 || rest[0].UUID != pa1.UUID {
		t.Fatalf("ListPorts after marker = %v, %v", rest, err)
	}
	if _, err := s.ListPorts(ctx, store.PortFilter{Marker: "6a1f0c4e-0000-4000-8000-000000000000"}); !errors.Is(err, store.ErrMarkerNotFound) {
		t.Fatalf("unknown marker: %v, want ErrMarkerNotFound", err)
	}

	cases := []struct {
		name string
		macs []string
		want []string
	}{
		{"one MAC upper case", []string{"52:54:00:00:0A:02"}, []string{a.UUID}},
		{"two MACs of one node", []string{"52:54:00:00:0a:01", "52:54:00:00:0a:02"}, []string{a.UUID}},
		{"MACs of two nodes", []string{"52:54:00:00:0b:01", "52:54:00:00:0a:01"}, []string{a.UUID, b.UUID}},
		{"invalid ignored", []string{"garbage", "", "52:54:00:00:0b:01"}, []string{b.UUID}},
		{"unknown", []string{"52:54:00:ff:ff:ff"}, nil},
		{"none", nil, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			nodes, err := s.NodesByMACs(ctx, c.macs)
			if err != nil {
				t.Fatalf("NodesByMACs: %v", err)
			}
			var got []string
			for _, n := range nodes {
				got = append(got, n.UUID)
			}
			if !slices.Equal(got, c.want) {
				t.Fatalf("NodesByMACs(%v) = %v, want %v", c.macs, got, c.want)
			}
		})
	}

	// Ports go with their node, as in Ironic.
	if err := s.DeleteNode(ctx, a.UUID); err != nil {
		t.Fatalf("DeleteNode: %v", err)
	}
	if _, err := s.GetPort(ctx, pa1.UUID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("port of a deleted node: %v, want ErrNotFound", err)
	}
	all, _ := s.ListPorts(ctx, store.PortFilter{})
	if len(all) != 1 || all[0].UUID != pb1.UUID {
		t.Fatalf("ports after deleting node a: %v", all)
	}
}
