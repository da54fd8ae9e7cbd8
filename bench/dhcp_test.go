package main

import (
	"context"
	"testing"

	"github.com/insomniacslk/dhcp/dhcpv4"
)

// BenchmarkDHCPHandleBytes is the boot part's DHCP handler measure as a Go
// benchmark, for -cpuprofile: go test ./bench -run '^$' -bench DHCP -cpuprofile cpu.out
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
