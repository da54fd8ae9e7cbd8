package pxe

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"
)

// DefaultShutdownTimeout bounds how long Run waits for HTTP downloads in
// flight when its context ends.
const DefaultShutdownTimeout = 10 * time.Second

// Config enables and configures the boot services; a nil section is off.
type Config struct {
	DHCP *DHCPConfig `json:"dhcp,omitempty"`
	// DHCPv6 and RA serve IPv6 segments (dhcpv6.go, ra.go).
	DHCPv6 *DHCPv6Config `json:"dhcpv6,omitempty"`
	RA     *RAConfig     `json:"ra,omitempty"`
	TFTP   *TFTPConfig   `json:"tftp,omitempty"`
	HTTP   *HTTPConfig   `json:"http,omitempty"`
}

// Run opens every enabled service's sockets, then serves until ctx ends or
// one service fails; then it stops the others and returns the first error.
// An error opening any socket stops Run before anything is served.
func Run(ctx context.Context, cfg Config, backend BootConfigs, leases Leases, log *slog.Logger) error {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("component", "pxe")
	if cfg.DHCP == nil && cfg.DHCPv6 == nil && cfg.TFTP == nil && cfg.HTTP == nil {
		return errors.New("pxe: no service enabled")
	}
	var serves []func(context.Context) error
	var closers []func()
	defer func() {
		for _, c := range closers {
			c()
		}
	}()

	if cfg.DHCP != nil {
		srv, err := NewDHCPServer(*cfg.DHCP, backend, leases, log)
		if err != nil {
			return err
		}
		if err := srv.Listen(); err != nil {
			return err
		}
		serves = append(serves, srv.Serve)
	}
	if cfg.DHCPv6 != nil {
		srv, err := NewDHCPv6Server(*cfg.DHCPv6, backend, leases, log)
		if err != nil {
			return err
		}
		if err := srv.Listen(); err != nil {
			return err
		}
		serves = append(serves, srv.Serve)
	}
	if cfg.RA != nil {
		ra := *cfg.RA
		if err := ra.validate(); err != nil {
			return err
		}
		serves = append(serves, func(ctx context.Context) error { return ServeRouterAdvertisements(ctx, ra, log) })
	}
	if cfg.TFTP != nil {
		srv, err := NewTFTPServer(*cfg.TFTP, log)
		if err != nil {
			return err
		}
		srv.ServeBootConfigs(backend)
		closers = append(closers, func() { srv.Close() })
		conn, err := net.ListenPacket("udp", srv.cfg.Addr)
		if err != nil {
			return fmt.Errorf("tftp: listen on %s: %w", srv.cfg.Addr, err)
		}
		serves = append(serves, func(ctx context.Context) error { return srv.Serve(ctx, conn) })
	}
	if cfg.HTTP != nil {
		h, err := NewHTTPHandler(*cfg.HTTP, backend, log)
		if err != nil {
			return err
		}
		srv := NewHTTPServer(cfg.HTTP.Addr, h)
		ln, err := net.Listen("tcp", srv.Addr)
		if err != nil {
			return fmt.Errorf("http boot: listen on %s: %w", srv.Addr, err)
		}
		log.Info("HTTP boot serving", "addr", ln.Addr().String())
		serves = append(serves, func(ctx context.Context) error {
			stop := context.AfterFunc(ctx, func() {
				sctx, cancel := context.WithTimeout(context.Background(), DefaultShutdownTimeout)
				defer cancel()
				_ = srv.Shutdown(sctx)
			})
			defer stop()
			if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
				return fmt.Errorf("http boot: serve: %w", err)
			}
			return nil
		})
	}

	log.Info("pxe services ready", "dhcp", cfg.DHCP != nil, "dhcpv6", cfg.DHCPv6 != nil, "ra", cfg.RA != nil, "tftp", cfg.TFTP != nil, "http", cfg.HTTP != nil)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg       sync.WaitGroup
		once     sync.Once
		firstErr error
	)
	for _, serve := range serves {
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := serve(ctx)
			if err != nil {
				once.Do(func() { firstErr = err })
			}
			// Any service ending, failed or not, ends the others.
			cancel()
		}()
	}
	wg.Wait()
	return firstErr
}
