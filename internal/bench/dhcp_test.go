package main

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
)

// BenchmarkDHCPHandleBytes is the boot part's DHCP handler measure as a Go
// benchmark, for -cpuprofile: go test ./internal/bench -run '^$' -bench DHCP -cpuprofile cpu.out
func BenchmarkDHCPHandleBytes(b *testing.B) {
	_, h, discovers, err := newDHCPSetup()
	if err != nil {
		b.Fatal(err)
	}
	wire := make([][]byte, len(discovers))
	for i, d := range discovers {
		wire[i] = d.ToBytes()
	}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		reply, _ := h.HandleBytes(ctx, wire[i%len(wire)])
		if reply == nil || reply.MessageType() != dhcpv4.MessageTypeOffer {
			b.Fatalf("no offer for packet %d", i%len(wire))
		}
		_ = reply.ToBytes()
	}
}

// BenchmarkDHCPServerUDP is one client's DISCOVER → OFFER round trips with
// the real pxe.DHCPServer on 127.0.0.1, for -cpuprofile of the socket path:
// go test ./internal/bench -run '^$' -bench DHCPServer -cpuprofile cpu.out
func BenchmarkDHCPServerUDP(b *testing.B) {
	backend, _, discovers, err := newDHCPSetup()
	if err != nil {
		b.Fatal(err)
	}
	srv, stop, err := startDHCPServer(context.Background(), backend)
	if err != nil {
		b.Fatal(err)
	}
	defer func() {
		if err := stop(); err != nil {
			b.Error(err)
		}
	}()
	conn, err := net.DialUDP("udp4", nil, srv.LocalAddr().(*net.UDPAddr))
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	buf := make([]byte, 4096)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		d := discovers[i%len(discovers)]
		if _, err := conn.Write(d.ToBytes()); err != nil {
			b.Fatal(err)
		}
		_ = conn.SetReadDeadline(time.Now().Add(udpReplyTimeout))
		n, err := conn.Read(buf)
		if err != nil {
			b.Fatalf("no reply to packet %d: %v", i%len(discovers), err)
		}
		reply, err := dhcpv4.FromBytes(buf[:n])
		if err != nil || reply.MessageType() != dhcpv4.MessageTypeOffer || reply.TransactionID != d.TransactionID {
			b.Fatalf("packet %d: want its OFFER, got %v (%v)", i%len(discovers), reply, err)
		}
	}
}
