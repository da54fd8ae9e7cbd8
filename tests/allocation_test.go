package tests

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// Allocations (API 1.52–1.79) on the real stack: the api process answers,
// the worker's Allocate workflow on the Temporal dev server picks the
// node, PostgreSQL holds the claim. Each test uses a resource class of its
// own, so that the lab's other nodes are never candidates.

// allocationNodes makes n available fake-hardware nodes of resource class
// rc, named prefix-0..n-1, with a known power state (Ironic allocates no
// node whose power state is unknown), and returns their UUIDs.
func allocationNodes(t *testing.T, prefix, rc string, n int) []string {
	t.Helper()
	var uuids []string
	for i := range n {
		var created map[string]any
		// Below 1.11 a new node is available at once.
		if code, _ := callAt(t, lab.APIURL, "1.10", "POST", "/v1/nodes", map[string]any{"driver": "fake-hardware", "name": fmt.Sprintf("%s-%d", prefix, i)}, &created); code != 201 {
			t.Fatalf("create node %s-%d: %d %v", prefix, i, code, created)
		}
		uuid := created["uuid"].(string)
		patch := []map[string]any{
			{"op": "add", "path": "/resource_class", "value": rc},
			{"op": "add", "path": "/deploy_interface", "value": "fake"},
			{"op": "add", "path": "/automated_clean", "value": false},
		}
		if code, _ := call(t, "PATCH", "/v1/nodes/"+uuid, patch, nil); code != 200 {
			t.Fatalf("patch node %s: %d", uuid, code)
		}
		uuids = append(uuids, uuid)
	}
	// The stack is the package's: the nodes and their allocations go when
	// the test ends, so that no later test (Nova's driver lists every node
	// with an instance) meets them.
	t.Cleanup(func() {
		for _, uuid := range uuids {
			var n struct {
				ProvisionState string `json:"provision_state"`
			}
			if code, _ := callAt(t, lab.APIURL, "1.52", "GET", "/v1/nodes/"+uuid, nil, &n); code == 404 {
				continue
			}
			if n.ProvisionState == "active" {
				_, _ = callAt(t, lab.APIURL, "1.52", "PUT", "/v1/nodes/"+uuid+"/states/provision", map[string]any{"target": "deleted"}, nil)
				waitState(t, uuid, "available", 2*time.Minute)
			}
			_, _ = callAt(t, lab.APIURL, "1.52", "DELETE", "/v1/nodes/"+uuid+"/allocation", nil, nil)
			if code, _ := callAt(t, lab.APIURL, "1.52", "DELETE", "/v1/nodes/"+uuid, nil, nil); code != 204 && code != 404 {
				t.Errorf("clean up node %s: DELETE answered %d", uuid, code)
			}
		}
	})
	for _, uuid := range uuids {
		deadline := time.Now().Add(60 * time.Second)
		for getNode(t, uuid).PowerState == nil {
			if time.Now().After(deadline) {
				t.Fatalf("node %s has no power state after a minute of power sync\nworker log:\n%s", uuid, workerLog())
			}
			time.Sleep(250 * time.Millisecond)
		}
	}
	return uuids
}

type allocationView struct {
	UUID           string         `json:"uuid"`
	Name           *string        `json:"name"`
	NodeUUID       *string        `json:"node_uuid"`
	State          string         `json:"state"`
	LastError      *string        `json:"last_error"`
	ResourceClass  string         `json:"resource_class"`
	CandidateNodes []string       `json:"candidate_nodes"`
	Traits         []string       `json:"traits"`
	Extra          map[string]any `json:"extra"`
	Owner          *string        `json:"owner"`
}

// allocate creates an allocation at 1.79 and waits for it to settle.
func allocate(t *testing.T, body map[string]any) allocationView {
	t.Helper()
	var a allocationView
	if code, _ := callAt(t, lab.APIURL, "1.79", "POST", "/v1/allocations", body, &a); code != 201 {
		t.Fatalf("POST /v1/allocations %v: %d %+v", body, code, a)
	}
	if a.State != "allocating" && body["node"] == nil {
		t.Errorf("a new allocation is %q, want allocating", a.State)
	}
	return waitAllocation(t, a.UUID)
}

func waitAllocation(t *testing.T, uuid string) allocationView {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		var a allocationView
		if code, _ := callAt(t, lab.APIURL, "1.79", "GET", "/v1/allocations/"+uuid, nil, &a); code != 200 {
			t.Fatalf("GET allocation %s: %d", uuid, code)
		}
		if a.State != "allocating" {
			return a
		}
		if time.Now().After(deadline) {
			t.Fatalf("allocation %s still allocating after a minute\nworker log:\n%s", uuid, workerLog())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// fault sends a request at version and returns the status and Ironic's
// faultstring.
func fault(t *testing.T, version, method, path string, body any) (int, string) {
	t.Helper()
	var out map[string]any
	code, _ := callAt(t, lab.APIURL, version, method, path, body, &out)
	return code, faultstring(out)
}

type allocNode struct {
	UUID           string         `json:"uuid"`
	InstanceUUID   *string        `json:"instance_uuid"`
	AllocationUUID *string        `json:"allocation_uuid"`
	InstanceInfo   map[string]any `json:"instance_info"`
	ProvisionState string         `json:"provision_state"`
}

func getAllocNode(t *testing.T, id string) allocNode {
	t.Helper()
	var n allocNode
	if code, _ := callAt(t, lab.APIURL, "1.79", "GET", "/v1/nodes/"+id, nil, &n); code != 200 {
		t.Fatalf("GET node %s: %d", id, code)
	}
	return n
}

// TestAllocationsOnRealStack walks an allocation's life and Ironic's
// answers: the version gates, the choice by resource class and traits, the
// node's instance_uuid and allocation_uuid, the node's own allocation
// route, list filters, PATCH (1.57), the node named as the allocation
// first (1.79), the failures in Ironic's words, delete, and release by
// undeploy and by node delete.
func TestAllocationsOnRealStack(t *testing.T) {
	const rc = "alloc-life"
	nodes := allocationNodes(t, "alloc-life", rc, 6)
	if code, _ := call(t, "PUT", "/v1/nodes/"+nodes[0]+"/traits", map[string]any{"traits": []string{"CUSTOM_GPU"}}, nil); code != 204 {
		t.Fatalf("set traits: %d", code)
	}

	t.Run("VersionGates", func(t *testing.T) {
		for _, c := range []struct {
			method, path string
			want         int
			msg          string
		}{
			{"GET", "/v1/allocations", 404, ""},
			{"POST", "/v1/allocations", 405, "The API version does not allow allocations"},
			{"GET", "/v1/nodes/" + nodes[0] + "/allocation", 404, ""},
		} {
			code, msg := fault(t, "1.51", c.method, c.path, map[string]any{"resource_class": rc})
			if code != c.want || c.msg != "" && msg != c.msg {
				t.Errorf("%s %s at 1.51: %d %q, want %d %q", c.method, c.path, code, msg, c.want, c.msg)
			}
		}
		if code, msg := fault(t, "1.59", "POST", "/v1/allocations", map[string]any{"resource_class": rc, "owner": "p"}); code != 406 {
			t.Errorf("owner at 1.59: %d %q, want 406", code, msg)
		}
	})

	t.Run("ByTraitsThenRelease", func(t *testing.T) {
		a := allocate(t, map[string]any{"resource_class": rc, "traits": []string{"CUSTOM_GPU"}, "extra": map[string]any{"k": "v"}})
		if a.State != "active" || a.NodeUUID == nil || *a.NodeUUID != nodes[0] || a.LastError != nil {
			t.Fatalf("allocation with CUSTOM_GPU: %+v, want active on %s", a, nodes[0])
		}
		n := getAllocNode(t, nodes[0])
		if deref(n.InstanceUUID) != a.UUID || deref(n.AllocationUUID) != a.UUID {
			t.Errorf("node after allocation: instance_uuid %s allocation_uuid %s, want %s", deref(n.InstanceUUID), deref(n.AllocationUUID), a.UUID)
		}
		if tr, _ := n.InstanceInfo["traits"].([]any); len(tr) != 1 || tr[0] != "CUSTOM_GPU" {
			t.Errorf("instance_info traits %v, want [CUSTOM_GPU]", n.InstanceInfo["traits"])
		}
		var byNode allocationView
		if code, _ := callAt(t, lab.APIURL, "1.79", "GET", "/v1/nodes/alloc-life-0/allocation", nil, &byNode); code != 200 || byNode.UUID != a.UUID {
			t.Errorf("GET /v1/nodes/alloc-life-0/allocation: %d %+v", code, byNode)
		}
		for _, q := range []string{"?node=alloc-life-0", "?node=" + nodes[0] + "&state=active", "?resource_class=" + rc + "&state=active"} {
			var l struct{ Allocations []allocationView }
			if code, _ := callAt(t, lab.APIURL, "1.79", "GET", "/v1/allocations"+q, nil, &l); code != 200 || len(l.Allocations) != 1 || l.Allocations[0].UUID != a.UUID {
				t.Errorf("list %s: %d %+v, want only %s", q, code, l.Allocations, a.UUID)
			}
		}
		if code, msg := fault(t, "1.79", "GET", "/v1/allocations?node=no-such-node", nil); code != 400 || msg != "Node no-such-node could not be found." {
			t.Errorf("list by a node that does not exist: %d %q", code, msg)
		}

		// PATCH (1.57): name and extra only.
		if code, msg := fault(t, "1.56", "PATCH", "/v1/allocations/"+a.UUID, []map[string]any{{"op": "add", "path": "/name", "value": "gpu-box"}}); code != 405 ||
			msg != "The API version does not allow updating allocations" {
			t.Errorf("PATCH at 1.56: %d %q", code, msg)
		}
		var patched allocationView
		if code, _ := callAt(t, lab.APIURL, "1.79", "PATCH", "/v1/allocations/"+a.UUID,
			[]map[string]any{{"op": "add", "path": "/name", "value": "gpu-box"}, {"op": "remove", "path": "/extra/k"}}, &patched); code != 200 ||
			deref(patched.Name) != "gpu-box" || len(patched.Extra) != 0 {
			t.Errorf("PATCH name and extra: %d %+v", code, patched)
		}
		if code, msg := fault(t, "1.79", "PATCH", "/v1/allocations/gpu-box", []map[string]any{{"op": "replace", "path": "/resource_class", "value": "x"}}); code != 400 ||
			!strings.HasPrefix(msg, "Cannot patch /resource_class.") {
			t.Errorf("PATCH resource_class: %d %q", code, msg)
		}

		if code, _ := callAt(t, lab.APIURL, "1.79", "DELETE", "/v1/allocations/gpu-box", nil, nil); code != 204 {
			t.Fatalf("DELETE allocation by name: %d", code)
		}
		n = getAllocNode(t, nodes[0])
		if n.InstanceUUID != nil || n.AllocationUUID != nil {
			t.Errorf("node after the allocation's delete: instance_uuid %s allocation_uuid %s, want both null", deref(n.InstanceUUID), deref(n.AllocationUUID))
		}
		if code, msg := fault(t, "1.79", "GET", "/v1/nodes/"+nodes[0]+"/allocation", nil); code != 404 || msg != "Allocation for node "+nodes[0]+" was not found" {
			t.Errorf("GET the allocation of a freed node: %d %q", code, msg)
		}
		if code, msg := fault(t, "1.79", "GET", "/v1/allocations/"+a.UUID, nil); code != 404 || msg != "Allocation "+a.UUID+" could not be found." {
			t.Errorf("GET a deleted allocation: %d %q", code, msg)
		}
	})

	// 1.79: a node named as the allocation is tried first; six nodes
	// match, so a random choice would pick it one time in six a round.
	t.Run("NodeNamedAsTheAllocationFirst", func(t *testing.T) {
		for round := range 3 {
			a := allocate(t, map[string]any{"resource_class": rc, "name": "alloc-life-4"})
			if a.State != "active" || deref(a.NodeUUID) != nodes[4] {
				t.Fatalf("round %d: allocation named alloc-life-4: %+v, want node %s", round, a, nodes[4])
			}
			if code, _ := callAt(t, lab.APIURL, "1.79", "DELETE", "/v1/allocations/"+a.UUID, nil, nil); code != 204 {
				t.Fatalf("delete: %d", code)
			}
		}
	})

	t.Run("RefusedInIronicsWords", func(t *testing.T) {
		for _, c := range []struct {
			body any
			want int
			msg  string
		}{
			{map[string]any{}, 400, "The resource_class field is mandatory when not backfilling"},
			{map[string]any{"resource_class": rc, "candidate_nodes": []string{"alloc-life-1", "nope-node"}}, 400, "Nodes cannot be found: nope-node"},
			{map[string]any{"resource_class": rc, "traits": []string{"GPU"}}, 400, "Schema error for allocation: 'GPU' is not valid under any of the given schemas. Possible root cause: 'GPU' does not match '^CUSTOM_[A-Z0-9_]+$'"},
			{map[string]any{"resource_class": rc, "name": "bad name"}, 400, "Cannot create allocation with invalid name 'bad name'"},
			{map[string]any{"resource_class": rc, "bogus": 1}, 400, "Schema error for allocation: Additional properties are not allowed ('bogus' was unexpected)"},
			{map[string]any{"resource_class": rc, "uuid": "not-a-uuid"}, 400, "Expected UUID for uuid: not-a-uuid"},
		} {
			if code, msg := fault(t, "1.79", "POST", "/v1/allocations", c.body); code != c.want || msg != c.msg {
				t.Errorf("POST %v: %d %q, want %d %q", c.body, code, msg, c.want, c.msg)
			}
		}
		if code, msg := fault(t, "1.57", "POST", "/v1/allocations", map[string]any{"resource_class": rc, "node": nodes[1]}); code != 400 ||
			msg != "Cannot set node when creating an allocation in this API version" {
			t.Errorf("node at 1.57: %d %q", code, msg)
		}
		first := allocate(t, map[string]any{"resource_class": "alloc-none", "name": "alloc-dup"})
		if code, msg := fault(t, "1.79", "POST", "/v1/allocations", map[string]any{"resource_class": rc, "name": "alloc-dup"}); code != 409 ||
			msg != "An allocation with name alloc-dup already exists." {
			t.Errorf("duplicate name: %d %q", code, msg)
		}
		// Nothing matches: the allocation ends in error, it does not wait.
		for _, c := range []struct {
			a    allocationView
			want string
		}{
			{first, "no available nodes match the resource class alloc-none"},
			{allocate(t, map[string]any{"resource_class": rc, "traits": []string{"CUSTOM_NOPE"}}), "no suitable nodes have the requested traits CUSTOM_NOPE"},
			{allocate(t, map[string]any{"resource_class": "other-class", "candidate_nodes": []string{"alloc-life-1"}}),
				"none of the requested nodes are available and match the resource class other-class"},
		} {
			want := fmt.Sprintf("Failed to process allocation %s: %s.", c.a.UUID, c.want)
			if c.a.State != "error" || deref(c.a.LastError) != want || c.a.NodeUUID != nil {
				t.Errorf("allocation %s: %s %q, want error %q", c.a.UUID, c.a.State, deref(c.a.LastError), want)
			}
		}
		// A candidate list given by name is kept as UUIDs, in its order.
		a := allocate(t, map[string]any{"resource_class": rc, "candidate_nodes": []string{"alloc-life-3", nodes[2]}})
		if len(a.CandidateNodes) != 2 || a.CandidateNodes[0] != nodes[3] || a.CandidateNodes[1] != nodes[2] ||
			(deref(a.NodeUUID) != nodes[2] && deref(a.NodeUUID) != nodes[3]) {
			t.Errorf("allocation among candidates: %+v", a)
		}
		if code, _ := callAt(t, lab.APIURL, "1.79", "DELETE", "/v1/nodes/"+deref(a.NodeUUID)+"/allocation", nil, nil); code != 204 {
			t.Errorf("DELETE /v1/nodes/{node}/allocation: %d", code)
		}
		if n := getAllocNode(t, deref(a.NodeUUID)); n.InstanceUUID != nil || n.AllocationUUID != nil {
			t.Errorf("node after DELETE /v1/nodes/{node}/allocation: %+v", n)
		}
	})

	// An allocated node is deployed: its allocation stays while it is
	// active (Ironic refuses to remove it), and undeploy releases it.
	t.Run("UndeployReleases", func(t *testing.T) {
		a := allocate(t, map[string]any{"resource_class": rc, "candidate_nodes": []string{nodes[1]}})
		if deref(a.NodeUUID) != nodes[1] {
			t.Fatalf("allocation: %+v", a)
		}
		if code, _ := call(t, "PATCH", "/v1/nodes/"+nodes[1], []map[string]any{{"op": "add", "path": "/instance_info/image_source", "value": "http://127.0.0.1:1/img.raw"}}, nil); code != 200 {
			t.Fatalf("set image_source: %d", code)
		}
		if code, _ := call(t, "PUT", "/v1/nodes/"+nodes[1]+"/states/provision", map[string]any{"target": "active"}, nil); code != 202 {
			t.Fatalf("deploy: %d", code)
		}
		waitState(t, nodes[1], "active", 2*time.Minute)
		want := fmt.Sprintf("Cannot remove allocation %s for node %s, because the node is active (and maintenance mode is off)", a.UUID, nodes[1])
		if code, msg := fault(t, "1.79", "DELETE", "/v1/allocations/"+a.UUID, nil); code != 409 || msg != want {
			t.Errorf("DELETE the allocation of an active node: %d %q, want 409 %q", code, msg, want)
		}
		if code, _ := call(t, "PUT", "/v1/nodes/"+nodes[1]+"/states/provision", map[string]any{"target": "deleted"}, nil); code != 202 {
			t.Fatalf("undeploy: %d", code)
		}
		waitState(t, nodes[1], "available", 2*time.Minute)
		n := getAllocNode(t, nodes[1])
		if n.InstanceUUID != nil || n.AllocationUUID != nil {
			t.Errorf("node after undeploy: instance_uuid %s allocation_uuid %s, want both null", deref(n.InstanceUUID), deref(n.AllocationUUID))
		}
		if code, _ := fault(t, "1.79", "GET", "/v1/allocations/"+a.UUID, nil); code != 404 {
			t.Errorf("the allocation after undeploy: %d, want 404 (deleted with the tear down, as Ironic)", code)
		}
	})

	// A deployed node without an allocation gets one by backfill (1.58),
	// named after its instance; a node that is not active is refused and
	// the allocation stays in error.
	t.Run("Backfill", func(t *testing.T) {
		const instance = "5d7e2a55-3f0e-4c61-9a3c-2f2f6f0b7a11"
		patch := []map[string]any{{"op": "add", "path": "/instance_info/image_source", "value": "http://127.0.0.1:1/img.raw"},
			{"op": "add", "path": "/instance_uuid", "value": instance}}
		if code, _ := call(t, "PATCH", "/v1/nodes/"+nodes[5], patch, nil); code != 200 {
			t.Fatalf("set instance: %d", code)
		}
		if code, _ := call(t, "PUT", "/v1/nodes/"+nodes[5]+"/states/provision", map[string]any{"target": "active"}, nil); code != 202 {
			t.Fatalf("deploy: %d", code)
		}
		waitState(t, nodes[5], "active", 2*time.Minute)
		var a allocationView
		if code, _ := callAt(t, lab.APIURL, "1.58", "POST", "/v1/allocations", map[string]any{"node": "alloc-life-5"}, &a); code != 201 ||
			a.State != "active" || a.UUID != instance || deref(a.NodeUUID) != nodes[5] || a.ResourceClass != rc {
			t.Fatalf("backfill: %d %+v, want active %s on %s", code, a, instance, nodes[5])
		}
		if n := getAllocNode(t, nodes[5]); deref(n.AllocationUUID) != instance {
			t.Errorf("backfilled node's allocation_uuid: %s", deref(n.AllocationUUID))
		}
		// A second allocation of the same node takes the instance's UUID
		// again (AllocationAlreadyExists), or, with its own, is refused
		// as Ironic's NodeAssociated.
		code, msg := fault(t, "1.79", "POST", "/v1/allocations", map[string]any{"node": nodes[5]})
		if want := fmt.Sprintf("An allocation with UUID %s already exists.", instance); code != 409 || msg != want {
			t.Errorf("backfill of an allocated node: %d %q, want 409 %q", code, msg, want)
		}
		code, msg = fault(t, "1.79", "POST", "/v1/allocations", map[string]any{"node": nodes[5], "name": "alloc-second"})
		if want := fmt.Sprintf("An allocation with UUID %s already exists.", instance); code != 409 || msg != want {
			t.Errorf("backfill of an allocated node, named: %d %q, want 409 %q", code, msg, want)
		}
		const second = "0b5f3e4c-8a1d-4f6e-9c2b-7d3a1e5f9b20"
		code, msg = fault(t, "1.79", "POST", "/v1/allocations", map[string]any{"node": nodes[5], "uuid": second})
		if want := fmt.Sprintf("Node %s is associated with instance %s.", nodes[5], instance); code != 409 || msg != want {
			t.Errorf("backfill of an allocated node under another UUID: %d %q, want 409 %q", code, msg, want)
		}
		var refused allocationView
		if callAt(t, lab.APIURL, "1.79", "GET", "/v1/allocations/"+second, nil, &refused); refused.State != "error" || refused.NodeUUID != nil {
			t.Errorf("the refused backfill's allocation: %+v, want error without a node", refused)
		}

		code, msg = fault(t, "1.79", "POST", "/v1/allocations", map[string]any{"node": nodes[2], "name": "alloc-backfill-available"})
		var failed allocationView
		callAt(t, lab.APIURL, "1.79", "GET", "/v1/allocations/alloc-backfill-available", nil, &failed)
		want := fmt.Sprintf(`Failed to process allocation %s: Cannot backfill an allocation for node %s: Node must be in the "active" state, but the current state is "available".`,
			failed.UUID, nodes[2])
		if code != 400 || msg != want || failed.State != "error" || deref(failed.LastError) != want {
			t.Errorf("backfill of an available node: %d %q; allocation %+v; want 400 and error %q", code, msg, failed, want)
		}
		if code, msg := fault(t, "1.79", "POST", "/v1/allocations", map[string]any{"node": "no-such-node"}); code != 400 || msg != "Node no-such-node could not be found." {
			t.Errorf("backfill of a node that does not exist: %d %q", code, msg)
		}
	})

	// Deleting an allocated node: refused outside maintenance, as Ironic's
	// destroy_node; in maintenance the allocation goes with the node.
	t.Run("NodeDeleteTakesTheAllocation", func(t *testing.T) {
		a := allocate(t, map[string]any{"resource_class": rc, "candidate_nodes": []string{nodes[3]}})
		if deref(a.NodeUUID) != nodes[3] {
			t.Fatalf("allocation: %+v", a)
		}
		want := fmt.Sprintf("Node %s is associated with instance %s.", nodes[3], a.UUID)
		if code, msg := fault(t, "1.79", "DELETE", "/v1/nodes/"+nodes[3], nil); code != 409 || msg != want {
			t.Errorf("DELETE an allocated node: %d %q, want 409 %q", code, msg, want)
		}
		if code, _ := call(t, "PUT", "/v1/nodes/"+nodes[3]+"/maintenance", map[string]any{"reason": "gone"}, nil); code != 202 {
			t.Fatalf("maintenance: %d", code)
		}
		if code, _ := callAt(t, lab.APIURL, "1.79", "DELETE", "/v1/nodes/"+nodes[3], nil, nil); code != 204 {
			t.Fatalf("DELETE node in maintenance: %d", code)
		}
		if code, _ := fault(t, "1.79", "GET", "/v1/allocations/"+a.UUID, nil); code != 404 {
			t.Errorf("the allocation of a deleted node: %d, want 404", code)
		}
	})
}

// TestAllocationsFiftyOverTwenty: 50 allocations at once over 20 matching
// nodes end with exactly 20 active on 20 distinct nodes, each node naming
// its allocation, and 30 in error with Ironic's message: the claim is one
// transaction, never two allocations on one node.
func TestAllocationsFiftyOverTwenty(t *testing.T) {
	const rc = "alloc-race"
	nodes := allocationNodes(t, "alloc-race", rc, 20)
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		uids []string
	)
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var a allocationView
			code, _ := callAt(t, lab.APIURL, "1.79", "POST", "/v1/allocations", map[string]any{"resource_class": rc, "name": fmt.Sprintf("race-%d", i)}, &a)
			if code != 201 {
				t.Errorf("POST allocation %d: %d", i, code)
				return
			}
			mu.Lock()
			uids = append(uids, a.UUID)
			mu.Unlock()
		}()
	}
	wg.Wait()
	active, failed := map[string]string{}, 0
	for _, u := range uids {
		a := waitAllocation(t, u)
		switch a.State {
		case "active":
			if other, dup := active[deref(a.NodeUUID)]; dup {
				t.Errorf("node %s given to %s and %s", deref(a.NodeUUID), other, a.UUID)
			}
			active[deref(a.NodeUUID)] = a.UUID
		case "error":
			msg := deref(a.LastError)
			if !strings.HasPrefix(msg, "Failed to process allocation "+a.UUID+": ") {
				t.Errorf("failed allocation %s: %q", a.UUID, msg)
			}
			failed++
		}
	}
	if len(active) != 20 || failed != 30 {
		t.Fatalf("50 allocations over 20 nodes: %d active, %d error; want 20 and 30", len(active), failed)
	}
	for _, n := range nodes {
		got := getAllocNode(t, n)
		if a, ok := active[n]; !ok || deref(got.AllocationUUID) != a || deref(got.InstanceUUID) != a {
			t.Errorf("node %s: allocation_uuid %s instance_uuid %s, want its allocation %s", n, deref(got.AllocationUUID), deref(got.InstanceUUID), a)
		}
	}
}
