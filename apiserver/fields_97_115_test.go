package apiserver

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/ironflow/ironflow/store"
)

// The field, filter and header versions of 1.97 to 1.115
// (docs/api-versions.md). The table walks of fields_test.go cover each
// field's gate, view and PATCH; these tests cover what the walks do not:
// create below the version, limits, defaults, filters, and the rules that
// come with a field.

// TestPortFieldsCreateAndLimits: description (1.97), vendor (1.100),
// category (1.101) and available_for_dynamic_portgroup (1.111) are 406 in
// a create below their version, set from it, limited to Ironic's lengths,
// and the last is true by default and takes only JSON booleans.
func TestPortFieldsCreateAndLimits(t *testing.T) {
	serveUpTo(t, v111DynamicPortgroup)
	e := newEnv(t)
	node := e.createNode(map[string]any{"driver": "fake-hardware"})["uuid"]
	mac := 0
	create := func(version string, extra map[string]any) resp {
		mac++
		body := map[string]any{"address": fmt.Sprintf("52:54:00:97:00:%02x", mac), "node_uuid": node}
		for k, v := range extra {
			body[k] = v
		}
		return e.do("POST", "/v1/ports", version, body)
	}
	for _, c := range []struct {
		field string
		since int
		value any
		limit int
	}{
		{"description", v97PortDescription, "uplink to tor-1", 255},
		{"vendor", v100PortVendor, "mellanox", 32},
		{"category", v101PortCategory, "storage", 80},
		{"available_for_dynamic_portgroup", v111DynamicPortgroup, false, 0},
	} {
		below, at := versionString(c.since-1), versionString(c.since)
		if r := create(below, map[string]any{c.field: c.value}); r.status != http.StatusNotAcceptable {
			t.Errorf("create with %s at %s: %d %s, want 406", c.field, below, r.status, r.body)
		}
		r := create(at, map[string]any{c.field: c.value})
		if r.status != http.StatusCreated || r.json(t)[c.field] != c.value {
			t.Errorf("create with %s at %s: %d %s", c.field, at, r.status, r.body)
			continue
		}
		uuid := r.json(t)["uuid"].(string)
		if got := e.do("GET", "/v1/ports/"+uuid, below, nil).json(t); got[c.field] != nil {
			t.Errorf("%s shown at %s: %v", c.field, below, got[c.field])
		}
		if r := e.do("GET", "/v1/ports/"+uuid+"?fields="+c.field, below, nil); r.status != http.StatusNotAcceptable {
			t.Errorf("?fields=%s at %s: %d %s, want 406", c.field, below, r.status, r.body)
		}
		if c.limit > 0 {
			long := strings.Repeat("x", c.limit+1)
			if r := create(at, map[string]any{c.field: long}); r.status != http.StatusBadRequest || !strings.Contains(r.faultstring(t), "is too long") {
				t.Errorf("%s of %d characters: %d %s, want 400 too long", c.field, c.limit+1, r.status, r.body)
			}
			if r := create(at, map[string]any{c.field: strings.Repeat("x", c.limit)}); r.status != http.StatusCreated {
				t.Errorf("%s of %d characters: %d %s, want 201", c.field, c.limit, r.status, r.body)
			}
		}
	}
	r := create("1.111", nil)
	if r.json(t)["available_for_dynamic_portgroup"] != true {
		t.Errorf("available_for_dynamic_portgroup by default: %s, want true", r.body)
	}
	if r := create("1.111", map[string]any{"available_for_dynamic_portgroup": "false"}); r.status != http.StatusBadRequest ||
		r.faultstring(t) != "Schema error for port: 'false' is not of type 'boolean'" {
		t.Errorf("available_for_dynamic_portgroup as a string: %d %s, want 400", r.status, r.body)
	}
}

// TestPortDescriptionContains: ?description_contains= selects the ports
// whose description contains the text (with the field, 1.97).
func TestPortDescriptionContains(t *testing.T) {
	serveUpTo(t, v97PortDescription)
	e := newEnv(t)
	node := e.createNode(map[string]any{"driver": "fake-hardware"})["uuid"]
	for i, d := range []string{"uplink to tor-1", "uplink to tor-2", "bmc"} {
		if r := e.do("POST", "/v1/ports", "1.97", map[string]any{"address": fmt.Sprintf("52:54:00:97:01:%02x", i), "node_uuid": node, "description": d}); r.status != http.StatusCreated {
			t.Fatalf("create: %d %s", r.status, r.body)
		}
	}
	r := e.do("GET", "/v1/ports?fields=description&description_contains=tor-", "1.97", nil)
	if got := listField(t, r, "ports", "description"); got != "uplink to tor-1,uplink to tor-2" {
		t.Errorf("description_contains=tor-: %s", r.body)
	}
	if r := e.do("GET", "/v1/ports?description_contains=tor-", "1.96", nil); r.status != http.StatusNotAcceptable {
		t.Errorf("description_contains at 1.96: %d %s, want 406", r.status, r.body)
	}
}

// TestConductorGroupsFilter: ?conductor_groups=a,b (1.99) lists the ports
// and port groups of nodes in those conductor groups (case-insensitive, as
// node groups), 406 below 1.99; a port filter that names a node, group or
// address too is Ironic's 400, so is a port group filter with another.
func TestConductorGroupsFilter(t *testing.T) {
	serveUpTo(t, v99ConductorGroupsFilter)
	e := newEnv(t)
	groups := map[string]string{"rack-a": "52:54:00:99:00:01", "rack-b": "52:54:00:99:00:02", "": "52:54:00:99:00:03"}
	nodes := map[string]string{}
	for cg, mac := range groups {
		n := e.createNode(map[string]any{"driver": "fake-hardware", "conductor_group": cg})["uuid"].(string)
		nodes[cg] = n
		if r := e.do("POST", "/v1/ports", "1.99", map[string]any{"address": mac, "node_uuid": n}); r.status != http.StatusCreated {
			t.Fatalf("create port: %d %s", r.status, r.body)
		}
		if r := e.do("POST", "/v1/portgroups", "1.99", map[string]any{"address": strings.Replace(mac, ":99:", ":9a:", 1), "node_uuid": n}); r.status != http.StatusCreated {
			t.Fatalf("create portgroup: %d %s", r.status, r.body)
		}
	}
	r := e.do("GET", "/v1/ports?conductor_groups=RACK-A,rack-b&sort_key=address", "1.99", nil)
	if got := listField(t, r, "ports", "address"); got != "52:54:00:99:00:01,52:54:00:99:00:02" {
		t.Errorf("ports in rack-a, rack-b: %s", r.body)
	}
	r = e.do("GET", "/v1/portgroups?conductor_groups=rack-b&sort_key=address", "1.99", nil)
	if got := listField(t, r, "portgroups", "address"); got != "52:54:00:9a:00:02" {
		t.Errorf("portgroups in rack-b: %s", r.body)
	}
	for _, path := range []string{"/v1/ports?conductor_groups=rack-a", "/v1/portgroups?conductor_groups=rack-a"} {
		if r := e.do("GET", path, "1.98", nil); r.status != http.StatusNotAcceptable {
			t.Errorf("%s at 1.98: %d %s, want 406", path, r.status, r.body)
		}
	}
	r = e.do("GET", "/v1/ports?conductor_groups=rack-a&node="+nodes["rack-a"], "1.99", nil)
	if want := "Filtering by conductor_groups cannot be combined with node_ident, portgroup_ident, or node address filters."; r.status != http.StatusBadRequest || r.faultstring(t) != want {
		t.Errorf("ports by conductor_groups and node: %d %s, want 400 %q", r.status, r.body, want)
	}
	r = e.do("GET", "/v1/nodes/"+nodes["rack-a"]+"/ports?conductor_groups=rack-a", "1.99", nil)
	if r.status != http.StatusBadRequest {
		t.Errorf("a node's ports by conductor_groups: %d %s, want 400", r.status, r.body)
	}
	r = e.do("GET", "/v1/portgroups?conductor_groups=rack-a&address=52:54:00:9a:00:01", "1.99", nil)
	if want := "Filtering by node, address, or shard simultaneously is not supported."; r.status != http.StatusBadRequest || r.faultstring(t) != want {
		t.Errorf("portgroups by conductor_groups and address: %d %s, want 400 %q", r.status, r.body, want)
	}
}

// TestPortgroupShardFilter: ?shard=a,b on port groups (1.106).
func TestPortgroupShardFilter(t *testing.T) {
	serveUpTo(t, v106PortgroupShard)
	e := newEnv(t)
	for i, sh := range []string{"s1", "s2", "s3"} {
		n := e.createNode(map[string]any{"driver": "fake-hardware"})["uuid"].(string)
		if r := e.do("PATCH", "/v1/nodes/"+n, "1.82", []map[string]any{{"op": "add", "path": "/shard", "value": sh}}); r.status != http.StatusOK {
			t.Fatalf("shard: %d %s", r.status, r.body)
		}
		if r := e.do("POST", "/v1/portgroups", "1.106", map[string]any{"name": "pg-" + sh, "node_uuid": n, "address": fmt.Sprintf("52:54:00:a6:00:%02x", i)}); r.status != http.StatusCreated {
			t.Fatalf("create portgroup: %d %s", r.status, r.body)
		}
	}
	r := e.do("GET", "/v1/portgroups?shard=s1,s3&sort_key=name", "1.106", nil)
	if got := listField(t, r, "portgroups", "name"); got != "pg-s1,pg-s3" {
		t.Errorf("portgroups in s1, s3: %s", r.body)
	}
	if r := e.do("GET", "/v1/portgroups?shard=s1", "1.105", nil); r.status != http.StatusNotAcceptable {
		t.Errorf("shard at 1.105: %d %s, want 406", r.status, r.body)
	}
}

// TestPortgroupPhysicalNetworkAndCategory: a group's physical_network
// (1.102) becomes its ports' when PATCHed, a port in a group may not change
// its own from 1.102, and category (1.103) is stored; dynamic_portgroup
// (1.111) is shown false and may not be set.
func TestPortgroupPhysicalNetworkAndCategory(t *testing.T) {
	serveUpTo(t, v111DynamicPortgroup)
	e := newEnv(t)
	node := e.createNode(map[string]any{"driver": "fake-hardware"})["uuid"]
	if r := e.do("POST", "/v1/portgroups", "1.101", map[string]any{"node_uuid": node, "physical_network": "physnet1"}); r.status != http.StatusNotAcceptable {
		t.Errorf("create with physical_network at 1.101: %d %s, want 406", r.status, r.body)
	}
	if r := e.do("POST", "/v1/portgroups", "1.102", map[string]any{"node_uuid": node, "category": "storage"}); r.status != http.StatusNotAcceptable {
		t.Errorf("create with category at 1.102: %d %s, want 406", r.status, r.body)
	}
	if r := e.do("POST", "/v1/portgroups", "1.111", map[string]any{"node_uuid": node, "dynamic_portgroup": true}); r.status != http.StatusBadRequest {
		t.Errorf("create with dynamic_portgroup: %d %s, want 400", r.status, r.body)
	}
	r := e.do("POST", "/v1/portgroups", "1.111", map[string]any{"node_uuid": node, "name": "bond0", "physical_network": "physnet1", "category": "storage"})
	if r.status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	g := r.json(t)
	if g["physical_network"] != "physnet1" || g["category"] != "storage" || g["dynamic_portgroup"] != false {
		t.Errorf("created %s", r.body)
	}
	port := e.do("POST", "/v1/ports", "1.111", map[string]any{"address": "52:54:00:a2:00:01", "node_uuid": node,
		"portgroup_uuid": g["uuid"], "physical_network": "physnet1"}).json(t)["uuid"].(string)
	r = e.do("PATCH", "/v1/portgroups/bond0", "1.102", []map[string]any{{"op": "replace", "path": "/physical_network", "value": "physnet2"}})
	if r.status != http.StatusOK || r.json(t)["physical_network"] != "physnet2" {
		t.Fatalf("PATCH the group's physical_network: %d %s", r.status, r.body)
	}
	if got := e.do("GET", "/v1/ports/"+port, "1.102", nil).json(t)["physical_network"]; got != "physnet2" {
		t.Errorf("member port's physical_network after the group's PATCH: %v, want physnet2", got)
	}
	r = e.do("PATCH", "/v1/ports/"+port, "1.102", []map[string]any{{"op": "replace", "path": "/physical_network", "value": "physnet3"}})
	if want := "physical_network cannot be changed while the port belongs to a portgroup."; r.status != http.StatusBadRequest || r.faultstring(t) != want {
		t.Errorf("PATCH a member port's physical_network at 1.102: %d %s, want 400 %q", r.status, r.body, want)
	}
	if got := e.do("GET", "/v1/ports/"+port, "1.102", nil).json(t)["physical_network"]; got != "physnet2" {
		t.Errorf("refused PATCH changed the port: %v", got)
	}
	if r := e.do("PATCH", "/v1/ports/"+port, "1.101", []map[string]any{{"op": "replace", "path": "/physical_network", "value": "physnet3"}}); r.status != http.StatusOK {
		t.Errorf("PATCH a member port's physical_network at 1.101: %d %s, want 200", r.status, r.body)
	}
	if r := e.do("PATCH", "/v1/portgroups/bond0", "1.111", []map[string]any{{"op": "replace", "path": "/dynamic_portgroup", "value": true}}); r.status != http.StatusBadRequest {
		t.Errorf("PATCH dynamic_portgroup: %d %s, want 400", r.status, r.body)
	}
	shown := e.do("GET", "/v1/portgroups/bond0", "1.101", nil).json(t)
	for _, k := range []string{"physical_network", "category", "dynamic_portgroup"} {
		if _, ok := shown[k]; ok {
			t.Errorf("%s shown at 1.101", k)
		}
	}
}

// TestOVNVtepKeysRemovedAt105: the OVN VTEP keys of local_link_connection
// are taken from 1.90 to 1.104, 406 from 1.105; a port that has them shows
// its local_link_connection as {} from 1.105, as below 1.90.
func TestOVNVtepKeysRemovedAt105(t *testing.T) {
	serveUpTo(t, v105RemoveOVNVtep)
	e := newEnv(t)
	node := e.createNode(map[string]any{"driver": "fake-hardware"})["uuid"]
	vtep := map[string]any{"port_id": "p1", "vtep-logical-switch": "ls1", "vtep-physical-switch": "ps1"}
	if r := e.do("POST", "/v1/ports", "1.105", map[string]any{"address": "52:54:00:a5:00:01", "node_uuid": node, "local_link_connection": vtep}); r.status != http.StatusNotAcceptable {
		t.Errorf("vtep keys at 1.105: %d %s, want 406", r.status, r.body)
	}
	r := e.do("POST", "/v1/ports", "1.104", map[string]any{"address": "52:54:00:a5:00:02", "node_uuid": node, "local_link_connection": vtep})
	if r.status != http.StatusCreated {
		t.Fatalf("vtep keys at 1.104: %d %s", r.status, r.body)
	}
	uuid := r.json(t)["uuid"].(string)
	for version, want := range map[string]string{"1.89": "map[]", "1.104": fmt.Sprint(vtep), "1.105": "map[]"} {
		if got := fmt.Sprint(e.do("GET", "/v1/ports/"+uuid, version, nil).json(t)["local_link_connection"]); got != want {
			t.Errorf("local_link_connection at %s: %s, want %s", version, got, want)
		}
	}
	r = e.do("PATCH", "/v1/ports/"+uuid, "1.105", []map[string]any{{"op": "add", "path": "/local_link_connection/vtep-logical-switch", "value": "ls2"}})
	if r.status != http.StatusNotAcceptable {
		t.Errorf("PATCH a vtep key at 1.105: %d %s, want 406", r.status, r.body)
	}
	r = e.do("PATCH", "/v1/ports/"+uuid, "1.105", []map[string]any{{"op": "add", "path": "/local_link_connection/switch_id", "value": "aa:bb:cc:dd:ee:ff"}})
	if r.status != http.StatusOK {
		t.Errorf("PATCH another key of a port that has vtep keys at 1.105: %d %s, want 200", r.status, r.body)
	}
}

// TestXOpenStackRequestID: every answer carries X-OpenStack-Request-Id,
// the same id as Openstack-Request-Id, whatever the version (Ironic's
// request-id middleware; 1.107 announces it), errors and the root too.
func TestXOpenStackRequestID(t *testing.T) {
	serveUpTo(t, v107XOpenStackRequestID)
	e := newEnv(t)
	for _, c := range []struct{ path, version string }{
		{"/", ""}, {"/v1", "1.1"}, {"/v1/nodes", "1.107"}, {"/v1/nodes/nope", "1.107"}, {"/v1/nodes", "1.999"},
	} {
		r := e.do("GET", c.path, c.version, nil)
		id, x := r.header.Get("Openstack-Request-Id"), r.header.Get("X-Openstack-Request-Id")
		if !strings.HasPrefix(id, "req-") || x != id {
			t.Errorf("GET %s at %q (%d): Openstack-Request-Id %q, X-OpenStack-Request-Id %q", c.path, c.version, r.status, id, x)
		}
	}
}

// TestServiceDisableRamdiskAt108: disable_ramdisk with the service verb is
// 406 below 1.108 with Ironic's message; clean keeps its 1.70.
func TestServiceDisableRamdiskAt108(t *testing.T) {
	serveUpTo(t, v108ServiceDisableRamdisk)
	e := newEnv(t)
	uuid := e.createNode(map[string]any{"driver": "fake-hardware"})["uuid"].(string)
	e.setState(uuid, "active")
	body := map[string]any{"target": "service", "disable_ramdisk": true, "service_steps": []map[string]any{{"interface": "bios", "step": "apply_configuration", "args": map[string]any{"settings": []any{}}}}}
	r := e.do("PUT", "/v1/nodes/"+uuid+"/states/provision", "1.107", body)
	if want := "disable_ramdisk is not acceptable in this API version"; r.status != http.StatusNotAcceptable || r.faultstring(t) != want {
		t.Errorf("service with disable_ramdisk at 1.107: %d %s, want 406 %q", r.status, r.body, want)
	}
	if len(e.eng.provisions) != 0 {
		t.Errorf("a refused request started %d workflows", len(e.eng.provisions))
	}
	if r := e.do("PUT", "/v1/nodes/"+uuid+"/states/provision", "1.108", body); r.status != http.StatusAccepted {
		t.Errorf("service with disable_ramdisk at 1.108: %d %s, want 202", r.status, r.body)
	}
}

// TestInstanceName: instance_name (1.104) is set by create and PATCH
// (1 to 255 characters), filters lists, and is copied from
// instance_info's display_name by a PATCH of instance_info when unset.
func TestInstanceName(t *testing.T) {
	serveUpTo(t, v104NodeInstanceName)
	e := newEnv(t)
	if r := e.do("POST", "/v1/nodes", "1.103", map[string]any{"driver": "fake-hardware", "instance_name": "web-1"}); r.status != http.StatusNotAcceptable {
		t.Errorf("create with instance_name at 1.103: %d %s, want 406", r.status, r.body)
	}
	if r := e.do("POST", "/v1/nodes", "1.104", map[string]any{"driver": "fake-hardware", "instance_name": ""}); r.status != http.StatusBadRequest {
		t.Errorf("create with an empty instance_name: %d %s, want 400", r.status, r.body)
	}
	r := e.do("POST", "/v1/nodes", "1.104", map[string]any{"driver": "fake-hardware", "name": "n1", "instance_name": "web-1"})
	if r.status != http.StatusCreated || r.json(t)["instance_name"] != "web-1" {
		t.Fatalf("create with instance_name: %d %s", r.status, r.body)
	}
	e.createNode(map[string]any{"driver": "fake-hardware", "name": "n2"})
	r = e.do("GET", "/v1/nodes?instance_name=web-1&fields=name", "1.104", nil)
	if got := listField(t, r, "nodes", "name"); got != "n1" {
		t.Errorf("nodes with instance_name web-1: %s", r.body)
	}
	if r := e.do("GET", "/v1/nodes?instance_name=web-1", "1.103", nil); r.status != http.StatusNotAcceptable {
		t.Errorf("instance_name filter at 1.103: %d %s, want 406", r.status, r.body)
	}
	// display_name fills an unset instance_name, at any version.
	r = e.do("PATCH", "/v1/nodes/n2", "1.78", []map[string]any{{"op": "add", "path": "/instance_info/display_name", "value": "db-1"}})
	if r.status != http.StatusOK {
		t.Fatalf("PATCH display_name: %d %s", r.status, r.body)
	}
	if got := e.do("GET", "/v1/nodes/n2", "1.104", nil).json(t)["instance_name"]; got != "db-1" {
		t.Errorf("instance_name after display_name: %v, want db-1", got)
	}
	// It does not replace a name that is set.
	r = e.do("PATCH", "/v1/nodes/n1", "1.104", []map[string]any{{"op": "add", "path": "/instance_info/display_name", "value": "other"}})
	if r.status != http.StatusOK || r.json(t)["instance_name"] != "web-1" {
		t.Errorf("display_name over a set instance_name: %d %s", r.status, r.body)
	}
}

// TestNodeHistoryProjectAndState: the detailed history shows project from
// 1.113 and state, target_provision_state, duration_seconds from 1.115;
// a provision verb's event records the state the node left and the
// seconds it spent there.
func TestNodeHistoryProjectAndState(t *testing.T) {
	serveUpTo(t, v115NodeHistoryFields)
	e := newEnv(t)
	uuid := e.createNode(map[string]any{"driver": "fake-hardware"})["uuid"].(string)
	ctx := context.Background()
	if err := e.st.AddHistory(ctx, uuid, store.HistoryEvent{EventType: "test", Event: "by a project", Project: "p-42"}); err != nil {
		t.Fatal(err)
	}
	if r := e.do("PUT", "/v1/nodes/"+uuid+"/states/provision", "1.78", map[string]any{"target": "manage"}); r.status != http.StatusAccepted {
		t.Fatalf("manage: %d %s", r.status, r.body)
	}
	list := func(version string) []any {
		r := e.do("GET", "/v1/nodes/"+uuid+"/history?detail=True", version, nil)
		if r.status != http.StatusOK {
			t.Fatalf("history at %s: %d %s", version, r.status, r.body)
		}
		return r.json(t)["history"].([]any)
	}
	has := func(ev any, k string) bool { _, ok := ev.(map[string]any)[k]; return ok }
	for _, ev := range list("1.112") {
		for _, k := range []string{"project", "state", "target_provision_state", "duration_seconds"} {
			if has(ev, k) {
				t.Errorf("%s shown at 1.112: %v", k, ev)
			}
		}
	}
	for _, ev := range list("1.113") {
		if !has(ev, "project") || has(ev, "state") {
			t.Errorf("at 1.113: %v, want project and not state", ev)
		}
	}
	events := list("1.115")
	if len(events) != 2 {
		t.Fatalf("history %v, want 2 events", events)
	}
	first, second := events[0].(map[string]any), events[1].(map[string]any)
	if first["project"] != "p-42" || first["state"] != "enroll" || first["target_provision_state"] != nil {
		t.Errorf("first event %v, want project p-42 in enroll", first)
	}
	if second["project"] != nil || second["state"] != "enroll" {
		t.Errorf("manage's event %v, want the state it left (enroll), no project", second)
	}
	if d, ok := second["duration_seconds"].(float64); ok && d < 0 {
		t.Errorf("duration_seconds %v", second["duration_seconds"])
	}
	if r := e.do("GET", "/v1/nodes/"+uuid+"/history", "1.115", nil); strings.Contains(string(r.body), "duration_seconds") {
		t.Errorf("history without detail shows the detail fields: %s", r.body)
	}
}

// TestFirmwareIdentityFields: vendor, model and serial_number of firmware
// components from 1.114, in the default fields too; below it ?fields= that
// names them is Ironic's 400.
func TestFirmwareIdentityFields(t *testing.T) {
	serveUpTo(t, v114FirmwareIdentity)
	e := newEnv(t)
	uuid := e.createNode(map[string]any{"driver": "fake-hardware"})["uuid"].(string)
	err := e.st.SyncFirmware(context.Background(), uuid, []store.FirmwareReading{
		{Component: "bmc", Version: "5.1", Model: "iLO 5"},
		{Component: "nic:NIC.1", Version: "7.4", Vendor: "Contoso", Model: "X710", SerialNumber: "SN1"},
	})
	if err != nil {
		t.Fatal(err)
	}
	get := func(version, query string) resp {
		return e.do("GET", "/v1/nodes/"+uuid+"/firmware"+query, version, nil)
	}
	r := get("1.114", "")
	comps := r.json(t)["firmware"].([]any)
	if len(comps) != 2 {
		t.Fatalf("firmware %s", r.body)
	}
	want := []string{
		"map[component:bmc current_version:5.1 initial_version:5.1 last_version_flashed:<nil> model:iLO 5 serial_number:<nil> vendor:<nil>]",
		"map[component:nic:NIC.1 current_version:7.4 initial_version:7.4 last_version_flashed:<nil> model:X710 serial_number:SN1 vendor:Contoso]",
	}
	for i, c := range comps {
		if got := fmt.Sprint(c); got != want[i] {
			t.Errorf("component %d at 1.114: %s, want %s", i, got, want[i])
		}
	}
	if got := fmt.Sprint(get("1.113", "").json(t)["firmware"].([]any)[1]); strings.Contains(got, "vendor") {
		t.Errorf("identity shown at 1.113: %s", got)
	}
	if got := fmt.Sprint(get("1.113", "?detail=True").json(t)["firmware"].([]any)[1]); strings.Contains(got, "vendor") {
		t.Errorf("identity shown in detail at 1.113: %s", got)
	}
	r = get("1.113", "?fields=component,vendor,model")
	if want := "Fields model, vendor are not allowed in this API version. They require at least API version 1.114."; r.status != http.StatusBadRequest || r.faultstring(t) != want {
		t.Errorf("fields with identity at 1.113: %d %s, want 400 %q", r.status, r.body, want)
	}
	if got := fmt.Sprint(get("1.114", "?fields=serial_number").json(t)["firmware"].([]any)[1]); got != "map[serial_number:SN1]" {
		t.Errorf("fields=serial_number at 1.114: %s", got)
	}
}

// TestPatchEscapedKeysAtEveryVersion: 1.98 lets Ironic's
// patch_validate_allowed_fields read a field name with RFC 6901 escapes,
// but the path pattern of Ironic's PATCH schema ('^(/[\\w-]+)+$', which
// ironflow's PATCHes all apply) admits no "~" at any version: a path with
// "~1" is the same 400 below and at 1.98, and there is nothing to gate.
func TestPatchEscapedKeysAtEveryVersion(t *testing.T) {
	serveUpTo(t, v98PatchEscapedKeys)
	e := newEnv(t)
	uuid := e.createNode(map[string]any{"driver": "fake-hardware"})["uuid"].(string)
	want := `Schema error for patch: '/extra/a~1b' does not match '^(/[\\w-]+)+$'`
	for _, v := range []string{"1.97", "1.98"} {
		r := e.do("PATCH", "/v1/nodes/"+uuid, v, []map[string]any{{"op": "add", "path": "/extra/a~1b", "value": 1}})
		if r.status != http.StatusBadRequest || r.faultstring(t) != want {
			t.Errorf("PATCH with ~1 at %s: %d %s, want 400 %q", v, r.status, r.body, want)
		}
	}
}

// listField joins the field of each item of a list answer.
func listField(t *testing.T, r resp, collection, field string) string {
	t.Helper()
	if r.status != http.StatusOK {
		t.Fatalf("list %s: %d %s", collection, r.status, r.body)
	}
	var out []string
	for _, it := range r.json(t)[collection].([]any) {
		out = append(out, fmt.Sprint(it.(map[string]any)[field]))
	}
	return strings.Join(out, ",")
}

// TestRunbookTraits: from 1.112 a runbook has a description, any
// unreserved name, and traits set through /v1/runbooks/{rb}/traits (404
// below 1.112); a clean by runbook needs a node with one of them, where
// below 1.112 it needs a node trait of the runbook's name.
func TestRunbookTraits(t *testing.T) {
	serveUpTo(t, v112RunbookTraits)
	e := newEnv(t)
	steps := []map[string]any{{"interface": "bios", "step": "apply_configuration", "args": map[string]any{"settings": []any{}}, "order": 1}}
	if r := e.do("POST", "/v1/runbooks", "1.111", map[string]any{"name": "fw-update", "steps": steps}); r.status != http.StatusBadRequest ||
		r.faultstring(t) != "Schema error for runbook: 'fw-update' is not valid under any of the given schemas" {
		t.Errorf("a non-trait name at 1.111: %d %s, want 400", r.status, r.body)
	}
	if r := e.do("POST", "/v1/runbooks", "1.112", map[string]any{"name": "fw update", "steps": steps}); r.status != http.StatusBadRequest {
		t.Errorf("a name with a space at 1.112: %d %s, want 400", r.status, r.body)
	}
	if r := e.do("POST", "/v1/runbooks", "1.112", map[string]any{"name": "fw-update", "steps": steps, "traits": []string{"CUSTOM_FW"}}); r.status != http.StatusBadRequest {
		t.Errorf("traits in a create: %d %s, want 400", r.status, r.body)
	}
	r := e.do("POST", "/v1/runbooks", "1.112", map[string]any{"name": "fw-update", "description": "BIOS settings", "steps": steps})
	if r.status != http.StatusCreated {
		t.Fatalf("create at 1.112: %d %s", r.status, r.body)
	}
	rb := r.json(t)
	if rb["description"] != "BIOS settings" || fmt.Sprint(rb["traits"]) != "[]" {
		t.Errorf("created %s", r.body)
	}
	if shown := e.do("GET", "/v1/runbooks/fw-update", "1.111", nil).json(t); shown["traits"] != nil || shown["description"] != nil {
		t.Errorf("traits or description shown at 1.111: %v", shown)
	}
	if r := e.do("GET", "/v1/runbooks/fw-update/traits", "1.111", nil); r.status != http.StatusNotFound {
		t.Errorf("traits at 1.111: %d %s, want 404", r.status, r.body)
	}

	put := func(path string, body any) resp {
		return e.do("PUT", "/v1/runbooks/fw-update/traits"+path, "1.112", body)
	}
	if r := put("", map[string]any{}); r.status != http.StatusBadRequest || r.faultstring(t) != runbookTraitsPutUsage {
		t.Errorf("PUT without traits: %d %s", r.status, r.body)
	}
	if r := put("", map[string]any{"traits": []string{"fw"}}); r.status != http.StatusBadRequest ||
		r.faultstring(t) != "Schema error for body: 'fw' is not valid under any of the given schemas" {
		t.Errorf("PUT of a bad trait: %d %s", r.status, r.body)
	}
	if r := put("", map[string]any{"traits": []string{"CUSTOM_A", "CUSTOM_B", "CUSTOM_A"}}); r.status != http.StatusNoContent {
		t.Errorf("PUT traits: %d %s", r.status, r.body)
	}
	r = put("/CUSTOM_C", nil)
	if r.status != http.StatusNoContent || !strings.HasSuffix(r.header.Get("Location"), "/v1/runbooks/fw-update/traits/CUSTOM_C") {
		t.Errorf("PUT one trait: %d %s, Location %q", r.status, r.body, r.header.Get("Location"))
	}
	if r := put("/CUSTOM_D", map[string]any{"x": 1}); r.status != http.StatusBadRequest || r.faultstring(t) != "No body should be provided when adding a trait" {
		t.Errorf("PUT one trait with a body: %d %s", r.status, r.body)
	}
	if r := e.do("DELETE", "/v1/runbooks/fw-update/traits/CUSTOM_B", "1.112", nil); r.status != http.StatusNoContent {
		t.Errorf("DELETE a trait: %d %s", r.status, r.body)
	}
	if r := e.do("DELETE", "/v1/runbooks/fw-update/traits/CUSTOM_NOT_THERE", "1.112", nil); r.status != http.StatusNoContent {
		t.Errorf("DELETE a trait the runbook lacks: %d %s, want 204", r.status, r.body)
	}
	if got := fmt.Sprint(e.do("GET", "/v1/runbooks/fw-update/traits", "1.112", nil).json(t)["traits"]); got != "[CUSTOM_A CUSTOM_C]" {
		t.Errorf("traits %s, want [CUSTOM_A CUSTOM_C]", got)
	}
	if r := e.do("PATCH", "/v1/runbooks/fw-update", "1.112", []map[string]any{{"op": "add", "path": "/traits/-", "value": "CUSTOM_X"}}); r.status != http.StatusBadRequest {
		t.Errorf("PATCH of traits: %d %s, want 400", r.status, r.body)
	}

	node := e.createNode(map[string]any{"driver": "fake-hardware"})["uuid"].(string)
	e.setState(node, "manageable")
	clean := func(version string) resp {
		return e.do("PUT", "/v1/nodes/"+node+"/states/provision", version, map[string]any{"target": "clean", "runbook": "fw-update"})
	}
	r = clean("1.112")
	want := "This runbook has not been approved for use on this node " + node + ". The node does not have any of the runbook's traits ['CUSTOM_A', 'CUSTOM_C']. Please ask an administrator to add a matching trait to your node."
	if r.status != http.StatusBadRequest || r.faultstring(t) != want {
		t.Errorf("clean by runbook without a matching trait: %d %s, want 400 %q", r.status, r.body, want)
	}
	if r := e.do("PUT", "/v1/nodes/"+node+"/traits/CUSTOM_C", "1.37", nil); r.status != http.StatusNoContent {
		t.Fatalf("node trait: %d %s", r.status, r.body)
	}
	if r := clean("1.111"); r.status != http.StatusBadRequest {
		t.Errorf("clean at 1.111, the node has no trait of the runbook's name: %d %s, want 400", r.status, r.body)
	}
	if r := clean("1.112"); r.status != http.StatusAccepted {
		t.Errorf("clean at 1.112 with a matching trait: %d %s, want 202", r.status, r.body)
	}
	e.setState(node, "manageable")
	if r := e.do("DELETE", "/v1/runbooks/fw-update/traits", "1.112", nil); r.status != http.StatusNoContent {
		t.Errorf("DELETE all traits: %d %s", r.status, r.body)
	}
	want = "Runbook " + rb["uuid"].(string) + " has no traits configured. Please ask an administrator to add traits to the runbook."
	if r := clean("1.112"); r.status != http.StatusBadRequest || r.faultstring(t) != want {
		t.Errorf("clean by a runbook without traits: %d %s, want 400 %q", r.status, r.body, want)
	}
}
