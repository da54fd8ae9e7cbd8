package embedded

import (
	"net"
	"strconv"
	"testing"
)

// TestHeldFreePortIsBindableAtOnce: the port heldFreePort leaves in
// TIME_WAIT is still free for the Go server started next, which binds it
// with SO_REUSEADDR, at once and again after that server closes.
func TestHeldFreePortIsBindableAtOnce(t *testing.T) {
	for i := 0; i < 3; i++ {
		port, err := heldFreePort("127.0.0.1")
		if err != nil {
			t.Fatal(err)
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			t.Fatalf("the held port %d cannot be bound: %v", port, err)
		}
		l.Close()
	}
}
