package pxe

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"time"

	"github.com/mdlayher/ndp"
)

// Named defaults of the router advertisement service.
const (
	// DefaultRAInterval is how often an unsolicited advertisement is sent;
	// router solicitations are answered at once. RFC 4861 §6.2.1 allows
	// 4 s to 1800 s; short, because the machines come and go.
	DefaultRAInterval = 10 * time.Second
	// raPrefixLifetime is the on-link prefix's valid and preferred lifetime.
	raPrefixLifetime = 24 * time.Hour
	// raRetryListen is how long the service waits for the interface's
	// link-local address (a bridge has none until a port is up).
	raRetryListen = time.Second
)

// RAConfig configures router advertisements (RFC 4861 §4.2) on a segment
// ironflow owns: the Managed flag sends clients to DHCPv6 for addresses,
// the prefix is on-link without autoconfiguration (A flag off), and the
// router lifetime is 0 unless ironflow's host routes for the segment.
type RAConfig struct {
	Interface string
	Prefix    netip.Prefix // the segment's on-link prefix, e.g. fd00:99::/64
	// RouterLifetime > 0 makes ironflow's host the segment's default router
	// (RFC 4861 §6.2.1, AdvDefaultLifetime).
	RouterLifetime time.Duration
	Interval       time.Duration
}

func (c *RAConfig) validate() error {
	if c.Interface == "" {
		return errors.New("router advertisements: no interface")
	}
	if !c.Prefix.IsValid() || !c.Prefix.Addr().Is6() || c.Prefix.Addr().Is4In6() {
		return fmt.Errorf("router advertisements: prefix %q is not an IPv6 prefix", c.Prefix)
	}
	return nil
}

// advertisement is the message the service sends.
func (c *RAConfig) advertisement(mac net.HardwareAddr) *ndp.RouterAdvertisement {
	opts := []ndp.Option{&ndp.PrefixInformation{
		PrefixLength: uint8(c.Prefix.Bits()), OnLink: true, AutonomousAddressConfiguration: false,
		ValidLifetime: raPrefixLifetime, PreferredLifetime: raPrefixLifetime, Prefix: c.Prefix.Masked().Addr(),
	}}
	if len(mac) == 6 {
		opts = append(opts, &ndp.LinkLayerAddress{Direction: ndp.Source, Addr: mac})
	}
	return &ndp.RouterAdvertisement{
		CurrentHopLimit: 64, ManagedConfiguration: true, OtherConfiguration: true,
		RouterLifetime: c.RouterLifetime, Options: opts,
	}
}

// ServeRouterAdvertisements advertises cfg until ctx ends.
func ServeRouterAdvertisements(ctx context.Context, cfg RAConfig, log *slog.Logger) error {
	if err := cfg.validate(); err != nil {
		return err
	}
	if cfg.Interval <= 0 {
		cfg.Interval = DefaultRAInterval
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("service", "ra", "interface", cfg.Interface)
	ifi, err := net.InterfaceByName(cfg.Interface)
	if err != nil {
		return fmt.Errorf("router advertisements: %w", err)
	}
	var conn *ndp.Conn
	for conn == nil {
		c, _, err := ndp.Listen(ifi, ndp.LinkLocal)
		if err == nil {
			conn = c
			break
		}
		log.Debug("waiting for a link-local address", "error", err)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(raRetryListen):
		}
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()
	if err := conn.JoinGroup(netip.MustParseAddr("ff02::2")); err != nil {
		return fmt.Errorf("router advertisements: join all-routers on %s: %w", cfg.Interface, err)
	}
	ra := cfg.advertisement(ifi.HardwareAddr)
	send := func() {
		if err := conn.WriteTo(ra, nil, netip.IPv6LinkLocalAllNodes()); err != nil && ctx.Err() == nil {
			log.Warn("send router advertisement", "error", err)
		}
	}
	solicited := make(chan struct{}, 1)
	go func() {
		for {
			m, _, _, err := conn.ReadFrom()
			if err != nil {
				return
			}
			if _, ok := m.(*ndp.RouterSolicitation); ok {
				select {
				case solicited <- struct{}{}:
				default:
				}
			}
		}
	}()
	log.Info("router advertisements serving", "prefix", cfg.Prefix, "managed", true)
	t := time.NewTicker(cfg.Interval)
	defer t.Stop()
	for {
		send()
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-solicited:
		}
	}
}
