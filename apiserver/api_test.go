package apiserver

import (
	"net/http"
	"sort"
	"strconv"
	"strings"
	"testing"
)

func TestVersionNegotiation(t *testing.T) {
	e := newEnv(t)
	cases := []struct {
		header     string
		status     int
		echo       string // X-OpenStack-Ironic-API-Version answered, "" for none
		rangeHdrs  bool
		faultOrDes string
	}{
		{"", 200, "1.1", true, ""},
		{"latest", 200, maxVersion(), true, ""},
		{"1.78", 200, "1.78", true, ""},
		{"1.1", 200, "1.1", true, ""},
		{"1.82", 200, "1.82", true, ""},
		{"1.999", 406, "", true, "Version 1.999 was requested but the minor version is not supported by this service. The supported version range is: [1.1, " + maxVersion() + "]."},
		{"1.0", 406, "", true, "Version 1.0 was requested but the minor version is not supported by this service. The supported version range is: [1.1, " + maxVersion() + "]."},
		{"2.1", 406, "", true, "Mutually exclusive versions requested. Version 2.1 requested but not supported by this service. The supported version range is: [1.1, " + maxVersion() + "]."},
		{"abc", 406, "", false, "Invalid value for X-OpenStack-Ironic-API-Version header"},
		{"1.", 406, "", false, "Invalid value for X-OpenStack-Ironic-API-Version header"},
	}
	for _, c := range cases {
		t.Run(c.header, func(t *testing.T) {
			r := e.do("GET", "/v1/nodes", c.header, nil)
			if r.status != c.status {
				t.Fatalf("status %d, want %d: %s", r.status, c.status, r.body)
			}
			if got := r.header.Get(headerVersion); got != c.echo {
				t.Errorf("version header %q, want %q", got, c.echo)
			}
			hasRange := r.header.Get(headerMinVersion) == "1.1" && r.header.Get(headerMaxVersion) == maxVersion()
			if hasRange != c.rangeHdrs {
				t.Errorf("min/max headers present=%v, want %v", hasRange, c.rangeHdrs)
			}
			if c.faultOrDes != "" {
				if got := r.faultstring(t); got != c.faultOrDes {
					t.Errorf("description %q, want %q", got, c.faultOrDes)
				}
			}
		})
	}
	// Version documents are public and unversioned at the root.
	root := e.do("GET", "/", "", nil)
	if root.status != 200 || root.json(t)["default_version"].(map[string]any)["version"] != maxVersion() {
		t.Fatalf("root document: %d %s", root.status, root.body)
	}
	v1 := e.do("GET", "/v1/", "", nil)
	if v1.status != 200 || v1.header.Get(headerVersion) != "1.1" || v1.json(t)["id"] != "v1" {
		t.Fatalf("v1 document: %d %v %s", v1.status, v1.header, v1.body)
	}
	if _, ok := v1.json(t)["lookup"]; ok {
		t.Errorf("v1 document at 1.1 lists lookup (1.22)")
	}
}

// The error bodies below are copied byte for byte, with their
// Content-Length, from real Ironic's answers to the baremetal CLI.
func TestErrorBodiesByteExact(t *testing.T) {
	e := newEnv(t)
	n := e.createNode(map[string]any{"driver": "fake-hardware", "name": "anchor-node-14937"})
	uuid := n["uuid"].(string)
	e.setState(uuid, "available")
	if r := e.do("POST", "/v1/ports", "1.78", map[string]any{"address": "52:54:00:aa:bb:59", "node_uuid": uuid}); r.status != 201 {
		t.Fatalf("create port: %d %s", r.status, r.body)
	}

	cases := []struct {
		name   string
		method string
		path   string
		ver    string
		body   any
		status int
		want   string
		length int
	}{
		{"node not found", "GET", "/v1/nodes/00000000-0000-0000-0000-000000000000", "1.78", nil, 404,
			`{"error_message": "{\"faultcode\": \"Client\", \"faultstring\": \"Node 00000000-0000-0000-0000-000000000000 could not be found.\", \"debuginfo\": null}"}`, 153},
		{"bad driver", "POST", "/v1/nodes", "1.78", map[string]any{"driver": "no-such-driver", "name": "bad-14937"}, 400,
			`{"error_message": "{\"faultcode\": \"Client\", \"faultstring\": \"No valid host was found. Reason: No conductor service registered which supports driver no-such-driver for conductor group \\\"\\\".\", \"debuginfo\": null}"}`, 223},
		{"duplicate mac", "POST", "/v1/ports", "1.78", map[string]any{"address": "52:54:00:aa:bb:59", "node_uuid": uuid}, 409,
			`{"error_message": "{\"faultcode\": \"Client\", \"faultstring\": \"A port with MAC address 52:54:00:aa:bb:59 already exists.\", \"debuginfo\": null}"}`, 149},
		{"duplicate name", "POST", "/v1/nodes", "1.78", map[string]any{"driver": "fake-hardware", "name": "anchor-node-14937"}, 409,
			`{"error_message": "{\"faultcode\": \"Client\", \"faultstring\": \"A node with name anchor-node-14937 already exists.\", \"debuginfo\": null}"}`, 142},
		{"provide from available", "PUT", "/v1/nodes/" + uuid + "/states/provision", "1.78", map[string]any{"target": "provide"}, 400,
			`{"error_message": "{\"faultcode\": \"Client\", \"faultstring\": \"The requested action \\\"provide\\\" can not be performed on node \\\"` + uuid + `\\\" while it is in state \\\"available\\\".\", \"debuginfo\": null}"}`, 242},
		{"bad microversion", "GET", "/v1/nodes", "1.999", nil, 406,
			`{"error_message": "{\"code\": 406, \"title\": \"Not Acceptable\", \"description\": \"Version 1.999 was requested but the minor version is not supported by this service. The supported version range is: [1.1, ` + maxVersion() + `].\"}"}`, 217 + len("1.999") - len("1.99") + len(maxVersion()) - len("1.93")}, // Ironic's length for 1.99 at 1.93
		{"unknown field", "POST", "/v1/nodes", "1.78", map[string]any{"driver": "fake-hardware", "bogus_field": 1}, 400,
			`{"error_message": "{\"faultcode\": \"Client\", \"faultstring\": \"Schema error for node: Additional properties are not allowed ('bogus_field' was unexpected)\", \"debuginfo\": null}"}`, 0},
		{"deploy alias at 1.72", "PUT", "/v1/nodes/" + uuid + "/states/provision", "1.72", map[string]any{"target": "deploy"}, 406,
			`{"error_message": "{\"faultcode\": \"Client\", \"faultstring\": \"Request not acceptable.\", \"debuginfo\": null}"}`, 0},
		{"bad patch op", "PATCH", "/v1/nodes/" + uuid, "1.78", []any{map[string]any{"op": "frobnicate", "path": "/extra/a", "value": 1}}, 400,
			`{"error_message": "{\"faultcode\": \"Client\", \"faultstring\": \"Schema error for patch: 'frobnicate' is not one of ['add', 'replace', 'remove']\", \"debuginfo\": null}"}`, 0},
		{"lookup without params", "GET", "/v1/lookup", "1.78", nil, 400,
			`{"error_message": "{\"faultcode\": \"Client\", \"faultstring\": \"At least one of 'addresses' and 'node_uuid' parameters is required\", \"debuginfo\": null}"}`, 0},
		{"unknown route", "GET", "/v1/nosuch", "1.78", nil, 404,
			`{"error_message": "{\"faultcode\": \"Client\", \"faultstring\": \"Resource could not be found.\", \"debuginfo\": null}"}`, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := e.do(c.method, c.path, c.ver, c.body)
			if r.status != c.status {
				t.Fatalf("status %d, want %d: %s", r.status, c.status, r.body)
			}
			if string(r.body) != c.want {
				t.Errorf("body\n got %s\nwant %s", r.body, c.want)
			}
			if c.length != 0 && r.header.Get("Content-Length") != strconv.Itoa(c.length) {
				t.Errorf("Content-Length %s, want %d", r.header.Get("Content-Length"), c.length)
			}
			if ct := r.header.Get("Content-Type"); ct != "application/json" {
				t.Errorf("Content-Type %q", ct)
			}
		})
	}
}

func sortedKeys(m map[string]any) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// The node object at 1.78 has Ironic's 62 keys; at 1.1 the 22 of old
// clients, with "available" shown as null.
func TestNodeShapeByVersion(t *testing.T) {
	e := newEnv(t)
	n := e.createNode(map[string]any{"driver": "fake-hardware", "name": "shape", "properties": map[string]any{"cpus": 4}})
	want178 := "allocation_uuid automated_clean bios_interface boot_interface boot_mode chassis_uuid clean_step conductor conductor_group console_enabled console_interface created_at deploy_interface deploy_step description driver driver_info driver_internal_info extra fault inspect_interface inspection_finished_at inspection_started_at instance_info instance_uuid last_error lessee links maintenance maintenance_reason management_interface name network_data network_interface owner portgroups ports power_interface power_state properties protected protected_reason provision_state provision_updated_at raid_config raid_interface rescue_interface reservation resource_class retired retired_reason secure_boot states storage_interface target_power_state target_provision_state target_raid_config traits updated_at uuid vendor_interface volume"
	if got := strings.Join(sortedKeys(n), " "); got != want178 {
		t.Errorf("keys at 1.78:\n got %s\nwant %s", got, want178)
	}
	if len(n) != 62 {
		t.Errorf("%d keys at 1.78, want 62", len(n))
	}
	if n["provision_state"] != "enroll" || n["deploy_interface"] != "fake" || n["network_interface"] != "noop" {
		t.Errorf("defaults: %v %v %v", n["provision_state"], n["deploy_interface"], n["network_interface"])
	}
	if props := n["properties"].(map[string]any); props["cpus"] != float64(4) {
		t.Errorf("properties %v", props)
	}
	uuid := n["uuid"].(string)
	e.setState(uuid, "available")
	old := e.do("GET", "/v1/nodes/"+uuid, "", nil)
	if old.status != 200 {
		t.Fatalf("show at 1.1: %d %s", old.status, old.body)
	}
	m := old.json(t)
	want11 := "chassis_uuid console_enabled created_at driver driver_info extra instance_info instance_uuid last_error links maintenance maintenance_reason ports power_state properties provision_state provision_updated_at reservation target_power_state target_provision_state updated_at uuid"
	if got := strings.Join(sortedKeys(m), " "); got != want11 {
		t.Errorf("keys at 1.1:\n got %s\nwant %s", got, want11)
	}
	if m["provision_state"] != nil {
		t.Errorf("available at 1.1 shown as %v, want null", m["provision_state"])
	}
	// Names are not known at 1.1: a name is a node that does not exist.
	if r := e.do("GET", "/v1/nodes/shape", "", nil); r.status != 404 {
		t.Errorf("show by name at 1.1: %d", r.status)
	}
	if latest := e.do("GET", "/v1/nodes/shape", "1.82", nil).json(t); latest["shard"] != nil || len(latest) != 63 {
		t.Errorf("latest: %d keys, shard %v", len(latest), latest["shard"])
	}
}

func TestNodeCRUD(t *testing.T) {
	e := newEnv(t)
	r := e.do("POST", "/v1/nodes", "1.78", map[string]any{
		"driver": "ipmi", "name": "n1",
		"driver_info": map[string]any{"ipmi_address": "127.0.0.1", "ipmi_password": "s3cret"},
	})
	if r.status != 201 {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	n := r.json(t)
	uuid := n["uuid"].(string)
	if loc := r.header.Get("Location"); loc != e.srv.URL+"/v1/nodes/"+uuid {
		t.Errorf("Location %q", loc)
	}
	if n["boot_interface"] != "ipxe" || n["power_interface"] != "ipmitool" || n["deploy_interface"] != "direct" {
		t.Errorf("ipmi defaults: boot %v power %v deploy %v", n["boot_interface"], n["power_interface"], n["deploy_interface"])
	}
	if di := n["driver_info"].(map[string]any); di["ipmi_password"] != "******" || di["ipmi_address"] != "127.0.0.1" {
		t.Errorf("driver_info %v", di)
	}
	if got := e.node(uuid).DriverInfo["ipmi_password"]; got != "s3cret" {
		t.Errorf("stored password %v", got)
	}
	// Interfaces are checked against the hardware type.
	if r := e.do("POST", "/v1/nodes", "1.78", map[string]any{"driver": "ipmi", "boot_interface": "redfish-virtual-media"}); r.status != 400 {
		t.Errorf("ipmi with redfish boot: %d %s", r.status, r.body)
	}
	if r := e.do("POST", "/v1/nodes", "1.78", map[string]any{"driver": "redfish", "deploy_interface": "ramdisk"}); r.status != 201 {
		t.Errorf("redfish ramdisk: %d %s", r.status, r.body)
	} else if m := r.json(t); m["boot_interface"] != "redfish-virtual-media" || m["inspect_interface"] != "redfish" {
		t.Errorf("redfish defaults %v %v", m["boot_interface"], m["inspect_interface"])
	}
	if r := e.do("POST", "/v1/nodes", "1.78", map[string]any{"driver": "ipmi", "name": 5}); r.status != 400 ||
		r.faultstring(t) != "Schema error for node: 5 is not of type 'string', 'null'" {
		t.Errorf("name 5: %d %s", r.status, r.body)
	}
	if r := e.do("POST", "/v1/nodes", "1.78", map[string]any{"name": "x"}); r.status != 400 ||
		r.faultstring(t) != "Schema error for node: 'driver' is a required property" {
		t.Errorf("no driver: %d %s", r.status, r.body)
	}
	if r := e.do("POST", "/v1/nodes", "1.78", map[string]any{"driver": "ipmi", "name": "0645f0f5-1593-4c27-9019-8a70abc8cc4c"}); r.status != 400 {
		t.Errorf("uuid-like name: %d %s", r.status, r.body)
	}
	if r := e.do("POST", "/v1/nodes", "1.45", map[string]any{"driver": "ipmi", "conductor_group": "rack1"}); r.status != 406 {
		t.Errorf("conductor_group at 1.45: %d %s", r.status, r.body)
	}

	// Show by name and by UUID.
	for _, id := range []string{"n1", uuid} {
		if r := e.do("GET", "/v1/nodes/"+id, "1.78", nil); r.status != 200 || r.json(t)["uuid"] != uuid {
			t.Errorf("show %s: %d %s", id, r.status, r.body)
		}
	}
	// Validate names the missing key.
	e.do("PATCH", "/v1/nodes/n1", "1.78", []any{map[string]any{"op": "remove", "path": "/driver_info/ipmi_address"}})
	v := e.do("GET", "/v1/nodes/n1/validate", "1.78", nil).json(t)
	power := v["power"].(map[string]any)
	if power["result"] != false || power["reason"] != "Missing the following IPMI credentials in node's driver_info: ['ipmi_address']." {
		t.Errorf("validate power %v", power)
	}
	// Neither deploy_kernel nor deploy_ramdisk: ironflow's own agent boots.
	if boot := v["boot"].(map[string]any); boot["result"] != true {
		t.Errorf("validate boot without deploy_kernel/deploy_ramdisk %v", boot)
	}
	// Only one of the pair is an error that names the other.
	e.do("PATCH", "/v1/nodes/n1", "1.78", []any{map[string]any{"op": "add", "path": "/driver_info/deploy_ramdisk", "value": "http://127.0.0.1/r"}})
	v = e.do("GET", "/v1/nodes/n1/validate", "1.78", nil).json(t)
	if boot := v["boot"].(map[string]any); boot["result"] != false || !strings.Contains(boot["reason"].(string), "deploy_kernel") {
		t.Errorf("validate boot with deploy_ramdisk alone %v", boot)
	}

	// Delete: refused while active, allowed in maintenance, refused while a
	// workflow holds the node.
	e.setState(uuid, "active")
	r = e.do("DELETE", "/v1/nodes/"+uuid, "1.78", nil)
	wantMsg := `Can not delete node "` + uuid + `" while it is in provision state "active". Valid provision states to perform deletion are: "('manageable', 'enroll', 'adopt failed', 'available')", or set the node into maintenance mode`
	if r.status != 409 || r.faultstring(t) != wantMsg {
		t.Errorf("delete active: %d %s", r.status, r.body)
	}
	e.setState(uuid, "manageable")
	e.eng.hold(uuid, true)
	if r := e.do("DELETE", "/v1/nodes/"+uuid, "1.78", nil); r.status != 409 ||
		r.faultstring(t) != "Node "+uuid+" is locked by host node-"+uuid+", please retry after the current operation is completed." {
		t.Errorf("delete locked: %d %s", r.status, r.body)
	}
	e.eng.hold(uuid, false)
	if r := e.do("DELETE", "/v1/nodes/n1", "1.78", nil); r.status != 204 || len(r.body) != 0 {
		t.Errorf("delete: %d %s", r.status, r.body)
	}
	if r := e.do("GET", "/v1/nodes/"+uuid, "1.78", nil); r.status != 404 {
		t.Errorf("after delete: %d", r.status)
	}
}

func TestListPaginationFieldsFilters(t *testing.T) {
	e := newEnv(t)
	var uuids []string
	for i := 0; i < 5; i++ {
		n := e.createNode(map[string]any{"driver": "fake-hardware", "name": "p" + strconv.Itoa(i)})
		uuids = append(uuids, n["uuid"].(string))
	}
	e.setState(uuids[1], "active")
	e.setState(uuids[3], "active")

	// Follow next links two at a time.
	var seen []string
	path := "/v1/nodes?limit=2"
	for pages := 0; path != "" && pages < 10; pages++ {
		r := e.do("GET", path, "1.78", nil)
		if r.status != 200 {
			t.Fatalf("GET %s: %d %s", path, r.status, r.body)
		}
		m := r.json(t)
		for _, it := range m["nodes"].([]any) {
			node := it.(map[string]any)
			if got := strings.Join(sortedKeys(node), " "); got != "instance_uuid links maintenance name power_state provision_state uuid" {
				t.Fatalf("list keys %s", got)
			}
			seen = append(seen, node["uuid"].(string))
		}
		path = ""
		if next, ok := m["next"].(string); ok {
			if !strings.HasPrefix(next, e.srv.URL+"/v1/nodes?sort_key=id&sort_dir=asc&fields=instance_uuid,maintenance,power_state,provision_state,uuid,name&limit=2&marker=") {
				t.Fatalf("next %s", next)
			}
			path = strings.TrimPrefix(next, e.srv.URL)
		}
	}
	if strings.Join(seen, ",") != strings.Join(uuids, ",") {
		t.Errorf("paged %v, want %v", seen, uuids)
	}

	m := e.do("GET", "/v1/nodes?provision_state=active&fields=uuid,name,provision_state", "1.78", nil).json(t)
	list := m["nodes"].([]any)
	if len(list) != 2 || strings.Join(sortedKeys(list[0].(map[string]any)), " ") != "links name provision_state uuid" {
		t.Errorf("filtered %v", m)
	}
	m = e.do("GET", "/v1/nodes/detail?sort_key=name&sort_dir=desc&limit=1", "1.78", nil).json(t)
	if first := m["nodes"].([]any)[0].(map[string]any); first["name"] != "p4" || len(first) != 62 {
		t.Errorf("detail desc first %v (%d keys)", first["name"], len(first))
	}
	if d := e.do("GET", "/v1/nodes?detail=true", "1.78", nil).json(t)["nodes"].([]any); len(d) != 5 || len(d[0].(map[string]any)) != 62 {
		t.Errorf("detail=true: %d nodes", len(d))
	}
	errCases := []struct{ path, ver, msg string }{
		{"/v1/nodes?limit=0", "1.78", "Limit must be positive"},
		{"/v1/nodes?sort_dir=up", "1.78", "Invalid sort direction: up. Acceptable values are 'asc' or 'desc'"},
		{"/v1/nodes?fields=bogus", "1.78", `Field(s) "bogus" are not valid`},
		{"/v1/nodes?provision_state=nowhere", "1.78", `Provision state "nowhere" is not valid`},
		{"/v1/nodes?marker=00000000-0000-0000-0000-000000000000", "1.78", "Marker 00000000-0000-0000-0000-000000000000 could not be found."},
		{"/v1/nodes?sort_key=driver_info", "1.78", "The sort_key value driver_info is an invalid field for sorting"},
		{"/v1/nodes?maintenance=perhaps", "1.78", `Invalid value for maintenance: "perhaps". Must be a boolean.`},
		{"/v1/nodes?driver=a%00b", "1.78", "Invalid query parameter driver: not valid UTF-8 text"},
		{"/v1/nodes?owner=%ff", "1.78", "Invalid query parameter owner: not valid UTF-8 text"},
		{"/v1/nodes?marker=garbage", "1.78", "Marker garbage could not be found."},
	}
	for _, c := range errCases {
		if r := e.do("GET", c.path, c.ver, nil); r.status != 400 || r.faultstring(t) != c.msg {
			t.Errorf("GET %s: %d %s", c.path, r.status, r.body)
		}
	}
	if r := e.do("GET", "/v1/nodes?fields=uuid", "1.7", nil); r.status != 406 {
		t.Errorf("fields at 1.7: %d", r.status)
	}
	if r := e.do("GET", "/v1/nodes?fields=shard", "1.78", nil); r.status != 406 {
		t.Errorf("shard at 1.78: %d", r.status)
	}
	if r := e.do("GET", "/v1/nodes?maintenance=false&associated=false&driver=fake-hardware", "1.78", nil); r.status != 200 || len(r.json(t)["nodes"].([]any)) != 5 {
		t.Errorf("bool filters: %d %s", r.status, r.body)
	}
	if r := e.do("GET", "/v1/nodes/p2?fields=name,provision_state", "1.78", nil); r.status != http.StatusOK ||
		strings.Join(sortedKeys(r.json(t)), " ") != "links name provision_state" {
		t.Errorf("show fields: %s", r.body)
	}
}
