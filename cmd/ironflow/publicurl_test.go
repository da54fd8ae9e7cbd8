package main

import (
	"testing"

	"github.com/ironflow/ironflow/apiserver"
)

// Without --public-url, links come from the request's Host header: the API
// warns when it listens beyond loopback (docs/security.md).
func TestWarnHostLinksWhenPublicURLUnsetBeyondLoopback(t *testing.T) {
	for _, c := range []struct {
		listen, public string
		want           bool
	}{
		{"127.0.0.1:6385", "", false},
		{"[::1]:6385", "", false},
		{"localhost:6385", "", false},
		{"0.0.0.0:6385", "", true},
		{":6385", "", true},
		{"10.0.0.5:6385", "", true},
		{"0.0.0.0:6385", "https://ironic.example.com", false},
	} {
		if got := warnHostLinks(apiserver.Config{Listen: c.listen, PublicURL: c.public}); got != c.want {
			t.Errorf("listen %q public %q: warn %v, want %v", c.listen, c.public, got, c.want)
		}
	}
}
