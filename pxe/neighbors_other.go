//go:build !linux

package pxe

import (
	"net"
	"net/netip"
)

// kernelNeighbors has no neighbour table to read outside Linux: kickstarts
// of nodes without a lease are then refused (docs/security.md).
func kernelNeighbors(netip.Addr) (net.HardwareAddr, bool) { return nil, false }
