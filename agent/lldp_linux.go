package agent

import (
	"context"
	"fmt"
	"net"
	"time"

	"golang.org/x/sys/unix"
)

// ListenLLDP waits on one interface for an LLDP frame and returns it.
func ListenLLDP(ctx context.Context, iface string) ([]byte, error) {
	l, err := OpenLLDP(iface)
	if err != nil {
		return nil, err
	}
	defer l.Close()
	return l.Receive(ctx)
}

// LLDPListener is a packet socket bound to one interface and LLDP's
// Ethernet type, in the nearest-bridge multicast group (no promiscuous
// mode). It sees frames that arrive from the moment it is open.
type LLDPListener struct {
	fd    int
	iface string
}

// OpenLLDP opens the listener of iface.
func OpenLLDP(iface string) (*LLDPListener, error) {
	ifi, err := net.InterfaceByName(iface)
	if err != nil {
		return nil, err
	}
	proto := htons(lldpEtherType)
	fd, err := unix.Socket(unix.AF_PACKET, unix.SOCK_RAW|unix.SOCK_CLOEXEC, int(proto))
	if err != nil {
		return nil, fmt.Errorf("lldp socket on %s: %w", iface, err)
	}
	if err := unix.Bind(fd, &unix.SockaddrLinklayer{Protocol: proto, Ifindex: ifi.Index}); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("bind lldp socket to %s: %w", iface, err)
	}
	mreq := unix.PacketMreq{Ifindex: int32(ifi.Index), Type: unix.PACKET_MR_MULTICAST, Alen: 6}
	copy(mreq.Address[:], lldpMulticast[:])
	if err := unix.SetsockoptPacketMreq(fd, unix.SOL_PACKET, unix.PACKET_ADD_MEMBERSHIP, &mreq); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("join the lldp group on %s: %w", iface, err)
	}
	return &LLDPListener{fd: fd, iface: iface}, nil
}

// Close closes the socket.
func (l *LLDPListener) Close() error { return unix.Close(l.fd) }

// Receive returns the next LLDP frame, or ctx's error when it ends first.
func (l *LLDPListener) Receive(ctx context.Context) ([]byte, error) {
	buf := make([]byte, 9216)
	for {
		wait := 200 * time.Millisecond
		if dl, ok := ctx.Deadline(); ok && time.Until(dl) < wait {
			wait = time.Until(dl)
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if wait <= 0 {
			return nil, context.DeadlineExceeded
		}
		n, err := unix.Poll([]unix.PollFd{{Fd: int32(l.fd), Events: unix.POLLIN}}, int(wait/time.Millisecond)+1)
		if err == unix.EINTR || n == 0 {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("lldp on %s: %w", l.iface, err)
		}
		m, _, err := unix.Recvfrom(l.fd, buf, unix.MSG_DONTWAIT)
		if err == unix.EAGAIN || err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("lldp on %s: %w", l.iface, err)
		}
		if LLDPTLVs(buf[:m]) != nil {
			return append([]byte(nil), buf[:m]...), nil
		}
	}
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }
