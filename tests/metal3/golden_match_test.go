package metal3

import (
	"strings"
	"testing"

	"github.com/ironflow/ironflow/tests/metal3/bmo"
)

// TestGoldenMatch: the comparison fails on each way a client can differ
// from BMO (a missing call, a missing body key, a wrong value, a version
// header where BMO sends none) and accepts polling runs.
func TestGoldenMatch(t *testing.T) {
	s := subst{node: "N", name: "ns~h", bare: "h", version: "1.95"}
	v := "1.95"
	good := []bmo.Call{
		{Method: "GET", Path: "/v1/nodes/N", Version: v},
		{Method: "PUT", Path: "/v1/nodes/N/states/provision", Version: v, Body: map[string]any{"target": "adopt"}},
		{Method: "GET", Path: "/v1/nodes/N", Version: v},
		{Method: "GET", Path: "/v1/nodes/N", Version: v},
	}
	if ok, why := s.match(goldenAdopt, good); !ok {
		t.Fatalf("a polled adopt does not match: %s", why)
	}
	for name, mutate := range map[string]func(c []bmo.Call) []bmo.Call{
		"no poll":       func(c []bmo.Call) []bmo.Call { return c[:2] },
		"wrong target":  func(c []bmo.Call) []bmo.Call { c[1].Body = map[string]any{"target": "manage"}; return c },
		"extra key":     func(c []bmo.Call) []bmo.Call { c[1].Body = map[string]any{"target": "adopt", "x": 1}; return c },
		"other version": func(c []bmo.Call) []bmo.Call { c[0].Version = "1.93"; return c },
		"extra call": func(c []bmo.Call) []bmo.Call {
			return append(c, bmo.Call{Method: "DELETE", Path: "/v1/nodes/N", Version: v})
		},
	} {
		calls := mutate(append([]bmo.Call(nil), good...))
		if ok, _ := s.match(goldenAdopt, calls); ok {
			t.Errorf("%s: matched the golden list", name)
		}
	}
	discovery := []bmo.Call{{Method: "GET", Path: "/v1/", Version: v}, {Method: "GET", Path: "/v1/drivers", Version: v}}
	if ok, why := s.match(goldenInit, discovery); ok || !strings.Contains(why, "want none") {
		t.Errorf("discovery with a version header: matched %v (%s)", ok, why)
	}
	create := bmo.Call{Method: "POST", Path: "/v1/nodes", Version: v, Body: map[string]any{"driver": "fake-hardware", "driver_info": map[string]any{},
		"inspect_interface": "agent", "name": "ns~h", "properties": map[string]any{"capabilities": "boot_mode:uefi", "cpu_arch": "x86_64"}}}
	if why := s.matchCall(goldenRegister("m")[3], create); !strings.Contains(why, "body keys") {
		t.Errorf("a create without disable_power_off: %q", why)
	}
}

// TestDropRetries: a pass that ended on a 409 write is left out when the
// next pass tries the same calls again, and is an error otherwise.
func TestDropRetries(t *testing.T) {
	get := bmo.Call{Method: "GET", Path: "/v1/nodes/N", Status: 200}
	put := bmo.Call{Method: "PUT", Path: "/v1/nodes/N/states/provision", Status: 202}
	busy := put
	busy.Status = 409
	at := func(c bmo.Call, pass int) bmo.Call { c.Pass = pass; return c }
	calls := []bmo.Call{at(get, 1), at(busy, 1), at(get, 2), at(put, 2), at(get, 3)}
	out, retries, why := dropRetries(calls)
	if why != "" || retries != 1 || len(out) != 3 || out[0].Pass != 2 {
		t.Errorf("retried pass: %v %d %q", out, retries, why)
	}
	if _, _, why := dropRetries([]bmo.Call{at(get, 1), at(busy, 1), at(get, 2)}); why == "" {
		t.Error("a 409 not tried again was accepted")
	}
}
