package pxe

import (
	"context"
	"net"
	"net/netip"
	"testing"

	"github.com/insomniacslk/dhcp/dhcpv4"
)

const (
	testNode    = "6f1c2d3e-4b5a-4c7d-8e9f-0a1b2c3d4e5f"
	testMAC     = "52:54:00:aa:bb:01"
	testVMMAC   = "52:54:00:aa:bb:02"
	unknownMAC  = "52:54:00:ff:ff:ff"
	testServer  = "10.99.0.1"
	relayedGW   = "10.20.0.1"
	testHTTPURL = "http://10.99.0.1:8080"
)

func testDHCPConfig(mode string) DHCPConfig {
	return DHCPConfig{
		Mode: mode, Interface: "br0", Addr: netip.MustParseAddr(testServer), HTTPBaseURL: testHTTPURL,
		Pools: []DHCPPool{
			{
				Subnet: netip.MustParsePrefix("10.99.0.0/24"), First: netip.MustParseAddr("10.99.0.100"), Last: netip.MustParseAddr("10.99.0.110"),
				Router: netip.MustParseAddr(testServer), DNS: []netip.Addr{netip.MustParseAddr("10.99.0.53")}, DomainName: "lab.example",
			},
			{Subnet: netip.MustParsePrefix("10.20.0.0/24"), First: netip.MustParseAddr("10.20.0.50"), Last: netip.MustParseAddr("10.20.0.60"), Router: netip.MustParseAddr(relayedGW)},
		},
	}
}

func testBackend(t testing.TB) *MemoryBackend {
	b := NewMemoryBackend()
	for _, bc := range []BootConfig{
		{NodeUUID: testNode, MACs: []string{testMAC}, BootMode: BootModeBIOS, Method: MethodPXE, Kind: "agent",
			KernelURL: testHTTPURL + "/images/vmlinuz", InitrdURL: testHTTPURL + "/images/initrd", KernelParams: "console=ttyS0"},
		{NodeUUID: "7f1c2d3e-4b5a-4c7d-8e9f-0a1b2c3d4e5f", MACs: []string{testVMMAC}, Method: MethodVMedia, Kind: "agent"},
	} {
		if err := b.Put(bc); err != nil {
			t.Fatal(err)
		}
	}
	return b
}

// client shapes, as vm-lab.md captured them.
type clientShape struct {
	class string // option 60
	arch  []byte // option 93
	ipxe  bool   // option 77 "iPXE" + option 175
}

var (
	seabiosIPXE = clientShape{class: "PXEClient:Arch:00000:UNDI:002001", arch: []byte{0, 0}, ipxe: true}
	ovmfPXE     = clientShape{class: "PXEClient:Arch:00007:UNDI:003000", arch: []byte{0, 7}}
	efiIPXE     = clientShape{class: "PXEClient:Arch:00007:UNDI:003010", arch: []byte{0, 7}, ipxe: true}
	osClient    = clientShape{} // the agent's own DHCP client
)

func packet(t testing.TB, mt dhcpv4.MessageType, mac string, shape clientShape, mods ...dhcpv4.Modifier) *dhcpv4.DHCPv4 {
	t.Helper()
	hw, _ := net.ParseMAC(mac)
	all := []dhcpv4.Modifier{dhcpv4.WithMessageType(mt), dhcpv4.WithBroadcast(true)}
	if shape.class != "" {
		all = append(all, dhcpv4.WithOption(dhcpv4.OptClassIdentifier(shape.class)))
	}
	if shape.arch != nil {
		all = append(all, dhcpv4.WithGeneric(dhcpv4.OptionClientSystemArchitectureType, shape.arch))
	}
	if shape.ipxe {
		all = append(all, dhcpv4.WithGeneric(dhcpv4.OptionUserClassInformation, []byte("iPXE")),
			dhcpv4.WithGeneric(dhcpv4.OptionEtherboot, []byte{0xb1, 0x05, 0x01, 0x1a, 0xf4, 0x10, 0x00}))
	}
	p, err := dhcpv4.NewDiscovery(hw, append(all, mods...)...)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDHCPReservation(t *testing.T) {
	sid := dhcpv4.WithOption(dhcpv4.OptServerIdentifier(net.ParseIP(testServer)))
	bcast := &net.UDPAddr{IP: net.IPv4bcast, Port: dhcpv4.ClientPort}
	cases := []struct {
		name      string
		req       *dhcpv4.DHCPv4
		wantType  dhcpv4.MessageType // MessageTypeNone: no reply
		wantIP    string
		wantFile  string
		wantNext  string
		want176   bool
		wantDest  *net.UDPAddr
		wantRoute string
	}{
		{name: "SeaBIOS iPXE discover gets the node script URL", req: packet(t, dhcpv4.MessageTypeDiscover, testMAC, seabiosIPXE),
			wantType: dhcpv4.MessageTypeOffer, wantIP: "10.99.0.100", wantFile: testHTTPURL + "/boot/" + testNode + "/boot.ipxe", wantNext: testServer, want176: true, wantDest: bcast, wantRoute: testServer},
		{name: "OVMF first stage gets ipxe.efi over TFTP", req: packet(t, dhcpv4.MessageTypeDiscover, testMAC, ovmfPXE),
			wantType: dhcpv4.MessageTypeOffer, wantIP: "10.99.0.100", wantFile: "ipxe.efi", wantNext: testServer, wantDest: bcast},
		{name: "BIOS PXE ROM gets undionly.kpxe", req: packet(t, dhcpv4.MessageTypeDiscover, testMAC, clientShape{class: "PXEClient:Arch:00000:UNDI:002001", arch: []byte{0, 0}}),
			wantType: dhcpv4.MessageTypeOffer, wantIP: "10.99.0.100", wantFile: "undionly.kpxe", wantNext: testServer, wantDest: bcast},
		{name: "iPXE EFI gets the node script URL", req: packet(t, dhcpv4.MessageTypeDiscover, testMAC, efiIPXE),
			wantType: dhcpv4.MessageTypeOffer, wantIP: "10.99.0.100", wantFile: testHTTPURL + "/boot/" + testNode + "/boot.ipxe", want176: true, wantNext: testServer, wantDest: bcast},
		{name: "the agent's own client gets an address and no boot file", req: packet(t, dhcpv4.MessageTypeDiscover, testMAC, osClient),
			wantType: dhcpv4.MessageTypeOffer, wantIP: "10.99.0.100", wantDest: bcast},
		{name: "virtual media node gets an address and no boot file", req: packet(t, dhcpv4.MessageTypeDiscover, testVMMAC, seabiosIPXE),
			wantType: dhcpv4.MessageTypeOffer, wantIP: "10.99.0.101", wantDest: bcast},
		{name: "unknown MAC gets nothing", req: packet(t, dhcpv4.MessageTypeDiscover, unknownMAC, seabiosIPXE)},
		{name: "relayed discover is answered to the relay from the relay's pool",
			req:      packet(t, dhcpv4.MessageTypeDiscover, testMAC, seabiosIPXE, dhcpv4.WithGatewayIP(net.ParseIP(relayedGW))),
			wantType: dhcpv4.MessageTypeOffer, wantIP: "10.20.0.50", wantFile: testHTTPURL + "/boot/" + testNode + "/boot.ipxe", want176: true, wantNext: testServer,
			wantDest: &net.UDPAddr{IP: net.ParseIP(relayedGW), Port: dhcpv4.ServerPort}, wantRoute: relayedGW},
		{name: "request for our offer is acked", req: packet(t, dhcpv4.MessageTypeRequest, testMAC, seabiosIPXE, sid,
			dhcpv4.WithOption(dhcpv4.OptRequestedIPAddress(net.ParseIP("10.99.0.100")))),
			wantType: dhcpv4.MessageTypeAck, wantIP: "10.99.0.100", wantFile: testHTTPURL + "/boot/" + testNode + "/boot.ipxe", want176: true, wantNext: testServer, wantDest: bcast},
		{name: "renewal is acked by unicast to ciaddr", req: packet(t, dhcpv4.MessageTypeRequest, testMAC, osClient, dhcpv4.WithBroadcast(false), dhcpv4.WithClientIP(net.ParseIP("10.99.0.100"))),
			wantType: dhcpv4.MessageTypeAck, wantIP: "10.99.0.100", wantDest: &net.UDPAddr{IP: net.ParseIP("10.99.0.100"), Port: dhcpv4.ClientPort}},
		{name: "request naming another server is ignored", req: packet(t, dhcpv4.MessageTypeRequest, testMAC, seabiosIPXE,
			dhcpv4.WithOption(dhcpv4.OptServerIdentifier(net.ParseIP("10.99.0.2"))), dhcpv4.WithOption(dhcpv4.OptRequestedIPAddress(net.ParseIP("10.99.0.100"))))},
		{name: "request for an address not leased is NAKed", req: packet(t, dhcpv4.MessageTypeRequest, testMAC, seabiosIPXE, sid,
			dhcpv4.WithOption(dhcpv4.OptRequestedIPAddress(net.ParseIP("10.99.0.107")))),
			wantType: dhcpv4.MessageTypeNak, wantDest: bcast},
		{name: "release gets no reply", req: packet(t, dhcpv4.MessageTypeRelease, testMAC, osClient, dhcpv4.WithClientIP(net.ParseIP("10.99.0.100")))},
		{name: "unknown MAC request gets nothing", req: packet(t, dhcpv4.MessageTypeRequest, unknownMAC, seabiosIPXE, sid)},
	}
	h, err := NewDHCPHandler(testDHCPConfig(DHCPModeReservation), testBackend(t), NewMemoryLeases(), nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			reply, dest := handleExpect(t, h, tc.req, tc.wantType)
			if reply == nil {
				return
			}
			checkReply(t, reply, dest, tc.wantType, tc.wantIP, tc.wantFile, tc.wantNext, tc.want176, tc.wantDest)
			if reply.TransactionID != tc.req.TransactionID || reply.ClientHWAddr.String() != tc.req.ClientHWAddr.String() {
				t.Errorf("reply xid/chaddr %s/%s do not match the request", reply.TransactionID, reply.ClientHWAddr)
			}
			if tc.wantType == dhcpv4.MessageTypeNak {
				return
			}
			if sid := reply.ServerIdentifier(); !sid.Equal(net.ParseIP(testServer)) {
				t.Errorf("server identifier %v, want %s", sid, testServer)
			}
			if tc.wantRoute != "" {
				if r := reply.Router(); len(r) != 1 || !r[0].Equal(net.ParseIP(tc.wantRoute)) {
					t.Errorf("router %v, want %s", r, tc.wantRoute)
				}
				if reply.SubnetMask().String() != "ffffff00" {
					t.Errorf("subnet mask %s", reply.SubnetMask())
				}
				if reply.IPAddressLeaseTime(0) != DefaultLeaseTime {
					t.Errorf("lease time %s", reply.IPAddressLeaseTime(0))
				}
			}
		})
	}
}

func checkReply(t *testing.T, reply *dhcpv4.DHCPv4, dest *net.UDPAddr, mt dhcpv4.MessageType, ip, file, next string, want176 bool, wantDest *net.UDPAddr) {
	t.Helper()
	if reply.MessageType() != mt {
		t.Errorf("type %s, want %s", reply.MessageType(), mt)
	}
	gotIP := ""
	if isSet(reply.YourIPAddr) {
		gotIP = reply.YourIPAddr.String()
	}
	if gotIP != ip {
		t.Errorf("yiaddr %q, want %q", gotIP, ip)
	}
	if reply.BootFileName != file {
		t.Errorf("file %q, want %q", reply.BootFileName, file)
	}
	if file != "" && reply.BootFileNameOption() != file {
		t.Errorf("option 67 %q, want %q", reply.BootFileNameOption(), file)
	}
	gotNext := ""
	if isSet(reply.ServerIPAddr) {
		gotNext = reply.ServerIPAddr.String()
	}
	if gotNext != next {
		t.Errorf("siaddr %q, want %q", gotNext, next)
	}
	got176 := string(reply.GetOneOption(dhcpv4.OptionEtherboot)) == string([]byte{176, 1, 1})
	if got176 != want176 {
		t.Errorf("option 175.176=1 present %v, want %v", got176, want176)
	}
	if wantDest != nil && dest.String() != wantDest.String() {
		t.Errorf("destination %s, want %s", dest, wantDest)
	}
	// What goes on the wire must decode again.
	if _, err := dhcpv4.FromBytes(reply.ToBytes()); err != nil {
		t.Errorf("reply does not decode: %v", err)
	}
}

func TestDHCPProxy(t *testing.T) {
	bcast := &net.UDPAddr{IP: net.IPv4bcast, Port: dhcpv4.ClientPort}
	cases := []struct {
		name     string
		req      *dhcpv4.DHCPv4
		wantType dhcpv4.MessageType
		wantFile string
		want176  bool
	}{
		{name: "OVMF first stage gets ipxe.efi, no address", req: packet(t, dhcpv4.MessageTypeDiscover, testMAC, ovmfPXE),
			wantType: dhcpv4.MessageTypeOffer, wantFile: "ipxe.efi"},
		{name: "iPXE gets the script URL", req: packet(t, dhcpv4.MessageTypeDiscover, testMAC, seabiosIPXE),
			wantType: dhcpv4.MessageTypeOffer, wantFile: testHTTPURL + "/boot/" + testNode + "/boot.ipxe", want176: true},
		{name: "PXE request to port 4011 is acked", req: packet(t, dhcpv4.MessageTypeRequest, testMAC, ovmfPXE, dhcpv4.WithClientIP(net.ParseIP("10.99.0.77"))),
			wantType: dhcpv4.MessageTypeAck, wantFile: "ipxe.efi"},
		{name: "request to the address server is left to it", req: packet(t, dhcpv4.MessageTypeRequest, testMAC, seabiosIPXE,
			dhcpv4.WithOption(dhcpv4.OptServerIdentifier(net.ParseIP("10.99.0.254"))))},
		{name: "non-PXE client is ignored", req: packet(t, dhcpv4.MessageTypeDiscover, testMAC, osClient)},
		{name: "unknown MAC is ignored", req: packet(t, dhcpv4.MessageTypeDiscover, unknownMAC, ovmfPXE)},
	}
	h, err := NewDHCPHandler(testDHCPConfig(DHCPModeProxy), testBackend(t), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			reply, dest := handleExpect(t, h, tc.req, tc.wantType)
			if reply == nil {
				return
			}
			want := bcast
			if isSet(tc.req.ClientIPAddr) {
				want = &net.UDPAddr{IP: tc.req.ClientIPAddr, Port: dhcpv4.ClientPort}
			}
			checkReply(t, reply, dest, tc.wantType, "", tc.wantFile, testServer, tc.want176, want)
			if reply.ClassIdentifier() != pxeClientClass {
				t.Errorf("option 60 %q, want PXEClient", reply.ClassIdentifier())
			}
			if len(reply.Router()) != 0 || reply.IPAddressLeaseTime(0) != 0 {
				t.Errorf("proxy reply carries address options: %s", reply.Summary())
			}
		})
	}
}

func TestDHCPLeasesAreStablePerMAC(t *testing.T) {
	h, err := NewDHCPHandler(testDHCPConfig(DHCPModeReservation), testBackend(t), NewMemoryLeases(), nil)
	if err != nil {
		t.Fatal(err)
	}
	var first string
	for _, shape := range []clientShape{ovmfPXE, efiIPXE, osClient} {
		reply, _ := h.Handle(context.Background(), packet(t, dhcpv4.MessageTypeDiscover, testMAC, shape))
		if reply == nil {
			t.Fatal("no offer")
		}
		if first == "" {
			first = reply.YourIPAddr.String()
		}
		if got := reply.YourIPAddr.String(); got != first {
			t.Errorf("address changed between boot stages: %s then %s", first, got)
		}
	}
}

func TestDHCPMalformedIsCountedAndDropped(t *testing.T) {
	h, err := NewDHCPHandler(testDHCPConfig(DHCPModeReservation), testBackend(t), NewMemoryLeases(), nil)
	if err != nil {
		t.Fatal(err)
	}
	good := packet(t, dhcpv4.MessageTypeDiscover, testMAC, seabiosIPXE).ToBytes()
	for _, b := range [][]byte{nil, {1, 2, 3}, good[:100], append(append([]byte{}, good[:240]...), 53, 9)} {
		if reply, _ := h.HandleBytes(context.Background(), b); reply != nil {
			t.Errorf("malformed packet got a reply")
		}
	}
	reply := packet(t, dhcpv4.MessageTypeDiscover, testMAC, seabiosIPXE)
	reply.OpCode = dhcpv4.OpcodeBootReply
	if r, _ := h.HandleBytes(context.Background(), reply.ToBytes()); r != nil {
		t.Errorf("a BOOTREPLY got a reply")
	}
	if s := h.Stats.Snapshot(); s.Malformed != 5 || s.Received != 5 {
		t.Errorf("stats %+v, want 5 received, 5 malformed", s)
	}
}

func FuzzDHCPHandle(f *testing.F) {
	for _, shape := range []clientShape{seabiosIPXE, ovmfPXE, efiIPXE, osClient} {
		f.Add(packet(f, dhcpv4.MessageTypeDiscover, testMAC, shape).ToBytes())
		f.Add(packet(f, dhcpv4.MessageTypeRequest, testMAC, shape, dhcpv4.WithGatewayIP(net.ParseIP(relayedGW))).ToBytes())
	}
	f.Add([]byte{})
	res, err := NewDHCPHandler(testDHCPConfig(DHCPModeReservation), testBackend(f), NewMemoryLeases(), nil)
	if err != nil {
		f.Fatal(err)
	}
	proxy, err := NewDHCPHandler(testDHCPConfig(DHCPModeProxy), testBackend(f), nil, nil)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, h := range []*DHCPHandler{res, proxy} {
			reply, dest := h.HandleBytes(context.Background(), b)
			if reply != nil {
				if dest == nil {
					t.Fatal("reply without destination")
				}
				_ = reply.ToBytes()
			}
		}
	})
}

func mustMAC(s string) net.HardwareAddr {
	hw, err := net.ParseMAC(s)
	if err != nil {
		panic(err)
	}
	return hw
}

// handleExpect handles req and checks whether a reply came as wanted
// (MessageTypeNone: none). It returns the reply, nil when none was wanted.
func handleExpect(t *testing.T, h *DHCPHandler, req *dhcpv4.DHCPv4, want dhcpv4.MessageType) (*dhcpv4.DHCPv4, *net.UDPAddr) {
	t.Helper()
	reply, dest := h.Handle(context.Background(), req)
	switch {
	case want == dhcpv4.MessageTypeNone && reply != nil:
		t.Fatalf("want no reply, got %s", reply.Summary())
	case want != dhcpv4.MessageTypeNone && reply == nil:
		t.Fatalf("want %s, got no reply", want)
	}
	return reply, dest
}
