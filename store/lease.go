package store

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Lease is a DHCP lease handed out by ironflow's DHCP server.
type Lease struct {
	MAC       string     `json:"mac" db:"mac"`
	IP        netip.Addr `json:"ip" db:"ip"`
	NodeUUID  string     `json:"node_uuid" db:"node_uuid"` // "" when unknown
	ExpiresAt time.Time  `json:"expires_at" db:"expires_at"`
}

// leaseAllocateAttempts bounds AllocateLease's retries when a concurrent
// allocation takes the address (or the MAC) it chose first.
const leaseAllocateAttempts = 32

// GetLeases returns the leases of mac (expired or not), IPv4's first: one
// per address family.
func (s *Store) GetLeases(ctx context.Context, mac string) ([]Lease, error) {
	m, err := NormalizeMAC(mac)
	if err != nil {
		return nil, fmt.Errorf("get leases: %w", err)
	}
	rows, err := s.pool.Query(ctx, "SELECT mac, ip, node_uuid, expires_at FROM dhcp_leases WHERE mac = $1 ORDER BY family", m)
	if err != nil {
		return nil, dbError(err, "get leases of %s", m)
	}
	defer rows.Close()
	var out []Lease
	for rows.Next() {
		var l Lease
		var node *string
		if err := rows.Scan(&l.MAC, &l.IP, &node, &l.ExpiresAt); err != nil {
			return nil, dbError(err, "get leases of %s", m)
		}
		if node != nil {
			l.NodeUUID = *node
		}
		out = append(out, l)
	}
	return out, dbError(rows.Err(), "get leases of %s", m)
}

// GetLease returns the IPv4 lease of mac, or its IPv6 one when it has no
// IPv4 lease (expired or not), or ErrNotFound.
func (s *Store) GetLease(ctx context.Context, mac string) (*Lease, error) {
	m, err := NormalizeMAC(mac)
	if err != nil {
		return nil, fmt.Errorf("get lease: %w", err)
	}
	l := &Lease{}
	var node *string
	err = s.pool.QueryRow(ctx, "SELECT mac, ip, node_uuid, expires_at FROM dhcp_leases WHERE mac = $1 ORDER BY family LIMIT 1", m).
		Scan(&l.MAC, &l.IP, &node, &l.ExpiresAt)
	if err != nil {
		return nil, dbError(err, "get lease of %s", m)
	}
	if node != nil {
		l.NodeUUID = *node
	}
	return l, nil
}

// AllocateLease gives mac an address in [first, last] for ttl. A MAC that
// holds a lease in the range gets the same address back with its expiry
// extended; otherwise it gets the lowest address not leased (expired leases
// of other MACs are reused). ErrPoolExhausted when none is free.
//
// Concurrent callers are kept apart by the unique constraints on mac and
// ip: the loser of a race retries and sees the winner's row.
func (s *Store) AllocateLease(ctx context.Context, mac string, nodeUUID string, first, last netip.Addr, ttl time.Duration) (netip.Addr, error) {
	m, err := NormalizeMAC(mac)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("allocate lease: %w", err)
	}
	first, last = first.Unmap(), last.Unmap()
	if !first.IsValid() || !last.IsValid() || first.Is4() != last.Is4() || last.Less(first) || ttl <= 0 {
		return netip.Addr{}, fmt.Errorf("allocate lease for %s: range %s-%s, ttl %s: %w", m, first, last, ttl, ErrInvalidInput)
	}
	var node *string
	if nodeUUID != "" {
		u, _ := canonicalUUID(nodeUUID)
		node = &u
	}
	for attempt := 0; attempt < leaseAllocateAttempts; attempt++ {
		ip, err := s.tryAllocateLease(ctx, m, node, first, last, ttl)
		if err == nil {
			return ip, nil
		}
		var pgErr *pgconn.PgError
		if errors.As(err, &pgErr) && pgErr.Code == "23505" && ctx.Err() == nil {
			continue
		}
		if errors.Is(err, ErrPoolExhausted) {
			return netip.Addr{}, fmt.Errorf("allocate lease for %s in %s-%s: %w", m, first, last, err)
		}
		return netip.Addr{}, dbError(err, "allocate lease for %s in %s-%s", m, first, last)
	}
	return netip.Addr{}, fmt.Errorf("allocate lease for %s in %s-%s: still contended after %d attempts", m, first, last, leaseAllocateAttempts)
}

func (s *Store) tryAllocateLease(ctx context.Context, mac string, node *string, first, last netip.Addr, ttl time.Duration) (netip.Addr, error) {
	var ip netip.Addr
	err := pgx.BeginFunc(ctx, s.pool, func(tx pgx.Tx) error {
		ttlMicros := ttl.Microseconds()
		err := tx.QueryRow(ctx, `UPDATE dhcp_leases SET expires_at = now() + $2 * interval '1 microsecond', node_uuid = $3
			WHERE mac = $1 AND ip BETWEEN $4 AND $5 RETURNING ip`, mac, ttlMicros, node, first, last).Scan(&ip)
		if err == nil {
			return nil
		}
		if !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		// A lease of this family outside the range (the pool was
		// reconfigured) is dropped; the other family's stays.
		if _, err := tx.Exec(ctx, "DELETE FROM dhcp_leases WHERE mac = $1 AND family = family($2::inet)", mac, first); err != nil {
			return err
		}
		// The lowest free address is first, or one past an active lease.
		err = tx.QueryRow(ctx, `SELECT c FROM (
				SELECT $1::inet AS c
				UNION ALL
				SELECT ip + 1 FROM dhcp_leases WHERE ip >= $1::inet AND ip < $2::inet AND expires_at > now()
			) cand
			WHERE c <= $2::inet AND NOT EXISTS (SELECT 1 FROM dhcp_leases l WHERE l.ip = cand.c AND l.expires_at > now())
			ORDER BY c LIMIT 1`, first, last).Scan(&ip)
		if errors.Is(err, pgx.ErrNoRows) {
			return ErrPoolExhausted
		}
		if err != nil {
			return err
		}
		if _, err := tx.Exec(ctx, "DELETE FROM dhcp_leases WHERE ip = $1 AND expires_at <= now()", ip); err != nil {
			return err
		}
		_, err = tx.Exec(ctx, `INSERT INTO dhcp_leases (mac, ip, node_uuid, expires_at)
			VALUES ($1, $2, $3, now() + $4 * interval '1 microsecond')`, mac, ip, node, ttlMicros)
		return err
	})
	return ip, err
}

// ReleaseLease deletes the lease of mac; no error if none.
func (s *Store) ReleaseLease(ctx context.Context, mac string) error {
	m, err := NormalizeMAC(mac)
	if err != nil {
		return fmt.Errorf("release lease: %w", err)
	}
	_, err = s.pool.Exec(ctx, "DELETE FROM dhcp_leases WHERE mac = $1", m)
	return dbError(err, "release lease of %s", m)
}
