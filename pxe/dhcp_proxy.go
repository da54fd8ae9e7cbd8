package pxe

import (
	"context"
	"log/slog"

	"github.com/insomniacslk/dhcp/dhcpv4"
)

// proxyHandler is ProxyDHCP (PXE specification 2.1 §2.2.5): another DHCP
// server owns addresses on the segment; ironflow answers PXE clients it has
// a boot config for with boot options only: no yiaddr, no lease.
type proxyHandler struct {
	cfg     *DHCPConfig
	backend Backend
	boot    *bootOptions
	log     *slog.Logger
	stats   *DHCPStats
}

func (h *proxyHandler) handle(ctx context.Context, req *dhcpv4.DHCPv4) *dhcpv4.DHCPv4 {
	var mt dhcpv4.MessageType
	switch req.MessageType() {
	case dhcpv4.MessageTypeDiscover:
		mt = dhcpv4.MessageTypeOffer
	case dhcpv4.MessageTypeRequest:
		// A REQUEST naming another server is the client accepting the
		// address server's offer; only REQUESTs to ironflow (the PXE
		// client's ProxyDHCP request to port 4011) get an ACK.
		if sid := req.ServerIdentifier(); sid != nil && !sid.Equal(h.cfg.Addr.AsSlice()) {
			return nil
		}
		mt = dhcpv4.MessageTypeAck
	default:
		return nil
	}
	// PXE 2.1 §2.2.5: a ProxyDHCP server answers only PXE clients.
	if !isNetbootClient(req) {
		return nil
	}
	bc := lookupBootConfig(ctx, h.backend, req, h.log, h.stats)
	if bc == nil {
		return nil
	}
	reply, err := dhcpv4.NewReplyFromRequest(req,
		dhcpv4.WithMessageType(mt),
		dhcpv4.WithOption(dhcpv4.OptServerIdentifier(h.cfg.Addr.AsSlice())),
		// The PXE ROM recognises a ProxyDHCP offer by class PXEClient even
		// when it is iPXE asking.
		dhcpv4.WithOption(dhcpv4.OptClassIdentifier(pxeClientClass)),
	)
	if err != nil {
		return nil
	}
	if !h.boot.apply(req, reply, bc, h.log) {
		return nil
	}
	return reply
}
