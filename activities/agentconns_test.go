package activities

import (
	"testing"
	"time"

	"github.com/ironflow/ironflow/agent/client"
)

func TestAgentConnsReuseOneClientPerAgentAndTrust(t *testing.T) {
	var p agentConns
	a, err := p.get("https://10.0.0.5:9999", "", true, client.WithInsecureTLS())
	if err != nil {
		t.Fatal(err)
	}
	again, _ := p.get("https://10.0.0.5:9999", "", true, client.WithInsecureTLS())
	if a != again {
		t.Fatalf("the same agent got a second HTTP client: its connection is not reused")
	}
	other, _ := p.get("https://10.0.0.6:9999", "", true, client.WithInsecureTLS())
	if other == a {
		t.Fatalf("two agents share an HTTP client")
	}
	// Another CA for the same URL (a rebooted agent with a new
	// certificate) must not reuse the old trust.
	if _, err := p.get("https://10.0.0.5:9999", "not a certificate", false, client.WithCAPEM([]byte("not a certificate"))); err == nil {
		t.Fatalf("a CA without a PEM certificate was accepted")
	}
	// Idle entries go.
	for _, c := range p.m {
		c.used = time.Now().Add(-2 * agentConnIdle)
	}
	p.lastSweep = time.Time{}
	fresh, _ := p.get("https://10.0.0.7:9999", "", true, client.WithInsecureTLS())
	if len(p.m) != 1 || p.m["https://10.0.0.7:9999\x00"+emptySum+"\x00insecure"].hc != fresh {
		t.Fatalf("after the sweep the cache holds %d clients, want only the fresh one", len(p.m))
	}
}

// emptySum is the hex sha256 of "".
const emptySum = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
