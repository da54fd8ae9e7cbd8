package pxe

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"syscall"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/dhcpv6"
	"golang.org/x/net/ipv6"
)

// allDHCPAgents is All_DHCP_Relay_Agents_and_Servers (RFC 8415 §7.1),
// where clients on the link send.
var allDHCPAgents = net.ParseIP("ff02::1:2")

// DHCPv6Server runs a DHCPv6Handler on a socket.
type DHCPv6Server struct {
	Handler *DHCPv6Handler
	cfg     DHCPv6Config
	log     *slog.Logger
	conn    net.PacketConn
}

// NewDHCPv6Server returns a server for cfg; Serve opens its socket.
func NewDHCPv6Server(cfg DHCPv6Config, backend Backend, leases Leases, log *slog.Logger) (*DHCPv6Server, error) {
	h, err := NewDHCPv6Handler(cfg, backend, leases, log)
	if err != nil {
		return nil, err
	}
	return &DHCPv6Server{Handler: h, cfg: h.cfg, log: h.log}, nil
}

// Listen opens the socket: cfg.Listen when set, otherwise port 547 on
// Interface, joined to ff02::1:2 there. Like the DHCPv4 service it sets no
// SO_REUSEADDR: a second server on the same port fails instead of sharing.
func (s *DHCPv6Server) Listen() error {
	if s.conn != nil {
		return nil
	}
	addr := s.cfg.Listen
	if !addr.IsValid() {
		if s.cfg.Interface == "" {
			return errors.New("dhcpv6: no interface and no listen address configured")
		}
		addr = netip.AddrPortFrom(netip.IPv6Unspecified(), dhcpv6.DefaultServerPort)
	}
	iface := s.cfg.Interface
	lc := net.ListenConfig{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) {
			if iface != "" {
				if err := dhcpv4.BindToInterface(int(fd), iface); err != nil {
					serr = fmt.Errorf("bind to interface %s: %w", iface, err)
				}
			}
		})
		return errors.Join(err, serr)
	}}
	pc, err := lc.ListenPacket(context.Background(), "udp6", addr.String())
	if errors.Is(err, syscall.EADDRINUSE) {
		return fmt.Errorf("dhcpv6: listen on %s (is another DHCPv6 server running there?): %w", addr, err)
	}
	if err != nil {
		return fmt.Errorf("dhcpv6: listen on %s: %w", addr, err)
	}
	if iface != "" && addr.Addr().IsUnspecified() {
		ifi, err := net.InterfaceByName(iface)
		if err == nil {
			err = ipv6.NewPacketConn(pc).JoinGroup(ifi, &net.UDPAddr{IP: allDHCPAgents})
		}
		if err != nil {
			pc.Close()
			return fmt.Errorf("dhcpv6: join %s on %s: %w", allDHCPAgents, iface, err)
		}
	}
	s.conn = pc
	return nil
}

// LocalAddr is the socket's address, nil before Listen.
func (s *DHCPv6Server) LocalAddr() net.Addr {
	if s.conn == nil {
		return nil
	}
	return s.conn.LocalAddr()
}

// Serve answers DHCPv6 until ctx ends. Replies go back to the sender's
// address and port: a client's link-local address at port 546, or the
// relay agent's at 547 (RFC 8415 §18.3.10, §19.2).
func (s *DHCPv6Server) Serve(ctx context.Context) error {
	if err := s.Listen(); err != nil {
		return err
	}
	conn := s.conn
	s.log.Info("DHCPv6 serving", "interface", s.cfg.Interface, "addr", s.cfg.Addr, "listen", conn.LocalAddr().String())
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	defer conn.Close()
	sem := make(chan struct{}, maxInflightDHCP)
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		buf := make([]byte, maxDHCPv6Packet)
		n, peer, err := conn.ReadFrom(buf)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			return fmt.Errorf("dhcpv6: read: %w", err)
		}
		up, ok := peer.(*net.UDPAddr)
		if !ok {
			continue
		}
		from, _ := netip.AddrFromSlice(up.IP.To16())
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			reply := s.Handler.HandleBytes(ctx, buf[:n], from)
			if reply == nil {
				return
			}
			if _, err := conn.WriteTo(reply, up); err != nil {
				s.log.Warn("send DHCPv6 reply", "dest", up.String(), "error", err)
			} else {
				observeDHCPv6Reply(reply)
			}
		}()
	}
}
