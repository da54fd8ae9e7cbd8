package pxe

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv6"
	"github.com/insomniacslk/dhcp/iana"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ironflow/ironflow/metrics"
)

const (
	testServer6  = "fd99::1"
	testHTTPURL6 = "http://[fd99::1]:8080"
)

func testDHCPv6Config() DHCPv6Config {
	return DHCPv6Config{
		Addr: netip.MustParseAddr(testServer6), HTTPBaseURL: testHTTPURL6,
		Pools: []DHCPv6Pool{
			{Prefix: netip.MustParsePrefix("fd99::/64"), First: netip.MustParseAddr("fd99::100"), Last: netip.MustParseAddr("fd99::1ff"),
				DNS: []netip.Addr{netip.MustParseAddr("fd99::53")}},
			{Prefix: netip.MustParsePrefix("fd20::/64"), First: netip.MustParseAddr("fd20::50"), Last: netip.MustParseAddr("fd20::60")},
		},
	}
}

func newTestDHCPv6(t testing.TB, backend Backend) *DHCPv6Handler {
	t.Helper()
	h, err := NewDHCPv6Handler(testDHCPv6Config(), backend, NewMemoryLeases(), nil)
	if err != nil {
		t.Fatal(err)
	}
	h.neighbors = func(netip.Addr) (net.HardwareAddr, bool) { return nil, false }
	return h
}

// linkLocal is the EUI-64 link-local address UEFI and iPXE use (RFC 4291
// appendix A).
func linkLocal(mac string) netip.Addr {
	hw, _ := net.ParseMAC(mac)
	return netip.AddrFrom16([16]byte{0xfe, 0x80, 8: hw[0] ^ 2, 9: hw[1], 10: hw[2], 11: 0xff, 12: 0xfe, 13: hw[3], 14: hw[4], 15: hw[5]})
}

// client6Shape is how one DHCPv6 client identifies itself.
type client6Shape struct {
	vendorClass string // option 16, enterprise 343
	userClass   string // option 15
	arch        []iana.Arch
	wantsBoot   bool // option 59 in the ORO
	duidUUID    bool // DUID-UUID instead of DUID-LL
}

var (
	// As OVMF's NetworkPkg PXE client and iPXE's DHCPv6 send them.
	ovmfPXE6  = client6Shape{vendorClass: "PXEClient:Arch:00007:UNDI:003016", arch: []iana.Arch{iana.EFI_X86_64}, wantsBoot: true, duidUUID: true}
	iPXE6     = client6Shape{vendorClass: "PXEClient:Arch:00007:UNDI:003010", userClass: "iPXE", arch: []iana.Arch{iana.EFI_X86_64}, wantsBoot: true, duidUUID: true}
	osDHCPv6  = client6Shape{}
	httpBoot6 = client6Shape{vendorClass: "HTTPClient:Arch:00016:UNDI:003016", arch: []iana.Arch{iana.EFI_X86_64_HTTP}, wantsBoot: true, duidUUID: true}
)

func message6(t testing.TB, typ dhcpv6.MessageType, mac string, s client6Shape, mods ...dhcpv6.Modifier) *dhcpv6.Message {
	t.Helper()
	hw, err := net.ParseMAC(mac)
	if err != nil {
		t.Fatal(err)
	}
	m, err := dhcpv6.NewSolicit(hw)
	if err != nil {
		t.Fatal(err)
	}
	m.MessageType = typ
	if s.duidUUID {
		m.UpdateOption(dhcpv6.OptClientID(&dhcpv6.DUIDUUID{UUID: [16]byte{1, 2, 3, 4}}))
	} else {
		m.UpdateOption(dhcpv6.OptClientID(&dhcpv6.DUIDLL{HWType: iana.HWTypeEthernet, LinkLayerAddr: hw}))
	}
	if s.vendorClass != "" {
		m.AddOption(&dhcpv6.OptVendorClass{EnterpriseNumber: pxeEnterprise, Data: [][]byte{[]byte(s.vendorClass)}})
	}
	if s.userClass != "" {
		m.AddOption(&dhcpv6.OptUserClass{UserClasses: [][]byte{[]byte(s.userClass)}})
	}
	if len(s.arch) > 0 {
		m.AddOption(dhcpv6.OptClientArchType(s.arch...))
	}
	if s.wantsBoot {
		m.UpdateOption(dhcpv6.OptRequestedOption(dhcpv6.OptionDNSRecursiveNameServer, dhcpv6.OptionBootfileURL))
	}
	for _, mod := range mods {
		mod(m)
	}
	return m
}

func reply6(t *testing.T, h *DHCPv6Handler, m dhcpv6.DHCPv6, peer netip.Addr) *dhcpv6.Message {
	t.Helper()
	// Through the wire format, as the server sees it.
	b := h.HandleBytes(context.Background(), m.ToBytes(), peer)
	if b == nil {
		return nil
	}
	r, err := dhcpv6.FromBytes(b)
	if err != nil {
		t.Fatalf("reply does not decode: %v", err)
	}
	msg, err := r.GetInnerMessage()
	if err != nil {
		t.Fatal(err)
	}
	return msg
}

func leased6(m *dhcpv6.Message) netip.Addr {
	ia := m.Options.OneIANA()
	if ia == nil || ia.Options.OneAddress() == nil {
		return netip.Addr{}
	}
	a, _ := netip.AddrFromSlice(ia.Options.OneAddress().IPv6Addr)
	return a
}

func TestDHCPv6AnswersPXEClients(t *testing.T) {
	sbMAC := "52:54:00:aa:bb:0b"
	backend := testBackend(t)
	if err := backend.Put(BootConfig{NodeUUID: "8f1c2d3e-4b5a-4c7d-8e9f-0a1b2c3d4e5f", MACs: []string{sbMAC}, BootMode: BootModeUEFI, Method: MethodPXE, Kind: "agent", SecureBoot: true}); err != nil {
		t.Fatal(err)
	}
	pool := testDHCPv6Config().Pools[0]
	for _, tc := range []struct {
		name     string
		mac      string
		shape    client6Shape
		typ      dhcpv6.MessageType
		wantType dhcpv6.MessageType
		wantURL  string // "" = no option 59
		wantAddr bool
	}{
		{"UEFI PXE solicit gets the loader over TFTP", testMAC, ovmfPXE6, dhcpv6.MessageTypeSolicit, dhcpv6.MessageTypeAdvertise, "tftp://[fd99::1]/ipxe.efi", true},
		{"UEFI PXE secure boot gets shim", sbMAC, ovmfPXE6, dhcpv6.MessageTypeSolicit, dhcpv6.MessageTypeAdvertise, "tftp://[fd99::1]/shimx64.efi", true},
		{"iPXE request gets the node's script", testMAC, iPXE6, dhcpv6.MessageTypeRequest, dhcpv6.MessageTypeReply, testHTTPURL6 + "/boot/" + testNode + "/boot.ipxe", true},
		{"iPXE information request: script, no address", testMAC, iPXE6, dhcpv6.MessageTypeInformationRequest, dhcpv6.MessageTypeReply, testHTTPURL6 + "/boot/" + testNode + "/boot.ipxe", false},
		{"the agent's DHCPv6 client: address only", testMAC, osDHCPv6, dhcpv6.MessageTypeSolicit, dhcpv6.MessageTypeAdvertise, "", true},
		{"a virtual media node: address only", testVMMAC, ovmfPXE6, dhcpv6.MessageTypeSolicit, dhcpv6.MessageTypeAdvertise, "", true},
		{"UEFI HTTP boot: no HTTP loader, address only", testMAC, httpBoot6, dhcpv6.MessageTypeSolicit, dhcpv6.MessageTypeAdvertise, "", true},
		{"renew", testMAC, osDHCPv6, dhcpv6.MessageTypeRenew, dhcpv6.MessageTypeReply, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newTestDHCPv6(t, backend)
			m := message6(t, tc.typ, tc.mac, tc.shape)
			if tc.typ == dhcpv6.MessageTypeInformationRequest {
				m.Options.Del(dhcpv6.OptionIANA)
			}
			r := reply6(t, h, m, linkLocal(tc.mac))
			if r == nil {
				t.Fatalf("no reply")
			}
			if r.Type() != tc.wantType || r.TransactionID != m.TransactionID {
				t.Errorf("reply %s xid %v, want %s xid %v", r.Type(), r.TransactionID, tc.wantType, m.TransactionID)
			}
			if sid := r.Options.ServerID(); sid == nil || !sid.Equal(h.cfg.ServerDUID) {
				t.Errorf("server ID %v, want %v", sid, h.cfg.ServerDUID)
			}
			if cid := r.Options.ClientID(); cid == nil || !cid.Equal(m.Options.ClientID()) {
				t.Errorf("client ID %v not echoed", cid)
			}
			if len(r.Options.VendorClasses()) > 0 {
				t.Errorf("reply carries a vendor class (UEFI would then ask port 4011): %v", r.Options.VendorClasses())
			}
			if got := r.Options.BootFileURL(); got != tc.wantURL {
				t.Errorf("boot file URL %q, want %q", got, tc.wantURL)
			}
			a := leased6(r)
			if tc.wantAddr != a.IsValid() {
				t.Fatalf("address %v, want one: %v", a, tc.wantAddr)
			}
			if tc.wantAddr {
				if !pool.Prefix.Contains(a) || a.Less(pool.First) || pool.Last.Less(a) {
					t.Errorf("address %s outside the pool", a)
				}
				if got, want := r.Options.OneIANA().IaId, m.Options.OneIANA().IaId; got != want {
					t.Errorf("IAID %v, want the client's %v", got, want)
				}
				if lt := r.Options.OneIANA().Options.OneAddress().ValidLifetime; lt != DefaultLeaseTime {
					t.Errorf("valid lifetime %s, want %s", lt, DefaultLeaseTime)
				}
			}
			if dns := r.Options.DNS(); tc.wantType != dhcpv6.MessageTypeAdvertise && (len(dns) != 1 || !dns[0].Equal(net.ParseIP("fd99::53"))) {
				t.Errorf("DNS %v, want fd99::53", dns)
			}
			if tc.wantType == dhcpv6.MessageTypeAdvertise && r.Options.Preference() != DefaultDHCPv6Preference {
				t.Errorf("preference %d, want %d", r.Options.Preference(), DefaultDHCPv6Preference)
			}
		})
	}
}

// A node whose boot interface is http-ipxe gets its loader URL when its
// firmware asks as a UEFI HTTP boot client over DHCPv6, with the
// "HTTPClient" vendor class that makes the answer an HTTP boot offer (UEFI
// §24.7.3); asked as a PXE client, the same node gets an address and no
// file (the firmware goes on to HTTP boot); iPXE then gets the node's
// script. A node without a loader URL, or a client architecture without
// an HTTP loader, gets an address only.
func TestDHCPv6AnswersUEFIHTTPBootClients(t *testing.T) {
	const (
		httpMAC, bareMAC = "52:54:00:aa:bb:61", "52:54:00:aa:bb:62"
		httpNode         = "7a1c2d3e-4b5a-4c7d-8e9f-0a1b2c3d4e61"
		loader           = "http://[fd99::1]:8080/loaders/snponly.efi"
	)
	backend := testBackend(t)
	for _, bc := range []BootConfig{
		{NodeUUID: httpNode, MACs: []string{httpMAC}, BootMode: BootModeUEFI, Method: MethodHTTPIPXE, Kind: "agent", LoaderURL: loader},
		{NodeUUID: "7a1c2d3e-4b5a-4c7d-8e9f-0a1b2c3d4e62", MACs: []string{bareMAC}, BootMode: BootModeUEFI, Method: MethodHTTPIPXE, Kind: "agent"},
	} {
		if err := backend.Put(bc); err != nil {
			t.Fatal(err)
		}
	}
	ia32HTTP := client6Shape{vendorClass: "HTTPClient:Arch:00015:UNDI:003016", arch: []iana.Arch{iana.EFI_X86_HTTP}, wantsBoot: true, duidUUID: true}
	for _, tc := range []struct {
		name      string
		mac       string
		shape     client6Shape
		wantURL   string
		wantClass bool
	}{
		{"UEFI HTTP boot client gets the loader URL", httpMAC, httpBoot6, loader, true},
		{"UEFI PXE client of the HTTP-boot node: address only", httpMAC, ovmfPXE6, "", false},
		{"iPXE of the HTTP-boot node gets its script", httpMAC, iPXE6, testHTTPURL6 + "/boot/" + httpNode + "/boot.ipxe", false},
		{"HTTP-boot node without a loader URL: address only", bareMAC, httpBoot6, "", false},
		{"an architecture without an HTTP loader: address only", httpMAC, ia32HTTP, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newTestDHCPv6(t, backend)
			m := message6(t, dhcpv6.MessageTypeSolicit, tc.mac, tc.shape)
			r := reply6(t, h, m, linkLocal(tc.mac))
			if r == nil {
				t.Fatal("no reply")
			}
			if got := r.Options.BootFileURL(); got != tc.wantURL {
				t.Errorf("boot file URL %q, want %q", got, tc.wantURL)
			}
			if !leased6(r).IsValid() {
				t.Error("no address")
			}
			var classes []string
			for _, vc := range r.Options.VendorClasses() {
				for _, d := range vc.Data {
					classes = append(classes, fmt.Sprintf("%d:%s", vc.EnterpriseNumber, d))
				}
			}
			want := []string(nil)
			if tc.wantClass {
				want = []string{"343:HTTPClient"}
			}
			if !slices.Equal(classes, want) {
				t.Errorf("vendor classes %q, want %q", classes, want)
			}
		})
	}
}

func TestDHCPv6AddressIsStablePerMAC(t *testing.T) {
	backend := testBackend(t)
	h := newTestDHCPv6(t, backend)
	other := "52:54:00:aa:bb:03"
	if err := backend.Put(BootConfig{NodeUUID: "9f1c2d3e-4b5a-4c7d-8e9f-0a1b2c3d4e5f", MACs: []string{other}, Method: MethodPXE, Kind: "agent"}); err != nil {
		t.Fatal(err)
	}
	first := leased6(reply6(t, h, message6(t, dhcpv6.MessageTypeSolicit, testMAC, ovmfPXE6), linkLocal(testMAC)))
	// iPXE, then the agent, each a new client with its own DUID.
	second := leased6(reply6(t, h, message6(t, dhcpv6.MessageTypeRequest, testMAC, iPXE6), linkLocal(testMAC)))
	third := leased6(reply6(t, h, message6(t, dhcpv6.MessageTypeSolicit, testMAC, osDHCPv6), netip.MustParseAddr("fe80::1234")))
	if !first.IsValid() || first != second || first != third {
		t.Errorf("one MAC got %s, %s, %s", first, second, third)
	}
	if o := leased6(reply6(t, h, message6(t, dhcpv6.MessageTypeSolicit, other, osDHCPv6), linkLocal(other))); !o.IsValid() || o == first {
		t.Errorf("another MAC got %s (first MAC has %s)", o, first)
	}
}

func TestDHCPv6StaysSilent(t *testing.T) {
	backend := testBackend(t)
	for _, tc := range []struct {
		name string
		msg  func(t *testing.T) dhcpv6.DHCPv6
		peer netip.Addr
	}{
		{"unknown MAC", func(t *testing.T) dhcpv6.DHCPv6 {
			return message6(t, dhcpv6.MessageTypeSolicit, unknownMAC, ovmfPXE6)
		}, linkLocal(unknownMAC)},
		{"request for another server", func(t *testing.T) dhcpv6.DHCPv6 {
			return message6(t, dhcpv6.MessageTypeRequest, testMAC, iPXE6,
				dhcpv6.WithServerID(&dhcpv6.DUIDLL{HWType: iana.HWTypeEthernet, LinkLayerAddr: net.HardwareAddr{2, 0, 0, 0, 0, 9}}))
		}, linkLocal(testMAC)},
		{"no MAC to be found (DUID-UUID, no EUI-64 address)", func(t *testing.T) dhcpv6.DHCPv6 {
			return message6(t, dhcpv6.MessageTypeSolicit, testMAC, ovmfPXE6)
		}, netip.MustParseAddr("fe80::1234")},
		{"a server's message", func(t *testing.T) dhcpv6.DHCPv6 {
			return message6(t, dhcpv6.MessageTypeAdvertise, testMAC, osDHCPv6)
		}, linkLocal(testMAC)},
		{"no client ID", func(t *testing.T) dhcpv6.DHCPv6 {
			m := message6(t, dhcpv6.MessageTypeSolicit, testMAC, osDHCPv6)
			m.Options.Del(dhcpv6.OptionClientID)
			return m
		}, linkLocal(testMAC)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newTestDHCPv6(t, backend)
			if r := reply6(t, h, tc.msg(t), tc.peer); r != nil {
				t.Errorf("answered with %s", r.Summary())
			}
			if s := h.Stats.Snapshot(); s.Replied != 0 || s.Received != 1 {
				t.Errorf("stats %+v", s)
			}
		})
	}
}

func TestDHCPv6DropsMalformedPackets(t *testing.T) {
	h := newTestDHCPv6(t, testBackend(t))
	m := message6(t, dhcpv6.MessageTypeSolicit, testMAC, ovmfPXE6).ToBytes()
	for _, b := range [][]byte{nil, {1}, m[:len(m)-3], append([]byte{12, 0}, m[:10]...)} {
		if r := h.HandleBytes(context.Background(), b, linkLocal(testMAC)); r != nil {
			t.Errorf("answered %x", b)
		}
	}
	if s := h.Stats.Snapshot(); s.Malformed != 4 || s.Replied != 0 {
		t.Errorf("stats %+v, want 4 malformed", s)
	}
}

func TestDHCPv6ReleaseAndConfirm(t *testing.T) {
	h := newTestDHCPv6(t, testBackend(t))
	r := reply6(t, h, message6(t, dhcpv6.MessageTypeRelease, testMAC, osDHCPv6, dhcpv6.WithServerID(h.cfg.ServerDUID)), linkLocal(testMAC))
	if r == nil || r.Type() != dhcpv6.MessageTypeReply || r.Options.Status() == nil || r.Options.Status().StatusCode != iana.StatusSuccess {
		t.Fatalf("release: %v", r)
	}
	for addr, want := range map[string]iana.StatusCode{"fd99::105": iana.StatusSuccess, "2001:db8::5": iana.StatusNotOnLink} {
		m := message6(t, dhcpv6.MessageTypeConfirm, testMAC, osDHCPv6)
		m.UpdateOption(&dhcpv6.OptIANA{IaId: [4]byte{1}, Options: dhcpv6.IdentityOptions{Options: dhcpv6.Options{
			&dhcpv6.OptIAAddress{IPv6Addr: net.ParseIP(addr), PreferredLifetime: time.Hour, ValidLifetime: time.Hour}}}})
		r := reply6(t, h, m, linkLocal(testMAC))
		if r == nil || r.Options.Status() == nil || r.Options.Status().StatusCode != want {
			t.Errorf("confirm %s: %v, want status %s", addr, r, want)
		}
	}
}

// TestDHCPv6Relayed: a relay agent's Relay-forward (RFC 8415 §19) with the
// client's MAC in RFC 6939's option gets a Relay-reply whose inner
// Advertise leases from the pool of the relay's link address.
func TestDHCPv6Relayed(t *testing.T) {
	h := newTestDHCPv6(t, testBackend(t))
	hw, _ := net.ParseMAC(testMAC)
	inner := message6(t, dhcpv6.MessageTypeSolicit, testMAC, ovmfPXE6)
	relay, err := dhcpv6.EncapsulateRelay(inner, dhcpv6.MessageTypeRelayForward, net.ParseIP("fd20::1"), net.ParseIP("fe80::9"))
	if err != nil {
		t.Fatal(err)
	}
	relay.AddOption(dhcpv6.OptClientLinkLayerAddress(iana.HWTypeEthernet, hw))
	b := h.HandleBytes(context.Background(), relay.ToBytes(), netip.MustParseAddr("fd20::1"))
	if b == nil {
		t.Fatal("no reply to the relay")
	}
	r, err := dhcpv6.FromBytes(b)
	if err != nil {
		t.Fatal(err)
	}
	rm, ok := r.(*dhcpv6.RelayMessage)
	if !ok || rm.MessageType != dhcpv6.MessageTypeRelayReply || !rm.PeerAddr.Equal(net.ParseIP("fe80::9")) {
		t.Fatalf("want a Relay-reply to fe80::9, got %s", r.Summary())
	}
	msg, _ := rm.GetInnerMessage()
	if a := leased6(msg); !netip.MustParsePrefix("fd20::/64").Contains(a) {
		t.Errorf("relayed client leased %s, want one of fd20::/64", a)
	}
	if u := msg.Options.BootFileURL(); u != "tftp://[fd99::1]/ipxe.efi" {
		t.Errorf("boot file %q", u)
	}
}

func TestDHCPv6ConfigRejects(t *testing.T) {
	for name, mut := range map[string]func(*DHCPv6Config){
		"IPv4 server address": func(c *DHCPv6Config) { c.Addr = netip.MustParseAddr("10.0.0.1") },
		"IPv4 listen address": func(c *DHCPv6Config) { c.Listen = netip.MustParseAddrPort("127.0.0.1:547") },
		"pool off its prefix": func(c *DHCPv6Config) { c.Pools[0].Last = netip.MustParseAddr("fd98::1") },
		"no pool":             func(c *DHCPv6Config) { c.Pools = nil },
		"no HTTP base URL":    func(c *DHCPv6Config) { c.HTTPBaseURL = "" },
	} {
		c := testDHCPv6Config()
		mut(&c)
		if _, err := NewDHCPv6Handler(c, testBackend(t), NewMemoryLeases(), nil); err == nil || !strings.Contains(err.Error(), "dhcpv6") {
			t.Errorf("%s: err %v", name, err)
		}
	}
}

func TestEUI64MAC(t *testing.T) {
	for addr, want := range map[string]string{
		"fe80::5054:ff:feaa:bb01": "52:54:00:aa:bb:01",
		"fe80::1":                 "",
		"fd99::5054:ff:feaa:bb01": "", // not link-local: could be anyone's
	} {
		mac, ok := eui64MAC(netip.MustParseAddr(addr))
		if (want == "") == ok || (ok && mac.String() != want) {
			t.Errorf("%s: %v %v, want %q", addr, mac, ok, want)
		}
	}
}

// TestDHCPv6ServerUDP is the real socket: a Solicit to the server on ::1
// gets its Advertise back at the sender's address.
func TestDHCPv6ServerUDP(t *testing.T) {
	cfg := testDHCPv6Config()
	cfg.Listen = netip.MustParseAddrPort("[::1]:0")
	srv, err := NewDHCPv6Server(cfg, testBackend(t), NewMemoryLeases(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Listen(); err != nil {
		t.Skipf("SKIPPING: no IPv6 loopback here: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()
	conn, err := net.DialUDP("udp6", nil, srv.LocalAddr().(*net.UDPAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	// From ::1 there is no EUI-64 address: the DUID-LL names the MAC.
	sol := message6(t, dhcpv6.MessageTypeSolicit, testMAC, osDHCPv6)
	if _, err := conn.Write(sol.ToBytes()); err != nil {
		t.Fatal(err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	buf := make([]byte, 1500)
	n, err := conn.Read(buf)
	if err != nil {
		t.Fatalf("no advertise: %v", err)
	}
	r, err := dhcpv6.MessageFromBytes(buf[:n])
	if err != nil || r.Type() != dhcpv6.MessageTypeAdvertise || r.TransactionID != sol.TransactionID || !leased6(r).IsValid() {
		t.Fatalf("want the Advertise of %v with an address, got %v (%v)", sol.TransactionID, r, err)
	}
}

func TestDHCPv6RepliesAreCounted(t *testing.T) {
	before := testutil.ToFloat64(metrics.DHCPReplies.WithLabelValues("advertise"))
	observeDHCPv6Reply(newTestDHCPv6(t, testBackend(t)).HandleBytes(context.Background(),
		message6(t, dhcpv6.MessageTypeSolicit, testMAC, ovmfPXE6).ToBytes(), linkLocal(testMAC)))
	if got := testutil.ToFloat64(metrics.DHCPReplies.WithLabelValues("advertise")); got != before+1 {
		t.Errorf("ironflow_dhcp_replies_total{type=advertise} went from %v to %v, want one more", before, got)
	}
}
