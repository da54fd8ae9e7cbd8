package pxe

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"strings"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv6"
	"github.com/insomniacslk/dhcp/iana"
)

// DHCPv6 has no proxy mode (RFC 8415 has no equivalent of PXE 2.1's
// ProxyDHCP): ironflow's DHCPv6 service is always stateful and answers, as
// the DHCPv4 reservation mode does, only the MACs it has boot configs for.
// docs/bmcs-and-boot.md ("IPv6") says what that means on a segment where
// another DHCPv6 server answers.

// Named defaults of the DHCPv6 service.
const (
	// DefaultDHCPv6Preference is the preference option (RFC 8415 §21.8) of
	// ironflow's Advertise: 255 tells clients to take it at once instead of
	// collecting other servers' offers for a second (§18.2.1).
	DefaultDHCPv6Preference = 255
	// maxDHCPv6Packet bounds one read.
	maxDHCPv6Packet = 4096
)

// PXE vendor class (RFC 8415 §21.16, enterprise 343 = Intel, the PXE
// specification's); the UEFI HTTP boot class (UEFI 2.x §24.7.3) is
// httpClientClass, DHCPv4's.
const pxeEnterprise = 343

// DHCPv6Pool is one prefix ironflow hands addresses from.
type DHCPv6Pool struct {
	Prefix netip.Prefix // the segment's on-link prefix, normally a /64
	First  netip.Addr
	Last   netip.Addr
	DNS    []netip.Addr // option 23 (RFC 3646)
}

// DHCPv6Config configures the DHCPv6 service.
type DHCPv6Config struct {
	Interface string     // interface to listen on (joins ff02::1:2 there)
	Addr      netip.Addr // ironflow's IPv6 address on the segment: the TFTP URL's host
	// Listen, when set, is the one UDP address the service binds instead
	// of port 547 on Interface, e.g. [::1]:0 for a test on this host.
	Listen netip.AddrPort
	// TFTPAddr serves ipxe.efi; defaults to Addr.
	TFTPAddr netip.Addr
	// HTTPBaseURL is where iPXE fetches node scripts, with the address in
	// brackets: "http://[fd00::1]:8080".
	HTTPBaseURL    string
	Pools          []DHCPv6Pool
	LeaseTime      time.Duration
	UEFIBootFile   string
	SecureBootFile string
	// ServerDUID identifies ironflow (option 2); the default is a DUID-LL
	// of Interface's MAC, or a DUID-UUID derived from Addr without one.
	ServerDUID dhcpv6.DUID
}

func (c *DHCPv6Config) setDefaults() {
	if !c.TFTPAddr.IsValid() {
		c.TFTPAddr = c.Addr
	}
	if c.LeaseTime == 0 {
		c.LeaseTime = DefaultLeaseTime
	}
	if c.UEFIBootFile == "" {
		c.UEFIBootFile = DefaultUEFIBootFile
	}
	if c.SecureBootFile == "" {
		c.SecureBootFile = DefaultSecureBootFile
	}
	if c.ServerDUID == nil {
		c.ServerDUID = defaultServerDUID(c.Interface, c.Addr)
	}
}

// defaultServerDUID is stable across restarts (RFC 8415 §11): the
// interface's MAC, or a hash of the server address.
func defaultServerDUID(iface string, addr netip.Addr) dhcpv6.DUID {
	if iface != "" {
		if ifi, err := net.InterfaceByName(iface); err == nil && len(ifi.HardwareAddr) == 6 {
			return &dhcpv6.DUIDLL{HWType: iana.HWTypeEthernet, LinkLayerAddr: ifi.HardwareAddr}
		}
	}
	sum := sha256.Sum256(addr.AsSlice())
	var u dhcpv6.DUIDUUID
	copy(u.UUID[:], sum[:16])
	return &u
}

func (c *DHCPv6Config) validate() error {
	if !c.Addr.Is6() || c.Addr.Is4In6() {
		return fmt.Errorf("dhcpv6: server address %q is not IPv6", c.Addr)
	}
	if c.Listen.IsValid() && !c.Listen.Addr().Is6() {
		return fmt.Errorf("dhcpv6: listen address %s is not IPv6", c.Listen)
	}
	if c.HTTPBaseURL == "" {
		return errors.New("dhcpv6: HTTP base URL for iPXE scripts is empty")
	}
	if len(c.Pools) == 0 {
		return errors.New("dhcpv6: at least one address pool is needed")
	}
	for _, p := range c.Pools {
		if !p.Prefix.Addr().Is6() || !p.Prefix.Contains(p.First) || !p.Prefix.Contains(p.Last) || p.Last.Less(p.First) {
			return fmt.Errorf("dhcpv6: pool %s-%s does not fit prefix %s", p.First, p.Last, p.Prefix)
		}
	}
	return nil
}

// DHCPv6Handler decides what to answer to a DHCPv6 message; like
// DHCPHandler it holds no socket.
type DHCPv6Handler struct {
	cfg       DHCPv6Config
	backend   Backend
	leases    Leases
	neighbors func(netip.Addr) (net.HardwareAddr, bool)
	log       *slog.Logger
	Stats     DHCPStats
}

// NewDHCPv6Handler returns the handler of cfg.
func NewDHCPv6Handler(cfg DHCPv6Config, backend Backend, leases Leases, log *slog.Logger) (*DHCPv6Handler, error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if backend == nil || leases == nil {
		return nil, errors.New("dhcpv6: a boot config backend and a lease store are needed")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &DHCPv6Handler{cfg: cfg, backend: backend, leases: leases, neighbors: kernelNeighbors,
		log: log.With("service", "dhcpv6")}, nil
}

// HandleBytes decodes a datagram from peer and returns the reply's bytes,
// or nil. Malformed datagrams are counted and dropped.
func (h *DHCPv6Handler) HandleBytes(ctx context.Context, b []byte, peer netip.Addr) []byte {
	h.Stats.Received.Add(1)
	msg, err := dhcpv6.FromBytes(b)
	if err != nil {
		h.Stats.Malformed.Add(1)
		h.log.Debug("dropped malformed DHCPv6 packet", "error", err)
		return nil
	}
	reply := h.handle(ctx, msg, peer)
	if reply == nil {
		return nil
	}
	return reply.ToBytes()
}

// Handle returns the reply to msg (a client message or a Relay-forward)
// from peer, or nil.
func (h *DHCPv6Handler) Handle(ctx context.Context, msg dhcpv6.DHCPv6, peer netip.Addr) dhcpv6.DHCPv6 {
	h.Stats.Received.Add(1)
	return h.handle(ctx, msg, peer)
}

func (h *DHCPv6Handler) handle(ctx context.Context, msg dhcpv6.DHCPv6, peer netip.Addr) (reply dhcpv6.DHCPv6) {
	defer func() {
		if r := recover(); r != nil {
			h.Stats.Malformed.Add(1)
			h.log.Warn("dropped DHCPv6 packet that failed handling", "peer", peer, "panic", fmt.Sprint(r))
			reply = nil
		}
	}()
	c := client6{peer: peer}
	var relay *dhcpv6.RelayMessage
	switch m := msg.(type) {
	case *dhcpv6.Message:
		c.msg = m
	case *dhcpv6.RelayMessage:
		// One relay hop (RFC 8415 §19): the link address names the
		// client's segment; RFC 6939's option may carry its MAC.
		if m.MessageType != dhcpv6.MessageTypeRelayForward {
			h.Stats.Malformed.Add(1)
			return nil
		}
		inner, ok := m.Options.RelayMessage().(*dhcpv6.Message)
		if !ok {
			h.Stats.Malformed.Add(1)
			return nil
		}
		relay, c.msg = m, inner
		c.peer, _ = netip.AddrFromSlice(m.PeerAddr.To16())
		c.link, _ = netip.AddrFromSlice(m.LinkAddr.To16())
		if ht, lla := m.Options.ClientLinkLayerAddress(); ht == iana.HWTypeEthernet && len(lla) == 6 {
			c.mac = lla
		}
	default:
		h.Stats.Malformed.Add(1)
		return nil
	}
	if c.msg.Options.ClientID() == nil {
		// Every client message but none we answer without one carries a
		// Client Identifier (RFC 8415 §16).
		h.Stats.Malformed.Add(1)
		return nil
	}
	out := h.answer(ctx, &c)
	if out == nil {
		h.Stats.Ignored.Add(1)
		return nil
	}
	h.Stats.Replied.Add(1)
	if relay != nil {
		r, err := dhcpv6.NewRelayReplFromRelayForw(relay, out)
		if err != nil {
			return nil
		}
		return r
	}
	return out
}

// client6 is one client message and what is known of its sender.
type client6 struct {
	msg  *dhcpv6.Message
	peer netip.Addr // the client's link-local source address
	link netip.Addr // the relay's link address; invalid when not relayed
	mac  net.HardwareAddr
}

// answer is the reply of RFC 8415 §18.3 to one message type.
func (h *DHCPv6Handler) answer(ctx context.Context, c *client6) *dhcpv6.Message {
	m := c.msg
	switch m.Type() {
	case dhcpv6.MessageTypeSolicit, dhcpv6.MessageTypeRequest, dhcpv6.MessageTypeRenew,
		dhcpv6.MessageTypeRebind, dhcpv6.MessageTypeConfirm, dhcpv6.MessageTypeInformationRequest,
		dhcpv6.MessageTypeRelease, dhcpv6.MessageTypeDecline:
	default:
		return nil
	}
	// Request, Renew, Release and Decline name their server (§16.4, 16.6,
	// 16.9, 16.8): one naming another server is not ours to answer.
	if sid := m.Options.ServerID(); sid != nil && !sid.Equal(h.cfg.ServerDUID) {
		h.log.Debug("message for another DHCPv6 server, ignoring", "peer", c.peer, "type", m.Type().String())
		return nil
	}
	mac, ok := h.clientMAC(c)
	if !ok {
		h.log.Debug("no MAC for DHCPv6 client, not answering", "peer", c.peer, "duid", m.Options.ClientID().String())
		return nil
	}
	bc := h.lookup(ctx, mac)
	if bc == nil {
		return nil
	}
	var reply *dhcpv6.Message
	var err error
	switch {
	case m.Type() == dhcpv6.MessageTypeSolicit && m.GetOneOption(dhcpv6.OptionRapidCommit) == nil:
		reply, err = dhcpv6.NewAdvertiseFromSolicit(m)
		if err == nil {
			reply.AddOption(&dhcpv6.OptionGeneric{OptionCode: dhcpv6.OptionPreference, OptionData: []byte{DefaultDHCPv6Preference}})
		}
	default:
		reply, err = dhcpv6.NewReplyFromMessage(m)
	}
	if err != nil {
		h.Stats.Malformed.Add(1)
		return nil
	}
	reply.AddOption(dhcpv6.OptServerID(h.cfg.ServerDUID))
	pool, ok := h.poolFor(c)
	if !ok {
		return nil
	}
	switch m.Type() {
	case dhcpv6.MessageTypeRelease, dhcpv6.MessageTypeDecline:
		// Leases stay bound to the MAC until they expire, as in DHCPv4.
		reply.AddOption(&dhcpv6.OptStatusCode{StatusCode: iana.StatusSuccess})
		return reply
	case dhcpv6.MessageTypeConfirm:
		// §18.3.3: the client's addresses are on-link here or not.
		status := iana.StatusSuccess
		for _, ia := range m.Options.IANA() {
			for _, a := range ia.Options.Addresses() {
				if ip, _ := netip.AddrFromSlice(a.IPv6Addr.To16()); !pool.Prefix.Contains(ip) {
					status = iana.StatusNotOnLink
				}
			}
		}
		reply.AddOption(&dhcpv6.OptStatusCode{StatusCode: status})
		return reply
	case dhcpv6.MessageTypeInformationRequest:
	default:
		if !h.assign(ctx, m, reply, mac, bc, pool) {
			return nil
		}
	}
	if len(pool.DNS) > 0 {
		dns := make([]net.IP, 0, len(pool.DNS))
		for _, d := range pool.DNS {
			dns = append(dns, d.AsSlice())
		}
		reply.AddOption(dhcpv6.OptDNS(dns...))
	}
	h.bootFile(m, reply, bc, mac)
	return reply
}

// assign puts the node's address into the reply's IA_NA, echoing the
// client's IAID (§21.4). One address per MAC, as the DHCPv4 leases: a
// second IA_NA gets NoAddrsAvail.
func (h *DHCPv6Handler) assign(ctx context.Context, m, reply *dhcpv6.Message, mac net.HardwareAddr, bc *BootConfig, pool DHCPv6Pool) bool {
	ias := m.Options.IANA()
	if len(ias) == 0 {
		return true
	}
	addr, err := h.leases.Allocate(ctx, mac, bc.NodeUUID, pool.First, pool.Last, h.cfg.LeaseTime)
	if err != nil {
		h.Stats.BackendErrors.Add(1)
		h.log.Error("allocate DHCPv6 lease", "mac", mac.String(), "node", bc.NodeUUID, "error", err)
		return false
	}
	for i, ia := range ias {
		out := &dhcpv6.OptIANA{IaId: ia.IaId, T1: h.cfg.LeaseTime / 2, T2: h.cfg.LeaseTime * 4 / 5}
		if i == 0 {
			out.Options.Add(&dhcpv6.OptIAAddress{IPv6Addr: addr.AsSlice(), PreferredLifetime: h.cfg.LeaseTime, ValidLifetime: h.cfg.LeaseTime})
		} else {
			out.Options.Add(&dhcpv6.OptStatusCode{StatusCode: iana.StatusNoAddrsAvail, StatusMessage: "one address per node"})
		}
		reply.AddOption(out)
	}
	h.log.Info("lease "+strings.ToUpper(reply.Type().String()), "mac", mac.String(), "node", bc.NodeUUID, "ip", addr)
	return true
}

// clientMAC finds the MAC the boot configs are keyed by: RFC 6939's
// option from a relay, the DUID's link-layer address (DUID-LL and
// DUID-LLT, RFC 8415 §11.2, 11.4), the modified EUI-64 of the client's
// link-local address (RFC 4291 appendix A), or the host's neighbour table.
// UEFI and iPXE send DUID-UUIDs and use EUI-64 link-local addresses.
func (h *DHCPv6Handler) clientMAC(c *client6) (net.HardwareAddr, bool) {
	if c.mac != nil {
		return c.mac, true
	}
	switch d := c.msg.Options.ClientID().(type) {
	case *dhcpv6.DUIDLL:
		if d.HWType == iana.HWTypeEthernet && len(d.LinkLayerAddr) == 6 {
			return d.LinkLayerAddr, true
		}
	case *dhcpv6.DUIDLLT:
		if d.HWType == iana.HWTypeEthernet && len(d.LinkLayerAddr) == 6 {
			return d.LinkLayerAddr, true
		}
	}
	if mac, ok := eui64MAC(c.peer); ok {
		return mac, true
	}
	if c.peer.IsValid() && h.neighbors != nil {
		return h.neighbors(c.peer)
	}
	return nil, false
}

// eui64MAC is the MAC inside a modified EUI-64 interface identifier
// (RFC 4291 appendix A): ff:fe in the middle, the universal/local bit
// flipped.
func eui64MAC(a netip.Addr) (net.HardwareAddr, bool) {
	if !a.Is6() || !a.IsLinkLocalUnicast() {
		return nil, false
	}
	b := a.As16()
	if b[11] != 0xff || b[12] != 0xfe {
		return nil, false
	}
	return net.HardwareAddr{b[8] ^ 0x02, b[9], b[10], b[13], b[14], b[15]}, true
}

func (h *DHCPv6Handler) lookup(ctx context.Context, mac net.HardwareAddr) *BootConfig {
	bc, err := h.backend.BootConfigByMAC(ctx, mac)
	switch {
	case errors.Is(err, ErrNoBootConfig):
		h.log.Debug("no boot config for MAC, not answering", "mac", mac.String())
		return nil
	case err != nil:
		h.Stats.BackendErrors.Add(1)
		h.log.Error("read boot config", "mac", mac.String(), "error", err)
		return nil
	}
	return bc
}

// poolFor picks the pool of the relay's link address, or of ironflow's own
// address for a client on its segment.
func (h *DHCPv6Handler) poolFor(c *client6) (DHCPv6Pool, bool) {
	on := h.cfg.Addr
	if c.link.IsValid() && !c.link.IsUnspecified() {
		on = c.link
	}
	for _, p := range h.cfg.Pools {
		if p.Prefix.Contains(on) {
			return p, true
		}
	}
	h.log.Warn("no DHCPv6 pool for the client's link", "peer", c.peer, "link", on)
	return DHCPv6Pool{}, false
}

// isIPXE6 reports whether the client is iPXE (user class "iPXE", RFC 8415
// §21.15).
func isIPXE6(m *dhcpv6.Message) bool {
	for _, uc := range m.Options.UserClasses() {
		if bytes.Equal(uc, []byte(ipxeUserClass)) {
			return true
		}
	}
	return false
}

// vendorClass6 reports whether any vendor class (§21.16) starts with
// prefix, e.g. "PXEClient" from UEFI's and iPXE's PXE stacks.
func vendorClass6(m *dhcpv6.Message, prefix string) bool {
	for _, vc := range m.Options.VendorClasses() {
		for _, d := range vc.Data {
			if bytes.HasPrefix(d, []byte(prefix)) {
				return true
			}
		}
	}
	return false
}

// clientArch6 is the first architecture of option 61 (RFC 5970 §3.3);
// without one, x86-64 UEFI, the only firmware that PXE boots over IPv6.
func clientArch6(m *dhcpv6.Message) iana.Arch {
	if a := m.Options.ArchTypes(); len(a) > 0 {
		return a[0]
	}
	return archEFIX8664
}

// bootFile adds option 59 (RFC 5970 §3.1) for a netboot client: iPXE gets
// the node's script URL, UEFI's PXE client a TFTP URL of the loader with
// the address in brackets (RFC 3986 §3.2.2), UEFI's HTTP boot client the
// node's loader URL (http-ipxe). OS DHCPv6 clients (the agent's) and
// virtual-media nodes get an address only, and so does a firmware client
// of the other kind than the node boots by (PXE for an HTTP-boot node,
// HTTP for a PXE one), as over DHCPv4 (applyHTTPBoot): the firmware goes
// on to its next boot option.
func (h *DHCPv6Handler) bootFile(m, reply *dhcpv6.Message, bc *BootConfig, mac net.HardwareAddr) {
	httpClient := vendorClass6(m, httpClientClass)
	netboot := m.IsOptionRequested(dhcpv6.OptionBootfileURL) || isIPXE6(m) || vendorClass6(m, pxeClientClass) || httpClient
	if !netboot || bc.Method == MethodVMedia {
		return
	}
	var url string
	switch arch := clientArch6(m); {
	case isIPXE6(m):
		url = strings.TrimRight(h.cfg.HTTPBaseURL, "/") + "/boot/" + bc.NodeUUID + "/boot.ipxe"
	case httpClient && !isHTTPBootMethod(bc.Method):
		h.log.Debug("UEFI HTTP boot client of a node that boots over PXE: no boot file", "mac", mac.String(), "node", bc.NodeUUID, "family", "ipv6")
		return
	case !httpClient && isHTTPBootMethod(bc.Method):
		h.log.Info("PXE client of a node that boots over UEFI HTTP: no boot file, the firmware tries HTTP next", "mac", mac.String(), "node", bc.NodeUUID, "family", "ipv6")
		return
	case httpClient:
		if bc.LoaderURL == "" {
			h.log.Warn("node boots over UEFI HTTP but has no loader URL", "mac", mac.String(), "node", bc.NodeUUID, "family", "ipv6")
			return
		}
		if _, ok := httpBootArchs[arch]; !ok {
			h.log.Warn("no UEFI HTTP boot loader for client architecture", "mac", mac.String(), "node", bc.NodeUUID, "arch", arch.String(), "family", "ipv6")
			return
		}
		url = bc.LoaderURL
		// UEFI specification §24.7.3: an offer is an HTTP boot offer when
		// its vendor class says "HTTPClient" (edk2 HttpBootDhcp6.c reads
		// the class data after the enterprise number), else the firmware
		// passes it over.
		reply.AddOption(&dhcpv6.OptVendorClass{EnterpriseNumber: pxeEnterprise, Data: [][]byte{[]byte(httpClientClass)}})
	case arch == archEFIBC || arch == archEFIX8664:
		file := h.cfg.UEFIBootFile
		if bc.SecureBoot {
			file = h.cfg.SecureBootFile
		}
		url = "tftp://" + bracketHost(h.cfg.TFTPAddr) + "/" + file
	default:
		h.log.Warn("no boot loader for DHCPv6 client architecture", "mac", mac.String(), "node", bc.NodeUUID, "arch", arch.String())
		return
	}
	// No "PXEClient" vendor class in the reply: UEFI's PXE client
	// (edk2 NetworkPkg, PxeBcDhcp6.c) takes an offer with it for a BINL
	// offer and asks the server again on port 4011, which ironflow does
	// not serve; without it the offer is an address with a boot file URL.
	reply.AddOption(dhcpv6.OptBootFileURL(url))
	h.log.Info("boot file offered", "mac", mac.String(), "node", bc.NodeUUID, "file", url, "ipxe", isIPXE6(m), "http_boot", httpClient, "family", "ipv6")
}

// bracketHost is an address as a URL's host: IPv6 literals in brackets.
func bracketHost(a netip.Addr) string {
	if a.Is6() && !a.Is4In6() {
		return "[" + a.String() + "]"
	}
	return a.String()
}
