package pxe

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/iana"
)

// DHCP modes.
const (
	// DHCPModeReservation: ironflow is the segment's DHCP server for the
	// MACs it has boot configs for, and hands them addresses from a pool.
	DHCPModeReservation = "reservation"
	// DHCPModeProxy: another server owns addresses; ironflow sends only boot
	// options (ProxyDHCP, PXE specification 2.1 §2.2.5).
	DHCPModeProxy = "proxy"
)

// Named defaults of the DHCP service.
const (
	DefaultLeaseTime    = time.Hour
	DefaultBIOSBootFile = "undionly.kpxe"
	DefaultUEFIBootFile = "ipxe.efi"
	// DefaultARM64BootFile is the boot file of an arm64 UEFI machine:
	// Debian ships no arm64 iPXE, so its signed network GRUB
	// (grub-efi-arm64-signed) boots the node's GRUB config over TFTP, the
	// chain secure boot uses on x86-64 (grubnet.go); without secure boot
	// the firmware starts it directly.
	DefaultARM64BootFile = "grubaa64.efi"
	// DefaultARM64SecureBootFile is the boot file of an arm64 UEFI
	// machine whose node boots with secure boot on: Debian's signed shim
	// (shim-signed), which loads grubaa64.efi from the same directory.
	DefaultARM64SecureBootFile = "shimaa64.efi"
	// maxDHCPPacket bounds one read; DHCP messages over Ethernet fit in 1500.
	maxDHCPPacket = 4096
	// maxInflightDHCP bounds concurrent handling so a storm of requests
	// queues in the socket instead of in goroutines.
	maxInflightDHCP = 64
)

// DHCPPool is one subnet ironflow hands addresses from in reservation mode.
// Requests relayed from a subnet (giaddr) pick the pool containing giaddr;
// direct requests pick the pool containing the server's own address.
type DHCPPool struct {
	Subnet     netip.Prefix
	First      netip.Addr
	Last       netip.Addr
	Router     netip.Addr   // option 3; empty for none
	DNS        []netip.Addr // option 6
	DomainName string       // option 15
}

// DHCPConfig configures the DHCP service.
type DHCPConfig struct {
	Mode      string     // DHCPModeReservation or DHCPModeProxy
	Interface string     // interface to listen on (SO_BINDTODEVICE)
	Addr      netip.Addr // ironflow's address on that segment: option 54, siaddr
	// Listen, when set, is the one UDP address the service binds instead of
	// port 67 on every address of Interface: 127.0.0.1:6767 for a test on
	// this host, or 10.99.0.1:67 for relayed requests only (a socket bound
	// to a unicast address does not receive broadcasts). Interface is
	// optional then and, when set, still binds the socket to it. Port 0
	// picks a free port (DHCPServer.LocalAddr says which). In proxy mode
	// the ProxyDHCP socket binds Listen's address at ProxyDHCPPort.
	Listen netip.AddrPort
	// TFTPAddr serves undionly.kpxe / ipxe.efi; defaults to Addr.
	TFTPAddr netip.Addr
	// HTTPBaseURL is where iPXE fetches node scripts, e.g.
	// "http://10.99.0.1:8080"; the script URL is
	// <HTTPBaseURL>/boot/<node-uuid>/boot.ipxe.
	HTTPBaseURL  string
	Pools        []DHCPPool
	LeaseTime    time.Duration
	BIOSBootFile string
	UEFIBootFile string
	// SecureBootFile is the boot file of a UEFI machine whose node boots
	// with secure boot on (shim over TFTP; grubnet.go).
	SecureBootFile string
	// ARM64BootFile and ARM64SecureBootFile are the boot files of arm64
	// UEFI machines (option 93 = 11), without and with secure boot.
	ARM64BootFile, ARM64SecureBootFile string
}

func (c *DHCPConfig) setDefaults() {
	if c.Mode == "" {
		c.Mode = DHCPModeReservation
	}
	if !c.TFTPAddr.IsValid() {
		c.TFTPAddr = c.Addr
	}
	if c.LeaseTime == 0 {
		c.LeaseTime = DefaultLeaseTime
	}
	if c.BIOSBootFile == "" {
		c.BIOSBootFile = DefaultBIOSBootFile
	}
	if c.SecureBootFile == "" {
		c.SecureBootFile = DefaultSecureBootFile
	}
	if c.UEFIBootFile == "" {
		c.UEFIBootFile = DefaultUEFIBootFile
	}
	if c.ARM64BootFile == "" {
		c.ARM64BootFile = DefaultARM64BootFile
	}
	if c.ARM64SecureBootFile == "" {
		c.ARM64SecureBootFile = DefaultARM64SecureBootFile
	}
}

func (c *DHCPConfig) validate() error {
	if !c.Addr.Is4() {
		return fmt.Errorf("dhcp: server address %q is not IPv4", c.Addr)
	}
	if c.Listen.IsValid() && !c.Listen.Addr().Is4() {
		return fmt.Errorf("dhcp: listen address %s is not IPv4", c.Listen)
	}
	if c.HTTPBaseURL == "" {
		return errors.New("dhcp: HTTP base URL for iPXE scripts is empty")
	}
	switch c.Mode {
	case DHCPModeProxy:
	case DHCPModeReservation:
		if len(c.Pools) == 0 {
			return errors.New("dhcp: reservation mode needs at least one address pool")
		}
		for _, p := range c.Pools {
			if !p.Subnet.Contains(p.First) || !p.Subnet.Contains(p.Last) || p.Last.Less(p.First) {
				return fmt.Errorf("dhcp: pool %s-%s does not fit subnet %s", p.First, p.Last, p.Subnet)
			}
		}
	default:
		return fmt.Errorf("dhcp: unknown mode %q (want %q or %q)", c.Mode, DHCPModeReservation, DHCPModeProxy)
	}
	return nil
}

// DHCPStats counts what the DHCP service did; read it with Snapshot.
type DHCPStats struct {
	Received      atomic.Uint64
	Malformed     atomic.Uint64 // undecodable or not a BOOTREQUEST from Ethernet
	Replied       atomic.Uint64
	Ignored       atomic.Uint64 // valid, but nothing to say (unknown MAC, other server, RELEASE)
	BackendErrors atomic.Uint64
}

// DHCPStatsSnapshot is a copy of DHCPStats at one moment.
type DHCPStatsSnapshot struct {
	Received, Malformed, Replied, Ignored, BackendErrors uint64
}

// Snapshot returns the current counters.
func (s *DHCPStats) Snapshot() DHCPStatsSnapshot {
	return DHCPStatsSnapshot{
		Received:      s.Received.Load(),
		Malformed:     s.Malformed.Load(),
		Replied:       s.Replied.Load(),
		Ignored:       s.Ignored.Load(),
		BackendErrors: s.BackendErrors.Load(),
	}
}

// modeHandler is one DHCP mode: given a valid request, the reply or nil.
type modeHandler interface {
	handle(ctx context.Context, req *dhcpv4.DHCPv4) *dhcpv4.DHCPv4
}

// DHCPHandler decides what to answer to a DHCP request. It holds no socket,
// so every decision is testable from packets alone.
type DHCPHandler struct {
	cfg   DHCPConfig
	mode  modeHandler
	log   *slog.Logger
	Stats DHCPStats
}

// NewDHCPHandler returns the handler of cfg.Mode. leases may be nil in
// proxy mode.
func NewDHCPHandler(cfg DHCPConfig, backend Backend, leases Leases, log *slog.Logger) (*DHCPHandler, error) {
	cfg.setDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if backend == nil {
		return nil, errors.New("dhcp: no boot config backend")
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("service", "dhcp", "mode", cfg.Mode)
	h := &DHCPHandler{cfg: cfg, log: log}
	boot := &bootOptions{cfg: &h.cfg}
	switch cfg.Mode {
	case DHCPModeReservation:
		if leases == nil {
			return nil, errors.New("dhcp: reservation mode needs a lease store")
		}
		h.mode = &reservationHandler{cfg: &h.cfg, backend: backend, leases: leases, boot: boot, log: log, stats: &h.Stats}
	case DHCPModeProxy:
		h.mode = &proxyHandler{cfg: &h.cfg, backend: backend, boot: boot, log: log, stats: &h.Stats}
	}
	return h, nil
}

// HandleBytes decodes a datagram and handles it. Malformed datagrams are
// counted and dropped: a broken client must not take the service down.
func (h *DHCPHandler) HandleBytes(ctx context.Context, b []byte) (*dhcpv4.DHCPv4, *net.UDPAddr) {
	h.Stats.Received.Add(1)
	req, err := dhcpv4.FromBytes(b)
	if err != nil {
		h.Stats.Malformed.Add(1)
		h.log.Debug("dropped malformed DHCP packet", "error", err)
		return nil, nil
	}
	return h.handle(ctx, req)
}

// Handle returns the reply to req and where to send it, or nil when the
// request gets no answer.
func (h *DHCPHandler) Handle(ctx context.Context, req *dhcpv4.DHCPv4) (*dhcpv4.DHCPv4, *net.UDPAddr) {
	h.Stats.Received.Add(1)
	return h.handle(ctx, req)
}

func (h *DHCPHandler) handle(ctx context.Context, req *dhcpv4.DHCPv4) (reply *dhcpv4.DHCPv4, dest *net.UDPAddr) {
	if !wellFormed(req) {
		h.Stats.Malformed.Add(1)
		return nil, nil
	}
	defer func() {
		// A malformed option can still trip a library accessor; drop the
		// packet rather than the service.
		if r := recover(); r != nil {
			h.Stats.Malformed.Add(1)
			h.log.Warn("dropped DHCP packet that failed handling", "mac", req.ClientHWAddr.String(), "panic", fmt.Sprint(r))
			reply, dest = nil, nil
		}
	}()
	reply = h.mode.handle(ctx, req)
	if reply == nil {
		h.Stats.Ignored.Add(1)
		return nil, nil
	}
	h.Stats.Replied.Add(1)
	return reply, replyDestination(req, reply)
}

// wellFormed accepts only BOOTREQUESTs from Ethernet clients carrying a
// DHCP message type (RFC 2131 §2, RFC 2132 §9.6): BOOTP-only and non-Ethernet
// clients are out of scope for machine provisioning.
func wellFormed(req *dhcpv4.DHCPv4) bool {
	return req != nil &&
		req.OpCode == dhcpv4.OpcodeBootRequest &&
		req.HWType == iana.HWTypeEthernet &&
		len(req.ClientHWAddr) == 6 &&
		req.MessageType() != dhcpv4.MessageTypeNone
}

// replyDestination picks where a reply goes, per RFC 2131 §4.1:
//   - giaddr set: to the relay agent's server port, which forwards it;
//   - a DHCPNAK without relay: broadcast, the client may have no address;
//   - ciaddr set (RENEWING, INFORM): unicast to ciaddr;
//   - otherwise broadcast. The RFC allows unicast to yiaddr when the
//     broadcast bit is clear, but that needs an ARP entry injected for a
//     client that has no address yet; broadcasting is what every client
//     accepts.
func replyDestination(req, reply *dhcpv4.DHCPv4) *net.UDPAddr {
	switch {
	case isSet(req.GatewayIPAddr):
		return &net.UDPAddr{IP: req.GatewayIPAddr, Port: dhcpv4.ServerPort}
	case reply.MessageType() == dhcpv4.MessageTypeNak:
		return &net.UDPAddr{IP: net.IPv4bcast, Port: dhcpv4.ClientPort}
	case isSet(req.ClientIPAddr):
		return &net.UDPAddr{IP: req.ClientIPAddr, Port: dhcpv4.ClientPort}
	default:
		return &net.UDPAddr{IP: net.IPv4bcast, Port: dhcpv4.ClientPort}
	}
}

func isSet(ip net.IP) bool { return ip != nil && !ip.IsUnspecified() }

// lookupBootConfig reads the backend; nil means "say nothing".
func lookupBootConfig(ctx context.Context, backend Backend, req *dhcpv4.DHCPv4, log *slog.Logger, stats *DHCPStats) *BootConfig {
	bc, err := backend.BootConfigByMAC(ctx, req.ClientHWAddr)
	switch {
	case errors.Is(err, ErrNoBootConfig):
		log.Debug("no boot config for MAC, not answering", "mac", req.ClientHWAddr.String())
		return nil
	case err != nil:
		stats.BackendErrors.Add(1)
		log.Error("read boot config", "mac", req.ClientHWAddr.String(), "error", err)
		return nil
	}
	return bc
}

// PXE and iPXE constants the boot options use.
const (
	pxeClientClass = "PXEClient"
	ipxeUserClass  = "iPXE"
	// optPXEDiscoveryControl is PXE vendor sub-option 6 in option 43; bit 3
	// (value 8) says "boot the file in this packet, skip boot server
	// discovery" (PXE specification 2.1, table 2-1).
	optPXEDiscoveryControl = 6
	// ipxeNoPXEDHCP is iPXE's encapsulated option 175.176: 1 tells iPXE not
	// to wait for a ProxyDHCP offer, which it otherwise does for 11 s.
	ipxeNoPXEDHCP = 176
)

// Client system architectures (RFC 4578 §2.1, IANA "Processor Architecture
// Types").
const (
	archBIOS     = iana.INTEL_X86PC
	archEFIBC    = iana.EFI_BC
	archEFIX8664 = iana.EFI_X86_64
	archEFIARM64 = iana.EFI_ARM64
)

// bootOptions writes the boot part of a reply, the same in both modes.
type bootOptions struct{ cfg *DHCPConfig }

// isIPXE reports whether the client is iPXE: it sends user class (77)
// "iPXE", either raw or in RFC 3004 form.
func isIPXE(req *dhcpv4.DHCPv4) bool {
	uc := req.GetOneOption(dhcpv4.OptionUserClassInformation)
	if bytes.Equal(uc, []byte(ipxeUserClass)) {
		return true
	}
	// RFC 3004: length-prefixed instances.
	for len(uc) > 0 {
		n := int(uc[0])
		if n == 0 || n+1 > len(uc) {
			return false
		}
		if string(uc[1:n+1]) == ipxeUserClass {
			return true
		}
		uc = uc[n+1:]
	}
	return false
}

// isPXEClient reports whether the vendor class (60) says PXE (PXE 2.1 §2.2).
func isPXEClient(req *dhcpv4.DHCPv4) bool {
	return bytes.HasPrefix(req.GetOneOption(dhcpv4.OptionClassIdentifier), []byte(pxeClientClass))
}

// isNetbootClient: a PXE ROM or iPXE, as opposed to an OS DHCP client such
// as the agent's, which gets an address but no boot file.
func isNetbootClient(req *dhcpv4.DHCPv4) bool {
	return isPXEClient(req) || isIPXE(req) || isHTTPClient(req)
}

// clientArch returns the first architecture of option 93 (RFC 4578 §2.1);
// PXE ROMs that omit it are BIOS.
func clientArch(req *dhcpv4.DHCPv4) iana.Arch {
	raw := req.GetOneOption(dhcpv4.OptionClientSystemArchitectureType)
	if len(raw) < 2 {
		return archBIOS
	}
	return iana.Arch(uint16(raw[0])<<8 | uint16(raw[1]))
}

// scriptURL is the node's iPXE script on the HTTP boot service.
func (b *bootOptions) scriptURL(nodeUUID string) string {
	return b.cfg.HTTPBaseURL + "/boot/" + nodeUUID + "/boot.ipxe"
}

// chooseBootFile picks what the client loads next:
//   - iPXE (user class 77) → the node's iPXE script over HTTP;
//   - a PXE ROM → an iPXE binary over TFTP for its architecture (93);
//     on arm64 UEFI, which has no iPXE, network GRUB (grubnet.go).
//
// ok is false for an architecture ironflow has no loader for (among them
// the UEFI HTTP boot clients, 16 and 19, which PXE's TFTP cannot serve).
func (b *bootOptions) chooseBootFile(req *dhcpv4.DHCPv4, bc *BootConfig) (file string, viaTFTP, ok bool) {
	if isIPXE(req) {
		return b.scriptURL(bc.NodeUUID), false, true
	}
	switch clientArch(req) {
	case archBIOS:
		return b.cfg.BIOSBootFile, true, true
	case archEFIBC, archEFIX8664:
		if bc.SecureBoot {
			// iPXE is not signed: shim, then signed GRUB (grubnet.go).
			return b.cfg.SecureBootFile, true, true
		}
		return b.cfg.UEFIBootFile, true, true
	case archEFIARM64:
		if bc.SecureBoot {
			return b.cfg.ARM64SecureBootFile, true, true
		}
		return b.cfg.ARM64BootFile, true, true
	default:
		return "", false, false
	}
}

// apply adds the boot options to reply. It does nothing for OS DHCP
// clients and for nodes booting from virtual media: they need an address,
// not a boot file.
func (b *bootOptions) apply(req, reply *dhcpv4.DHCPv4, bc *BootConfig, log *slog.Logger) bool {
	if !isNetbootClient(req) || bc.Method == MethodVMedia {
		return false
	}
	if !isIPXE(req) && (isHTTPClient(req) || isHTTPBootMethod(bc.Method)) {
		return b.applyHTTPBoot(req, reply, bc, log) // httpboot.go
	}
	file, viaTFTP, ok := b.chooseBootFile(req, bc)
	if !ok {
		log.Warn("no boot loader for client architecture", "mac", req.ClientHWAddr.String(), "node", bc.NodeUUID, "arch", clientArch(req).String())
		return false
	}
	// siaddr and file (RFC 2131 §2) are what PXE ROMs read; options 66/67
	// (RFC 2132 §9.4, §9.5) carry the same for clients that prefer options.
	reply.BootFileName = file
	reply.UpdateOption(dhcpv4.OptBootFileName(file))
	if viaTFTP {
		reply.ServerIPAddr = b.cfg.TFTPAddr.AsSlice()
		reply.UpdateOption(dhcpv4.OptTFTPServerName(b.cfg.TFTPAddr.String()))
	} else {
		reply.ServerIPAddr = b.cfg.Addr.AsSlice()
	}
	if isPXEClient(req) {
		// PXE 2.1 §2.2.1: a PXE server identifies itself with class
		// "PXEClient"; option 43 sub-option 6 = 8 boots the file directly.
		reply.UpdateOption(dhcpv4.OptClassIdentifier(pxeClientClass))
		reply.UpdateOption(dhcpv4.OptGeneric(dhcpv4.OptionVendorSpecificInformation,
			dhcpv4.Options{optPXEDiscoveryControl: []byte{8}}.ToBytes()))
	}
	if isIPXE(req) {
		reply.UpdateOption(dhcpv4.OptGeneric(dhcpv4.OptionEtherboot,
			dhcpv4.Options{ipxeNoPXEDHCP: []byte{1}}.ToBytes()))
	}
	log.Info("boot file offered", "mac", req.ClientHWAddr.String(), "node", bc.NodeUUID, "file", file, "arch", clientArch(req).String(), "ipxe", isIPXE(req))
	return true
}
