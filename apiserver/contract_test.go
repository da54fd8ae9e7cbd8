package apiserver

import (
	"bufio"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
)

// pendingRoutes are Ironic routes at or below MaxVersionMinor that ironflow
// does not serve yet, each being built on its own branch. This list must be
// empty: a route ironflow advertises (by its maximum version) and does not
// serve is a broken promise to every client. TestIronicRouteContract fails
// for an entry that is served by now, so that whoever merges the route
// removes its entry in the same commit.
var pendingRoutes = map[string]string{}

// ironicRoute is one row of testdata/ironic-routes.tsv.
type ironicRoute struct {
	method, path string
	since        int
	// below: Ironic's status below since; 0 for "served" (Ironic has no
	// version check) and for routes of 1.1 ("-").
	below int
	line  int
}

func (r ironicRoute) key() string { return r.method + " " + r.path }

// readIronicRoutes reads the table of Ironic's routes (its header says
// where the rows come from).
func readIronicRoutes(t *testing.T) []ironicRoute {
	t.Helper()
	f, err := os.Open("testdata/ironic-routes.tsv")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []ironicRoute
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, "method\t") {
			continue
		}
		cols := strings.Split(line, "\t")
		if len(cols) < 5 {
			t.Fatalf("ironic-routes.tsv:%d: %d columns, want method, path, since, below, source[, note]", n, len(cols))
		}
		minor, err := strconv.Atoi(strings.TrimPrefix(cols[2], "1."))
		if err != nil || !strings.HasPrefix(cols[2], "1.") {
			t.Fatalf("ironic-routes.tsv:%d: since %q is not a 1.x version", n, cols[2])
		}
		r := ironicRoute{method: cols[0], path: cols[1], since: minor, line: n}
		switch cols[3] {
		case "-", "served":
		default:
			if r.below, err = strconv.Atoi(cols[3]); err != nil || r.below < 400 {
				t.Fatalf("ironic-routes.tsv:%d: below %q is not a status, '-' or 'served'", n, cols[3])
			}
		}
		if (r.since == 1) != (cols[3] == "-") {
			t.Fatalf("ironic-routes.tsv:%d: below is '-' exactly for routes of 1.1", n)
		}
		out = append(out, r)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(out) < 100 {
		t.Fatalf("ironic-routes.tsv: %d routes; the API reference alone lists over 100", len(out))
	}
	return out
}

// routeShape is a path with every parameter written "{}": Ironic's
// "{node_ident}" and gin's ":node" compare equal.
func routeShape(path string) string {
	segs := strings.Split(strings.TrimRight(path, "/"), "/")
	for i, s := range segs {
		if strings.ContainsAny(s, "{:*") {
			segs[i] = "{}"
		}
	}
	return strings.Join(segs, "/")
}

// servedRoute finds the route table's entry and operation for an Ironic
// route ("*": any method of the path).
func servedRoute(table []route, ir ironicRoute) (route, op, bool) {
	for _, rt := range table {
		if routeShape(rt.path) != routeShape(ir.path) {
			continue
		}
		for _, o := range rt.ops {
			if ir.method == "*" || o.method == ir.method {
				return rt, o, true
			}
		}
	}
	return route{}, op{}, false
}

// contractPath fills an Ironic route's parameters with names of no object:
// a request reaches the route's handler (or its gate) and stops at the
// lookup.
func contractPath(path string) string {
	segs := strings.Split(path, "/")
	for i, s := range segs {
		if strings.Contains(s, "{") {
			segs[i] = "contract-" + strings.NewReplacer("{", "", "}", "", "@", "-").Replace(s)
		}
	}
	return strings.Join(segs, "/")
}

// contractBodies are bodies of the routes whose version check comes after
// the body's (Ironic's events controller).
var contractBodies = map[string]any{
	"POST /v1/events": map[string]any{"events": []any{map[string]any{"event": "network.bind_port",
		"port_id": "7a1c3f1e-6a3b-4b2a-9d6c-0e5f8a1b2c3d", "mac_address": "52:54:00:c0:00:01", "status": "ACTIVE"}}},
}

// Every Ironic route up to the advertised maximum version is served by the
// route table, introduced at Ironic's version, refused below it with
// Ironic's status and answered by its handler from that version on. The
// routes come from testdata/ironic-routes.tsv, data read from Ironic's API
// reference and controllers: a row added there and not served fails here.
func TestIronicRouteContract(t *testing.T) {
	routes := readIronicRoutes(t)
	s := &server{cfg: DefaultConfig(), log: quietLogger(), hbGate: newSignalGate()}
	s.routes()
	e := newEnv(t)

	pendingSeen := map[string]bool{}
	for _, ir := range routes {
		rt, o, served := servedRoute(s.table, ir)
		if why, pending := pendingRoutes[ir.key()]; pending {
			pendingSeen[ir.key()] = true
			if served {
				t.Errorf("%s (%s) is served now: remove it from pendingRoutes", ir.key(), why)
			}
			continue
		}
		if ir.since > MaxVersionMinor {
			if served && max(rt.sinceFor(o), 1) != ir.since {
				t.Errorf("%s: served from 1.%d, Ironic introduced it in 1.%d", ir.key(), max(rt.sinceFor(o), 1), ir.since)
			}
			continue
		}
		if !served {
			t.Errorf("ironic-routes.tsv:%d: %s (Ironic 1.%d) is not in the route table (routes.go), though ironflow advertises 1.%d",
				ir.line, ir.key(), ir.since, MaxVersionMinor)
			continue
		}
		if got := max(rt.sinceFor(o), 1); got != ir.since {
			t.Errorf("%s: the route table introduces it in 1.%d, Ironic in 1.%d", ir.key(), got, ir.since)
		}
		if ir.since == 1 {
			continue
		}
		method := o.method
		body := contractBodies[method+" "+rt.path]
		path := contractPath(ir.path)
		under := e.do(method, path, versionString(ir.since-1), body)
		at := e.do(method, path, versionString(ir.since), body)
		switch {
		case ir.below == 0: // served at every version, as Ironic
			if under.status == http.StatusNotFound && under.faultstring(t) == resourceNotFound().msg {
				t.Errorf("%s at 1.%d: refused (%d %s); Ironic serves it below 1.%d", ir.key(), ir.since-1, under.status, under.body, ir.since)
			}
		case under.status != ir.below:
			t.Errorf("%s at 1.%d: %d %s, want Ironic's %d", ir.key(), ir.since-1, under.status, under.body, ir.below)
		case ir.below == http.StatusNotFound && under.faultstring(t) != resourceNotFound().msg && !strings.Contains(under.faultstring(t), "API version"):
			t.Errorf("%s at 1.%d: 404 %q, want Ironic's refusal of the version", ir.key(), ir.since-1, under.faultstring(t))
		}
		if at.status == under.status && string(at.body) == string(under.body) {
			t.Errorf("%s at 1.%d answers as at 1.%d (%d %s): not served from its version", ir.key(), ir.since, ir.since-1, at.status, at.body)
		}
	}
	for k := range pendingRoutes {
		if !pendingSeen[k] {
			t.Errorf("pendingRoutes names %s, which is no row of ironic-routes.tsv", k)
		}
	}
}
