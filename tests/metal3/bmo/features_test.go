package bmo

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestChooseMicroversion: BMO v0.13.2 sends the highest version it knows
// that the API serves (clients/features.go).
func TestChooseMicroversion(t *testing.T) {
	for max, want := range map[int]string{89: "1.89", 92: "1.89", 93: "1.93", 94: "1.93", 95: "1.95", 108: "1.95", 109: "1.109", 110: "1.110", 115: "1.110"} {
		if got := ChooseMicroversion(max); got != want {
			t.Errorf("maximum 1.%d: %s, want %s", max, got, want)
		}
	}
}

// TestTryInitVersionDiscovery: discovery is GET /v1/ without a version
// header; an API below 1.89 is refused with BMO's message; the drivers
// list then carries the chosen version.
func TestTryInitVersionDiscovery(t *testing.T) {
	for _, tc := range []struct{ max, want, refused string }{
		{"1.88", "", "ironic API 1.89 or newer is required, got 1.88"},
		{"1.93", "1.93", ""},
		{"1.115", "1.110", ""},
	} {
		var seen []string
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			seen = append(seen, r.Method+" "+r.URL.Path+" "+r.Header.Get("X-OpenStack-Ironic-API-Version"))
			w.Header().Set("Content-Type", "application/json")
			switch r.URL.Path {
			case "/v1/", "/v1":
				w.Write([]byte(`{"id": "v1", "version": {"id": "v1", "status": "CURRENT", "version": "` + tc.max + `", "min_version": "1.1", "links": []}}`))
			case "/v1/drivers":
				w.Write([]byte(`{"drivers": [{"name": "fake-hardware", "hosts": ["h"], "links": []}]}`))
			default:
				http.NotFound(w, r)
			}
		}))
		p, err := New(Config{Endpoint: srv.URL + "/v1"}, &Host{BMCAddress: "fake://x"})
		if err != nil {
			t.Fatal(err)
		}
		ready, err := p.TryInit(context.Background())
		srv.Close()
		if tc.refused != "" {
			if err == nil || !strings.Contains(err.Error(), tc.refused) {
				t.Errorf("maximum %s: %v, want %q", tc.max, err, tc.refused)
			}
			continue
		}
		if err != nil || !ready || p.Microversion() != tc.want {
			t.Errorf("maximum %s: ready %v, %v, version %s, want %s", tc.max, ready, err, p.Microversion(), tc.want)
		}
		if len(seen) != 2 || seen[0] != "GET /v1/ " || seen[1] != "GET /v1/drivers "+tc.want {
			t.Errorf("maximum %s: requests %q", tc.max, seen)
		}
	}
}
