package agent

import (
	"context"
	"encoding/binary"
	"encoding/hex"
	"sync"
	"time"
)

// LLDP, as Ironic's agent collects it for inspection (IPA's collect_lldp,
// kernel parameter ipa-collect-lldp=1): the first LLDP frame each network
// interface receives, its TLVs handed to Ironic's inspection hooks as the
// interface's "lldp" list of [type, "hex value"] pairs (parse-lldp turns
// them into plugin_data's parsed_lldp; docs/inspection.md).

// DefaultLLDPTimeout is how long the agent listens (IPA's lldp_timeout).
const DefaultLLDPTimeout = 30 * time.Second

// lldpEtherType is LLDP's Ethernet type.
const lldpEtherType = 0x88cc

// lldpMulticast is the nearest-bridge address LLDP frames are sent to.
var lldpMulticast = [6]byte{0x01, 0x80, 0xc2, 0x00, 0x00, 0x0e}

// LLDPCollector listens for LLDP on a set of interfaces from the moment it
// starts (the agent starts it when it boots, so that the inventory asked
// for later rarely waits): each interface keeps its first frame, and
// listening ends when every interface has one or the timeout passes.
type LLDPCollector struct {
	mu     sync.Mutex
	frames map[string][][2]any
	done   chan struct{}
}

// NewLLDPCollector collects on ifaces until timeout, with listen reading
// one interface (listenLLDP on Linux). It returns at once.
func NewLLDPCollector(ctx context.Context, ifaces []string, timeout time.Duration, listen func(ctx context.Context, iface string) ([]byte, error)) *LLDPCollector {
	c := &LLDPCollector{frames: map[string][][2]any{}, done: make(chan struct{})}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	var wg sync.WaitGroup
	for _, name := range ifaces {
		wg.Add(1)
		go func() {
			defer wg.Done()
			frame, err := listen(ctx, name)
			if err != nil {
				return
			}
			if tlvs := LLDPTLVs(frame); len(tlvs) > 0 {
				c.mu.Lock()
				c.frames[name] = tlvs
				c.mu.Unlock()
			}
		}()
	}
	go func() {
		wg.Wait()
		cancel()
		close(c.done)
	}()
	return c
}

// Wait blocks until listening ended (or ctx ends) and returns the TLVs per
// interface; an interface that received nothing is absent.
func (c *LLDPCollector) Wait(ctx context.Context) map[string][][2]any {
	select {
	case <-c.done:
	case <-ctx.Done():
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[string][][2]any, len(c.frames))
	for k, v := range c.frames {
		out[k] = v
	}
	return out
}

// LLDPTLVs reads an Ethernet frame carrying an LLDPDU into [type, hex]
// pairs, up to the End TLV; nil when the frame is not LLDP.
func LLDPTLVs(frame []byte) [][2]any {
	if len(frame) < 14 || binary.BigEndian.Uint16(frame[12:14]) != lldpEtherType {
		return nil
	}
	var out [][2]any
	b := frame[14:]
	for len(b) >= 2 {
		h := binary.BigEndian.Uint16(b)
		typ, n := int(h>>9), int(h&0x1ff)
		if typ == 0 || len(b) < 2+n {
			break
		}
		out = append(out, [2]any{typ, hex.EncodeToString(b[2 : 2+n])})
		b = b[2+n:]
	}
	return out
}
