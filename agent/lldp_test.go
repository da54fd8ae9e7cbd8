package agent

import (
	"context"
	"encoding/hex"
	"reflect"
	"sync/atomic"
	"testing"
	"time"
)

// lldpFrame is an Ethernet frame to the nearest-bridge address with a
// chassis ID (MAC), a port ID (interface name "swp7"), a TTL and the End.
func lldpFrame(t *testing.T) []byte {
	b, err := hex.DecodeString("0180c200000e" + "525400aabbcc" + "88cc" +
		"0207" + "04525400aabbcc" + "0405" + "0573777037" + "0602" + "0078" + "0000")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestLLDPTLVsReadsTheLLDPDU(t *testing.T) {
	got := LLDPTLVs(lldpFrame(t))
	want := [][2]any{{1, "04525400aabbcc"}, {2, "0573777037"}, {3, "0078"}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("TLVs %v, want %v", got, want)
	}
	ip := lldpFrame(t)
	ip[12], ip[13] = 0x08, 0x00
	if LLDPTLVs(ip) != nil || LLDPTLVs(ip[:10]) != nil {
		t.Fatal("a frame that is not LLDP gave TLVs")
	}
	cut := lldpFrame(t)[:20] // the chassis TLV says 7 bytes, 4 follow
	if got := LLDPTLVs(cut); len(got) != 0 {
		t.Fatalf("a truncated TLV was read: %v", got)
	}
}

// The collector keeps each interface's frame, leaves out those that heard
// nothing, and ends at its timeout even when an interface never hears one.
func TestLLDPCollectorEndsAtItsTimeout(t *testing.T) {
	frame := lldpFrame(t)
	var eth1Gave atomic.Bool
	listen := func(ctx context.Context, iface string) ([]byte, error) {
		if iface == "eth0" {
			return frame, nil
		}
		<-ctx.Done()
		eth1Gave.Store(true)
		return nil, ctx.Err()
	}
	c := NewLLDPCollector(context.Background(), []string{"eth0", "eth1"}, 300*time.Millisecond, listen)
	got := c.Wait(context.Background())
	if _, ok := got["eth1"]; ok || len(got["eth0"]) != 3 {
		t.Fatalf("collected %v; want eth0's three TLVs only", got)
	}
	if !eth1Gave.Load() {
		t.Fatal("the collector ended while eth1 still listened")
	}
}
