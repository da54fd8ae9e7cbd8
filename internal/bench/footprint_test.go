package main

import (
	"slices"
	"testing"
)

// A role's tree stops at another role's root: ironflow dev's Temporal
// server and PostgreSQL are below it in the process tree, and each counts
// once, under its own role.
func TestRoleTreesCountEveryProcessOnce(t *testing.T) {
	kids := map[int][]int{
		1: {2, 3, 4}, // ironflow dev: its Temporal, the postmaster, pg_ctl's leftover
		2: {5},       // Temporal's own child
		3: {6, 7},    // PostgreSQL's backends
	}
	children := func(p int) []int { return kids[p] }
	got := roleTrees(map[string]int{"ironflow": 1, "temporal": 2, "postgres": 3, "gone": 0}, children)
	want := map[string][]int{"ironflow": {1, 4}, "temporal": {2, 5}, "postgres": {3, 6, 7}}
	if len(got) != len(want) {
		t.Fatalf("roles %v, want %v", got, want)
	}
	seen := map[int]string{}
	for role, w := range want {
		g := slices.Clone(got[role])
		slices.Sort(g)
		if !slices.Equal(g, w) {
			t.Errorf("%s: %v, want %v", role, g, w)
		}
		for _, p := range g {
			if other, ok := seen[p]; ok {
				t.Errorf("pid %d counted under %s and %s", p, other, role)
			}
			seen[p] = role
		}
	}
}
