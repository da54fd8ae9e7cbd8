package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"net/url"
	"strings"

	"github.com/ironflow/ironflow/pxe"
)

// dhcpv6Flags are the IPv6 boot services' settings: DHCPv6 and, where
// ironflow owns the segment, router advertisements (docs/bmcs-and-boot.md,
// "IPv6").
type dhcpv6Flags struct {
	iface, listen, addr, pool, bootURL *string
	ra                                 *bool
}

func addDHCPv6Flags(s *settings) dhcpv6Flags {
	return dhcpv6Flags{
		iface:   s.String("dhcpv6-interface", "", "interface to serve DHCPv6 on (empty: off unless --dhcpv6-listen is set)"),
		listen:  s.String("dhcpv6-listen", "", "UDP address [ip]:port to serve DHCPv6 on instead of port 547 on --dhcpv6-interface, e.g. a relay-facing address"),
		addr:    s.String("dhcpv6-server-address", "", "ironflow's IPv6 address on the DHCPv6 segment (the host of the TFTP boot file URL)"),
		pool:    s.String("dhcpv6-pool", "", "DHCPv6 address pool as prefix,first,last e.g. fd00:77::/64,fd00:77::100,fd00:77::1ff"),
		bootURL: s.String("dhcpv6-boot-url", "", "the HTTP boot service as IPv6 machines reach it (default --boot-public-url when its host is IPv6, else http://[--dhcpv6-server-address]:<its port>)"),
		ra: s.Bool("router-advertisements", false,
			"send IPv6 router advertisements on --dhcpv6-interface (Managed flag, the pool's prefix on-link): only where ironflow owns the segment"),
	}
}

// enabled reports whether DHCPv6 is configured.
func (f dhcpv6Flags) enabled() bool { return *f.iface != "" || *f.listen != "" }

// config builds the DHCPv6 and router advertisement settings; httpBase is
// the boot service's public URL.
func (f dhcpv6Flags) config(httpBase string) (pxe.DHCPv6Config, *pxe.RAConfig, error) {
	addr, err := netip.ParseAddr(*f.addr)
	if err != nil || !addr.Is6() {
		return pxe.DHCPv6Config{}, nil, fmt.Errorf("--dhcpv6-server-address %q: want an IPv6 address", *f.addr)
	}
	cfg := pxe.DHCPv6Config{Interface: *f.iface, Addr: addr}
	if *f.listen != "" {
		if cfg.Listen, err = netip.ParseAddrPort(*f.listen); err != nil {
			return cfg, nil, fmt.Errorf("--dhcpv6-listen %q: want [ip]:port: %w", *f.listen, err)
		}
	}
	parts := strings.Split(*f.pool, ",")
	if len(parts) != 3 {
		return cfg, nil, fmt.Errorf("--dhcpv6-pool %q: want prefix,first,last", *f.pool)
	}
	var pool pxe.DHCPv6Pool
	if pool.Prefix, err = netip.ParsePrefix(parts[0]); err != nil {
		return cfg, nil, fmt.Errorf("--dhcpv6-pool prefix: %w", err)
	}
	if pool.First, err = netip.ParseAddr(parts[1]); err != nil {
		return cfg, nil, fmt.Errorf("--dhcpv6-pool first: %w", err)
	}
	if pool.Last, err = netip.ParseAddr(parts[2]); err != nil {
		return cfg, nil, fmt.Errorf("--dhcpv6-pool last: %w", err)
	}
	cfg.Pools = []pxe.DHCPv6Pool{pool}
	if cfg.HTTPBaseURL, err = ipv6BootURL(*f.bootURL, httpBase, addr); err != nil {
		return cfg, nil, err
	}
	var ra *pxe.RAConfig
	if *f.ra {
		if *f.iface == "" {
			return cfg, nil, errors.New("--router-advertisements needs --dhcpv6-interface")
		}
		ra = &pxe.RAConfig{Interface: *f.iface, Prefix: pool.Prefix}
	}
	return cfg, ra, nil
}

// ipv6BootURL is the boot service's URL for IPv6 clients: set, the public
// URL when it names an IPv6 host, or the public URL's scheme and port on
// the DHCPv6 server address, bracketed (RFC 3986 §3.2.2).
func ipv6BootURL(set, public string, addr netip.Addr) (string, error) {
	if set != "" {
		return strings.TrimRight(set, "/"), nil
	}
	u, err := url.Parse(public)
	if err != nil || u.Host == "" {
		return "", fmt.Errorf("boot public URL %q: %v", public, err)
	}
	if a, err := netip.ParseAddr(u.Hostname()); err == nil && a.Is6() && !a.Is4In6() {
		return strings.TrimRight(public, "/"), nil
	}
	port := u.Port()
	if port == "" {
		port = map[string]string{"https": "443"}[u.Scheme]
	}
	host := "[" + addr.String() + "]"
	if port != "" {
		host = net.JoinHostPort(addr.String(), port)
	}
	return u.Scheme + "://" + host, nil
}

// start runs DHCPv6 and router advertisements when configured; a service
// that stops reports on errs.
func (f dhcpv6Flags) start(ctx context.Context, httpBase string, backend pxe.Backend, log *slog.Logger, errs chan<- error) error {
	if !f.enabled() {
		if *f.ra {
			return errors.New("--router-advertisements needs --dhcpv6-interface")
		}
		return nil
	}
	cfg, ra, err := f.config(httpBase)
	if err != nil {
		return err
	}
	leases, ok := backend.(pxe.Leases)
	if !ok {
		return errors.New("dhcpv6: the boot store keeps no leases")
	}
	d, err := pxe.NewDHCPv6Server(cfg, backend, leases, log)
	if err != nil {
		return err
	}
	if err := d.Listen(); err != nil {
		return err
	}
	go func() { errs <- d.Serve(ctx) }()
	if ra != nil {
		go func() { errs <- pxe.ServeRouterAdvertisements(ctx, *ra, log) }()
	}
	log.Info("dhcpv6 serving", "interface", cfg.Interface, "listen", cfg.Listen, "boot_url", cfg.HTTPBaseURL, "router_advertisements", ra != nil)
	return nil
}
