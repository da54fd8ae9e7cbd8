package main

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"time"

	"github.com/ironflow/ironflow/pxe"
	"github.com/ironflow/ironflow/store"
)

// bootStore adapts the store's boot configurations and leases to the small
// interfaces the PXE services read through.
type bootStore struct{ st *store.Store }

func toPXE(c *store.BootConfig) *pxe.BootConfig {
	return &pxe.BootConfig{
		NodeUUID: c.NodeUUID, MACs: c.MACs, BootMode: c.BootMode, Method: c.Method,
		KernelURL: c.KernelURL, InitrdURL: c.InitrdURL, KernelParams: c.KernelParams,
		ISOPath: c.ISOPath, Kind: c.Kind, Kickstart: c.Kickstart, UpdatedAt: c.UpdatedAt, SecureBoot: c.SecureBoot,
		LoaderURL: c.LoaderURL,
	}
}

func (b bootStore) BootConfigByMAC(ctx context.Context, mac net.HardwareAddr) (*pxe.BootConfig, error) {
	c, err := b.st.BootConfigByMAC(ctx, mac.String())
	if errors.Is(err, store.ErrNotFound) {
		return nil, pxe.ErrNoBootConfig
	}
	if err != nil {
		return nil, err
	}
	return toPXE(c), nil
}

func (b bootStore) BootConfigByNode(ctx context.Context, nodeUUID string) (*pxe.BootConfig, error) {
	c, err := b.st.GetBootConfig(ctx, nodeUUID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, pxe.ErrNoBootConfig
	}
	if err != nil {
		return nil, err
	}
	return toPXE(c), nil
}

func (b bootStore) Allocate(ctx context.Context, mac net.HardwareAddr, nodeUUID string, first, last netip.Addr, ttl time.Duration) (netip.Addr, error) {
	return b.st.AllocateLease(ctx, mac.String(), nodeUUID, first, last, ttl)
}

// LeasedAddrs are the unexpired addresses ironflow's DHCP leased to macs:
// the boot service serves a node's kickstart only to them.
func (b bootStore) LeasedAddrs(ctx context.Context, macs []string) ([]netip.Addr, error) {
	var out []netip.Addr
	for _, m := range macs {
		ls, err := b.st.GetLeases(ctx, m)
		if err != nil {
			return nil, err
		}
		for _, l := range ls {
			if time.Now().Before(l.ExpiresAt) {
				out = append(out, l.IP.Unmap())
			}
		}
	}
	return out, nil
}
