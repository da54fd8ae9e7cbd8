package apiserver

import (
	"context"
	"net/http"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/ironflow/ironflow/store"
)

// poweredOffNode creates a node whose power state is "power off", the only
// state Ironic changes volume objects in.
func (e *env) poweredOffNode(name string) string {
	e.t.Helper()
	uuid := e.createNode(map[string]any{"driver": "fake-hardware", "name": name})["uuid"].(string)
	e.setPower(uuid, "power off")
	return uuid
}

func (e *env) setPower(uuid, state string) {
	e.t.Helper()
	if _, err := e.st.SetPowerState(context.Background(), uuid, &state, nil, nil); err != nil {
		e.t.Fatal(err)
	}
}

func TestEveryVolumeConnectorFieldRoundTrips(t *testing.T) {
	e := newEnv(t)
	node := e.poweredOffNode("vc-node")
	created := e.do("POST", "/v1/volume/connectors", maxVersion(), map[string]any{
		"node_uuid": node, "type": "iqn", "connector_id": "iqn.2010-10.org.openstack:rt"})
	if created.status != http.StatusCreated {
		t.Fatalf("create: %d %s", created.status, created.body)
	}
	roundTrip(t, e, connectorResource, "volume/connectors", created.json(t)["uuid"].(string))
}

func TestEveryVolumeTargetFieldRoundTrips(t *testing.T) {
	e := newEnv(t)
	node := e.poweredOffNode("vt-node")
	created := e.do("POST", "/v1/volume/targets", maxVersion(), map[string]any{
		"node_uuid": node, "volume_type": "iscsi", "boot_index": 0, "volume_id": "vol-rt"})
	if created.status != http.StatusCreated {
		t.Fatalf("create: %d %s", created.status, created.body)
	}
	roundTrip(t, e, targetResource, "volume/targets", created.json(t)["uuid"].(string))
}

// TestVolumeListsNovaCalls: the calls Nova's driver makes in its failure
// cleanup, destroy and get_volume_connector.
func TestVolumeListsNovaCalls(t *testing.T) {
	e := newEnv(t)
	node := e.poweredOffNode("nova-node")
	for _, kind := range []string{"targets", "connectors"} {
		r := e.do("GET", "/v1/volume/"+kind+"?detail=True&node="+node, "1.32", nil)
		if r.status != http.StatusOK {
			t.Fatalf("%s of a node without any: %d %s", kind, r.status, r.body)
		}
		if items, ok := r.json(t)[kind].([]any); !ok || len(items) != 0 {
			t.Errorf("%s: %s, want an empty list", kind, r.body)
		}
		r = e.do("GET", "/v1/volume/"+kind+"?detail=True&node=nova-node", "1.32", nil)
		if r.status != http.StatusOK {
			t.Errorf("%s by node name: %d %s", kind, r.status, r.body)
		}
		r = e.do("GET", "/v1/volume/"+kind+"?node=00000000-0000-0000-0000-000000000000", "1.32", nil)
		if want := "Node 00000000-0000-0000-0000-000000000000 could not be found."; r.status != http.StatusNotFound || r.faultstring(t) != want {
			t.Errorf("%s of an unknown node: %d %s", kind, r.status, r.body)
		}
		if r := e.do("GET", "/v1/volume/"+kind, "1.31", nil); r.status != http.StatusNotFound {
			t.Errorf("%s at 1.31: %d, want 404", kind, r.status)
		}
		r = e.do("GET", "/v1/volume/"+kind+"?marker=00000000-0000-0000-0000-0000000000aa", "1.32", nil)
		if !strings.HasSuffix(r.faultstring(t), " 00000000-0000-0000-0000-0000000000aa could not be found.") || r.status != http.StatusNotFound {
			t.Errorf("%s after an unknown marker: %d %s", kind, r.status, r.body)
		}
		r = e.do("GET", "/v1/volume/"+kind+"?detail=True&fields=uuid", "1.32", nil)
		if want := "Can't fetch a subset of fields with 'detail' set"; r.status != http.StatusBadRequest || r.faultstring(t) != want {
			t.Errorf("%s with detail and fields: %d %s", kind, r.status, r.body)
		}
	}
}

func TestVolumeConnectorRules(t *testing.T) {
	e := newEnv(t)
	node := e.poweredOffNode("vc")
	body := map[string]any{"node_uuid": node, "type": "iqn", "connector_id": "iqn.2010-10.org.openstack:vc"}
	r := e.do("POST", "/v1/volume/connectors", "1.32", body)
	if r.status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	vc := r.json(t)
	id := vc["uuid"].(string)
	if loc := r.header.Get("Location"); loc != e.srv.URL+"/v1/volume/connectors/"+id {
		t.Errorf("Location %q", loc)
	}
	if vc["node_uuid"] != node || vc["extra"] == nil || vc["links"] == nil {
		t.Errorf("created %v", vc)
	}

	r = e.do("POST", "/v1/volume/connectors", "1.32", body)
	if want := "A volume connector with type iqn and connector ID iqn.2010-10.org.openstack:vc already exists."; r.status != http.StatusConflict || r.faultstring(t) != want {
		t.Errorf("duplicate: %d %s", r.status, r.body)
	}
	r = e.do("POST", "/v1/volume/connectors", "1.32", map[string]any{"node_uuid": "00000000-0000-0000-0000-000000000001", "type": "ip", "connector_id": "10.0.0.1"})
	if want := "Node 00000000-0000-0000-0000-000000000001 could not be found."; r.status != http.StatusBadRequest || r.faultstring(t) != want {
		t.Errorf("unknown node: %d %s, want 400 %q", r.status, r.body, want)
	}
	r = e.do("POST", "/v1/volume/connectors", "1.32", map[string]any{"node_uuid": node, "type": "ip"})
	if want := "Schema error for connector: 'connector_id' is a required property"; r.status != http.StatusBadRequest || r.faultstring(t) != want {
		t.Errorf("missing connector_id: %d %s", r.status, r.body)
	}

	// Lists: default fields, detail, below the node.
	r = e.do("GET", "/v1/volume/connectors", "1.32", nil)
	items := r.json(t)["connectors"].([]any)
	if len(items) != 1 || strings.Join(sortedKeys(items[0].(map[string]any)), ",") != "connector_id,links,node_uuid,type,uuid" {
		t.Errorf("list without detail: %s", r.body)
	}
	r = e.do("GET", "/v1/nodes/vc/volume/connectors?detail=True", "1.32", nil)
	if items := r.json(t)["connectors"].([]any); len(items) != 1 || items[0].(map[string]any)["extra"] == nil {
		t.Errorf("node's connectors with detail: %s", r.body)
	}
	if r := e.do("GET", "/v1/nodes/vc/volume/connectors/"+id, "1.32", nil); r.status != http.StatusForbidden || r.faultstring(t) != "Operation not permitted." {
		t.Errorf("connector below its node: %d %s", r.status, r.body)
	}
	r = e.do("GET", "/v1/nodes/vc/volume", "1.32", nil)
	if links := r.json(t)["targets"].([]any); r.status != http.StatusOK || links[0].(map[string]any)["href"] != e.srv.URL+"/v1/nodes/vc/volume/targets" {
		t.Errorf("node's volume document: %d %s", r.status, r.body)
	}
	if r := e.do("GET", "/v1/volume", "1.32", nil); r.status != http.StatusOK || r.json(t)["connectors"] == nil {
		t.Errorf("volume document: %d %s", r.status, r.body)
	}
	if doc := e.do("GET", "/v1", "1.32", nil).json(t); doc["volume"] == nil {
		t.Errorf("the /v1 document at 1.32 does not link volume: %v", doc)
	}
	if doc := e.do("GET", "/v1", "1.31", nil).json(t); doc["volume"] != nil {
		t.Errorf("the /v1 document at 1.31 links volume: %v", doc)
	}
	if r := e.do("GET", "/v1/volume/connectors/not-a-uuid", "1.32", nil); r.status != http.StatusBadRequest || r.faultstring(t) != "Expected UUID for connector_uuid: not-a-uuid" {
		t.Errorf("show by a non-UUID: %d %s", r.status, r.body)
	}

	// Changes need the node powered off, as Ironic's conductor.
	e.setPower(node, "power on")
	patch := []map[string]any{{"op": "replace", "path": "/connector_id", "value": "iqn.2010-10.org.openstack:other"}}
	r = e.do("PATCH", "/v1/volume/connectors/"+id, "1.32", patch)
	if want := `The requested action "volume connector update" can not be performed on node "` + node + `" while it is in state "power on".`; r.status != http.StatusBadRequest || r.faultstring(t) != want {
		t.Errorf("update while powered on: %d %s, want %q", r.status, r.body, want)
	}
	r = e.do("DELETE", "/v1/volume/connectors/"+id, "1.32", nil)
	if want := `The requested action "volume connector deletion" can not be performed on node "` + node + `" while it is in state "power on".`; r.status != http.StatusBadRequest || r.faultstring(t) != want {
		t.Errorf("delete while powered on: %d %s", r.status, r.body)
	}
	e.setPower(node, "power off")
	e.eng.hold(node, true)
	if r := e.do("DELETE", "/v1/volume/connectors/"+id, "1.32", nil); r.status != http.StatusConflict {
		t.Errorf("delete while a workflow holds the node: %d %s", r.status, r.body)
	}
	e.eng.hold(node, false)
	r = e.do("PATCH", "/v1/volume/connectors/"+id, "1.32", []map[string]any{{"op": "replace", "path": "/node_uuid", "value": "nope"}})
	if want := "Expected a UUID for node_uuid, but received nope."; r.status != http.StatusBadRequest || r.faultstring(t) != want {
		t.Errorf("patch to a non-UUID node: %d %s", r.status, r.body)
	}
	r = e.do("PATCH", "/v1/volume/connectors/"+id, "1.32", []map[string]any{{"op": "replace", "path": "/uuid", "value": node}})
	if want := "Cannot patch /uuid. Only the following can be updated: connector_id, extra, node_uuid, type"; r.status != http.StatusBadRequest || r.faultstring(t) != want {
		t.Errorf("patch of uuid: %d %s", r.status, r.body)
	}
	if r := e.do("PATCH", "/v1/volume/connectors/"+id, "1.32", patch); r.status != http.StatusOK || r.json(t)["connector_id"] != "iqn.2010-10.org.openstack:other" {
		t.Errorf("update while powered off: %d %s", r.status, r.body)
	}
	if r := e.do("DELETE", "/v1/volume/connectors/"+id, "1.32", nil); r.status != http.StatusNoContent {
		t.Errorf("delete while powered off: %d %s", r.status, r.body)
	}
	if r := e.do("GET", "/v1/volume/connectors/"+id, "1.32", nil); r.status != http.StatusNotFound || r.faultstring(t) != "Volume connector "+id+" could not be found." {
		t.Errorf("show after delete: %d %s", r.status, r.body)
	}
}

func TestVolumeTargetBootIndexIsUniquePerNode(t *testing.T) {
	e := newEnv(t)
	node := e.poweredOffNode("vt")
	body := map[string]any{"node_uuid": node, "volume_type": "iscsi", "boot_index": 0, "volume_id": "vol-1"}
	if r := e.do("POST", "/v1/volume/targets", "1.32", body); r.status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	body["volume_id"] = "vol-2"
	r := e.do("POST", "/v1/volume/targets", "1.32", body)
	if want := "A volume target with boot index '0' for the same node already exists."; r.status != http.StatusConflict || r.faultstring(t) != want {
		t.Errorf("same boot_index: %d %s", r.status, r.body)
	}
	body["boot_index"] = "1"
	r = e.do("POST", "/v1/volume/targets", "1.32", body)
	if want := "Schema error for target: '1' is not of type 'integer'"; r.status != http.StatusBadRequest || r.faultstring(t) != want {
		t.Errorf("string boot_index: %d %s", r.status, r.body)
	}
	r = e.do("GET", "/v1/volume/targets?node="+node, "1.32", nil)
	items := r.json(t)["targets"].([]any)
	if len(items) != 1 || strings.Join(sortedKeys(items[0].(map[string]any)), ",") != "boot_index,links,node_uuid,uuid,volume_id,volume_type" {
		t.Errorf("targets without detail: %s", r.body)
	}
}

// TestStorageInterface: noop is the only storage interface ironflow
// enables; Ironic's noop storage interface validates true and ignores
// volume targets (it deploys the image as without them), so a node with
// targets still validates.
func TestStorageInterface(t *testing.T) {
	e := newEnv(t)
	r := e.do("POST", "/v1/nodes", "1.33", map[string]any{"driver": "fake-hardware", "storage_interface": "cinder"})
	want := "Could not find the following interface in the 'ironic.hardware.interfaces.storage' entrypoint: cinder. Valid interfaces are ['noop']."
	if r.status != http.StatusBadRequest || r.faultstring(t) != want {
		t.Errorf("cinder: %d %s, want 400 %q", r.status, r.body, want)
	}
	node := e.poweredOffNode("st")
	if n := e.node(node); n.StorageInterface != "noop" {
		t.Errorf("default storage_interface %q", n.StorageInterface)
	}
	if r := e.do("POST", "/v1/volume/targets", "1.32", map[string]any{"node_uuid": node, "volume_type": "iscsi", "boot_index": 0, "volume_id": "v"}); r.status != http.StatusCreated {
		t.Fatal(r.status, string(r.body))
	}
	r = e.do("GET", "/v1/nodes/"+node+"/validate", "1.33", nil)
	if st := r.json(t)["storage"].(map[string]any); st["result"] != true {
		t.Errorf("storage validation with a target and noop: %v", st)
	}
}

// TestVolumeSortKeysAreTheStores: the tables' sort keys are the store's,
// and each sorts a list.
func TestVolumeSortKeysAreTheStores(t *testing.T) {
	e := newEnv(t)
	for _, c := range []struct {
		path   string
		fields []string
		keys   map[string]string
	}{
		{"connectors", sortableNames(connectorResource), store.VolumeConnectorSortKeys},
		{"targets", sortableNames(targetResource), store.VolumeTargetSortKeys},
	} {
		var want []string
		for k := range c.keys {
			if k != "id" {
				want = append(want, k)
			}
		}
		sort.Strings(want)
		if !reflect.DeepEqual(c.fields, want) {
			t.Errorf("%s sort keys in the field table %v, in the store %v", c.path, c.fields, want)
		}
		for _, k := range append(c.fields, "id") {
			if r := e.do("GET", "/v1/volume/"+c.path+"?sort_key="+k, "1.32", nil); r.status != http.StatusOK {
				t.Errorf("sort %s by %s: %d %s", c.path, k, r.status, r.body)
			}
		}
		r := e.do("GET", "/v1/volume/"+c.path+"?sort_key=extra", "1.32", nil)
		if want := "The sort_key value extra is an invalid field for sorting"; r.status != http.StatusBadRequest || r.faultstring(t) != want {
			t.Errorf("sort %s by extra: %d %s", c.path, r.status, r.body)
		}
	}
}

func sortableNames[T, F any](r *resource[T, F]) []string {
	var out []string
	for _, f := range r.fields {
		if f.sortable {
			out = append(out, f.name)
		}
	}
	sort.Strings(out)
	return out
}
