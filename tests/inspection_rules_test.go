package tests

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/ironflow/ironflow/store"
)

// TestInspectionHooksAndRules runs an in-band inspection on the lab's
// real stack (API and worker binaries, PostgreSQL, Temporal): the test
// plays the ramdisk, looking the node up and posting IPA's inventory with
// LLDP to /v1/continue_inspection as IPA does. The hooks must fill
// plugin_data (all_interfaces with pxe_enabled, parsed_lldp, root_disk),
// the ports (pxe_enabled, local_link_connection from LLDP) and the
// properties; an inspection rule adds a trait and copies the switch port;
// then a failing rule fails the next inspection with nothing of it
// written.
//
// The rules are written into the lab's database: the API serves
// /v1/inspection_rules from 1.96, which the binary does not negotiate while
// MaxVersionMinor is below it (apiserver's TestInspectionRulesAPI tests the
// routes at 1.96 on real PostgreSQL). They match only this test's node, as
// other tests inspect in the same lab.
func TestInspectionHooksAndRules(t *testing.T) {
	st := openStore(t)
	ctx := context.Background()
	const name = "rules-node-0"
	macA, macB := "52:54:00:ee:0a:01", "52:54:00:ee:0a:02"
	mine := map[string]any{"op": "eq", "args": map[string]any{"values": []any{"{node.name}", name}}}
	rule := func(priority int, conds []map[string]any, acts ...map[string]any) {
		t.Helper()
		r := &store.InspectionRule{Priority: priority, Conditions: append([]map[string]any{mine}, conds...), Actions: acts}
		if err := st.CreateInspectionRule(ctx, r); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = st.DeleteInspectionRule(context.Background(), r.UUID) })
	}
	rule(50, []map[string]any{{"op": "eq", "args": map[string]any{"values": []any{"{plugin_data[parsed_lldp][eth0][switch_system_name]}", "switch-a.example.org"}}}},
		map[string]any{"op": "add-trait", "args": map[string]any{"name": "CUSTOM_RACK_A"}},
		map[string]any{"op": "set-attribute", "args": map[string]any{"path": "/extra/switch_port", "value": "{plugin_data[parsed_lldp][eth0][switch_port_id]}"}},
		map[string]any{"op": "set-plugin-data", "args": map[string]any{"path": "rack", "value": "a"}})

	uuid := createNode(t, map[string]any{"name": name, "driver": "fake-hardware", "deploy_interface": "direct", "inspect_interface": "agent"}, macA)
	moveTo(t, uuid, [2]string{"manage", "manageable"})
	begin := time.Now()
	postInventory := func() {
		t.Helper()
		if code, _ := call(t, "PUT", "/v1/nodes/"+uuid+"/states/provision", map[string]any{"target": "inspect"}, nil); code != 202 {
			t.Fatalf("inspect: %d", code)
		}
		waitState(t, uuid, "inspect wait", 90*time.Second)
		var lookup struct {
			Config struct {
				AgentToken string `json:"agent_token"`
			} `json:"config"`
		}
		if code, _ := call(t, "GET", "/v1/lookup?addresses="+macA, nil, &lookup); code != 200 || lookup.Config.AgentToken == "" {
			t.Fatalf("lookup: %d, token %q", code, lookup.Config.AgentToken)
		}
		body := ipaInventoryFor(t, macA, macB)
		body["agent_token"] = lookup.Config.AgentToken
		if code, _ := callAt(t, lab.APIURL, "1.84", "POST", "/v1/continue_inspection", body, nil); code != http.StatusAccepted {
			t.Fatalf("continue_inspection: %d", code)
		}
	}

	postInventory()
	waitState(t, uuid, "manageable", 90*time.Second)
	t.Logf("inspection with hooks and rules took %.1fs", time.Since(begin).Seconds())

	var inv struct {
		PluginData map[string]any `json:"plugin_data"`
	}
	if code, _ := callAt(t, lab.APIURL, "1.81", "GET", "/v1/nodes/"+uuid+"/inventory", nil, &inv); code != 200 {
		t.Fatalf("inventory: %d", code)
	}
	pd := inv.PluginData
	all, _ := pd["all_interfaces"].(map[string]any)
	eth0, _ := all["eth0"].(map[string]any)
	eth1, _ := all["eth1"].(map[string]any)
	lldp, _ := pd["parsed_lldp"].(map[string]any)
	lldp0, _ := lldp["eth0"].(map[string]any)
	root, _ := pd["root_disk"].(map[string]any)
	if eth0["pxe_enabled"] != true || eth1["pxe_enabled"] != false || lldp0["switch_port_id"] != "Ethernet1/18" ||
		lldp0["switch_chassis_id"] != "88:5a:92:ec:54:59" || pd["rack"] != "a" || root["name"] != "/dev/sda" {
		t.Errorf("plugin_data after inspection: %v", pd)
	}

	var ports struct {
		Ports []struct {
			Address    string         `json:"address"`
			PXEEnabled bool           `json:"pxe_enabled"`
			LLC        map[string]any `json:"local_link_connection"`
		} `json:"ports"`
	}
	call(t, "GET", "/v1/ports/detail?node="+uuid+"&sort_key=address", nil, &ports)
	if len(ports.Ports) != 2 || ports.Ports[0].Address != macA || !ports.Ports[0].PXEEnabled || ports.Ports[1].PXEEnabled ||
		ports.Ports[0].LLC["port_id"] != "Ethernet1/18" || ports.Ports[0].LLC["switch_info"] != "switch-a.example.org" ||
		ports.Ports[1].LLC["switch_id"] != "88:5a:92:ec:54:59" {
		t.Errorf("ports after inspection: %+v", ports.Ports)
	}

	var full struct {
		Properties map[string]any `json:"properties"`
		Extra      map[string]any `json:"extra"`
	}
	call(t, "GET", "/v1/nodes/"+uuid, nil, &full)
	caps, _ := full.Properties["capabilities"].(string)
	if full.Properties["cpu_arch"] != "x86_64" || full.Properties["memory_mb"] != float64(32768) || full.Properties["local_gb"] != float64(446) ||
		!strings.Contains(caps, "cpu_vt:true") || full.Extra["switch_port"] != "Ethernet1/18" {
		t.Errorf("node after inspection: properties %v, extra %v", full.Properties, full.Extra)
	}
	var traits struct {
		Traits []string `json:"traits"`
	}
	call(t, "GET", "/v1/nodes/"+uuid+"/traits", nil, &traits)
	if len(traits.Traits) != 1 || traits.Traits[0] != "CUSTOM_RACK_A" {
		t.Errorf("traits after inspection: %v", traits.Traits)
	}

	// A rule of higher priority writes, then fails: the inspection fails
	// with Ironic's words and none of it is kept.
	rule(90, nil,
		map[string]any{"op": "set-attribute", "args": map[string]any{"path": "/extra/switch_port", "value": "overwritten"}},
		map[string]any{"op": "fail", "args": map[string]any{"msg": "rack a is closed"}})
	postInventory()
	n := waitState(t, uuid, "inspect failed", 90*time.Second)
	if n.LastError == nil || !strings.Contains(*n.LastError, "Failed to finish inspection: Failed to inspect hardware. Reason: rack a is closed") {
		t.Errorf("last_error after a failing rule: %v", n.LastError)
	}
	call(t, "GET", "/v1/nodes/"+uuid, nil, &full)
	if full.Extra["switch_port"] != "Ethernet1/18" {
		t.Errorf("a failed inspection wrote extra: %v", full.Extra)
	}
	moveTo(t, uuid, [2]string{"manage", "manageable"})
}

// ipaInventoryFor is inspection/hooks' fixture (IPA's documented
// inventory format, with LLDP) as continue_inspection's body, its two NICs
// given this test's MAC addresses.
func ipaInventoryFor(t *testing.T, macA, macB string) map[string]any {
	t.Helper()
	b, err := os.ReadFile("../inspection/hooks/testdata/ipa-inventory-lldp.json")
	if err != nil {
		t.Fatal(err)
	}
	s := strings.NewReplacer("52:54:00:12:34:56", macA, "52-54-00-12-34-56", strings.ReplaceAll(macA, ":", "-"),
		"52:54:00:12:34:57", macB).Replace(string(b))
	var body map[string]any
	if err := json.Unmarshal([]byte(s), &body); err != nil {
		t.Fatal(err)
	}
	delete(body, "_comment")
	return body
}
