package store_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/ironflow/ironflow/internal/testkit/storetest"
	"github.com/ironflow/ironflow/provision"
	"github.com/ironflow/ironflow/store"
)

func TestNodeRoundTrip(t *testing.T) {
	s := storetest.New(t)
	ctx := context.Background()
	in := &store.Node{
		Name:               ptr("node-0"),
		Driver:             "redfish",
		BootInterface:      "ipxe",
		PowerInterface:     "redfish",
		ProvisionState:     "enroll",
		PowerState:         ptr("power off"),
		ConductorGroup:     "rack1",
		ResourceClass:      ptr("baremetal"),
		AutomatedClean:     ptr(false),
		SecureBoot:         ptr(true),
		Traits:             []string{"CUSTOM_GPU"},
		DriverInfo:         map[string]any{"redfish_address": "http://127.0.0.1:8000", "redfish_password": "secret"},
		Properties:         map[string]any{"cpus": float64(2), "memory_mb": float64(512)},
		DriverInternalInfo: nil, // stored as {}
	}
	if err := s.CreateNode(ctx, in); err != nil {
		t.Fatalf("CreateNode: %v", err)
	}
	if in.UUID == "" || in.ID == 0 || in.CreatedAt.IsZero() {
		t.Fatalf("CreateNode did not fill uuid/id/created_at: %+v", in)
	}
	for _, key := range []string{in.UUID, strings.ToUpper(in.UUID), "node-0"} {
		got, err := s.GetNode(ctx, key)
		if err != nil {
			t.Fatalf("GetNode(%s): %v", key, err)
		}
		if got.UUID != in.UUID || *got.Name != "node-0" || got.Driver != "redfish" || got.BootInterface != "ipxe" ||
			*got.PowerState != "power off" || got.ConductorGroup != "rack1" || *got.AutomatedClean || !*got.SecureBoot ||
			!slices.Equal(got.Traits, []string{"CUSTOM_GPU"}) || got.DriverInfo["redfish_password"] != "secret" ||
			got.Properties["memory_mb"] != float64(512) || got.LastError != nil || got.UpdatedAt != nil {
			t.Fatalf("GetNode(%s) = %+v", key, got)
		}
		for name, m := range map[string]map[string]any{"driver_internal_info": got.DriverInternalInfo,
			"instance_info": got.InstanceInfo, "clean_step": got.CleanStep, "raid_config": got.RAIDConfig} {
			if m == nil || len(m) != 0 {
				t.Fatalf("%s = %#v, want empty non-nil map", name, m)
			}
		}
	}
	if _, err := s.GetNode(ctx, "NODE-0"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("GetNode by name in another case: %v, want ErrNotFound (names are case-sensitive)", err)
	}

	updated, err := s.UpdateNode(ctx, in.UUID, func(n *store.Node) error {
		n.Name = ptr("node-renamed")
		n.Extra = map[string]any{"rack": "r1"}
		n.ProvisionState = "manageable"
		n.UUID = "ignored"
		return nil
	})
	if err != nil {
		t.Fatalf("UpdateNode: %v", err)
	}
	if updated.UUID != in.UUID || *updated.Name != "node-renamed" || updated.Extra["rack"] != "r1" ||
		updated.UpdatedAt == nil || updated.ProvisionUpdatedAt == nil || updated.ProvisionState != "manageable" {
		t.Fatalf("UpdateNode = %+v", updated)
	}
	errAbort := errors.New("abort")
	if _, err := s.UpdateNode(ctx, in.UUID, func(n *store.Node) error { n.Name = ptr("x"); return errAbort }); err != errAbort {
		t.Fatalf("UpdateNode with failing fn: %v, want the fn's error", err)
	}
	if got, _ := s.GetNode(ctx, in.UUID); *got.Name != "node-renamed" {
		t.Fatalf("aborted update was written: name %q", *got.Name)
	}
	if _, err := s.UpdateNode(ctx, "6a1f0c4e-0000-4000-8000-000000000000", func(*store.Node) error { return nil }); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("UpdateNode of a missing node: %v, want ErrNotFound", err)
	}

	if err := s.DeleteNode(ctx, in.UUID); err != nil {
		t.Fatalf("DeleteNode: %v", err)
	}
	if _, err := s.GetNode(ctx, in.UUID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("GetNode after delete: %v, want ErrNotFound", err)
	}
	if err := s.DeleteNode(ctx, in.UUID); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("second DeleteNode: %v, want ErrNotFound", err)
	}
}

func TestNodeUniqueness(t *testing.T) {
	s := storetest.New(t)
	ctx := context.Background()
	first := newNode(t, s, &store.Node{Name: ptr("node-a"), InstanceUUID: ptr("0b9a3c1e-5a4b-4f0e-9c6d-3d2e1f000001")})
	newNode(t, s, &store.Node{Name: ptr("Node-A")}) // another case is another name
	newNode(t, s, &store.Node{})                    // NULL names never collide
	newNode(t, s, &store.Node{})

	cases := []struct {
		name string
		node store.Node
		want error
	}{
		{"same name", store.Node{Name: ptr("node-a")}, store.ErrDuplicateName},
		{"same uuid", store.Node{UUID: first.UUID}, store.ErrDuplicateUUID},
		{"same uuid upper case", store.Node{UUID: strings.ToUpper(first.UUID)}, store.ErrDuplicateUUID},
		{"same instance", store.Node{InstanceUUID: first.InstanceUUID}, store.ErrInstanceAssociated},
		{"invalid uuid", store.Node{UUID: "not-a-uuid"}, store.ErrInvalidInput},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n := c.node
			n.Driver, n.ProvisionState = "ipmi", "enroll"
			if err := s.CreateNode(ctx, &n); !errors.Is(err, c.want) {
				t.Fatalf("CreateNode: %v, want %v", err, c.want)
			}
		})
	}
	other := newNode(t, s, &store.Node{Name: ptr("node-b")})
	if _, err := s.UpdateNode(ctx, other.UUID, func(n *store.Node) error { n.Name = ptr("node-a"); return nil }); !errors.Is(err, store.ErrDuplicateName) {
		t.Fatalf("rename onto a taken name: %v, want ErrDuplicateName", err)
	}
}

func TestSetProvisionStateRaceHasOneWinner(t *testing.T) {
	s := storetest.New(t)
	ctx := context.Background()
	n := newNode(t, s, &store.Node{ProvisionState: "available"})
	const racers = 20
	var wg sync.WaitGroup
	errs := make([]error, racers)
	start := make(chan struct{})
	for i := 0; i < racers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			_, errs[i] = s.SetProvisionState(ctx, n.UUID, []provision.State{"available"}, "deploying", ptr(provision.Active), nil)
		}()
	}
	close(start)
	wg.Wait()
	wins := 0
	for _, err := range errs {
		switch {
		case err == nil:
			wins++
		case errors.Is(err, store.ErrStateConflict):
			if !strings.Contains(err.Error(), `"deploying"`) {
				t.Errorf("conflict error does not name the current state: %v", err)
			}
		default:
			t.Errorf("unexpected error: %v", err)
		}
	}
	if wins != 1 {
		t.Fatalf("%d racers won the transition, want exactly 1", wins)
	}
	got, _ := s.GetNode(ctx, n.UUID)
	if got.ProvisionState != "deploying" || got.TargetProvisionState == nil || *got.TargetProvisionState != "active" || got.ProvisionUpdatedAt == nil {
		t.Fatalf("node after the race: %+v", got)
	}
}

func TestSetProvisionStateCases(t *testing.T) {
	s := storetest.New(t)
	ctx := context.Background()
	n := newNode(t, s, &store.Node{ProvisionState: "deploying", TargetProvisionState: ptr(provision.Active)})

	got, err := s.SetProvisionState(ctx, n.UUID, []provision.State{"wait call-back", "deploying"}, "deploy failed", ptr(provision.Active), ptr("image checksum mismatch"))
	if err != nil {
		t.Fatalf("SetProvisionState: %v", err)
	}
	if got.ProvisionState != "deploy failed" || *got.LastError != "image checksum mismatch" {
		t.Fatalf("after failure: %+v", got)
	}
	// nil target and last_error clear them; empty from accepts any state.
	got, err = s.SetProvisionState(ctx, n.UUID, nil, "available", nil, nil)
	if err != nil {
		t.Fatalf("unconditional SetProvisionState: %v", err)
	}
	if got.ProvisionState != "available" || got.TargetProvisionState != nil || got.LastError != nil {
		t.Fatalf("after unconditional transition: %+v", got)
	}
	if _, err := s.SetProvisionState(ctx, n.UUID, []provision.State{"manageable"}, "cleaning", nil, nil); !errors.Is(err, store.ErrStateConflict) {
		t.Fatalf("from the wrong state: %v, want ErrStateConflict", err)
	}
	if _, err := s.SetProvisionState(ctx, "6a1f0c4e-0000-4000-8000-000000000000", nil, "available", nil, nil); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("missing node: %v, want ErrNotFound", err)
	}

	got, err = s.SetPowerState(ctx, n.UUID, ptr("power on"), nil, nil)
	if err != nil || *got.PowerState != "power on" || got.TargetPowerState != nil {
		t.Fatalf("SetPowerState = %+v, %v", got, err)
	}
	if _, err := s.SetPowerState(ctx, "6a1f0c4e-0000-4000-8000-000000000000", ptr("power on"), nil, nil); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("SetPowerState of a missing node: %v, want ErrNotFound", err)
	}

	// The state with a mark in one write: the target and last_error are
	// cleared, the mark merged beside the keys already there.
	if _, err := s.SetPowerState(ctx, n.UUID, ptr("power on"), ptr("power off"), ptr("BMC busy")); err != nil {
		t.Fatal(err)
	}
	if err := s.MergeDriverInternalInfo(ctx, n.UUID, map[string]any{"keep": "me"}); err != nil {
		t.Fatal(err)
	}
	if err := s.SetPowerStateMerging(ctx, n.UUID, ptr("power off"), map[string]any{"power_call": map[string]any{"run": "r1", "seq": 3}}); err != nil {
		t.Fatalf("SetPowerStateMerging: %v", err)
	}
	got, err = s.GetNode(ctx, n.UUID)
	if err != nil {
		t.Fatal(err)
	}
	mark, _ := got.DriverInternalInfo["power_call"].(map[string]any)
	if *got.PowerState != "power off" || got.TargetPowerState != nil || got.LastError != nil ||
		got.DriverInternalInfo["keep"] != "me" || mark["run"] != "r1" {
		t.Fatalf("after SetPowerStateMerging: power %v target %v last_error %v driver_internal_info %v",
			*got.PowerState, got.TargetPowerState, got.LastError, got.DriverInternalInfo)
	}
	if err := s.SetPowerStateMerging(ctx, "6a1f0c4e-0000-4000-8000-000000000000", ptr("power on"), nil); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("SetPowerStateMerging of a missing node: %v, want ErrNotFound", err)
	}
}

func TestDriverInternalInfoConcurrentMerges(t *testing.T) {
	s := storetest.New(t)
	ctx := context.Background()
	n := newNode(t, s, &store.Node{DriverInternalInfo: map[string]any{"keep": "me", "drop": true}})
	const writers = 20
	var wg sync.WaitGroup
	for i := 0; i < writers; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.MergeDriverInternalInfo(ctx, n.UUID, map[string]any{fmt.Sprintf("k%d", i): float64(i)}); err != nil {
				t.Errorf("MergeDriverInternalInfo: %v", err)
			}
		}()
	}
	wg.Wait()
	if err := s.DeleteDriverInternalInfoKeys(ctx, n.UUID, "drop", "absent"); err != nil {
		t.Fatalf("DeleteDriverInternalInfoKeys: %v", err)
	}
	got, _ := s.GetNode(ctx, n.UUID)
	want := map[string]any{"keep": "me"}
	for i := 0; i < writers; i++ {
		want[fmt.Sprintf("k%d", i)] = float64(i)
	}
	if !reflect.DeepEqual(got.DriverInternalInfo, want) {
		t.Fatalf("driver_internal_info = %v, want %v", got.DriverInternalInfo, want)
	}
	if err := s.MergeDriverInternalInfo(ctx, "6a1f0c4e-0000-4000-8000-000000000000", map[string]any{"a": 1}); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("merge into a missing node: %v, want ErrNotFound", err)
	}
}

func TestMergeDropDriverInternalInfo(t *testing.T) {
	s := storetest.New(t)
	ctx := context.Background()
	n := newNode(t, s, &store.Node{DriverInternalInfo: map[string]any{"keep": "me", "deploy_step_progress": map[string]any{"stage": "old"}, "deploy_step_index": float64(0)}})
	if err := s.MergeDropDriverInternalInfo(ctx, n.UUID, map[string]any{"deploy_step_index": 1, "new": "yes"}, "deploy_step_progress", "absent"); err != nil {
		t.Fatalf("MergeDropDriverInternalInfo: %v", err)
	}
	got, _ := s.GetNode(ctx, n.UUID)
	want := map[string]any{"keep": "me", "deploy_step_index": float64(1), "new": "yes"}
	if !reflect.DeepEqual(got.DriverInternalInfo, want) {
		t.Fatalf("driver_internal_info = %v, want %v", got.DriverInternalInfo, want)
	}
	// A key both set and dropped is dropped: the merge comes first.
	if err := s.MergeDropDriverInternalInfo(ctx, n.UUID, map[string]any{"gone": 1}, "gone"); err != nil {
		t.Fatalf("MergeDropDriverInternalInfo: %v", err)
	}
	if got, _ := s.GetNode(ctx, n.UUID); got.DriverInternalInfo["gone"] != nil {
		t.Fatalf("driver_internal_info kept %q: %v", "gone", got.DriverInternalInfo)
	}
	if err := s.MergeDropDriverInternalInfo(ctx, n.UUID, nil); err != nil {
		t.Fatalf("MergeDropDriverInternalInfo with nothing: %v", err)
	}
	if err := s.MergeDropDriverInternalInfo(ctx, "6a1f0c4e-0000-4000-8000-000000000000", map[string]any{"a": 1}, "b"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("update of a missing node: %v, want ErrNotFound", err)
	}
}

// seedNodes creates count nodes with names, states and drivers that repeat,
// so that sorting by them needs the id tie-breaker.
func seedNodes(t testing.TB, s *store.Store, count int) []*store.Node {
	t.Helper()
	states := []provision.State{"enroll", "available", "active", "deploy failed"}
	var nodes []*store.Node
	for i := 0; i < count; i++ {
		n := &store.Node{
			Driver:         []string{"ipmi", "redfish"}[i%2],
			ProvisionState: states[i%len(states)],
			Maintenance:    i%5 == 0,
			ConductorGroup: []string{"", "rack1", "rack2"}[i%3],
			Owner:          ptr([]string{"alice", "bob"}[i%2]),
		}
		if i%7 != 0 { // some nodes have no name
			n.Name = ptr(fmt.Sprintf("node-%02d", i%11))
			if i >= 11 {
				n.Name = ptr(fmt.Sprintf("node-%02d-%d", i%11, i))
			}
		}
		if i%4 == 2 {
			n.InstanceUUID = ptr(fmt.Sprintf("00000000-0000-4000-8000-%012d", i))
		}
		newNode(t, s, n)
		nodes = append(nodes, n)
	}
	return nodes
}

func TestListNodesPagination(t *testing.T) {
	s := storetest.New(t)
	ctx := context.Background()
	nodes := seedNodes(t, s, 40)

	sortKeys := map[string]func(n *store.Node) string{
		"id":              func(n *store.Node) string { return fmt.Sprintf("%020d", n.ID) },
		"name":            func(n *store.Node) string { return deref(n.Name) },
		"provision_state": func(n *store.Node) string { return string(n.ProvisionState) },
		"driver":          func(n *store.Node) string { return n.Driver },
		"uuid":            func(n *store.Node) string { return n.UUID },
		"created_at":      func(n *store.Node) string { return n.CreatedAt.UTC().Format("2006-01-02T15:04:05.000000") },
	}
	for key, keyOf := range sortKeys {
		for _, dir := range []string{"asc", "desc"} {
			t.Run(key+"_"+dir, func(t *testing.T) {
				want := slices.Clone(nodes)
				sort.SliceStable(want, func(i, j int) bool {
					ki, kj := keyOf(want[i]), keyOf(want[j])
					if ki != kj {
						return (ki < kj) == (dir == "asc")
					}
					return (want[i].ID < want[j].ID) == (dir == "asc")
				})
				var got []*store.Node
				marker := ""
				for page := 0; page < 20; page++ {
					batch, err := s.ListNodes(ctx, store.NodeFilter{Limit: 7, Marker: marker, SortKey: key, SortDir: dir})
					if err != nil {
						t.Fatalf("ListNodes page %d: %v", page, err)
					}
					got = append(got, batch...)
					if len(batch) < 7 {
						break
					}
					marker = batch[len(batch)-1].UUID
				}
				if len(got) != len(want) {
					t.Fatalf("paged through %d nodes, want %d", len(got), len(want))
				}
				for i := range want {
					if got[i].UUID != want[i].UUID {
						t.Fatalf("position %d: %s (%s), want %s (%s)", i, got[i].UUID, keyOf(got[i]), want[i].UUID, keyOf(want[i]))
					}
				}
			})
		}
	}

	brief, err := s.ListNodes(ctx, store.NodeFilter{Fields: []string{"name", "provision_state"}, Limit: 3})
	if err != nil || len(brief) != 3 || brief[1].UUID != nodes[1].UUID || brief[1].ProvisionState != nodes[1].ProvisionState ||
		deref(brief[1].Name) != deref(nodes[1].Name) || brief[1].Driver != "" || brief[1].DriverInfo != nil {
		t.Fatalf("ListNodes with fields = %+v, %v", brief, err)
	}
	if _, err := s.ListNodes(ctx, store.NodeFilter{Fields: []string{"password"}}); !errors.Is(err, store.ErrInvalidInput) {
		t.Fatalf("unknown field: %v, want ErrInvalidInput", err)
	}
	if _, err := s.ListNodes(ctx, store.NodeFilter{SortKey: "driver_info"}); !errors.Is(err, store.ErrInvalidSortKey) {
		t.Fatalf("sort by a non-whitelisted column: %v, want ErrInvalidSortKey", err)
	}
	if _, err := s.ListNodes(ctx, store.NodeFilter{SortKey: "name; DROP TABLE nodes"}); !errors.Is(err, store.ErrInvalidSortKey) {
		t.Fatalf("sort key injection: %v, want ErrInvalidSortKey", err)
	}
	if _, err := s.ListNodes(ctx, store.NodeFilter{SortDir: "sideways"}); !errors.Is(err, store.ErrInvalidInput) {
		t.Fatalf("bad sort dir: %v, want ErrInvalidInput", err)
	}
	if _, err := s.ListNodes(ctx, store.NodeFilter{Marker: "6a1f0c4e-0000-4000-8000-000000000000"}); !errors.Is(err, store.ErrMarkerNotFound) {
		t.Fatalf("unknown marker: %v, want ErrMarkerNotFound", err)
	}
	last := nodes[len(nodes)-1]
	if got, err := s.ListNodes(ctx, store.NodeFilter{Marker: last.UUID}); err != nil || len(got) != 0 {
		t.Fatalf("page after the last node: %d nodes, %v; want none, no error", len(got), err)
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func TestListNodesFilters(t *testing.T) {
	s := storetest.New(t)
	ctx := context.Background()
	nodes := seedNodes(t, s, 40)
	cases := []struct {
		name   string
		filter store.NodeFilter
		match  func(n *store.Node) bool
	}{
		{"all", store.NodeFilter{}, func(*store.Node) bool { return true }},
		{"provision_state", store.NodeFilter{ProvisionState: "active"}, func(n *store.Node) bool { return n.ProvisionState == "active" }},
		{"driver", store.NodeFilter{Driver: "redfish"}, func(n *store.Node) bool { return n.Driver == "redfish" }},
		{"maintenance", store.NodeFilter{Maintenance: ptr(true)}, func(n *store.Node) bool { return n.Maintenance }},
		{"not maintenance", store.NodeFilter{Maintenance: ptr(false)}, func(n *store.Node) bool { return !n.Maintenance }},
		{"empty conductor group", store.NodeFilter{ConductorGroup: ptr("")}, func(n *store.Node) bool { return n.ConductorGroup == "" }},
		{"conductor group", store.NodeFilter{ConductorGroup: ptr("rack2")}, func(n *store.Node) bool { return n.ConductorGroup == "rack2" }},
		{"associated", store.NodeFilter{Associated: ptr(true)}, func(n *store.Node) bool { return n.InstanceUUID != nil }},
		{"unassociated", store.NodeFilter{Associated: ptr(false)}, func(n *store.Node) bool { return n.InstanceUUID == nil }},
		{"owner", store.NodeFilter{Owner: "bob"}, func(n *store.Node) bool { return deref(n.Owner) == "bob" }},
		{"combined", store.NodeFilter{Driver: "ipmi", Maintenance: ptr(false), ProvisionState: "enroll"},
			func(n *store.Node) bool { return n.Driver == "ipmi" && !n.Maintenance && n.ProvisionState == "enroll" }},
		{"no match", store.NodeFilter{ResourceClass: "gpu"}, func(*store.Node) bool { return false }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var want []string
			for _, n := range nodes {
				if c.match(n) {
					want = append(want, n.UUID)
				}
			}
			got, err := s.ListNodes(ctx, c.filter)
			if err != nil {
				t.Fatalf("ListNodes: %v", err)
			}
			var gotUUIDs []string
			for _, n := range got {
				gotUUIDs = append(gotUUIDs, n.UUID)
			}
			if !slices.Equal(gotUUIDs, want) {
				t.Fatalf("ListNodes(%+v) = %d nodes, want %d", c.filter, len(gotUUIDs), len(want))
			}
			count, err := s.CountNodes(ctx, c.filter)
			if err != nil || count != len(want) {
				t.Fatalf("CountNodes = %d, %v; want %d", count, err, len(want))
			}
		})
	}
}
