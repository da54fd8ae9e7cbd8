package store_test

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/ironflow/ironflow/internal/testkit/storetest"
	"github.com/ironflow/ironflow/store"
)

const leaseTTL = time.Hour

var (
	poolFirst = netip.MustParseAddr("192.0.2.10")
	poolLast  = netip.MustParseAddr("192.0.2.13") // four addresses
)

func allocate(t *testing.T, s *store.Store, mac string) netip.Addr {
	t.Helper()
	ip, err := s.AllocateLease(context.Background(), mac, "", poolFirst, poolLast, leaseTTL)
	if err != nil {
		t.Fatalf("AllocateLease(%s): %v", mac, err)
	}
	return ip
}

func TestLeasesStablePerMACDistinctAcrossMACs(t *testing.T) {
	s := storetest.New(t)
	ctx := context.Background()
	n := newNode(t, s, &store.Node{})
	ip1, err := s.AllocateLease(ctx, "52:54:00:00:00:01", n.UUID, poolFirst, poolLast, leaseTTL)
	if err != nil {
		t.Fatalf("AllocateLease: %v", err)
	}
	if ip1 != poolFirst {
		t.Fatalf("first lease %s, want the lowest address %s", ip1, poolFirst)
	}
	before, _ := s.GetLease(ctx, "52:54:00:00:00:01")
	if before.NodeUUID != n.UUID || before.IP != ip1 {
		t.Fatalf("GetLease = %+v", before)
	}
	ip2 := allocate(t, s, "52:54:00:00:00:02")
	if ip2 == ip1 || ip2 != netip.MustParseAddr("192.0.2.11") {
		t.Fatalf("second MAC got %s (first has %s), want 192.0.2.11", ip2, ip1)
	}
	// Renewal: same address, later expiry (upper-case MAC is the same MAC).
	again := allocate(t, s, "52:54:00:00:00:01")
	if again != ip1 {
		t.Fatalf("renewal got %s, want %s", again, ip1)
	}
	after, _ := s.GetLease(ctx, "52:54:00:00:00:01")
	if after.ExpiresAt.Before(before.ExpiresAt) || after.ExpiresAt.Equal(before.ExpiresAt) {
		t.Fatalf("renewal did not extend expiry: %s then %s", before.ExpiresAt, after.ExpiresAt)
	}

	allocate(t, s, "52:54:00:00:00:03")
	allocate(t, s, "52:54:00:00:00:04")
	if _, err := s.AllocateLease(ctx, "52:54:00:00:00:05", "", poolFirst, poolLast, leaseTTL); !errors.Is(err, store.ErrPoolExhausted) {
		t.Fatalf("fifth MAC in a pool of four: %v, want ErrPoolExhausted", err)
	}
	// A holder still renews when the pool is full.
	if ip := allocate(t, s, "52:54:00:00:00:04"); ip != netip.MustParseAddr("192.0.2.13") {
		t.Fatalf("renewal in a full pool got %s", ip)
	}

	// An expired lease of another MAC is reused; the lowest free address wins.
	if _, err := s.Pool().Exec(ctx, "UPDATE dhcp_leases SET expires_at = now() - interval '1 second' WHERE mac = '52:54:00:00:00:02'"); err != nil {
		t.Fatal(err)
	}
	if ip := allocate(t, s, "52:54:00:00:00:05"); ip != ip2 {
		t.Fatalf("after expiry got %s, want the expired %s", ip, ip2)
	}
	if _, err := s.GetLease(ctx, "52:54:00:00:00:02"); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("the expired lease still exists: %v", err)
	}

	if err := s.ReleaseLease(ctx, "52:54:00:00:00:01"); err != nil {
		t.Fatal(err)
	}
	if ip := allocate(t, s, "52:54:00:00:00:06"); ip != ip1 {
		t.Fatalf("after release got %s, want %s", ip, ip1)
	}
}

func TestLeaseOutsideNewRangeMoves(t *testing.T) {
	s := storetest.New(t)
	allocate(t, s, "52:54:00:00:00:01")
	ip, err := s.AllocateLease(context.Background(), "52:54:00:00:00:01", "", netip.MustParseAddr("198.51.100.1"), netip.MustParseAddr("198.51.100.9"), leaseTTL)
	if err != nil || ip != netip.MustParseAddr("198.51.100.1") {
		t.Fatalf("lease in the reconfigured pool = %s, %v", ip, err)
	}
}

func TestLeaseInvalidInput(t *testing.T) {
	s := storetest.New(t)
	ctx := context.Background()
	v6 := netip.MustParseAddr("2001:db8::1")
	cases := []struct {
		name        string
		mac         string
		first, last netip.Addr
		ttl         time.Duration
	}{
		{"bad MAC", "xx", poolFirst, poolLast, leaseTTL},
		{"reversed range", "52:54:00:00:00:01", poolLast, poolFirst, leaseTTL},
		{"mixed families", "52:54:00:00:00:01", poolFirst, v6, leaseTTL},
		{"zero ttl", "52:54:00:00:00:01", poolFirst, poolLast, 0},
		{"invalid address", "52:54:00:00:00:01", netip.Addr{}, poolLast, leaseTTL},
	}
	for _, c := range cases {
		if _, err := s.AllocateLease(ctx, c.mac, "", c.first, c.last, c.ttl); !errors.Is(err, store.ErrInvalidInput) {
			t.Errorf("%s: %v, want ErrInvalidInput", c.name, err)
		}
	}
}

func TestConcurrentLeasesAreDistinct(t *testing.T) {
	s := storetest.New(t)
	first, last := netip.MustParseAddr("192.0.2.100"), netip.MustParseAddr("192.0.2.111") // 12 addresses
	const clients = 16
	ips := make([]netip.Addr, clients)
	errs := make([]error, clients)
	var wg sync.WaitGroup
	for i := 0; i < clients; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ips[i], errs[i] = s.AllocateLease(context.Background(), fmt.Sprintf("52:54:00:00:01:%02x", i), "", first, last, leaseTTL)
		}()
	}
	wg.Wait()
	seen := map[netip.Addr]int{}
	exhausted := 0
	for i, err := range errs {
		switch {
		case err == nil:
			if j, dup := seen[ips[i]]; dup {
				t.Fatalf("clients %d and %d both got %s", i, j, ips[i])
			}
			seen[ips[i]] = i
		case errors.Is(err, store.ErrPoolExhausted):
			exhausted++
		default:
			t.Fatalf("client %d: %v", i, err)
		}
	}
	if len(seen) != 12 || exhausted != clients-12 {
		t.Fatalf("%d leases, %d exhausted; want 12 and %d", len(seen), exhausted, clients-12)
	}
}

// TestLeasesOnePerFamily: on a dual-stack segment a MAC holds its DHCPv4
// and its DHCPv6 lease at once; each family's allocation keeps its own
// address and leaves the other's alone.
func TestLeasesOnePerFamily(t *testing.T) {
	s := storetest.New(t)
	ctx := context.Background()
	const mac = "52:54:00:00:06:01"
	first6, last6 := netip.MustParseAddr("2001:db8::100"), netip.MustParseAddr("2001:db8::1ff")
	v4 := allocate(t, s, mac)
	v6, err := s.AllocateLease(ctx, mac, "", first6, last6, leaseTTL)
	if err != nil || v6 != first6 {
		t.Fatalf("IPv6 lease = %s, %v; want %s", v6, err, first6)
	}
	if again := allocate(t, s, mac); again != v4 {
		t.Errorf("IPv4 lease after the IPv6 one = %s, want %s still", again, v4)
	}
	if again, err := s.AllocateLease(ctx, mac, "", first6, last6, leaseTTL); err != nil || again != v6 {
		t.Errorf("IPv6 lease again = %s, %v; want %s", again, err, v6)
	}
	ls, err := s.GetLeases(ctx, mac)
	if err != nil || len(ls) != 2 || ls[0].IP != v4 || ls[1].IP != v6 {
		t.Fatalf("GetLeases = %+v, %v; want %s then %s", ls, err, v4, v6)
	}
	if l, err := s.GetLease(ctx, mac); err != nil || l.IP != v4 {
		t.Errorf("GetLease = %+v, %v; want the IPv4 lease", l, err)
	}
	// The IPv6 pool reconfigured: only the IPv6 lease moves.
	moved, err := s.AllocateLease(ctx, mac, "", netip.MustParseAddr("2001:db8:1::10"), netip.MustParseAddr("2001:db8:1::20"), leaseTTL)
	if err != nil || moved != netip.MustParseAddr("2001:db8:1::10") {
		t.Fatalf("IPv6 lease in the new pool = %s, %v", moved, err)
	}
	if ls, _ := s.GetLeases(ctx, mac); len(ls) != 2 || ls[0].IP != v4 {
		t.Errorf("after the IPv6 pool moved: %+v, want the IPv4 lease kept", ls)
	}
}
