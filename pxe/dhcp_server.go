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
	"github.com/insomniacslk/dhcp/dhcpv4/server4"
)

// ProxyDHCPPort is where PXE clients send their ProxyDHCP REQUEST (PXE
// specification 2.1 §2.2.5).
const ProxyDHCPPort = 4011

// DHCPServer runs a DHCPHandler on sockets.
type DHCPServer struct {
	Handler *DHCPHandler
	cfg     DHCPConfig
	log     *slog.Logger
	conns   []net.PacketConn
}

// NewDHCPServer returns a server for cfg; Serve opens its sockets.
func NewDHCPServer(cfg DHCPConfig, backend Backend, leases Leases, log *slog.Logger) (*DHCPServer, error) {
	h, err := NewDHCPHandler(cfg, backend, leases, log)
	if err != nil {
		return nil, err
	}
	return &DHCPServer{Handler: h, cfg: h.cfg, log: h.log}, nil
}

// Listen opens the sockets. Without cfg.Listen: port 67 on all addresses of
// the interface (clients without an address broadcast), and in proxy mode
// port 4011 on the server address. With cfg.Listen: that address, and in
// proxy mode port 4011 on its IP. Serve calls it when it was not called
// before.
func (s *DHCPServer) Listen() error {
	if s.conns != nil {
		return nil
	}
	if s.cfg.Listen.IsValid() {
		return s.listenAt(s.cfg.Listen)
	}
	if s.cfg.Interface == "" {
		return errors.New("dhcp: no interface and no listen address configured")
	}
	conn, err := server4.NewIPv4UDPConn(s.cfg.Interface, &net.UDPAddr{Port: dhcpv4.ServerPort})
	if err != nil {
		return fmt.Errorf("dhcp: listen on %s port %d: %w", s.cfg.Interface, dhcpv4.ServerPort, err)
	}
	conns := []net.PacketConn{conn}
	if s.cfg.Mode == DHCPModeProxy {
		pc, err := server4.NewIPv4UDPConn(s.cfg.Interface, &net.UDPAddr{IP: s.cfg.Addr.AsSlice(), Port: ProxyDHCPPort})
		if err != nil {
			conn.Close()
			return fmt.Errorf("dhcp: listen on %s:%d: %w", s.cfg.Addr, ProxyDHCPPort, err)
		}
		conns = append(conns, pc)
	}
	s.conns = conns
	return nil
}

// listenAt opens the sockets of a configured listen address.
func (s *DHCPServer) listenAt(addr netip.AddrPort) error {
	conn, err := listenUDP(s.cfg.Interface, addr)
	if err != nil {
		return err
	}
	conns := []net.PacketConn{conn}
	if s.cfg.Mode == DHCPModeProxy {
		pc, err := listenUDP(s.cfg.Interface, netip.AddrPortFrom(addr.Addr(), ProxyDHCPPort))
		if err != nil {
			conn.Close()
			return err
		}
		conns = append(conns, pc)
	}
	s.conns = conns
	return nil
}

// listenUDP binds addr, on iface when it is set. Unlike
// server4.NewIPv4UDPConn it sets neither SO_REUSEADDR nor SO_REUSEPORT: a
// second server on the same address must fail, not silently take half of
// the first one's requests.
func listenUDP(iface string, addr netip.AddrPort) (net.PacketConn, error) {
	where := addr.String()
	if iface != "" {
		where += " on " + iface
	}
	lc := net.ListenConfig{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) {
			// Replies to clients without an address are broadcast (RFC
			// 2131 §4.1), which the kernel refuses without SO_BROADCAST.
			if err := syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_BROADCAST, 1); err != nil {
				serr = fmt.Errorf("set SO_BROADCAST: %w", err)
				return
			}
			if iface != "" {
				if err := dhcpv4.BindToInterface(int(fd), iface); err != nil {
					serr = fmt.Errorf("bind to interface %s: %w", iface, err)
				}
			}
		})
		return errors.Join(err, serr)
	}}
	pc, err := lc.ListenPacket(context.Background(), "udp4", addr.String())
	if errors.Is(err, syscall.EADDRINUSE) {
		return nil, fmt.Errorf("dhcp: listen on %s (is another DHCP server running there?): %w", where, err)
	}
	if err != nil {
		return nil, fmt.Errorf("dhcp: listen on %s: %w", where, err)
	}
	return pc, nil
}

// LocalAddr is the address of the DHCP socket (not the ProxyDHCP one),
// nil before Listen. With a listen address of port 0 it says which port
// the kernel chose.
func (s *DHCPServer) LocalAddr() net.Addr {
	if s.conns == nil {
		return nil
	}
	return s.conns[0].LocalAddr()
}

// Serve answers DHCP until ctx ends.
func (s *DHCPServer) Serve(ctx context.Context) error {
	if err := s.Listen(); err != nil {
		return err
	}
	conns := s.conns
	s.log.Info("DHCP serving", "interface", s.cfg.Interface, "addr", s.cfg.Addr, "listen", conns[0].LocalAddr().String())
	stop := context.AfterFunc(ctx, func() {
		for _, c := range conns {
			c.Close()
		}
	})
	defer stop()
	var wg sync.WaitGroup
	errs := make([]error, len(conns))
	for i, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = s.serveConn(ctx, c, i > 0)
		}()
	}
	wg.Wait()
	for _, c := range conns {
		c.Close()
	}
	if ctx.Err() != nil {
		return nil
	}
	return errors.Join(errs...)
}

// serveConn reads datagrams and answers each in its own goroutine, at most
// maxInflightDHCP at once. toPeer: replies go back to the sender (the port
// 4011 exchange is unicast both ways). Otherwise replies go where
// replyDestination says, except to senders on this host.
func (s *DHCPServer) serveConn(ctx context.Context, conn net.PacketConn, toPeer bool) error {
	sem := make(chan struct{}, maxInflightDHCP)
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		buf := make([]byte, maxDHCPPacket)
		n, peer, err := conn.ReadFrom(buf)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			return fmt.Errorf("dhcp: read: %w", err)
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			reply, dest := s.Handler.HandleBytes(ctx, buf[:n])
			if reply == nil {
				return
			}
			if toPeer || onThisHost(peer) {
				dest, _ = peer.(*net.UDPAddr)
			}
			if _, err := conn.WriteTo(reply.ToBytes(), dest); err != nil {
				s.log.Warn("send DHCP reply", "mac", reply.ClientHWAddr.String(), "dest", dest.String(), "error", err)
			} else {
				observeDHCPReply(reply)
			}
		}()
	}
}

// onThisHost reports whether peer sent from a loopback address: a process on
// this host (a test, a benchmark, a local relay) that the RFC 2131 §4.1
// destinations (broadcast to port 68, the relay's port 67, ciaddr) would
// not reach, while its source address does.
func onThisHost(peer net.Addr) bool {
	p, ok := peer.(*net.UDPAddr)
	return ok && p.IP.IsLoopback()
}
