package apiserver

import (
	"net/http"
	"reflect"
	"sort"
	"testing"

	"github.com/ironflow/ironflow/store"
)

// TestEveryAllocationFieldRoundTrips walks the allocation field table:
// shown from 1.52 (owner from 1.60), PATCH of name and extra only, and
// the resource_class, state and owner filters.
func TestEveryAllocationFieldRoundTrips(t *testing.T) {
	e := newEnv(t)
	r := e.do("POST", "/v1/allocations", maxVersion(), map[string]any{"resource_class": "rt", "name": "rt-alloc", "owner": "o1",
		"traits": []string{"CUSTOM_RT"}})
	if r.status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.status, r.body)
	}
	roundTrip(t, e, allocationResource, "allocations", r.json(t)["uuid"].(string))
}

// TestAllocationSortKeysAreTheStores: the table's sort keys are the
// store's, and each sorts a list.
func TestAllocationSortKeysAreTheStores(t *testing.T) {
	e := newEnv(t)
	var want []string
	for k := range store.AllocationSortKeys {
		if k != "id" {
			want = append(want, k)
		}
	}
	sort.Strings(want)
	if got := sortableNames(allocationResource); !reflect.DeepEqual(got, want) {
		t.Errorf("allocation sort keys in the field table %v, in the store %v", got, want)
	}
	for _, k := range append(want, "id") {
		if r := e.do("GET", "/v1/allocations?sort_key="+k, maxVersion(), nil); r.status != http.StatusOK {
			t.Errorf("sort_key=%s: %d %s", k, r.status, r.body)
		}
	}
	for _, k := range []string{"extra", "candidate_nodes", "traits"} {
		r := e.do("GET", "/v1/allocations?sort_key="+k, maxVersion(), nil)
		if want := "The sort_key value " + k + " is an invalid field for sorting"; r.status != http.StatusBadRequest || r.faultstring(t) != want {
			t.Errorf("sort_key=%s: %d %s, want 400 %q", k, r.status, r.body, want)
		}
	}
}
