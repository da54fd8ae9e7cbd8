package apiserver

import (
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// Every route gin serves comes from the route table, once, and the table
// writes each path once.
func TestRouteTable(t *testing.T) {
	s := &server{cfg: DefaultConfig(), log: quietLogger(), hbGate: newSignalGate()}
	s.routes()
	want := map[string]int{}
	paths := map[string]int{}
	for _, rt := range s.table {
		paths[rt.path]++
		for _, o := range rt.ops {
			want[o.method+" "+rt.path]++
			if rt.auth != authUser && o.policy != (routeRule{}) {
				t.Errorf("%s %s: a policy rule on a route without user credentials", o.method, rt.path)
			}
			if o.since != 0 && o.since <= rt.since {
				t.Errorf("%s %s: since %d, not later than its path's %d", o.method, rt.path, o.since, rt.since)
			}
		}
	}
	for p, n := range paths {
		if n > 1 {
			t.Errorf("path %s: %d entries in the table, want one", p, n)
		}
	}
	got := map[string]int{}
	for _, r := range s.router.Routes() {
		got[r.Method+" "+r.Path]++
	}
	for k, n := range want {
		if n > 1 {
			t.Errorf("%s: %d operations in the table, want one", k, n)
		}
		if got[k] != 1 {
			t.Errorf("%s: in the table, registered %d times", k, got[k])
		}
	}
	for _, k := range slices.Sorted(maps.Keys(got)) {
		if want[k] == 0 {
			t.Errorf("%s: registered, not in the route table", k)
		}
	}
}

// A route path is written once in the package's code: string literals
// that are a table path, or a gin pattern with a :parameter, appear once
// across the non-test files (the table), so routing, policy, gates and
// index documents cannot drift apart.
func TestRoutePathsWrittenOnce(t *testing.T) {
	table := map[string]bool{}
	for _, rt := range (&server{}).routeTable() {
		// "/" is every path's separator as well: not scanned for.
		if rt.path != "/" {
			table[rt.path] = true
		}
	}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string][]string{}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		src, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, name, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			v, err := strconv.Unquote(lit.Value)
			if err != nil {
				return true
			}
			if table[v] || strings.Contains(v, "/:") || strings.Contains(v, "/*") {
				seen[v] = append(seen[v], fset.Position(lit.Pos()).String())
			}
			return true
		})
	}
	if len(seen) < len(table) {
		t.Errorf("%d route-like literals found for %d table paths: the scan misses the table", len(seen), len(table))
	}
	for _, v := range slices.Sorted(maps.Keys(seen)) {
		if at := seen[v]; len(at) > 1 {
			t.Errorf("route path %q written %d times: %s; write it once, in the route table (routes.go)", v, len(at), strings.Join(at, ", "))
		}
	}
}

// The index documents link what Ironic's do, from the versions Ironic's
// v1 controller (and volume.py) add them in.
func TestIndexDocuments(t *testing.T) {
	want := map[string]map[string]int{
		"/v1": {"chassis": 0, "nodes": 0, "ports": 0, "drivers": 0, "lookup": v22Ramdisk, "heartbeat": v22Ramdisk,
			"portgroups": v23Portgroups, "volume": v32Volume, "conductors": v49Conductors,
			"events": v54Events, "allocations": v52Allocation, "deploy_templates": v55DeployTemplates, "shards": v82Shard, "runbooks": v92Runbooks,
			"inspection_rules": v96InspectionRules},
		"/v1/volume":             {"connectors": v32Volume, "targets": v32Volume},
		"/v1/nodes/:node/volume": {"connectors": v32Volume, "targets": v32Volume},
	}
	got := map[string]map[string]int{}
	for doc, entries := range indexes((&server{}).routeTable()) {
		got[doc] = map[string]int{}
		for _, e := range entries {
			got[doc][e.name] = e.since
		}
	}
	if !maps.EqualFunc(got, want, maps.Equal) {
		t.Errorf("index documents %v, want %v", got, want)
	}
}
