package apiserver

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
)

// createPortgroup makes a port group through the API at the latest version.
func (e *env) createPortgroup(body map[string]any) map[string]any {
	e.t.Helper()
	r := e.do("POST", "/v1/portgroups", maxVersion(), body)
	if r.status != http.StatusCreated {
		e.t.Fatalf("create portgroup: %d %s", r.status, r.body)
	}
	return r.json(e.t)
}

func (e *env) createPort(body map[string]any) map[string]any {
	e.t.Helper()
	r := e.do("POST", "/v1/ports", maxVersion(), body)
	if r.status != http.StatusCreated {
		e.t.Fatalf("create port: %d %s", r.status, r.body)
	}
	return r.json(e.t)
}

func TestEveryPortgroupFieldRoundTrips(t *testing.T) {
	serveFieldsOf(t, portgroupFields)
	e := newEnv(t)
	node := e.createNode(map[string]any{"driver": "fake-hardware"})
	g := e.createPortgroup(map[string]any{"node_uuid": node["uuid"], "address": "52:54:00:cc:00:01", "name": "bond0"})
	roundTrip(t, e, portgroupResource, "portgroups", g["uuid"].(string))
}

func TestPortgroupCRUD(t *testing.T) {
	e := newEnv(t)
	node := e.createNode(map[string]any{"driver": "fake-hardware", "name": "pg-node"})
	nodeUUID := node["uuid"].(string)

	r := e.do("POST", "/v1/portgroups", maxVersion(), map[string]any{
		"node_uuid": nodeUUID, "address": "52:54:00:CC:00:01", "name": "bond0",
		"mode": "802.3ad", "properties": map[string]any{"miimon": "100"},
	})
	if r.status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	g := r.json(t)
	uuid := g["uuid"].(string)
	if loc := r.header.Get("Location"); !strings.HasSuffix(loc, "/v1/portgroups/"+uuid) {
		t.Errorf("Location %q", loc)
	}
	if g["address"] != "52:54:00:cc:00:01" || g["mode"] != "802.3ad" || g["standalone_ports_supported"] != true ||
		g["node_uuid"] != nodeUUID || g["name"] != "bond0" {
		t.Errorf("created %v", g)
	}
	// The fields of the served maximum: 1.102 physical_network, 1.103
	// category, 1.111 dynamic_portgroup.
	keys := []string{"address", "created_at", "extra", "internal_info", "links", "mode", "name", "node_uuid", "ports", "properties", "standalone_ports_supported", "updated_at", "uuid"}
	for _, f := range []struct {
		since int
		key   string
	}{{v102PortgroupPhysnet, "physical_network"}, {v103PortgroupCategory, "category"}, {v111DynamicPortgroup, "dynamic_portgroup"}} {
		if servedMaxMinor >= f.since {
			keys = append(keys, f.key)
		}
	}
	slices.Sort(keys)
	want := strings.Join(keys, " ")
	if got := strings.Join(sortedKeys(g), " "); got != want {
		t.Errorf("keys at %s:\n got %s\nwant %s", maxVersion(), got, want)
	}
	// mode and properties are hidden below 1.26, the resource below 1.23.
	if old := e.do("GET", "/v1/portgroups/"+uuid, "1.25", nil).json(t); old["mode"] != nil || old["properties"] != nil {
		t.Errorf("shown at 1.25: %v", old)
	}
	if r := e.do("GET", "/v1/portgroups", "1.22", nil); r.status != http.StatusNotFound {
		t.Errorf("list at 1.22: %d", r.status)
	}
	if r := e.do("POST", "/v1/portgroups", "1.25", map[string]any{"node_uuid": nodeUUID, "mode": "balance-rr"}); r.status != http.StatusNotAcceptable {
		t.Errorf("create with mode at 1.25: %d %s", r.status, r.body)
	}
	// Default mode, by name lookup.
	d := e.createPortgroup(map[string]any{"node_uuid": nodeUUID, "name": "bond1"})
	if d["mode"] != "active-backup" || d["address"] != nil {
		t.Errorf("defaults %v", d)
	}
	if r := e.do("GET", "/v1/portgroups/bond1", maxVersion(), nil); r.status != http.StatusOK || r.json(t)["uuid"] != d["uuid"] {
		t.Errorf("show by name: %d %s", r.status, r.body)
	}

	errCases := []struct {
		name   string
		body   map[string]any
		status int
		msg    string
	}{
		{"duplicate address", map[string]any{"node_uuid": nodeUUID, "address": "52:54:00:cc:00:01"}, 409, "A portgroup with MAC address 52:54:00:cc:00:01 already exists."},
		{"duplicate name", map[string]any{"node_uuid": nodeUUID, "name": "bond0"}, 409, "A portgroup with name bond0 already exists."},
		{"unknown node", map[string]any{"node_uuid": "00000000-0000-0000-0000-000000000000"}, 400, "Node 00000000-0000-0000-0000-000000000000 could not be found."},
		{"invalid name", map[string]any{"node_uuid": nodeUUID, "name": "bad name"}, 400, "Cannot create portgroup with invalid name 'bad name'"},
		{"invalid address", map[string]any{"node_uuid": nodeUUID, "address": "nope"}, 400, "Expected a MAC address but received nope."},
		{"no node", map[string]any{"name": "x"}, 400, "Schema error for portgroup: 'node_uuid' is a required property"},
	}
	for _, c := range errCases {
		r := e.do("POST", "/v1/portgroups", maxVersion(), c.body)
		if r.status != c.status || r.faultstring(t) != c.msg {
			t.Errorf("%s: %d %s, want %d %q", c.name, r.status, r.body, c.status, c.msg)
		}
	}

	// PATCH.
	r = e.do("PATCH", "/v1/portgroups/bond0", maxVersion(), []map[string]any{
		{"op": "replace", "path": "/standalone_ports_supported", "value": false},
		{"op": "add", "path": "/extra/a", "value": "b"},
	})
	if r.status != http.StatusOK || r.json(t)["standalone_ports_supported"] != false || r.json(t)["extra"].(map[string]any)["a"] != "b" {
		t.Errorf("patch: %d %s", r.status, r.body)
	}
	r = e.do("PATCH", "/v1/portgroups/bond0", maxVersion(), []map[string]any{{"op": "replace", "path": "/name", "value": "bad name"}})
	if want := "Portgroup bond0: Cannot change name to invalid name 'bad name'"; r.status != 400 || r.faultstring(t) != want {
		t.Errorf("patch invalid name: %d %s", r.status, r.body)
	}
	r = e.do("PATCH", "/v1/portgroups/bond0", maxVersion(), []map[string]any{{"op": "remove", "path": "/mode"}})
	if want := "'mode' is a mandatory attribute and can not be removed"; r.status != 400 || r.faultstring(t) != want {
		t.Errorf("patch remove mode: %d %s", r.status, r.body)
	}

	// Lookups.
	for path, want := range map[string]string{
		"/v1/portgroups/00000000-0000-0000-0000-000000000000": "Portgroup 00000000-0000-0000-0000-000000000000 could not be found.",
		"/v1/portgroups/no-such-group":                        "Portgroup no-such-group could not be found.",
	} {
		if r := e.do("GET", path, maxVersion(), nil); r.status != 404 || r.faultstring(t) != want {
			t.Errorf("GET %s: %d %s", path, r.status, r.body)
		}
	}

	// Delete: refused while ports are in the group.
	port := e.createPort(map[string]any{"address": "52:54:00:aa:00:01", "node_uuid": nodeUUID, "portgroup_uuid": uuid})
	r = e.do("DELETE", "/v1/portgroups/"+uuid, maxVersion(), nil)
	if want := fmt.Sprintf("Cannot complete the requested action because portgroup %s contains ports.", uuid); r.status != 400 || r.faultstring(t) != want {
		t.Errorf("delete with ports: %d %s", r.status, r.body)
	}
	if r := e.do("DELETE", "/v1/ports/"+port["uuid"].(string), maxVersion(), nil); r.status != 204 {
		t.Fatalf("delete port: %d %s", r.status, r.body)
	}
	if r := e.do("DELETE", "/v1/portgroups/"+uuid, maxVersion(), nil); r.status != 204 {
		t.Errorf("delete: %d %s", r.status, r.body)
	}
	if r := e.do("GET", "/v1/portgroups/"+uuid, maxVersion(), nil); r.status != 404 {
		t.Errorf("show after delete: %d", r.status)
	}
	// A node's groups go with the node.
	if r := e.do("DELETE", "/v1/nodes/"+nodeUUID, maxVersion(), nil); r.status != 204 {
		t.Fatalf("delete node: %d %s", r.status, r.body)
	}
	if r := e.do("GET", "/v1/portgroups", maxVersion(), nil); len(r.json(t)["portgroups"].([]any)) != 0 {
		t.Errorf("groups after node delete: %s", r.body)
	}
}

// TestPortgroupListsAsNovaReadsThem: Nova's config drive reads
// GET /v1/portgroups/detail?node=<uuid> and GET /v1/ports/detail?node=<uuid>
// and uses the groups' address, mode, properties and uuid, and the ports'
// address, portgroup_uuid and extra.
func TestPortgroupListsAsNovaReadsThem(t *testing.T) {
	e := newEnv(t)
	n1 := e.createNode(map[string]any{"driver": "fake-hardware", "name": "n1"})["uuid"].(string)
	n2 := e.createNode(map[string]any{"driver": "fake-hardware", "name": "n2"})["uuid"].(string)
	g1 := e.createPortgroup(map[string]any{"node_uuid": n1, "address": "52:54:00:cc:00:01", "mode": "802.3ad", "properties": map[string]any{"miimon": "100"}})
	e.createPortgroup(map[string]any{"node_uuid": n2, "address": "52:54:00:cc:00:02"})
	p1 := e.createPort(map[string]any{"address": "52:54:00:aa:00:01", "node_uuid": n1, "portgroup_uuid": g1["uuid"]})
	e.createPort(map[string]any{"address": "52:54:00:aa:00:02", "node_uuid": n1})
	e.createPort(map[string]any{"address": "52:54:00:aa:00:03", "node_uuid": n2})

	r := e.do("GET", "/v1/portgroups/detail?node="+n1, "1.82", nil)
	groups := r.json(t)["portgroups"].([]any)
	if r.status != 200 || len(groups) != 1 {
		t.Fatalf("portgroups/detail?node=: %d %s", r.status, r.body)
	}
	g := groups[0].(map[string]any)
	if g["uuid"] != g1["uuid"] || g["address"] != "52:54:00:cc:00:01" || g["mode"] != "802.3ad" ||
		g["properties"].(map[string]any)["miimon"] != "100" {
		t.Errorf("group %v", g)
	}
	r = e.do("GET", "/v1/ports/detail?node="+n1, "1.82", nil)
	ports := r.json(t)["ports"].([]any)
	if r.status != 200 || len(ports) != 2 {
		t.Fatalf("ports/detail?node=: %d %s", r.status, r.body)
	}
	if p := ports[0].(map[string]any); p["portgroup_uuid"] != g1["uuid"] || p["address"] != "52:54:00:aa:00:01" {
		t.Errorf("port in group %v", p)
	}
	if p := ports[1].(map[string]any); p["portgroup_uuid"] != nil {
		t.Errorf("port in no group %v", p)
	}

	// The other lists and filters.
	list := func(path string) []any {
		t.Helper()
		r := e.do("GET", path, "1.82", nil)
		if r.status != 200 {
			t.Fatalf("GET %s: %d %s", path, r.status, r.body)
		}
		for _, k := range []string{"portgroups", "ports"} {
			if v, ok := r.json(t)[k]; ok {
				return v.([]any)
			}
		}
		return nil
	}
	if got := list("/v1/portgroups"); len(got) != 2 || strings.Join(sortedKeys(got[0].(map[string]any)), " ") != "address links name uuid" {
		t.Errorf("list without detail %v", got)
	}
	if got := list("/v1/portgroups?address=52:54:00:CC:00:02"); len(got) != 1 {
		t.Errorf("?address= %v", got)
	}
	if got := list("/v1/nodes/n2/portgroups"); len(got) != 1 {
		t.Errorf("nodes/{id}/portgroups %v", got)
	}
	if got := list("/v1/portgroups/" + g1["uuid"].(string) + "/ports"); len(got) != 1 || got[0].(map[string]any)["uuid"] != p1["uuid"] {
		t.Errorf("portgroups/{id}/ports %v", got)
	}
	if got := list("/v1/ports?portgroup=" + g1["uuid"].(string)); len(got) != 1 || got[0].(map[string]any)["uuid"] != p1["uuid"] {
		t.Errorf("ports?portgroup= %v", got)
	}
	if r := e.do("GET", "/v1/ports?portgroup="+g1["uuid"].(string), "1.23", nil); r.status != http.StatusNotAcceptable {
		t.Errorf("?portgroup= at 1.23: %d", r.status)
	}
	if r := e.do("GET", "/v1/portgroups?limit=1", "1.82", nil); !strings.Contains(string(r.body), `"next":`) {
		t.Errorf("no next link on a full page: %s", r.body)
	}
	if r := e.do("GET", "/v1/portgroups?node=n1&address=52:54:00:cc:00:01", "1.82", nil); r.status != 400 {
		t.Errorf("node and address: %d %s", r.status, r.body)
	}
	if r := e.do("GET", "/v1/portgroups?sort_key=extra", "1.82", nil); r.status != 400 {
		t.Errorf("sort by extra: %d", r.status)
	}
	// A node goes with its groups and their ports.
	if r := e.do("DELETE", "/v1/nodes/n1", "1.82", nil); r.status != 204 {
		t.Errorf("delete a node with a group and its port: %d %s", r.status, r.body)
	}
	if got := list("/v1/portgroups"); len(got) != 1 {
		t.Errorf("groups after node delete %v", got)
	}
}

func TestPortPortgroupUUID(t *testing.T) {
	e := newEnv(t)
	n1 := e.createNode(map[string]any{"driver": "fake-hardware"})["uuid"].(string)
	n2 := e.createNode(map[string]any{"driver": "fake-hardware"})["uuid"].(string)
	g1 := e.createPortgroup(map[string]any{"node_uuid": n1})["uuid"].(string)
	g2 := e.createPortgroup(map[string]any{"node_uuid": n2})["uuid"].(string)

	r := e.do("POST", "/v1/ports", maxVersion(), map[string]any{"address": "52:54:00:aa:00:01", "node_uuid": n1, "portgroup_uuid": "00000000-0000-0000-0000-000000000000"})
	if want := "Portgroup 00000000-0000-0000-0000-000000000000 could not be found."; r.status != 404 || r.faultstring(t) != want {
		t.Errorf("unknown group: %d %s", r.status, r.body)
	}
	r = e.do("POST", "/v1/ports", maxVersion(), map[string]any{"address": "52:54:00:aa:00:01", "node_uuid": n1, "portgroup_uuid": g2})
	if want := "Port can not be added to a portgroup belonging to a different node."; r.status != 400 || r.faultstring(t) != want {
		t.Errorf("group of another node: %d %s", r.status, r.body)
	}
	if r := e.do("POST", "/v1/ports", "1.23", map[string]any{"address": "52:54:00:aa:00:01", "node_uuid": n1, "portgroup_uuid": g1}); r.status != http.StatusNotAcceptable {
		t.Errorf("portgroup_uuid at 1.23: %d %s", r.status, r.body)
	}
	p := e.createPort(map[string]any{"address": "52:54:00:aa:00:01", "node_uuid": n1})["uuid"].(string)
	r = e.do("PATCH", "/v1/ports/"+p, maxVersion(), []map[string]any{{"op": "add", "path": "/portgroup_uuid", "value": g1}})
	if r.status != 200 || r.json(t)["portgroup_uuid"] != g1 {
		t.Errorf("patch into group: %d %s", r.status, r.body)
	}
	// Moving the port to another node while it is in a group of this one.
	r = e.do("PATCH", "/v1/ports/"+p, maxVersion(), []map[string]any{{"op": "replace", "path": "/node_uuid", "value": n2}})
	if r.status != 400 {
		t.Errorf("move out of the group's node: %d %s", r.status, r.body)
	}
	// Moving a group with ports to another node is refused too.
	r = e.do("PATCH", "/v1/portgroups/"+g1, maxVersion(), []map[string]any{{"op": "replace", "path": "/node_uuid", "value": n2}})
	if want := fmt.Sprintf("Cannot complete the requested action because portgroup %s contains ports.", g1); r.status != 400 || r.faultstring(t) != want {
		t.Errorf("move a group with ports: %d %s", r.status, r.body)
	}
	r = e.do("PATCH", "/v1/ports/"+p, maxVersion(), []map[string]any{{"op": "remove", "path": "/portgroup_uuid"}})
	if r.status != 200 || r.json(t)["portgroup_uuid"] != nil {
		t.Errorf("patch out of group: %d %s", r.status, r.body)
	}
}

// TestStandalonePortsOnFlat: on a flat node, a group that does not support
// standalone ports takes no PXE-enabled port, and cannot stop supporting
// them while a PXE-enabled port is in it (Ironic's flat interface); noop
// nodes check nothing.
func TestStandalonePortsOnFlat(t *testing.T) {
	e := newEnv(t)
	flat := e.createNode(map[string]any{"driver": "fake-hardware", "network_interface": "flat"})["uuid"].(string)
	noop := e.createNode(map[string]any{"driver": "fake-hardware"})["uuid"].(string)
	g := e.createPortgroup(map[string]any{"node_uuid": flat, "standalone_ports_supported": false})["uuid"].(string)

	r := e.do("POST", "/v1/ports", maxVersion(), map[string]any{"uuid": "6f0c1a52-5b1c-4c1e-9d7e-2a6f8d1b0c01",
		"address": "52:54:00:aa:00:01", "node_uuid": flat, "portgroup_uuid": g})
	want := fmt.Sprintf("Port group %s doesn't support standalone ports. This port 6f0c1a52-5b1c-4c1e-9d7e-2a6f8d1b0c01 cannot be  a member of that port group because of: 'pxe_enabled' was set to True", g)
	if r.status != http.StatusConflict || r.faultstring(t) != want {
		t.Errorf("PXE port into a group without standalone ports: %d %s", r.status, r.body)
	}
	p := e.createPort(map[string]any{"address": "52:54:00:aa:00:01", "node_uuid": flat, "portgroup_uuid": g, "pxe_enabled": false})["uuid"].(string)
	r = e.do("PATCH", "/v1/ports/"+p, maxVersion(), []map[string]any{{"op": "replace", "path": "/pxe_enabled", "value": true}})
	if r.status != http.StatusConflict {
		t.Errorf("enable PXE in the group: %d %s", r.status, r.body)
	}

	g2 := e.createPortgroup(map[string]any{"node_uuid": flat})["uuid"].(string)
	e.createPort(map[string]any{"address": "52:54:00:aa:00:02", "node_uuid": flat, "portgroup_uuid": g2})
	r = e.do("PATCH", "/v1/portgroups/"+g2, maxVersion(), []map[string]any{{"op": "replace", "path": "/standalone_ports_supported", "value": false}})
	want = fmt.Sprintf("standalone_ports_supported can not be set to False, because the port group %s contains port with 'pxe_enabled' is set to True", g2)
	if r.status != http.StatusConflict || r.faultstring(t) != want {
		t.Errorf("turn standalone off with a PXE port: %d %s", r.status, r.body)
	}

	g3 := e.createPortgroup(map[string]any{"node_uuid": noop, "standalone_ports_supported": false})["uuid"].(string)
	e.createPort(map[string]any{"address": "52:54:00:aa:00:03", "node_uuid": noop, "portgroup_uuid": g3})
}
