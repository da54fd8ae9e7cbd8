package store_test

import (
	"context"
	"errors"
	"testing"

	"github.com/ironflow/ironflow/internal/testkit/storetest"
	"github.com/ironflow/ironflow/store"
)

func TestInspectionRulesCRUD(t *testing.T) {
	s := storetest.New(t)
	ctx := context.Background()
	a := &store.InspectionRule{Priority: 10, Description: ptr("a"), Actions: []map[string]any{{"op": "fail", "args": map[string]any{"msg": "x"}}}}
	b := &store.InspectionRule{UUID: "4B3E9C7A-1D2F-4E5A-8B6C-7D8E9F0A1B2C", Priority: 90, Sensitive: true,
		Conditions: []map[string]any{{"op": "eq", "args": map[string]any{"values": []any{1.0, 1.0}}}},
		Actions:    []map[string]any{{"op": "add-trait", "args": map[string]any{"name": "CUSTOM_X"}}}}
	for _, r := range []*store.InspectionRule{a, b} {
		if err := s.CreateInspectionRule(ctx, r); err != nil {
			t.Fatalf("CreateInspectionRule: %v", err)
		}
	}
	if b.UUID != "4b3e9c7a-1d2f-4e5a-8b6c-7d8e9f0a1b2c" || a.Phase != "main" {
		t.Errorf("uuid %s, phase %s", b.UUID, a.Phase)
	}
	if err := s.CreateInspectionRule(ctx, &store.InspectionRule{UUID: b.UUID, Actions: a.Actions}); !errors.Is(err, store.ErrDuplicateUUID) {
		t.Errorf("second rule with one UUID: %v", err)
	}
	got, err := s.GetInspectionRule(ctx, b.UUID)
	if err != nil || !got.Sensitive || got.Conditions[0]["op"] != "eq" || got.UpdatedAt != nil {
		t.Fatalf("GetInspectionRule: %+v, %v", got, err)
	}
	list, err := s.ListInspectionRules(ctx, store.InspectionRuleFilter{SortKey: "priority", SortDir: "desc"})
	if err != nil || len(list) != 2 || list[0].UUID != b.UUID {
		t.Fatalf("ListInspectionRules by priority: %v, %v", list, err)
	}
	got.Priority = 5
	if err := s.UpdateInspectionRule(ctx, got); err != nil || got.UpdatedAt == nil {
		t.Fatalf("UpdateInspectionRule: %v", err)
	}
	if err := s.DeleteInspectionRule(ctx, a.UUID); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteInspectionRule(ctx, a.UUID); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("delete twice: %v", err)
	}
	if err := s.DeleteAllInspectionRules(ctx); err != nil {
		t.Fatal(err)
	}
	if l, _ := s.InspectionRulesOfPhase(ctx, "main"); len(l) != 0 {
		t.Errorf("after delete all: %v", l)
	}
}

// ApplyInspection writes the node, its ports and plugin_data together, or
// nothing when the decision fails.
func TestApplyInspectionIsAllOrNothing(t *testing.T) {
	s := storetest.New(t)
	ctx := context.Background()
	n := newNode(t, s, &store.Node{Traits: []string{"CUSTOM_OLD"}})
	p := &store.Port{NodeUUID: n.UUID, Address: "52:54:00:aa:00:01", PXEEnabled: false}
	if err := s.CreatePort(ctx, p); err != nil {
		t.Fatal(err)
	}
	other := newNode(t, s, &store.Node{})
	if err := s.CreatePort(ctx, &store.Port{NodeUUID: other.UUID, Address: "52:54:00:aa:00:09"}); err != nil {
		t.Fatal(err)
	}
	if err := s.PutInventory(ctx, &store.Inventory{NodeUUID: n.UUID, Inventory: map[string]any{"cpu": map[string]any{"count": 2.0}},
		PluginData: map[string]any{"from": "agent"}}); err != nil {
		t.Fatal(err)
	}
	_, err := s.ApplyInspection(ctx, n.UUID, func(node *store.Node, ports []*store.Port, inv *store.Inventory) (*store.InspectionOutcome, error) {
		node.Properties = map[string]any{"cpus": 2.0}
		node.Traits = nil
		return nil, errors.New("a rule failed")
	})
	if err == nil || err.Error() != "a rule failed" {
		t.Fatalf("failing decision: %v", err)
	}
	if after, _ := s.GetNode(ctx, n.UUID); len(after.Properties) != 0 || len(after.Traits) != 1 {
		t.Errorf("node changed by a failed inspection: %+v", after)
	}
	out, err := s.ApplyInspection(ctx, n.UUID, func(node *store.Node, ports []*store.Port, inv *store.Inventory) (*store.InspectionOutcome, error) {
		if len(ports) != 1 || inv.PluginData["from"] != "agent" {
			t.Errorf("ports %v, inventory %v", ports, inv)
		}
		node.Properties = map[string]any{"cpus": inv.Inventory["cpu"].(map[string]any)["count"]}
		node.Traits = []string{"CUSTOM_NEW"}
		ports[0].PXEEnabled = true
		ports[0].LocalLinkConnection = map[string]any{"port_id": "Ethernet1/1"}
		return &store.InspectionOutcome{
			PluginData:   map[string]any{"from": "agent", "macs": []any{"52:54:00:aa:00:01"}},
			UpdatedPorts: ports,
			NewPorts: []*store.Port{{NodeUUID: n.UUID, Address: "52:54:00:AA:00:02", PXEEnabled: false},
				{NodeUUID: n.UUID, Address: "52:54:00:aa:00:09"}}, // the other node's MAC: skipped
		}, nil
	})
	if err != nil {
		t.Fatalf("ApplyInspection: %v", err)
	}
	if out.Properties["cpus"] != 2.0 || len(out.Traits) != 1 || out.Traits[0] != "CUSTOM_NEW" {
		t.Errorf("node after inspection: %+v", out)
	}
	ports, _ := s.ListPorts(ctx, store.PortFilter{NodeUUID: n.UUID})
	if len(ports) != 2 || !ports[0].PXEEnabled || ports[0].LocalLinkConnection["port_id"] != "Ethernet1/1" || ports[1].Address != "52:54:00:aa:00:02" {
		t.Errorf("ports after inspection: %+v %+v", ports[0], ports[len(ports)-1])
	}
	inv, _ := s.GetInventory(ctx, n.UUID)
	if _, ok := inv.PluginData["macs"]; !ok || inv.Inventory["cpu"] == nil {
		t.Errorf("inventory after inspection: %+v", inv)
	}
}
