package pxe

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"

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

// Listen opens the sockets: port 67 on all addresses of the interface
// (clients without an address broadcast), and in proxy mode port 4011 on
// the server address. Serve calls it when it was not called before.
func (s *DHCPServer) Listen() error {
	if s.conns != nil {
		return nil
	}
	if s.cfg.Interface == "" {
		return errors.New("dhcp: no interface configured")
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

// Serve answers DHCP until ctx ends.
func (s *DHCPServer) Serve(ctx context.Context) error {
	if err := s.Listen(); err != nil {
		return err
	}
	conns := s.conns
	s.log.Info("DHCP serving", "interface", s.cfg.Interface, "addr", s.cfg.Addr)
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
// 4011 exchange is unicast both ways).
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
			if toPeer {
				dest, _ = peer.(*net.UDPAddr)
			}
			if _, err := conn.WriteTo(reply.ToBytes(), dest); err != nil {
				s.log.Warn("send DHCP reply", "mac", reply.ClientHWAddr.String(), "dest", dest.String(), "error", err)
			}
		}()
	}
}
