package activities

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"sync"
	"time"

	"github.com/ironflow/ironflow/agent/client"
)

// agentConnIdle is how long an agent's HTTP client is kept without use: the
// activities of one deploy follow each other within seconds, a finished
// agent's entry goes after this.
const agentConnIdle = 2 * time.Minute

// agentConns keeps one HTTP client per agent (its URL and how it is
// trusted), so that the activities of one operation reuse the agent's TLS
// connection instead of each paying a handshake.
//
// A client lives for one agent session, which its token names. A machine
// that reboots into a new agent keeps its address (same MAC, same DHCP
// lease, same port) but not its TCP connections: reusing a pooled one gets
// "connection reset by peer", and the POST that carried the command is not
// retried. So a new token for an agent URL drops every client of that URL,
// pooled connections included, and the new session dials afresh.
type agentConns struct {
	mu        sync.Mutex
	m         map[string]*agentConn
	lastSweep time.Time
}

type agentConn struct {
	hc      *http.Client
	url     string
	session [sha256.Size]byte // of the agent token
	used    time.Time
}

// get returns the HTTP client for the agent session at url with token,
// trusted by ca (or by nothing when insecure), building it with opts the
// first time.
func (p *agentConns) get(url, token, ca string, insecure bool, opts ...client.Option) (*http.Client, error) {
	sum := sha256.Sum256([]byte(ca))
	key := url + "\x00" + hex.EncodeToString(sum[:])
	if insecure {
		key += "\x00insecure"
	}
	session := sha256.Sum256([]byte(token))
	now := time.Now()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.m == nil {
		p.m = map[string]*agentConn{}
	}
	if now.Sub(p.lastSweep) > agentConnIdle {
		for k, c := range p.m {
			if now.Sub(c.used) > agentConnIdle {
				c.hc.CloseIdleConnections()
				delete(p.m, k)
			}
		}
		p.lastSweep = now
	}
	if c, ok := p.m[key]; ok && c.session == session {
		c.used = now
		return c.hc, nil
	}
	hc, err := client.HTTPClient(opts...)
	if err != nil {
		return nil, err
	}
	// Another session at this URL is a rebooted machine: its connections
	// lead nowhere.
	for k, c := range p.m {
		if c.url == url {
			c.hc.CloseIdleConnections()
			delete(p.m, k)
		}
	}
	p.m[key] = &agentConn{hc: hc, url: url, session: session, used: now}
	return hc, nil
}
