package pxe

import (
	"bytes"
	"encoding/binary"
	"net"
	"net/netip"
	"syscall"
)

// Neighbour states of rtnetlink(7) that name no usable link-layer address.
const (
	nudIncomplete = 0x01
	nudFailed     = 0x20
	ndaDst        = 1
	ndaLLAddr     = 2
	ndmsgLen      = 12
)

// kernelNeighbors is the host's neighbour table (ARP and NDP), read with an
// rtnetlink RTM_GETNEIGH dump: the link-layer address the boot service's
// host resolved addr to, when addr is on one of its segments.
func kernelNeighbors(addr netip.Addr) (net.HardwareAddr, bool) {
	rib, err := syscall.NetlinkRIB(syscall.RTM_GETNEIGH, syscall.AF_UNSPEC)
	if err != nil {
		return nil, false
	}
	msgs, err := syscall.ParseNetlinkMessage(rib)
	if err != nil {
		return nil, false
	}
	for _, m := range msgs {
		if m.Header.Type != syscall.RTM_NEWNEIGH || len(m.Data) < ndmsgLen {
			continue
		}
		state := binary.NativeEndian.Uint16(m.Data[8:10])
		if state&(nudIncomplete|nudFailed) != 0 {
			continue
		}
		var dst, ll []byte
		for b := m.Data[ndmsgLen:]; len(b) >= 4; {
			l := int(binary.NativeEndian.Uint16(b[0:2]))
			if l < 4 || l > len(b) {
				break
			}
			switch binary.NativeEndian.Uint16(b[2:4]) {
			case ndaDst:
				dst = b[4:l]
			case ndaLLAddr:
				ll = b[4:l]
			}
			b = b[min((l+3)&^3, len(b)):]
		}
		if a, ok := netip.AddrFromSlice(dst); ok && a.Unmap() == addr && len(ll) > 0 && !bytes.Equal(ll, make([]byte, len(ll))) {
			return net.HardwareAddr(bytes.Clone(ll)), true
		}
	}
	return nil, false
}
