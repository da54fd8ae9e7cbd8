package main

import (
	"os"
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

// The fleet part runs only when named; the footprint part is in the
// default set; other builds for the footprint part are a list.
func TestFootprintAndFleetFlags(t *testing.T) {
	cfg, err := parseFlags(nil)
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.has("footprint") || cfg.has("fleet") || cfg.has("compare") {
		t.Fatalf("default parts %v: want footprint, not fleet or compare", cfg.parts)
	}
	if cfg.footprintNodes != 10000 || cfg.footprintDeploys != 1000 || cfg.fleetNodes != 10000 {
		t.Fatalf("default sizes: footprint %d nodes, %d deploys; fleet %d nodes", cfg.footprintNodes, cfg.footprintDeploys, cfg.fleetNodes)
	}
	cfg, err = parseFlags([]string{"-parts", "fleet", "-footprint-also", "/a/ironflow, /b/ironflow,", "-fleet-nodes", "200"})
	if err != nil {
		t.Fatal(err)
	}
	if !cfg.has("fleet") || cfg.fleetNodes != 200 || !slices.Equal(cfg.footprintAlso, []string{"/a/ironflow", "/b/ironflow"}) {
		t.Fatalf("parts %v, fleet nodes %d, also %q", cfg.parts, cfg.fleetNodes, cfg.footprintAlso)
	}
	if _, err := parseFlags([]string{"-footprint-deploys", "0"}); err == nil {
		t.Fatal("0 deploys accepted")
	}
}

// The anonymous part of a footprint is part of its PSS: this process's
// heap is anonymous, its binary's pages are not.
func TestFootprintAnonymousWithinPSS(t *testing.T) {
	f := measureFootprint(map[string]int{"self": os.Getpid()})
	if f.anon <= 0 || f.anon > f.pss {
		t.Fatalf("anonymous %d of PSS %d", f.anon, f.pss)
	}
}
