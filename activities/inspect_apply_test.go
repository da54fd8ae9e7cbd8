package activities_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"os"
	"testing"

	"go.temporal.io/sdk/temporal"

	"github.com/ironflow/ironflow/activities"
	"github.com/ironflow/ironflow/inspection/rules"
	"github.com/ironflow/ironflow/internal/testkit/storetest"
	"github.com/ironflow/ironflow/provision"
	"github.com/ironflow/ironflow/store"
)

// ipaInventory is inspection/hooks' fixture: IPA's documented inventory
// format with LLDP on two NICs.
func ipaInventory(t *testing.T) (inv, pluginData map[string]any) {
	t.Helper()
	b, err := os.ReadFile("../inspection/hooks/testdata/ipa-inventory-lldp.json")
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		Inventory  map[string]any `json:"inventory"`
		PluginData map[string]any `json:"plugin_data"`
	}
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	return f.Inventory, f.PluginData
}

// ApplyInventory on real PostgreSQL: hooks then rules, written together;
// a failing rule leaves everything as it was.
func TestApplyInventoryRunsHooksThenRules(t *testing.T) {
	st := storetest.New(t)
	ctx := context.Background()
	a := activities.New(st, activities.Config{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	n := &store.Node{Driver: "fake-hardware", ProvisionState: provision.Inspecting, Traits: []string{"CUSTOM_OLD"}}
	if err := st.CreateNode(ctx, n); err != nil {
		t.Fatal(err)
	}
	if err := st.CreatePort(ctx, &store.Port{NodeUUID: n.UUID, Address: "52:54:00:12:34:56"}); err != nil {
		t.Fatal(err)
	}
	inv, pd := ipaInventory(t)
	if err := st.PutInventory(ctx, &store.Inventory{NodeUUID: n.UUID, Inventory: inv, PluginData: pd}); err != nil {
		t.Fatal(err)
	}
	mk := func(priority int, conds, acts string) {
		t.Helper()
		r := &store.InspectionRule{Priority: priority}
		if err := json.Unmarshal([]byte(conds), &r.Conditions); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal([]byte(acts), &r.Actions); err != nil {
			t.Fatal(err)
		}
		if err := st.CreateInspectionRule(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	// Rules see what the hooks made: parsed_lldp and the port's switch.
	mk(50, `[{"op": "eq", "args": {"values": ["{plugin_data[parsed_lldp][eth0][switch_system_name]}", "switch-a.example.org"]}}]`,
		`[{"op": "add-trait", "args": {"name": "CUSTOM_RACK_A"}}, {"op": "remove-trait", "args": {"name": "CUSTOM_OLD"}},
		  {"op": "set-attribute", "args": {"path": "/extra/switch_port", "value": "{plugin_data[parsed_lldp][eth0][switch_port_id]}"}},
		  {"op": "set-plugin-data", "args": {"path": "rack", "value": "a"}}]`)
	mk(10, `[{"op": "contains", "args": {"value": "{inventory[system_vendor][manufacturer]}", "regex": "(?i)hp"}}]`,
		`[{"op": "fail", "args": {"msg": "not for HP"}}]`)
	if err := a.ApplyInventory(ctx, n.UUID); err != nil {
		t.Fatalf("ApplyInventory: %v", err)
	}
	got, _ := st.GetNode(ctx, n.UUID)
	if got.Properties["cpu_arch"] != "x86_64" || got.Properties["memory_mb"] != float64(32768) || got.Properties["local_gb"] != float64(446) ||
		got.Extra["switch_port"] != "Ethernet1/18" || len(got.Traits) != 1 || got.Traits[0] != "CUSTOM_RACK_A" {
		t.Errorf("node after inspection: properties %v, extra %v, traits %v", got.Properties, got.Extra, got.Traits)
	}
	ports, _ := st.ListPorts(ctx, store.PortFilter{NodeUUID: n.UUID})
	if len(ports) != 2 || !ports[0].PXEEnabled || ports[1].PXEEnabled || ports[0].LocalLinkConnection["port_id"] != "Ethernet1/18" ||
		ports[1].LocalLinkConnection["switch_id"] != "88:5a:92:ec:54:59" {
		t.Errorf("ports after inspection: %+v / %+v", ports[0], ports[len(ports)-1])
	}
	stored, _ := st.GetInventory(ctx, n.UUID)
	if stored.PluginData["rack"] != "a" || stored.PluginData["parsed_lldp"] == nil || stored.PluginData["all_interfaces"] == nil {
		t.Errorf("plugin_data after inspection: %v", stored.PluginData)
	}

	// Now a rule fails: nothing of this pass is written.
	mk(90, `[]`, `[{"op": "set-attribute", "args": {"path": "/extra/switch_port", "value": "overwritten"}},
		{"op": "fail", "args": {"msg": "rack {plugin_data[rack]} is closed"}}]`)
	inv["cpu"].(map[string]any)["count"] = 64.0
	if err := st.PutInventory(ctx, &store.Inventory{NodeUUID: n.UUID, Inventory: inv, PluginData: pd}); err != nil {
		t.Fatal(err)
	}
	err := a.ApplyInventory(ctx, n.UUID)
	var app *temporal.ApplicationError
	if !errors.As(err, &app) || !app.NonRetryable() || app.Type() != activities.ErrTypeInspectionFailed ||
		app.Message() != "Failed to finish inspection: Failed to inspect hardware. Reason: rack {plugin_data[rack]} is closed" {
		t.Fatalf("failing rule: %v", err)
	}
	after, _ := st.GetNode(ctx, n.UUID)
	if after.Extra["switch_port"] != "Ethernet1/18" || after.Properties["cpus"] != float64(8) {
		t.Errorf("a failed inspection changed the node: extra %v, properties %v", after.Extra, after.Properties)
	}
}

// A BMC's inventory (out-of-band inspection) without network interfaces
// still fills in the properties, as in ironflow 0.1.0.
func TestApplyInventoryOutOfBandWithoutInterfaces(t *testing.T) {
	st := storetest.New(t)
	ctx := context.Background()
	a := activities.New(st, activities.Config{}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	n := &store.Node{Driver: "fake-hardware", ProvisionState: provision.Inspecting}
	if err := st.CreateNode(ctx, n); err != nil {
		t.Fatal(err)
	}
	inv := map[string]any{"cpu": map[string]any{"count": 4.0}, "memory": map[string]any{"total": float64(8 << 30)},
		"disks": []any{map[string]any{"name": "Drive 0", "size": float64(100 << 30)}}}
	if err := st.PutInventory(ctx, &store.Inventory{NodeUUID: n.UUID, Inventory: inv, PluginData: map[string]any{"source": "redfish"}}); err != nil {
		t.Fatal(err)
	}
	if err := a.ApplyInventory(ctx, n.UUID); err != nil {
		t.Fatalf("ApplyInventory: %v", err)
	}
	got, _ := st.GetNode(ctx, n.UUID)
	if got.Properties["cpus"] != 4.0 || got.Properties["memory_mb"] != 8192.0 || got.Properties["local_gb"] != 99.0 {
		t.Errorf("properties from a BMC's inventory: %v", got.Properties)
	}
}

// Built-in rules (a file's, not stored) run with the stored ones by
// priority, the stored rule first where priorities are equal, and are
// written in the same transaction.
func TestApplyInventoryRunsBuiltInRules(t *testing.T) {
	st := storetest.New(t)
	ctx := context.Background()
	builtIn := []rules.Rule{
		{UUID: "00000000-0000-0000-0000-000000000000", Priority: 20000,
			Actions: []map[string]any{{"op": "set-attribute", "args": map[string]any{"path": "/extra/first", "value": "built-in"}}}},
		{UUID: "00000000-0000-0000-0000-000000000001", Priority: 50,
			Actions: []map[string]any{{"op": "set-attribute", "args": map[string]any{"path": "/extra/last", "value": "built-in"}},
				{"op": "add-trait", "args": map[string]any{"name": "CUSTOM_BUILT_IN"}}}},
	}
	a := activities.New(st, activities.Config{BuiltInRules: builtIn}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	n := &store.Node{Driver: "fake-hardware", ProvisionState: provision.Inspecting}
	if err := st.CreateNode(ctx, n); err != nil {
		t.Fatal(err)
	}
	inv, pd := ipaInventory(t)
	if err := st.PutInventory(ctx, &store.Inventory{NodeUUID: n.UUID, Inventory: inv, PluginData: pd}); err != nil {
		t.Fatal(err)
	}
	stored := &store.InspectionRule{Priority: 50, Actions: []map[string]any{
		{"op": "set-attribute", "args": map[string]any{"path": "/extra/first", "value": "stored"}},
		{"op": "set-attribute", "args": map[string]any{"path": "/extra/last", "value": "stored"}}}}
	if err := st.CreateInspectionRule(ctx, stored); err != nil {
		t.Fatal(err)
	}
	if err := a.ApplyInventory(ctx, n.UUID); err != nil {
		t.Fatalf("ApplyInventory: %v", err)
	}
	got, _ := st.GetNode(ctx, n.UUID)
	// 20000 (built-in) first, then 50 stored, then 50 built-in.
	if got.Extra["first"] != "stored" || got.Extra["last"] != "built-in" || len(got.Traits) != 1 || got.Traits[0] != "CUSTOM_BUILT_IN" {
		t.Errorf("after inspection: extra %v, traits %v; want the stored rule between the two built-in ones", got.Extra, got.Traits)
	}
}
