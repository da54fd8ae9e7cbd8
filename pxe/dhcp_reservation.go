package pxe

import (
	"context"
	"log/slog"
	"net"
	"net/netip"

	"github.com/insomniacslk/dhcp/dhcpv4"
)

// reservationHandler is ironflow as the segment's DHCP server, answering
// only the MACs of nodes it has boot configs for. Addresses come from a
// pool through Leases, stable per MAC.
type reservationHandler struct {
	cfg     *DHCPConfig
	backend Backend
	leases  Leases
	boot    *bootOptions
	log     *slog.Logger
	stats   *DHCPStats
}

func (h *reservationHandler) handle(ctx context.Context, req *dhcpv4.DHCPv4) *dhcpv4.DHCPv4 {
	switch mt := req.MessageType(); mt {
	case dhcpv4.MessageTypeDiscover:
		return h.offer(ctx, req)
	case dhcpv4.MessageTypeRequest:
		return h.ack(ctx, req)
	case dhcpv4.MessageTypeInform:
		return h.inform(ctx, req)
	case dhcpv4.MessageTypeRelease, dhcpv4.MessageTypeDecline:
		// Leases stay bound to the MAC until they expire so a node keeps
		// one address through a deploy's several DHCP clients; a RELEASE
		// needs no reply (RFC 2131 §4.3.4).
		h.log.Debug("lease released by client", "mac", req.ClientHWAddr.String(), "type", mt.String())
		return nil
	default:
		return nil
	}
}

// offer answers DHCPDISCOVER (RFC 2131 §4.3.1).
func (h *reservationHandler) offer(ctx context.Context, req *dhcpv4.DHCPv4) *dhcpv4.DHCPv4 {
	bc := lookupBootConfig(ctx, h.backend, req, h.log, h.stats)
	if bc == nil {
		return nil
	}
	pool, addr, ok := h.allocate(ctx, req, bc)
	if !ok {
		return nil
	}
	return h.reply(req, bc, pool, addr, dhcpv4.MessageTypeOffer)
}

// ack answers DHCPREQUEST (RFC 2131 §4.3.2). A REQUEST naming another
// server (option 54) means the client took that server's offer: stay
// silent. A REQUEST for an address other than the node's lease gets a NAK
// so the client starts over instead of using an address nobody gave it.
func (h *reservationHandler) ack(ctx context.Context, req *dhcpv4.DHCPv4) *dhcpv4.DHCPv4 {
	if sid := req.ServerIdentifier(); sid != nil && !sid.Equal(h.cfg.Addr.AsSlice()) {
		h.log.Debug("request for another server, ignoring", "mac", req.ClientHWAddr.String(), "server", sid.String())
		return nil
	}
	bc := lookupBootConfig(ctx, h.backend, req, h.log, h.stats)
	if bc == nil {
		return nil
	}
	pool, addr, ok := h.allocate(ctx, req, bc)
	if !ok {
		return nil
	}
	if asked := requestedAddr(req); asked.IsValid() && asked != addr {
		h.log.Info("NAK: client asked for an address it does not hold", "mac", req.ClientHWAddr.String(), "node", bc.NodeUUID, "asked", asked, "lease", addr)
		nak, err := dhcpv4.NewReplyFromRequest(req,
			dhcpv4.WithMessageType(dhcpv4.MessageTypeNak),
			dhcpv4.WithOption(dhcpv4.OptServerIdentifier(h.cfg.Addr.AsSlice())),
			dhcpv4.WithOption(dhcpv4.OptMessage("address not leased to this client")),
		)
		if err != nil {
			return nil
		}
		return nak
	}
	return h.reply(req, bc, pool, addr, dhcpv4.MessageTypeAck)
}

// inform answers DHCPINFORM with configuration only (RFC 2131 §4.3.5): the
// client already has an address, so no yiaddr and no lease time.
func (h *reservationHandler) inform(ctx context.Context, req *dhcpv4.DHCPv4) *dhcpv4.DHCPv4 {
	bc := lookupBootConfig(ctx, h.backend, req, h.log, h.stats)
	if bc == nil {
		return nil
	}
	pool, ok := h.poolFor(req)
	if !ok {
		return nil
	}
	reply, err := dhcpv4.NewReplyFromRequest(req,
		dhcpv4.WithMessageType(dhcpv4.MessageTypeAck),
		dhcpv4.WithOption(dhcpv4.OptServerIdentifier(h.cfg.Addr.AsSlice())),
	)
	if err != nil {
		return nil
	}
	setNetworkOptions(reply, pool)
	h.boot.apply(req, reply, bc, h.log)
	return reply
}

// requestedAddr is the address a REQUEST asks for: option 50 in SELECTING
// and INIT-REBOOT, ciaddr in RENEWING and REBINDING (RFC 2131 §4.3.2).
func requestedAddr(req *dhcpv4.DHCPv4) netip.Addr {
	ip := req.RequestedIPAddress()
	if !isSet(ip) {
		ip = req.ClientIPAddr
	}
	if !isSet(ip) {
		return netip.Addr{}
	}
	a, _ := netip.AddrFromSlice(ip.To4())
	return a
}

// poolFor picks the pool of the client's subnet: the relay's (giaddr, RFC
// 2131 §4.3.1) or, for a client on ironflow's own segment, the server's.
func (h *reservationHandler) poolFor(req *dhcpv4.DHCPv4) (DHCPPool, bool) {
	on := h.cfg.Addr
	if isSet(req.GatewayIPAddr) {
		on, _ = netip.AddrFromSlice(req.GatewayIPAddr.To4())
	}
	for _, p := range h.cfg.Pools {
		if p.Subnet.Contains(on) {
			return p, true
		}
	}
	h.log.Warn("no address pool for the client's subnet", "mac", req.ClientHWAddr.String(), "subnet_of", on)
	return DHCPPool{}, false
}

func (h *reservationHandler) allocate(ctx context.Context, req *dhcpv4.DHCPv4, bc *BootConfig) (DHCPPool, netip.Addr, bool) {
	pool, ok := h.poolFor(req)
	if !ok {
		return DHCPPool{}, netip.Addr{}, false
	}
	addr, err := h.leases.Allocate(ctx, req.ClientHWAddr, bc.NodeUUID, pool.First, pool.Last, h.cfg.LeaseTime)
	if err != nil {
		h.stats.BackendErrors.Add(1)
		h.log.Error("allocate lease", "mac", req.ClientHWAddr.String(), "node", bc.NodeUUID, "error", err)
		return DHCPPool{}, netip.Addr{}, false
	}
	return pool, addr, true
}

// reply builds an OFFER or ACK carrying the lease and the boot options.
func (h *reservationHandler) reply(req *dhcpv4.DHCPv4, bc *BootConfig, pool DHCPPool, addr netip.Addr, mt dhcpv4.MessageType) *dhcpv4.DHCPv4 {
	reply, err := dhcpv4.NewReplyFromRequest(req,
		dhcpv4.WithMessageType(mt),
		dhcpv4.WithYourIP(addr.AsSlice()),
		dhcpv4.WithOption(dhcpv4.OptServerIdentifier(h.cfg.Addr.AsSlice())),
		dhcpv4.WithOption(dhcpv4.OptIPAddressLeaseTime(h.cfg.LeaseTime)),
	)
	if err != nil {
		return nil
	}
	setNetworkOptions(reply, pool)
	h.boot.apply(req, reply, bc, h.log)
	h.log.Info("lease "+mt.String(), "mac", req.ClientHWAddr.String(), "node", bc.NodeUUID, "ip", addr)
	return reply
}

// setNetworkOptions writes subnet mask (1), router (3), DNS (6) and domain
// name (15) (RFC 2132 §3).
func setNetworkOptions(reply *dhcpv4.DHCPv4, pool DHCPPool) {
	reply.UpdateOption(dhcpv4.OptSubnetMask(net.CIDRMask(pool.Subnet.Bits(), 32)))
	if pool.Router.IsValid() {
		reply.UpdateOption(dhcpv4.OptRouter(pool.Router.AsSlice()))
	}
	if len(pool.DNS) > 0 {
		dns := make([]net.IP, 0, len(pool.DNS))
		for _, d := range pool.DNS {
			dns = append(dns, d.AsSlice())
		}
		reply.UpdateOption(dhcpv4.OptDNS(dns...))
	}
	if pool.DomainName != "" {
		reply.UpdateOption(dhcpv4.OptDomainName(pool.DomainName))
	}
}
