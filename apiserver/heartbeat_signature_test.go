package apiserver

import (
	"testing"
	"time"

	"github.com/ironflow/ironflow/provision"
	"github.com/ironflow/ironflow/signature"
	"github.com/ironflow/ironflow/workflows"
)

// The heartbeat signal the API sends carries a MAC the worker verifies with
// the shared key (package signature).
func TestHeartbeatSignalsAreSigned(t *testing.T) {
	keys := signature.Keys{Current: []byte("api-test-signal-key-0123456789")}
	e := newEnv(t, func(c *Config) { c.SignalKey = keys.Current })
	uuid, token := hbNode(t, e, provision.DeployWait, nil)
	e.eng.hold(uuid, true)
	b := map[string]any{"callback_url": "http://127.0.0.1:9999", "agent_token": token, "agent_version": "9.4.0"}
	if r := e.do("POST", "/v1/heartbeat/"+uuid, "1.78", b); r.status != 202 {
		t.Fatalf("heartbeat: %d %s", r.status, r.body)
	}
	e.eng.mu.Lock()
	defer e.eng.mu.Unlock()
	if len(e.eng.signals) != 1 {
		t.Fatalf("signals %+v", e.eng.signals)
	}
	hb := e.eng.signals[0].arg.(workflows.Heartbeat)
	if hb.MAC == "" || hb.Nonce == "" {
		t.Fatalf("the heartbeat signal is not signed: %+v", hb)
	}
	if err := signature.Verify(keys, uuid, hb, time.Now()); err != nil {
		t.Fatalf("the worker would refuse the API's signal: %v", err)
	}
	// It names the token this operation's agent holds, and not the token.
	if err := signature.CheckToken(hb, token); err != nil || hb.AgentTokenRef == "" || hb.AgentTokenRef == token {
		t.Fatalf("the signal's agent token ref %q does not name the node's token: %v", hb.AgentTokenRef, err)
	}
}
