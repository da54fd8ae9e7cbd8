package pxe

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"strings"
	"sync"
	"time"
)

// ErrNoBootConfig is what a Backend returns for a MAC or node that ironflow
// was not asked to boot. Every service answers it with silence (DHCP) or 404
// (HTTP): ironflow never boots a machine it was not asked to.
var ErrNoBootConfig = errors.New("no boot config")

// Boot modes and methods, as the store spells them.
const (
	BootModeBIOS = "bios"
	BootModeUEFI = "uefi"

	MethodPXE    = "pxe"
	MethodVMedia = "vmedia"
	// MethodHTTPIPXE is in httpboot.go.
)

// BootConfig is what the pxe services need to know about one node's next
// boot. It mirrors the store's boot config row; the adapter between the two
// lives with the caller so that pxe imports no database code.
type BootConfig struct {
	NodeUUID     string
	MACs         []string
	BootMode     string // "bios" | "uefi"
	Method       string // "pxe" | "vmedia" | "http-ipxe"
	KernelURL    string
	InitrdURL    string
	KernelParams string
	ISOPath      string
	Kind         string // "agent" | "ramdisk" | "anaconda" | "instance"
	// Kickstart is served at /boot/{uuid}/ks.cfg for Kind "anaconda"
	// (RenderKickstart). It holds the agent token: never log it.
	Kickstart string
	// SecureBoot: the node boots with secure boot on (its secure_boot
	// field): a UEFI PXE boot goes through the signed chain (grubnet.go).
	SecureBoot bool
	// LoaderURL is the UEFI loader a node that boots over UEFI HTTP boot
	// fetches (Method MethodHTTPIPXE; httpboot.go).
	LoaderURL string
	UpdatedAt time.Time
}

// Backend is what the DHCP handler reads: the boot config of the machine
// whose NIC sent the request.
type Backend interface {
	BootConfigByMAC(ctx context.Context, mac net.HardwareAddr) (*BootConfig, error)
}

// NodeBackend is what the HTTP boot service reads: the boot config of the
// node whose iPXE script or ISO is asked for.
type NodeBackend interface {
	BootConfigByNode(ctx context.Context, nodeUUID string) (*BootConfig, error)
}

// BootConfigs is both lookups, as pxe.Run needs them.
type BootConfigs interface {
	Backend
	NodeBackend
}

// Leases hands out IPv4 addresses in reservation mode, and IPv6 addresses
// to DHCPv6 clients. An implementation
// must return the same address to the same MAC for as long as its lease
// lives, so that a machine keeps its address across the PXE, iPXE and agent
// DHCP exchanges of one deploy.
type Leases interface {
	Allocate(ctx context.Context, mac net.HardwareAddr, nodeUUID string, first, last netip.Addr, ttl time.Duration) (netip.Addr, error)
}

// MemoryBackend is an in-memory Backend for tests, benchmarks and
// `ironflow dev` without a database.
type MemoryBackend struct {
	mu     sync.RWMutex
	byNode map[string]*BootConfig
	byMAC  map[string]*BootConfig
}

// NewMemoryBackend returns an empty MemoryBackend.
func NewMemoryBackend() *MemoryBackend {
	return &MemoryBackend{byNode: map[string]*BootConfig{}, byMAC: map[string]*BootConfig{}}
}

// Put stores (or replaces) a node's boot config.
func (b *MemoryBackend) Put(bc BootConfig) error {
	macs := make([]string, 0, len(bc.MACs))
	for _, m := range bc.MACs {
		hw, err := net.ParseMAC(m)
		if err != nil {
			return fmt.Errorf("store boot config of node %s: %w", bc.NodeUUID, err)
		}
		macs = append(macs, hw.String())
	}
	bc.MACs = macs
	b.mu.Lock()
	defer b.mu.Unlock()
	b.removeLocked(bc.NodeUUID)
	b.byNode[bc.NodeUUID] = &bc
	for _, m := range macs {
		b.byMAC[m] = &bc
	}
	return nil
}

// Delete removes a node's boot config (CleanBoot).
func (b *MemoryBackend) Delete(nodeUUID string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.removeLocked(nodeUUID)
}

func (b *MemoryBackend) removeLocked(nodeUUID string) {
	old, ok := b.byNode[nodeUUID]
	if !ok {
		return
	}
	for _, m := range old.MACs {
		delete(b.byMAC, m)
	}
	delete(b.byNode, nodeUUID)
}

// BootConfigByMAC implements Backend.
func (b *MemoryBackend) BootConfigByMAC(_ context.Context, mac net.HardwareAddr) (*BootConfig, error) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	bc, ok := b.byMAC[mac.String()]
	if !ok {
		return nil, ErrNoBootConfig
	}
	c := *bc
	return &c, nil
}

// BootConfigByNode implements NodeBackend.
func (b *MemoryBackend) BootConfigByNode(_ context.Context, nodeUUID string) (*BootConfig, error) {
	b.mu.RLock()
	defer b.mu.RUnlock()
	bc, ok := b.byNode[strings.ToLower(nodeUUID)]
	if !ok {
		bc, ok = b.byNode[nodeUUID]
	}
	if !ok {
		return nil, ErrNoBootConfig
	}
	c := *bc
	return &c, nil
}

// ErrPoolExhausted is returned when every address of a pool is leased.
var ErrPoolExhausted = errors.New("address pool exhausted")

// MemoryLeases is an in-memory Leases for tests, benchmarks and
// `ironflow dev`. Leases are sticky: a MAC keeps its address while the lease
// lives, and an expired lease is reused only when no free address is left.
type MemoryLeases struct {
	mu     sync.Mutex
	now    func() time.Time
	byMAC  map[string]memoryLease
	byAddr map[netip.Addr]string
}

type memoryLease struct {
	addr    netip.Addr
	expires time.Time
}

// NewMemoryLeases returns an empty MemoryLeases.
func NewMemoryLeases() *MemoryLeases {
	return &MemoryLeases{now: time.Now, byMAC: map[string]memoryLease{}, byAddr: map[netip.Addr]string{}}
}

// Allocate implements Leases.
func (l *MemoryLeases) Allocate(_ context.Context, mac net.HardwareAddr, _ string, first, last netip.Addr, ttl time.Duration) (netip.Addr, error) {
	if !first.IsValid() || first.Is4() != last.Is4() || last.Less(first) {
		return netip.Addr{}, fmt.Errorf("allocate lease for %s: invalid pool %s-%s", mac, first, last)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	// A MAC holds one IPv4 and one IPv6 lease (DHCPv4 and DHCPv6 on one
	// dual-stack segment).
	key := mac.String()
	if first.Is6() {
		key += "/6"
	}
	if cur, ok := l.byMAC[key]; ok && !cur.addr.Less(first) && !last.Less(cur.addr) {
		l.byMAC[key] = memoryLease{addr: cur.addr, expires: now.Add(ttl)}
		return cur.addr, nil
	}
	var expired netip.Addr
	for a := first; a.IsValid() && !last.Less(a); a = a.Next() {
		owner, taken := l.byAddr[a]
		if !taken {
			l.bindLocked(key, a, now.Add(ttl))
			return a, nil
		}
		if !expired.IsValid() && l.byMAC[owner].expires.Before(now) {
			expired = a
		}
	}
	if expired.IsValid() {
		delete(l.byMAC, l.byAddr[expired])
		l.bindLocked(key, expired, now.Add(ttl))
		return expired, nil
	}
	return netip.Addr{}, fmt.Errorf("allocate lease for %s in %s-%s: %w", mac, first, last, ErrPoolExhausted)
}

func (l *MemoryLeases) bindLocked(mac string, a netip.Addr, expires time.Time) {
	if old, ok := l.byMAC[mac]; ok {
		delete(l.byAddr, old.addr)
	}
	l.byMAC[mac] = memoryLease{addr: a, expires: expires}
	l.byAddr[a] = mac
}
