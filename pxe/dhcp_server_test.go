package pxe

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ironflow/ironflow/metrics"
)

// serverReplyTimeout bounds the wait for one reply from a server on
// loopback; a reply that never comes fails the test instead of hanging it.
const serverReplyTimeout = 10 * time.Second

// startDHCPServer runs a real DHCPServer on 127.0.0.1 at a free port until
// the test ends, and returns it.
func startDHCPServer(t *testing.T, mode string) *DHCPServer {
	t.Helper()
	cfg := testDHCPConfig(mode)
	cfg.Interface = ""
	cfg.Listen = netip.MustParseAddrPort("127.0.0.1:0")
	var leases Leases
	if mode == DHCPModeReservation {
		leases = NewMemoryLeases()
	}
	srv, err := NewDHCPServer(cfg, testBackend(t), leases, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return srv
}

// exchange sends req from a UDP socket on 127.0.0.1 to addr and returns the
// reply.
func exchange(t *testing.T, addr net.Addr, req *dhcpv4.DHCPv4) *dhcpv4.DHCPv4 {
	t.Helper()
	conn, err := net.DialUDP("udp4", nil, addr.(*net.UDPAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if _, err := conn.Write(req.ToBytes()); err != nil {
		t.Fatalf("send %s: %v", req.MessageType(), err)
	}
	if err := conn.SetReadDeadline(time.Now().Add(serverReplyTimeout)); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, maxDHCPPacket)
	n, err := conn.Read(buf)
	if err != nil {
		t.Fatalf("no reply to %s: %v", req.MessageType(), err)
	}
	reply, err := dhcpv4.FromBytes(buf[:n])
	if err != nil {
		t.Fatalf("reply does not decode: %v", err)
	}
	if reply.TransactionID != req.TransactionID || reply.ClientHWAddr.String() != req.ClientHWAddr.String() {
		t.Errorf("reply xid/chaddr %s/%s do not match the request", reply.TransactionID, reply.ClientHWAddr)
	}
	return reply
}

// A client on loopback gets its replies over the wire from the real server:
// DISCOVER → OFFER, then REQUEST → ACK for the offered address.
func TestDHCPServerReservationOnLoopback(t *testing.T) {
	srv := startDHCPServer(t, DHCPModeReservation)
	script := testHTTPURL + "/boot/" + testNode + "/boot.ipxe"
	offers := testutil.ToFloat64(metrics.DHCPReplies.WithLabelValues("offer"))
	acks := testutil.ToFloat64(metrics.DHCPReplies.WithLabelValues("ack"))

	offer := exchange(t, srv.LocalAddr(), packet(t, dhcpv4.MessageTypeDiscover, testMAC, seabiosIPXE))
	checkReply(t, offer, nil, dhcpv4.MessageTypeOffer, "10.99.0.100", script, testServer, true, nil)
	if sid := offer.ServerIdentifier(); !sid.Equal(net.ParseIP(testServer)) {
		t.Errorf("server identifier %v, want %s", sid, testServer)
	}

	req := packet(t, dhcpv4.MessageTypeRequest, testMAC, seabiosIPXE,
		dhcpv4.WithOption(dhcpv4.OptServerIdentifier(offer.ServerIdentifier())),
		dhcpv4.WithOption(dhcpv4.OptRequestedIPAddress(offer.YourIPAddr)))
	ack := exchange(t, srv.LocalAddr(), req)
	checkReply(t, ack, nil, dhcpv4.MessageTypeAck, "10.99.0.100", script, testServer, true, nil)

	if s := srv.Handler.Stats.Snapshot(); s.Received != 2 || s.Replied != 2 {
		t.Errorf("stats %+v, want 2 received, 2 replied", s)
	}
	// docs/metrics.md: ironflow_dhcp_replies_total.
	if o, a := testutil.ToFloat64(metrics.DHCPReplies.WithLabelValues("offer"))-offers, testutil.ToFloat64(metrics.DHCPReplies.WithLabelValues("ack"))-acks; o != 1 || a != 1 {
		t.Errorf("dhcp replies counted: %v offers, %v acks; want 1 and 1", o, a)
	}
}

// In proxy mode the DISCOVER goes to the listen address and the PXE
// client's REQUEST to port 4011 on the same IP, as on a segment.
func TestDHCPServerProxyOnLoopback(t *testing.T) {
	srv := startDHCPServer(t, DHCPModeProxy)
	offer := exchange(t, srv.LocalAddr(), packet(t, dhcpv4.MessageTypeDiscover, testMAC, ovmfPXE))
	checkReply(t, offer, nil, dhcpv4.MessageTypeOffer, "", "ipxe.efi", testServer, false, nil)

	proxyAddr := &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1), Port: ProxyDHCPPort}
	ack := exchange(t, proxyAddr, packet(t, dhcpv4.MessageTypeRequest, testMAC, ovmfPXE, dhcpv4.WithClientIP(net.ParseIP("10.99.0.77"))))
	checkReply(t, ack, nil, dhcpv4.MessageTypeAck, "", "ipxe.efi", testServer, false, nil)
}

func TestDHCPServerListenErrors(t *testing.T) {
	// A real server holds an address; the cases try to take it again.
	busy := startDHCPServer(t, DHCPModeReservation).LocalAddr().String()
	cases := []struct {
		name      string
		iface     string
		listen    string // empty: no listen address
		wantErrno error  // nil: only the message is checked
		wantMsg   []string
	}{
		{name: "address held by another server", listen: busy, wantErrno: syscall.EADDRINUSE,
			wantMsg: []string{"dhcp: listen on " + busy, "another DHCP server", "address already in use"}},
		{name: "address not on this host", listen: "192.0.2.1:0", wantErrno: syscall.EADDRNOTAVAIL,
			wantMsg: []string{"dhcp: listen on 192.0.2.1:0"}},
		{name: "interface that does not exist", iface: "ironflow-none0", listen: "127.0.0.1:0", wantErrno: syscall.ENODEV,
			wantMsg: []string{"127.0.0.1:0 on ironflow-none0", "bind to interface ironflow-none0"}},
		{name: "neither interface nor listen address", wantMsg: []string{"no interface and no listen address"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := testDHCPConfig(DHCPModeReservation)
			cfg.Interface = tc.iface
			if tc.listen != "" {
				cfg.Listen = netip.MustParseAddrPort(tc.listen)
			}
			srv, err := NewDHCPServer(cfg, testBackend(t), NewMemoryLeases(), nil)
			if err != nil {
				t.Fatal(err)
			}
			err = srv.Listen()
			if err == nil {
				srv.Serve(canceledContext())
				t.Fatal("Listen succeeded")
			}
			if tc.wantErrno != nil && !errors.Is(err, tc.wantErrno) {
				t.Errorf("error %q is not %v", err, tc.wantErrno)
			}
			for _, m := range tc.wantMsg {
				if !strings.Contains(err.Error(), m) {
					t.Errorf("error %q does not say %q", err, m)
				}
			}
		})
	}
}

func TestDHCPConfigRejectsIPv6ListenAddress(t *testing.T) {
	cfg := testDHCPConfig(DHCPModeReservation)
	cfg.Listen = netip.MustParseAddrPort("[::1]:6767")
	_, err := NewDHCPServer(cfg, testBackend(t), NewMemoryLeases(), nil)
	if err == nil || !strings.Contains(err.Error(), "listen address [::1]:6767 is not IPv4") {
		t.Fatalf("error %v, want one saying the listen address is not IPv4", err)
	}
}

// canceledContext makes Serve close the sockets of a Listen that should
// have failed, so an unexpected success leaks nothing.
func canceledContext() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}
