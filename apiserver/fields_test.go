package apiserver

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/ironflow/ironflow/store"
)

// TestEveryNodeFieldRoundTrips walks the node field table itself, so that a
// field added to it is covered without touching this test: each field is
// shown at and above its microversion and hidden below, PATCH changes it
// or refuses it as its access says (and refuses it below its version),
// required fields cannot be removed, and each declared list filter filters
// and is refused below its own version.
func TestEveryNodeFieldRoundTrips(t *testing.T) {
	serveFieldsOf(t, nodeFields)
	e := newEnv(t)
	// The chassis a chassis_uuid candidate of patchCandidates names.
	if r := e.do("POST", "/v1/chassis", maxVersion(), map[string]any{"uuid": "0d6b8f0e-3c1a-4f5e-8a2b-7c9d1e3f5a70"}); r.status != http.StatusCreated {
		t.Fatalf("create chassis: %d %s", r.status, r.body)
	}
	created := e.do("POST", "/v1/nodes", maxVersion(), map[string]any{
		"driver": "fake-hardware", "name": "round-trip", "owner": "o1", "lessee": "l1",
		"resource_class": "rc1", "instance_uuid": "9f3e1a52-5b1c-4c1e-9d7e-2a6f8d1b0c44",
	})
	if created.status != http.StatusCreated {
		t.Fatalf("create: %d %s", created.status, created.body)
	}
	roundTrip(t, e, nodeResource, "nodes", created.json(t)["uuid"].(string))
}

// TestEveryPortFieldRoundTrips is the same walk over the port table.
func TestEveryPortFieldRoundTrips(t *testing.T) {
	serveFieldsOf(t, portFields)
	e := newEnv(t)
	node := e.createNode(map[string]any{"driver": "fake-hardware"})
	created := e.do("POST", "/v1/ports", maxVersion(), map[string]any{
		"address": "52:54:00:aa:bb:01", "node_uuid": node["uuid"],
		"physical_network": "physnet1",
	})
	if created.status != http.StatusCreated {
		t.Fatalf("create: %d %s", created.status, created.body)
	}
	roundTrip(t, e, portResource, "ports", created.json(t)["uuid"].(string))
}

// maxVersion is the highest version served (MaxVersionMinor unless the test
// serves ahead of it, serveUpTo).
func maxVersion() string { return "1." + strconv.Itoa(servedMaxMinor) }

// serveFieldsOf lets a table walk reach the fields implemented ahead of
// MaxVersionMinor (docs/api-versions.md).
func serveFieldsOf[T, F any](t *testing.T, fields []field[T, F]) {
	top := MaxVersionMinor
	for _, f := range fields {
		top = max(top, f.since)
	}
	serveUpTo(t, top)
}

func roundTrip[T, F any](t *testing.T, e *env, r *resource[T, F], collection, uuid string) {
	maxV := maxVersion()
	at := func(minor int) string { return "1." + strconv.Itoa(minor) }
	show := func(version string) map[string]any {
		t.Helper()
		res := e.do("GET", "/v1/"+collection+"/"+uuid, version, nil)
		if res.status != http.StatusOK {
			t.Fatalf("show at %s: %d %s", version, res.status, res.body)
		}
		return res.json(t)
	}
	patch := func(version string, ops ...map[string]any) resp {
		t.Helper()
		return e.do("PATCH", "/v1/"+collection+"/"+uuid, version, ops)
	}

	// floor is the version that introduced the resource: below it the
	// resource itself is a 404, so "below its version" checks start above.
	floor := MinVersionMinor
	for i, f := range r.fields {
		if i == 0 || f.since < floor {
			floor = f.since
		}
	}
	for _, f := range r.fields {
		t.Run(f.name, func(t *testing.T) {
			if _, ok := show(at(f.since))[f.name]; !ok {
				t.Errorf("hidden at 1.%d, its version", f.since)
			}
			if _, ok := show(maxV)[f.name]; !ok {
				t.Errorf("hidden at %s", maxV)
			}
			// A resource introduced at a version (volume: 1.32) is a 404
			// below it, which hides its fields too.
			hiddenBelow := false
			if f.since > floor {
				if res := e.do("GET", "/v1/"+collection+"/"+uuid, at(f.since-1), nil); res.status == http.StatusNotFound {
					hiddenBelow = true
				} else if v, ok := show(at(f.since - 1))[f.name]; ok {
					t.Errorf("shown at 1.%d, below its version: %v", f.since-1, v)
				}
			}

			path := "/" + f.name
			if f.access != writable {
				res := patch(maxV, map[string]any{"op": "replace", "path": path, "value": "x"})
				want := fmt.Sprintf("'%s' is an internal attribute and can not be updated", path)
				if !r.patch.internal[f.name] {
					// Resources that refuse as Ironic's patch_validate_allowed_fields.
					want = fmt.Sprintf("Cannot patch %s. Only the following can be updated: %s", path, strings.Join(allowedNames(r.patch.allowed), ", "))
				}
				if res.status != http.StatusBadRequest || res.faultstring(t) != want {
					t.Errorf("PATCH of a read-only field: %d %s, want 400 %q", res.status, res.body, want)
				}
				return
			}

			current := show(maxV)[f.name]
			changed := false
			for _, v := range patchCandidates(f.name, current) {
				res := patch(maxV, map[string]any{"op": "replace", "path": path, "value": v})
				if res.status != http.StatusOK {
					continue
				}
				if got := res.json(t)[f.name]; !sameJSON(got, v) {
					t.Errorf("PATCH to %v answered %v", v, got)
				}
				if got := show(maxV)[f.name]; !sameJSON(got, v) {
					t.Errorf("PATCH to %v then shown as %v", v, got)
				}
				changed = true
				break
			}
			if !changed {
				t.Errorf("no value could be PATCHed (current %v)", current)
			}
			if f.since > floor {
				res := patch(at(f.since-1), map[string]any{"op": "replace", "path": path, "value": show(maxV)[f.name]})
				if res.status != http.StatusNotAcceptable && !(hiddenBelow && res.status == http.StatusNotFound) {
					t.Errorf("PATCH at 1.%d, below its version: %d %s, want 406", f.since-1, res.status, res.body)
				}
			}
			res := patch(maxV, map[string]any{"op": "remove", "path": path})
			if f.keep {
				if res.status != http.StatusBadRequest {
					t.Errorf("remove of a field that must be kept: %d %s, want 400", res.status, res.body)
				}
			} else if f.required {
				want := fmt.Sprintf("'%s' is a mandatory attribute and can not be removed", path)
				if res.status != http.StatusBadRequest || res.faultstring(t) != want {
					t.Errorf("remove of a required field: %d %s, want 400 %q", res.status, res.body, want)
				}
			} else if res.status != http.StatusOK {
				t.Errorf("remove: %d %s, want 200", res.status, res.body)
			}
		})
	}

	// Filters run against the object as the PATCHes above left it.
	final := show(maxV)
	for _, lf := range r.filters {
		t.Run("filter "+lf.name, func(t *testing.T) {
			value, ok := filterValue(final[lf.name])
			if !ok {
				value = "rt-unmatched"
			}
			list := func(version, v string) resp {
				return e.do("GET", "/v1/"+collection+"?fields=uuid&"+lf.name+"="+url.QueryEscape(v), version, nil)
			}
			if r.byName[lf.name] != nil {
				res := list(maxV, value)
				if !ok {
					// A value that matches nothing may be refused by the
					// filter's validation (provision states, faults), never
					// fail otherwise.
					if res.status != http.StatusOK && res.status != http.StatusBadRequest {
						t.Errorf("filter by %q: %d %s", value, res.status, res.body)
					}
				} else if res.status != http.StatusOK || !listHas(t, res, collection, uuid) {
					t.Errorf("filter by the object's own value %q: %d %s, want the object", value, res.status, res.body)
				}
			}
			if lf.since > floor {
				if res := list(at(lf.since-1), value); res.status != http.StatusNotAcceptable {
					t.Errorf("filter at 1.%d, below its version: %d %s, want 406", lf.since-1, res.status, res.body)
				}
			}
		})
	}
}

// TestSortKeysAreTheStores: the field table's sort keys are the ones the
// store can order by, and each sorts a list.
func TestSortKeysAreTheStores(t *testing.T) {
	check := func(t *testing.T, name string, table []string, storeKeys map[string]string) {
		var want []string
		for k := range storeKeys {
			if k != "id" {
				want = append(want, k)
			}
		}
		sort.Strings(want)
		sort.Strings(table)
		if !reflect.DeepEqual(table, want) {
			t.Errorf("%s sort keys in the field table %v, in the store %v", name, table, want)
		}
	}
	var nodeKeys, portKeys []string
	for _, f := range nodeResource.fields {
		if f.sortable {
			nodeKeys = append(nodeKeys, f.name)
		}
	}
	for _, f := range portResource.fields {
		if f.sortable {
			portKeys = append(portKeys, f.name)
		}
	}
	var portgroupKeys []string
	for _, f := range portgroupResource.fields {
		if f.sortable {
			portgroupKeys = append(portgroupKeys, f.name)
		}
	}
	check(t, "node", nodeKeys, store.NodeSortKeys)
	check(t, "port", portKeys, store.PortSortKeys)
	check(t, "portgroup", portgroupKeys, store.PortgroupSortKeys)

	e := newEnv(t)
	e.createNode(map[string]any{"driver": "fake-hardware", "name": "sorted"})
	for _, k := range append(nodeKeys, "id") {
		if r := e.do("GET", "/v1/nodes?sort_key="+k, "1.82", nil); r.status != http.StatusOK {
			t.Errorf("sort nodes by %s: %d %s", k, r.status, r.body)
		}
	}
	for _, k := range append(portKeys, "id") {
		if r := e.do("GET", "/v1/ports?sort_key="+k, "1.82", nil); r.status != http.StatusOK {
			t.Errorf("sort ports by %s: %d %s", k, r.status, r.body)
		}
	}
	for _, k := range append(portgroupKeys, "id") {
		if r := e.do("GET", "/v1/portgroups?sort_key="+k, "1.82", nil); r.status != http.StatusOK {
			t.Errorf("sort portgroups by %s: %d %s", k, r.status, r.body)
		}
	}
	r := e.do("GET", "/v1/nodes?sort_key=driver_info", "1.82", nil)
	if want := "The sort_key value driver_info is an invalid field for sorting"; r.status != http.StatusBadRequest || r.faultstring(t) != want {
		t.Errorf("sort by a field that is no sort key: %d %s", r.status, r.body)
	}
}

// patchCandidates are values to try to PATCH a field to, most telling
// first: a new value of the current value's type, then the current value
// itself (interface and driver names only accept what the driver has).
func patchCandidates(name string, current any) []any {
	var out []any
	if name == "network_data" {
		// Ironic's schema checks it (package networkdata): the smallest
		// network_data it accepts.
		out = append(out, map[string]any{"links": []any{}, "networks": []any{}, "services": []any{}})
	}
	switch t := current.(type) {
	case bool:
		out = append(out, !t)
	case map[string]any:
		out = append(out, map[string]any{"round_trip": name})
	default:
		out = append(out, "rt-"+name, true, "0d6b8f0e-3c1a-4f5e-8a2b-7c9d1e3f5a70")
	}
	return append(out, current)
}

// filterValue is the query value that selects a node shown with v.
func filterValue(v any) (string, bool) {
	switch t := v.(type) {
	case bool:
		return strconv.FormatBool(t), true
	case string:
		return t, t != ""
	}
	return "", false
}

func listHas(t *testing.T, r resp, collection, uuid string) bool {
	t.Helper()
	items, _ := r.json(t)[collection].([]any)
	for _, n := range items {
		if m, _ := n.(map[string]any); m["uuid"] == uuid {
			return true
		}
	}
	return false
}

// sameJSON compares a decoded answer with the Go value sent.
func sameJSON(got, sent any) bool {
	a, _ := json.Marshal(got)
	b, _ := json.Marshal(sent)
	return string(a) == string(b)
}

func allowedNames(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
