package tests

import (
	"strings"
	"testing"
)

// TestRequestIDHeadersOfTheBinary: the API binary answers every request,
// errors too, with Openstack-Request-Id and the same id in
// X-OpenStack-Request-Id (Ironic's request-id middleware; API 1.107).
func TestRequestIDHeadersOfTheBinary(t *testing.T) {
	for _, c := range []struct{ version, path string }{
		{"1.1", "/v1/nodes"}, {"1.78", "/v1/nodes/no-such-node"}, {"1.999", "/v1/nodes"},
	} {
		code, h := callAt(t, lab.APIURL, c.version, "GET", c.path, nil, nil)
		id, x := h.Get("Openstack-Request-Id"), h.Get("X-Openstack-Request-Id")
		if !strings.HasPrefix(id, "req-") || x != id {
			t.Errorf("GET %s at %s (%d): Openstack-Request-Id %q, X-OpenStack-Request-Id %q", c.path, c.version, code, id, x)
		}
	}
}
