package pxe

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/dhcpv6"
)

// BenchmarkDHCPv6VsDHCPv4 answers, alternately, a UEFI PXE client's
// DHCPv4 DISCOVER and its DHCPv6 Solicit for 1000 machines, each through
// its handler's HandleBytes with the same in-memory boot configs and
// leases, and reports both rates and their ratio: the DHCPv4 handler is
// the baseline measured in the same run (docs/benchmarks.md).
func BenchmarkDHCPv6VsDHCPv4(b *testing.B) {
	const machines = 1000
	backend := NewMemoryBackend()
	var v4, v6 [][]byte
	var peers []netip.Addr
	for i := range machines {
		mac := fmt.Sprintf("52:57:00:00:%02x:%02x", i>>8, i&0xff)
		if err := backend.Put(BootConfig{NodeUUID: fmt.Sprintf("00000000-0000-4000-8000-%012d", i), MACs: []string{mac},
			BootMode: BootModeUEFI, Method: MethodPXE, Kind: "agent"}); err != nil {
			b.Fatal(err)
		}
		hw, _ := net.ParseMAC(mac)
		d, err := dhcpv4.NewDiscovery(hw, dhcpv4.WithBroadcast(true),
			dhcpv4.WithOption(dhcpv4.OptClassIdentifier("PXEClient:Arch:00007:UNDI:003000")),
			dhcpv4.WithGeneric(dhcpv4.OptionClientSystemArchitectureType, []byte{0, 7}))
		if err != nil {
			b.Fatal(err)
		}
		v4 = append(v4, d.ToBytes())
		v6 = append(v6, message6(b, dhcpv6.MessageTypeSolicit, mac, ovmfPXE6).ToBytes())
		peers = append(peers, linkLocal(mac))
	}
	cfg4 := testDHCPConfig(DHCPModeReservation)
	cfg4.Pools[0].Subnet, cfg4.Pools[0].First, cfg4.Pools[0].Last = netip.MustParsePrefix("10.99.0.0/16"), netip.MustParseAddr("10.99.1.0"), netip.MustParseAddr("10.99.15.255")
	cfg4.Addr = netip.MustParseAddr("10.99.0.1")
	h4, err := NewDHCPHandler(cfg4, backend, NewMemoryLeases(), nil)
	if err != nil {
		b.Fatal(err)
	}
	cfg6 := testDHCPv6Config()
	cfg6.Pools[0].Last = netip.MustParseAddr("fd99::ffff")
	h6, err := NewDHCPv6Handler(cfg6, backend, NewMemoryLeases(), nil)
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	var t4, t6 time.Duration
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		k := i % machines
		start := time.Now()
		reply, _ := h4.HandleBytes(ctx, v4[k])
		if reply == nil {
			b.Fatalf("no DHCPv4 offer for machine %d", k)
		}
		_ = reply.ToBytes()
		mid := time.Now()
		if h6.HandleBytes(ctx, v6[k], peers[k]) == nil {
			b.Fatalf("no DHCPv6 advertise for machine %d", k)
		}
		t4 += mid.Sub(start)
		t6 += time.Since(mid)
	}
	b.StopTimer()
	if t4 > 0 && t6 > 0 {
		r4, r6 := float64(b.N)/t4.Seconds(), float64(b.N)/t6.Seconds()
		b.ReportMetric(r4, "dhcpv4-answers/s")
		b.ReportMetric(r6, "dhcpv6-answers/s")
		b.ReportMetric(r6/r4, "v6/v4")
	}
}
