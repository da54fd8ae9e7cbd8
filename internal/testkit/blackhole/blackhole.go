// Package blackhole is a TCP proxy on loopback that a test can turn into a
// black hole: while it is on, nothing crosses it in either direction and new
// connections are accepted but never served, so that the peers see what
// dropped packets do to them (calls that hang, connects that time out)
// rather than a refused or reset connection. Off again, bytes flow on the
// connections that survived. It is tooling for the outage tests.
package blackhole

import (
	"net"
	"sync"
)

// Proxy forwards connections from its loopback address to a target.
type Proxy struct {
	l      net.Listener
	target string

	mu    sync.Mutex
	on    bool
	open  chan struct{} // closed while the proxy forwards
	conns []net.Conn
}

// Start listens on a free loopback port and forwards to target.
func Start(target string) (*Proxy, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	return serveOn(l, target), nil
}

// serveOn forwards the connections l accepts to target.
func serveOn(l net.Listener, target string) *Proxy {
	p := &Proxy{l: l, target: target, open: make(chan struct{})}
	close(p.open)
	go p.serve()
	return p
}

// Addr is the address to dial in place of the target.
func (p *Proxy) Addr() string { return p.l.Addr().String() }

// Drop turns the black hole on: nothing more crosses the proxy.
func (p *Proxy) Drop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.on {
		p.on = true
		p.open = make(chan struct{})
	}
}

// Pass turns it off: bytes held on either side flow again.
func (p *Proxy) Pass() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.on {
		p.on = false
		close(p.open)
	}
}

// Close stops listening and closes every connection.
func (p *Proxy) Close() {
	p.l.Close()
	p.Pass()
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		c.Close()
	}
}

func (p *Proxy) gate() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.open
}

func (p *Proxy) track(c net.Conn) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.conns = append(p.conns, c)
}

func (p *Proxy) serve() {
	for {
		c, err := p.l.Accept()
		if err != nil {
			return
		}
		p.track(c)
		go func() {
			// A connection made into the black hole waits, unanswered,
			// until it is lifted (or the client gives up).
			<-p.gate()
			up, err := net.Dial("tcp", p.target)
			if err != nil {
				c.Close()
				return
			}
			p.track(up)
			go p.pipe(up, c)
			p.pipe(c, up)
		}()
	}
}

// pipe copies from src to dst, holding every chunk while the black hole is
// on.
func (p *Proxy) pipe(dst, src net.Conn) {
	defer dst.Close()
	defer src.Close()
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			<-p.gate()
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return // EOF or a closed side: the other goes too
		}
	}
}
