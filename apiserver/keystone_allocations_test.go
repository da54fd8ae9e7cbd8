package apiserver

import (
	"fmt"
	"slices"
	"testing"
)

// Ironic's allocation rules (API 1.52) persona by persona, with the
// allocation's owner as the target (policy.py's ALLOCATION_OWNER_MEMBER and
// ALLOCATION_OWNER_READER): an allocation of the owner project ("own") and
// of another project ("other"), each on a node it holds.

// ksAllocationRoute: the allocation routes, checked by AllocationByPersona.
func ksAllocationRoute(rr routeRule) bool {
	switch rr.kind {
	case onAllocation, onAllocationCreate, onNodeAllocation:
		return true
	}
	return rr.list == "baremetal:allocation:list"
}

// ksAllocationRoutes are the routes AllocationByPersona covers.
var ksAllocationRoutes = []string{"GET /v1/allocations", "POST /v1/allocations", "GET /v1/allocations/:ident",
	"PATCH /v1/allocations/:ident", "DELETE /v1/allocations/:ident", "GET /v1/nodes/:node/allocation", "DELETE /v1/nodes/:node/allocation"}

// allocation makes, as the system admin, an allocation of owner that
// holds a fresh node owned by the same project (backfilled: the node is
// active with the allocation as its instance), and returns both.
func (e *ksEnv) allocation(owner string) (alloc, node string) {
	e.t.Helper()
	node = e.fixture(owner, "", false).node
	if _, err := e.st.Pool().Exec(e.t.Context(), `UPDATE nodes SET provision_state = 'active', resource_class = 'ks' WHERE uuid = $1`, node); err != nil {
		e.t.Fatal(err)
	}
	alloc = e.create("/v1/allocations", map[string]any{"node": node, "owner": owner, "name": fmt.Sprintf("ks-alloc-%d", e.seq.Add(1))})
	return alloc, node
}

func (e *ksEnv) allocationByPersona(t *testing.T) {
	reader := func(p ksPersona, kind string) bool { // ALLOCATION_READER
		return p == pSA || p == pSR || kind == "own" && (p == pOM || p == pOR)
	}
	member := func(p ksPersona, kind string) bool { // ALLOCATION_MEMBER
		return p == pSA || kind == "own" && p == pOM
	}
	for _, p := range ksPersonas {
		for _, kind := range []string{"own", "other"} {
			owner := e.ownerPID
			if kind == "other" {
				owner = "ks-someone-else"
			}
			name := fmt.Sprintf("%s on an %s allocation", p, kind)
			a, node := e.allocation(owner)
			// Below the node: node:get hides the node, then the
			// allocation's own rule.
			r := e.req(e.tokens[p], "GET", "/v1/nodes/"+node+"/allocation", nil)
			switch {
			case reader(p, kind) && (r.status != 200 || r.json(t)["uuid"] != a):
				t.Errorf("%s: GET the node's allocation %d %s, want 200", name, r.status, r.body)
			case !reader(p, kind) && (r.status != 404 || r.faultstring(t) != fmt.Sprintf("Node %s could not be found.", node)):
				t.Errorf("%s: GET the node's allocation %d %s, want 404 (hidden node)", name, r.status, r.body)
			}
			r = e.req(e.tokens[p], "GET", "/v1/allocations/"+a, nil)
			switch {
			case reader(p, kind) && r.status != 200:
				t.Errorf("%s: GET %d %s, want 200", name, r.status, r.body)
			case !reader(p, kind) && (r.status != 404 || r.faultstring(t) != fmt.Sprintf("Allocation %s could not be found.", a)):
				t.Errorf("%s: GET %d %s, want 404 (hidden)", name, r.status, r.body)
			}
			r = e.req(e.tokens[p], "PATCH", "/v1/allocations/"+a, []map[string]any{{"op": "add", "path": "/extra/k", "value": "v"}})
			switch {
			case member(p, kind) && r.status != 200:
				t.Errorf("%s: PATCH %d %s, want 200", name, r.status, r.body)
			case !member(p, kind) && reader(p, kind) && (r.status != 403 || r.faultstring(t) != "Access was denied to the following resource: baremetal:allocation:update"):
				t.Errorf("%s: PATCH %d %s, want 403", name, r.status, r.body)
			case !reader(p, kind) && r.status != 404:
				t.Errorf("%s: PATCH %d %s, want 404 (hidden)", name, r.status, r.body)
			}
			// The allocation's node is active: a member passes the
			// policy and meets Ironic's 409.
			r = e.req(e.tokens[p], "DELETE", "/v1/allocations/"+a, nil)
			switch {
			case member(p, kind) && r.status != 409:
				t.Errorf("%s: DELETE %d %s, want 409 (the node is active)", name, r.status, r.body)
			case !member(p, kind) && reader(p, kind) && r.status != 403:
				t.Errorf("%s: DELETE %d %s, want 403", name, r.status, r.body)
			case !reader(p, kind) && r.status != 404:
				t.Errorf("%s: DELETE %d %s, want 404 (hidden)", name, r.status, r.body)
			}
		}
	}

	// A project's list holds its own allocations only.
	own, _ := e.allocation(e.ownerPID)
	other, _ := e.allocation("ks-someone-else")
	for _, p := range ksPersonas {
		r := e.req(e.tokens[p], "GET", "/v1/allocations?limit=1000", nil)
		if r.status != 200 {
			t.Fatalf("%s: list: %d %s", p, r.status, r.body)
		}
		var seen []string
		for _, it := range r.json(t)["allocations"].([]any) {
			seen = append(seen, it.(map[string]any)["uuid"].(string))
		}
		all := p == pSA || p == pSR
		if got, want := slices.Contains(seen, own), all || p == pOM || p == pOR; got != want {
			t.Errorf("%s: its project's allocation in the list: %v, want %v", p, got, want)
		}
		if got := slices.Contains(seen, other); got != all {
			t.Errorf("%s: another project's allocation in the list: %v, want %v", p, got, all)
		}
	}

	// post: a project member's allocation is its project's; naming
	// another owner needs create_restricted.
	r := e.req(e.tokens[pOM], "POST", "/v1/allocations", map[string]any{"resource_class": "ks"})
	if r.status != 201 || r.json(t)["owner"] != e.ownerPID {
		t.Errorf("owner member creates an allocation: %d %s, want 201 owned by %s", r.status, r.body, e.ownerPID)
	}
	want := fmt.Sprintf("Cannot create allocation with an owner Project ID value ks-someone-else not matching the requestor Project ID %s. "+
		"Policy baremetal:allocation:create_restricted is required for this capability.", e.ownerPID)
	if r := e.req(e.tokens[pOM], "POST", "/v1/allocations", map[string]any{"resource_class": "ks", "owner": "ks-someone-else"}); r.status != 403 || r.faultstring(t) != want {
		t.Errorf("owner member creates another project's allocation: %d %s, want 403 %q", r.status, r.body, want)
	}
	if r := e.req(e.tokens[pSR], "POST", "/v1/allocations", map[string]any{"resource_class": "ks"}); r.status != 403 {
		t.Errorf("system reader creates an allocation: %d %s, want 403", r.status, r.body)
	}
	// A node of another project is no candidate of a project's allocation.
	foreign := e.fixture("ks-someone-else", "", false).node
	if r := e.req(e.tokens[pOM], "POST", "/v1/allocations", map[string]any{"resource_class": "ks", "candidate_nodes": []string{foreign}}); r.status != 400 ||
		r.faultstring(t) != "Nodes cannot be found: "+foreign {
		t.Errorf("owner member names another project's node as candidate: %d %s, want 400", r.status, r.body)
	}
}
