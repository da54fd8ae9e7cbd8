package workflows

import (
	"testing"
	"time"
)

func TestDriverInfoSeconds(t *testing.T) {
	cases := []struct {
		name    string
		info    map[string]any
		want    time.Duration
		ok, err bool
	}{
		{"absent", map[string]any{}, 0, false, false},
		{"JSON number", map[string]any{DriverInfoHeartbeatTimeout: 60.0}, time.Minute, true, false},
		{"string, fractional", map[string]any{DriverInfoHeartbeatTimeout: "0.5"}, 500 * time.Millisecond, true, false},
		{"not a number", map[string]any{DriverInfoHeartbeatTimeout: "soon"}, 0, true, true},
		{"zero", map[string]any{DriverInfoHeartbeatTimeout: 0}, 0, true, true},
	}
	for _, c := range cases {
		d, ok, err := DriverInfoSeconds(c.info, DriverInfoHeartbeatTimeout)
		if d != c.want || ok != c.ok || (err != nil) != c.err {
			t.Errorf("%s: got %s, %v, %v; want %s, %v, error %v", c.name, d, ok, err, c.want, c.ok, c.err)
		}
	}
}
