package apiserver

import (
	"errors"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"testing"

	"github.com/ironflow/ironflow/provision"
	"github.com/ironflow/ironflow/store"
)

const nfID = "6b1c2d3e-4f50-4a6b-8c7d-9e0f1a2b3c4d"

func wantAPIError(t *testing.T, err error, status int, msg string) {
	t.Helper()
	var ae *apiError
	if !errors.As(err, &ae) || ae.status != status || ae.msg != msg {
		t.Fatalf("got %v, want %d %q", err, status, msg)
	}
}

// TestDecideProvisionInMaintenance: Ironic refuses active, deploy and
// rebuild on a node in maintenance before it looks at the state, clean,
// rescue and unrescue once the state accepted them, and allows the rest.
func TestDecideProvisionInMaintenance(t *testing.T) {
	msg := func(op string) string {
		return "The " + op + " operation can't be performed on node " + nfID + " because it's in maintenance mode."
	}
	cases := []struct {
		state     provision.State
		verb      provision.Verb
		status    int
		msg       string
		operation provision.Operation
	}{
		{state: "available", verb: "active", status: http.StatusBadRequest, msg: msg("provisioning")},
		{state: "available", verb: "deploy", status: http.StatusBadRequest, msg: msg("provisioning")},
		{state: "active", verb: "rebuild", status: http.StatusBadRequest, msg: msg("provisioning")},
		// Before the state: even where the state machine refuses the verb.
		{state: "enroll", verb: "active", status: http.StatusBadRequest, msg: msg("provisioning")},
		{state: "manageable", verb: "clean", status: http.StatusBadRequest, msg: msg("cleaning")},
		// After the state: the state's refusal comes first.
		{state: "available", verb: "clean", status: http.StatusBadRequest,
			msg: `The requested action "clean" can not be performed on node "` + nfID + `" while it is in state "available".`},
		{state: "enroll", verb: "manage", operation: "manage"},
		{state: "manageable", verb: "provide", operation: "provide"},
		{state: "manageable", verb: "inspect", operation: "inspect"},
		{state: "active", verb: "deleted", operation: "undeploy"},
		{state: "active", verb: "undeploy", operation: "undeploy"},
		{state: "wait call-back", verb: "abort", operation: "abort"},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%s × %s", tc.state, tc.verb), func(t *testing.T) {
			n := &store.Node{UUID: nfID, ProvisionState: tc.state, Maintenance: true}
			plan, err := decideProvision(n, tc.verb, func() bool { return false })
			if tc.status != 0 {
				wantAPIError(t, err, tc.status, tc.msg)
				return
			}
			if err != nil {
				t.Fatalf("refused in maintenance: %v", err)
			}
			if plan.transition.Operation != tc.operation {
				t.Errorf("operation %s, want %s", plan.transition.Operation, tc.operation)
			}
		})
	}
	// Outside maintenance the same verbs are accepted.
	n := &store.Node{UUID: nfID, ProvisionState: "available"}
	if _, err := decideProvision(n, "active", func() bool { return false }); err != nil {
		t.Errorf("active outside maintenance: %v", err)
	}
}

// TestDecideProvisionInstanceTraits: a deploy whose instance_info/traits
// names a trait the node lacks is refused as Ironic's start_deploy does.
func TestDecideProvisionInstanceTraits(t *testing.T) {
	cases := []struct {
		name      string
		verb      provision.Verb
		state     provision.State
		traits    []string
		requested any
		msg       string
	}{
		{name: "subset", verb: "active", state: "available", traits: []string{"CUSTOM_A", "CUSTOM_B"}, requested: []any{"CUSTOM_A"}},
		{name: "none requested", verb: "active", state: "available", requested: nil},
		{name: "missing", verb: "active", state: "available", traits: []string{"CUSTOM_A"}, requested: []any{"CUSTOM_C", "CUSTOM_A", "CUSTOM_B"},
			msg: "Failed to validate deploy or power info for node " + nfID + ": Cannot specify instance traits that are not also set on the node. Node " + nfID + " is missing traits CUSTOM_B, CUSTOM_C"},
		{name: "rebuild missing", verb: "rebuild", state: "active", requested: []any{"CUSTOM_A"},
			msg: "Failed to validate deploy or power info for node " + nfID + ": Cannot specify instance traits that are not also set on the node. Node " + nfID + " is missing traits CUSTOM_A"},
		{name: "not a list", verb: "deploy", state: "available", requested: "CUSTOM_A",
			msg: "Failed to validate deploy or power info for node " + nfID + ": Error parsing traits from Node " + nfID + " instance_info field. A list of strings is expected."},
		// Verbs that write no instance do not look.
		{name: "undeploy", verb: "deleted", state: "active", requested: []any{"CUSTOM_A"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			info := map[string]any{}
			if tc.requested != nil {
				info["traits"] = tc.requested
			}
			n := &store.Node{UUID: nfID, ProvisionState: tc.state, Traits: tc.traits, InstanceInfo: info}
			_, err := decideProvision(n, tc.verb, func() bool { return false })
			if tc.msg != "" {
				wantAPIError(t, err, http.StatusBadRequest, tc.msg)
			} else if err != nil {
				t.Fatalf("refused: %v", err)
			}
		})
	}
}

func listUUIDs(t *testing.T, r resp) []string {
	t.Helper()
	if r.status != http.StatusOK {
		t.Fatalf("list: %d %s", r.status, r.body)
	}
	var out []string
	for _, n := range r.json(t)["nodes"].([]any) {
		out = append(out, n.(map[string]any)["uuid"].(string))
	}
	sort.Strings(out)
	return out
}

func sorted(s ...string) []string { sort.Strings(s); return s }

// TestShardFilters: ?shard= and ?sharded= select nodes by shard (1.82),
// and GET /v1/shards counts them.
func TestShardFilters(t *testing.T) {
	e := newEnv(t)
	mk := func(shard any) string {
		r := e.do("POST", "/v1/nodes", "1.82", map[string]any{"driver": "fake-hardware", "shard": shard})
		if r.status != http.StatusCreated {
			t.Fatalf("create: %d %s", r.status, r.body)
		}
		return r.json(t)["uuid"].(string)
	}
	a1, a2, b, none := mk("shard-a"), mk("shard-a"), mk("shard-b"), mk(nil)

	list := func(q string) []string { return listUUIDs(t, e.do("GET", "/v1/nodes?"+q, "1.82", nil)) }
	check := func(q string, want ...string) {
		t.Helper()
		if got := list(q); fmt.Sprint(got) != fmt.Sprint(sorted(want...)) {
			t.Errorf("?%s: %v, want %v", q, got, sorted(want...))
		}
	}
	check("shard=shard-a", a1, a2)
	check("shard=shard-b", b)
	check("shard=shard-a,shard-b", a1, a2, b)
	check("shard=nosuch")
	check("sharded=true", a1, a2, b)
	check("sharded=false", none)
	check("sharded=false&shard=shard-a")
	check("", a1, a2, b, none)
	// Nova's resource tracker list: fields with the shard filter.
	r := e.do("GET", "/v1/nodes?fields=uuid,traits,resource_class&shard=shard-b", "1.82", nil)
	if got := listUUIDs(t, r); fmt.Sprint(got) != fmt.Sprint([]string{b}) {
		t.Errorf("Nova's list by shard: %v", got)
	}

	for _, q := range []string{"shard=shard-a", "sharded=true"} {
		if r := e.do("GET", "/v1/nodes?"+q, "1.81", nil); r.status != http.StatusNotAcceptable {
			t.Errorf("?%s at 1.81: %d, want 406", q, r.status)
		}
	}
	if r := e.do("GET", "/v1/nodes?sharded=maybe", "1.82", nil); r.status != http.StatusBadRequest {
		t.Errorf("?sharded=maybe: %d, want 400", r.status)
	}

	r = e.do("GET", "/v1/shards", "1.82", nil)
	if r.status != http.StatusOK {
		t.Fatalf("shards: %d %s", r.status, r.body)
	}
	if got, want := string(r.body), `{"shards":[{"name":"shard-a","count":2},{"name":"shard-b","count":1},{"name":"None","count":1}]}`; got != want {
		t.Errorf("shards %s, want %s", got, want)
	}
	if r := e.do("GET", "/v1/shards", "1.81", nil); r.status != http.StatusNotFound {
		t.Errorf("shards at 1.81: %d, want 404", r.status)
	}
	// PATCH moves a node to another shard.
	if r := e.do("PATCH", "/v1/nodes/"+b, "1.82", []map[string]any{{"op": "replace", "path": "/shard", "value": "shard-a"}}); r.status != http.StatusOK {
		t.Fatalf("patch shard: %d %s", r.status, r.body)
	}
	check("shard=shard-a", a1, a2, b)
}

// TestNodeTraits: the traits sub-resource (1.37) with Ironic's rules.
func TestNodeTraits(t *testing.T) {
	e := newEnv(t)
	id := e.createNode(map[string]any{"driver": "fake-hardware"})["uuid"].(string)
	path := "/v1/nodes/" + id + "/traits"
	traits := func() []any {
		t.Helper()
		r := e.do("GET", path, "1.37", nil)
		if r.status != http.StatusOK {
			t.Fatalf("get traits: %d %s", r.status, r.body)
		}
		return r.json(t)["traits"].([]any)
	}
	if got := traits(); len(got) != 0 {
		t.Errorf("new node traits %v", got)
	}
	r := e.do("PUT", path, "1.37", map[string]any{"traits": []string{"CUSTOM_GPU", "HW_CPU_X86_AVX2", "CUSTOM_GPU"}})
	if r.status != http.StatusNoContent || r.header.Get("Location") != "" {
		t.Fatalf("put traits: %d %s location %q", r.status, r.body, r.header.Get("Location"))
	}
	if got := fmt.Sprint(traits()); got != "[CUSTOM_GPU HW_CPU_X86_AVX2]" {
		t.Errorf("traits %s", got)
	}
	if r := e.do("PUT", path+"/CUSTOM_RAID", "1.37", nil); r.status != http.StatusNoContent || r.header.Get("Location") != e.srv.URL+path+"/CUSTOM_RAID" {
		t.Fatalf("add trait: %d %s location %q", r.status, r.body, r.header.Get("Location"))
	}
	if r := e.do("PUT", path+"/CUSTOM_RAID", "1.37", map[string]any{"traits": []string{"CUSTOM_X"}}); r.status != http.StatusBadRequest || r.faultstring(t) != "No body should be provided when adding a trait" {
		t.Errorf("add one trait with a body: %d %s", r.status, r.body)
	}
	if r := e.do("PUT", path, "1.37", map[string]any{}); r.status != http.StatusBadRequest || r.faultstring(t) != traitsPutUsage {
		t.Errorf("put traits without a list: %d %s", r.status, r.body)
	}
	if r := e.do("PUT", path+"/CUSTOM_RAID", "1.37", nil); r.status != http.StatusNoContent {
		t.Fatalf("add the same trait again: %d %s", r.status, r.body)
	}
	if got := fmt.Sprint(traits()); got != "[CUSTOM_GPU CUSTOM_RAID HW_CPU_X86_AVX2]" {
		t.Errorf("traits after add %s", got)
	}
	// The node view and Nova's ?fields= list show them.
	n := e.do("GET", "/v1/nodes/"+id+"?fields=traits", "1.37", nil).json(t)
	if fmt.Sprint(n["traits"]) != "[CUSTOM_GPU CUSTOM_RAID HW_CPU_X86_AVX2]" {
		t.Errorf("node view traits %v", n["traits"])
	}
	l := e.do("GET", "/v1/nodes?fields=uuid,traits", "1.37", nil).json(t)
	if got := l["nodes"].([]any)[0].(map[string]any)["traits"].([]any); len(got) != 3 {
		t.Errorf("list traits %v", got)
	}

	if r := e.do("DELETE", path+"/CUSTOM_GPU", "1.37", nil); r.status != http.StatusNoContent {
		t.Fatalf("delete trait: %d %s", r.status, r.body)
	}
	r = e.do("DELETE", path+"/CUSTOM_GPU", "1.37", nil)
	if want := "Node " + id + " doesn't have a trait 'CUSTOM_GPU'"; r.status != http.StatusNotFound || r.faultstring(t) != want {
		t.Errorf("delete a missing trait: %d %s, want 404 %q", r.status, r.body, want)
	}

	invalid := "Invalid trait. A valid trait must be no longer than 255 characters. Standard traits are defined in the os_traits library. A custom trait must start with the prefix CUSTOM_ and use the following characters: A-Z, 0-9 and _"
	for _, bad := range []string{"custom_lower", "NOT_A_STANDARD_TRAIT", "CUSTOM_", "CUSTOM_" + strings.Repeat("A", 249)} {
		if r := e.do("PUT", path+"/"+bad, "1.37", nil); r.status != http.StatusBadRequest || r.faultstring(t) != invalid {
			t.Errorf("add %q: %d %s", bad, r.status, r.body)
		}
	}
	if r := e.do("PUT", path+"/CUSTOM_"+strings.Repeat("A", 248), "1.37", nil); r.status != http.StatusNoContent {
		t.Errorf("a 255-character trait: %d %s", r.status, r.body)
	}
	if r := e.do("PUT", path, "1.37", map[string]any{"traits": []any{"CUSTOM_OK", 5}}); r.status != http.StatusBadRequest || r.faultstring(t) != invalid {
		t.Errorf("a list with a number: %d %s", r.status, r.body)
	}

	var many []string
	for i := 0; i < 51; i++ {
		many = append(many, fmt.Sprintf("CUSTOM_T%d", i))
	}
	r = e.do("PUT", path, "1.37", map[string]any{"traits": many})
	if want := fmt.Sprintf("Could not modify traits for node %d as it would exceed the maximum number of traits per node (51 vs. 50)", e.node(id).ID); r.status != http.StatusBadRequest || r.faultstring(t) != want {
		t.Errorf("51 traits: %d %s, want 400 %q", r.status, r.body, want)
	}
	if r := e.do("PUT", path, "1.37", map[string]any{"traits": many[:50]}); r.status != http.StatusNoContent {
		t.Errorf("50 traits: %d %s", r.status, r.body)
	}
	if r := e.do("PUT", path+"/CUSTOM_ONE_MORE", "1.37", nil); r.status != http.StatusBadRequest {
		t.Errorf("a 51st trait: %d %s", r.status, r.body)
	}

	if r := e.do("DELETE", path, "1.37", nil); r.status != http.StatusNoContent || len(traits()) != 0 {
		t.Errorf("delete all: %d %s, left %v", r.status, r.body, traits())
	}
	// Below 1.37 the path is Ironic's nodes controller's (node.py): GET
	// is 406 (ironic-routes.tsv, checked against Ironic 21.4).
	if r := e.do("GET", path, "1.36", nil); r.status != http.StatusNotAcceptable {
		t.Errorf("traits at 1.36: %d, want 406", r.status)
	}
}

// TestInstanceTraitsValidateAndDeploy: validate reports deploy false and
// the deploy is refused while instance_info/traits asks for a trait the
// node lacks; both pass once the node has it.
func TestInstanceTraitsValidateAndDeploy(t *testing.T) {
	e := newEnv(t)
	id := e.createNode(map[string]any{"driver": "fake-hardware", "instance_info": map[string]any{
		"image_source": "http://example.com/img.qcow2", "traits": []string{"CUSTOM_GOLD"}}})["uuid"].(string)
	e.setState(id, "available")
	missing := "Cannot specify instance traits that are not also set on the node. Node " + id + " is missing traits CUSTOM_GOLD"
	v := e.do("GET", "/v1/nodes/"+id+"/validate", "1.82", nil).json(t)
	deploy := v["deploy"].(map[string]any)
	if deploy["result"] != false || deploy["reason"] != missing {
		t.Errorf("validate deploy %v, want false %q", deploy, missing)
	}
	r := e.do("PUT", "/v1/nodes/"+id+"/states/provision", "1.82", map[string]any{"target": "active"})
	if want := "Failed to validate deploy or power info for node " + id + ": " + missing; r.status != http.StatusBadRequest || r.faultstring(t) != want {
		t.Errorf("deploy: %d %s, want 400 %q", r.status, r.body, want)
	}
	if r := e.do("PUT", "/v1/nodes/"+id+"/traits/CUSTOM_GOLD", "1.82", nil); r.status != http.StatusNoContent {
		t.Fatalf("add trait: %d %s", r.status, r.body)
	}
	v = e.do("GET", "/v1/nodes/"+id+"/validate", "1.82", nil).json(t)
	if d := v["deploy"].(map[string]any); d["result"] != true {
		t.Errorf("validate deploy after adding the trait: %v", d)
	}
	if r := e.do("PUT", "/v1/nodes/"+id+"/states/provision", "1.82", map[string]any{"target": "active"}); r.status != http.StatusAccepted {
		t.Errorf("deploy after adding the trait: %d %s", r.status, r.body)
	}
}

// TestDeployInMaintenanceRefused: through the API, as Nova meets it.
func TestDeployInMaintenanceRefused(t *testing.T) {
	e := newEnv(t)
	id := e.createNode(map[string]any{"driver": "fake-hardware", "instance_info": map[string]any{"image_source": "http://example.com/img"}})["uuid"].(string)
	e.setState(id, "available")
	if r := e.do("PUT", "/v1/nodes/"+id+"/maintenance", "1.82", map[string]any{"reason": "x"}); r.status != http.StatusAccepted {
		t.Fatalf("maintenance: %d %s", r.status, r.body)
	}
	r := e.do("PUT", "/v1/nodes/"+id+"/states/provision", "1.82", map[string]any{"target": "active"})
	if want := "The provisioning operation can't be performed on node " + id + " because it's in maintenance mode."; r.status != http.StatusBadRequest || r.faultstring(t) != want {
		t.Errorf("deploy in maintenance: %d %s, want 400 %q", r.status, r.body, want)
	}
	if e.node(id).ProvisionState != "available" {
		t.Errorf("node moved to %s", e.node(id).ProvisionState)
	}
}

// TestNovaInstanceInfoAndReservation: every instance_info key Nova's driver
// writes is stored and shown, and reserving a node another instance holds
// is 409 as Ironic's NodeAssociated.
func TestNovaInstanceInfoAndReservation(t *testing.T) {
	e := newEnv(t)
	id := e.createNode(map[string]any{"driver": "fake-hardware"})["uuid"].(string)
	inst := "1a2b3c4d-0000-4000-8000-000000000001"
	if r := e.do("PATCH", "/v1/nodes/"+id, "1.82", []map[string]any{{"op": "add", "path": "/instance_uuid", "value": inst}}); r.status != http.StatusOK {
		t.Fatalf("reserve: %d %s", r.status, r.body)
	}
	nova := map[string]any{
		"image_source": "5f6a7b8c-1111-4222-8333-444455556666", "root_gb": "10", "swap_mb": "0", "ephemeral_gb": "0",
		"ephemeral_format": "ext4", "preserve_ephemeral": false, "display_name": "vm1", "vcpus": "2", "memory_mb": "2048",
		"local_gb": "10", "nova_host_id": "compute-1", "project_id": "p1", "project_name": "demo", "user_id": "u1",
		"user_name": "alice", "flavor_name": "baremetal", "fixed_ips": []any{map[string]any{"ip_address": "10.0.0.5"}},
		"floating_ips": []any{}, "capabilities": `{"boot_mode": "uefi"}`, "traits": []any{},
	}
	var ops []map[string]any
	for k, v := range nova {
		ops = append(ops, map[string]any{"op": "add", "path": "/instance_info/" + k, "value": v})
	}
	r := e.do("PATCH", "/v1/nodes/"+id, "1.82", ops)
	if r.status != http.StatusOK {
		t.Fatalf("Nova's instance_info: %d %s", r.status, r.body)
	}
	shown := e.do("GET", "/v1/nodes/"+id, "1.82", nil).json(t)["instance_info"].(map[string]any)
	for k, v := range nova {
		if !sameJSON(shown[k], v) {
			t.Errorf("instance_info/%s shown as %v, want %v", k, shown[k], v)
		}
	}
	r = e.do("PATCH", "/v1/nodes/"+id, "1.82", []map[string]any{{"op": "add", "path": "/instance_uuid", "value": "1a2b3c4d-0000-4000-8000-000000000002"}})
	if want := "Node " + id + " is associated with instance " + inst + "."; r.status != http.StatusConflict || r.faultstring(t) != want {
		t.Errorf("reserve a taken node: %d %s, want 409 %q", r.status, r.body, want)
	}
	// The same instance again, and clearing, are not refused.
	if r := e.do("PATCH", "/v1/nodes/"+id, "1.82", []map[string]any{{"op": "add", "path": "/instance_uuid", "value": inst}}); r.status != http.StatusOK {
		t.Errorf("same instance again: %d %s", r.status, r.body)
	}
	if r := e.do("PATCH", "/v1/nodes/"+id, "1.82", []map[string]any{{"op": "remove", "path": "/instance_uuid"}}); r.status != http.StatusOK {
		t.Errorf("clear: %d %s", r.status, r.body)
	}
}

// TestChassis: CRUD, the chassis' nodes, nodes' chassis_uuid and its
// filter, with Ironic's refusals.
func TestChassis(t *testing.T) {
	e := newEnv(t)
	r := e.do("POST", "/v1/chassis", "1.82", map[string]any{"description": "rack 1", "extra": map[string]any{"row": "a"}})
	if r.status != http.StatusCreated {
		t.Fatalf("create chassis: %d %s", r.status, r.body)
	}
	ch := r.json(t)
	cid := ch["uuid"].(string)
	if r.header.Get("Location") != e.srv.URL+"/v1/chassis/"+cid || ch["description"] != "rack 1" || ch["nodes"] == nil || ch["links"] == nil {
		t.Errorf("created chassis %v location %q", ch, r.header.Get("Location"))
	}
	l := e.do("GET", "/v1/chassis", "1.82", nil).json(t)["chassis"].([]any)
	if len(l) != 1 || len(l[0].(map[string]any)) != 3 { // uuid, description, links
		t.Errorf("chassis list %v", l)
	}
	d := e.do("GET", "/v1/chassis/detail", "1.82", nil).json(t)["chassis"].([]any)
	if len(d) != 1 || d[0].(map[string]any)["extra"] == nil {
		t.Errorf("chassis detail %v", d)
	}
	if r := e.do("PATCH", "/v1/chassis/"+cid, "1.82", []map[string]any{{"op": "replace", "path": "/description", "value": "rack 2"}}); r.status != http.StatusOK || r.json(t)["description"] != "rack 2" {
		t.Errorf("patch chassis: %d %s", r.status, r.body)
	}

	missing := "0d6b8f0e-3c1a-4f5e-8a2b-7c9d1e3f5a71"
	r = e.do("POST", "/v1/nodes", "1.82", map[string]any{"driver": "fake-hardware", "chassis_uuid": missing})
	if want := "Chassis " + missing + " could not be found."; r.status != http.StatusBadRequest || r.faultstring(t) != want {
		t.Errorf("node in a missing chassis: %d %s, want 400 %q", r.status, r.body, want)
	}
	in := e.createNode(map[string]any{"driver": "fake-hardware", "chassis_uuid": cid})
	if in["chassis_uuid"] != cid {
		t.Errorf("node chassis_uuid %v", in["chassis_uuid"])
	}
	out := e.createNode(map[string]any{"driver": "fake-hardware"})["uuid"].(string)
	if got := listUUIDs(t, e.do("GET", "/v1/chassis/"+cid+"/nodes", "1.82", nil)); fmt.Sprint(got) != fmt.Sprint([]string{in["uuid"].(string)}) {
		t.Errorf("chassis nodes %v", got)
	}
	if got := listUUIDs(t, e.do("GET", "/v1/nodes?chassis_uuid="+cid, "1.82", nil)); fmt.Sprint(got) != fmt.Sprint([]string{in["uuid"].(string)}) {
		t.Errorf("?chassis_uuid= %v", got)
	}
	if r := e.do("GET", "/v1/nodes?chassis_uuid="+missing, "1.82", nil); r.status != http.StatusNotFound {
		t.Errorf("?chassis_uuid= of a missing chassis: %d %s", r.status, r.body)
	}
	if r := e.do("PATCH", "/v1/nodes/"+out, "1.82", []map[string]any{{"op": "add", "path": "/chassis_uuid", "value": missing}}); r.status != http.StatusBadRequest {
		t.Errorf("patch to a missing chassis: %d %s", r.status, r.body)
	}

	r = e.do("DELETE", "/v1/chassis/"+cid, "1.82", nil)
	if want := "Cannot complete the requested action because chassis " + cid + " contains nodes."; r.status != http.StatusBadRequest || r.faultstring(t) != want {
		t.Errorf("delete a chassis with nodes: %d %s, want 400 %q", r.status, r.body, want)
	}
	if r := e.do("PATCH", "/v1/nodes/"+in["uuid"].(string), "1.24", []map[string]any{{"op": "remove", "path": "/chassis_uuid"}}); r.status != http.StatusNotAcceptable {
		t.Errorf("remove chassis_uuid at 1.24: %d %s, want 406", r.status, r.body)
	}
	if r := e.do("PATCH", "/v1/nodes/"+in["uuid"].(string), "1.25", []map[string]any{{"op": "remove", "path": "/chassis_uuid"}}); r.status != http.StatusOK {
		t.Fatalf("remove chassis_uuid: %d %s", r.status, r.body)
	}
	if r := e.do("DELETE", "/v1/chassis/"+cid, "1.82", nil); r.status != http.StatusNoContent {
		t.Errorf("delete an empty chassis: %d %s", r.status, r.body)
	}
	if r := e.do("GET", "/v1/chassis/"+cid, "1.82", nil); r.status != http.StatusNotFound || r.faultstring(t) != "Chassis "+cid+" could not be found." {
		t.Errorf("deleted chassis: %d %s", r.status, r.body)
	}
}

// TestEveryChassisFieldRoundTrips walks the chassis field table.
func TestEveryChassisFieldRoundTrips(t *testing.T) {
	e := newEnv(t)
	created := e.do("POST", "/v1/chassis", maxVersion(), map[string]any{"description": "rt"})
	if created.status != http.StatusCreated {
		t.Fatalf("create: %d %s", created.status, created.body)
	}
	roundTrip(t, e, chassisResource, "chassis", created.json(t)["uuid"].(string))
}

// TestV1DocumentLinksNodeFieldResources: chassis at every version, shards
// from 1.82.
func TestV1DocumentLinksNodeFieldResources(t *testing.T) {
	e := newEnv(t)
	doc := e.do("GET", "/v1", "1.82", nil).json(t)
	for _, k := range []string{"chassis", "shards"} {
		links, _ := doc[k].([]any)
		if len(links) != 2 || links[0].(map[string]any)["href"] != e.srv.URL+"/v1/"+k+"/" {
			t.Errorf("/v1 %s links %v", k, doc[k])
		}
		if r := e.do("GET", "/v1/"+k, "1.82", nil); r.status != http.StatusOK {
			t.Errorf("the linked %s: %d", k, r.status)
		}
	}
	if _, ok := e.do("GET", "/v1", "1.81", nil).json(t)["shards"]; ok {
		t.Errorf("shards linked at 1.81")
	}
}

// TestChassisSortKeysAreTheStores: the chassis table's sort keys are the
// store's, and each sorts a list (as TestSortKeysAreTheStores for nodes and
// ports).
func TestChassisSortKeysAreTheStores(t *testing.T) {
	var table, want []string
	for _, f := range chassisResource.fields {
		if f.sortable {
			table = append(table, f.name)
		}
	}
	for k := range store.ChassisSortKeys {
		if k != "id" {
			want = append(want, k)
		}
	}
	if fmt.Sprint(sorted(table...)) != fmt.Sprint(sorted(want...)) {
		t.Errorf("chassis sort keys in the field table %v, in the store %v", sorted(table...), sorted(want...))
	}
	e := newEnv(t)
	e.do("POST", "/v1/chassis", "1.82", map[string]any{"description": "sorted"})
	for _, k := range append(table, "id") {
		if r := e.do("GET", "/v1/chassis?sort_key="+k, "1.82", nil); r.status != http.StatusOK {
			t.Errorf("sort chassis by %s: %d %s", k, r.status, r.body)
		}
	}
}
