package store

import (
	"context"
	"net/netip"
	"time"
)

// Lease is a DHCP lease handed out by ironflow's DHCP server.
type Lease struct {
	MAC       string     `json:"mac" db:"mac"`
	IP        netip.Addr `json:"ip" db:"ip"`
	NodeUUID  string     `json:"node_uuid" db:"node_uuid"` // "" when unknown
	ExpiresAt time.Time  `json:"expires_at" db:"expires_at"`
}

// GetLease returns the lease of mac (expired or not) or ErrNotFound.
func (s *Store) GetLease(ctx context.Context, mac string) (*Lease, error) { panic("todo") }

// AllocateLease gives mac an address in [first, last] for ttl. A MAC that
// holds a lease in the range gets the same address back with its expiry
// extended; otherwise it gets the lowest address not leased (expired leases
// of other MACs are reused). ErrPoolExhausted when none is free.
func (s *Store) AllocateLease(ctx context.Context, mac string, nodeUUID string, first, last netip.Addr, ttl time.Duration) (netip.Addr, error) {
	panic("todo")
}

// ReleaseLease deletes the lease of mac; no error if none.
func (s *Store) ReleaseLease(ctx context.Context, mac string) error { panic("todo") }
