package console

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
)

// Source opens the stream an endpoint bridges a session to: the BMC's
// serial-over-LAN, a TCP serial port, a VNC server. Each session opens its
// own stream and closes it when the session ends, as Ironic's socat console
// runs one ipmitool per connection.
type Source interface {
	Open(ctx context.Context) (io.ReadWriteCloser, error)
}

// Endpoint is one TCP listener of a node's console. One session at a time
// holds it: the console is one serial line and an IPMI BMC serves one SOL
// session, so a second connection is refused (Ironic's socat console
// listens with max-children=1) with a line saying so when refuseNotice is
// set (a VNC client would read the line as protocol: it is closed silently).
// Close ends the listener and every session before it returns.
type Endpoint struct {
	node         string
	ln           net.Listener
	src          Source
	refuseNotice bool

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu     sync.Mutex
	holder net.Conn
	conns  map[net.Conn]struct{}
}

// Serve starts serving sessions on ln, bridged to src.
func Serve(node string, ln net.Listener, src Source, refuseNotice bool) *Endpoint {
	ctx, cancel := context.WithCancel(context.Background())
	e := &Endpoint{node: node, ln: ln, src: src, refuseNotice: refuseNotice, ctx: ctx, cancel: cancel,
		conns: map[net.Conn]struct{}{}}
	e.wg.Add(1)
	go e.accept()
	return e
}

// Addr is the listener's host:port.
func (e *Endpoint) Addr() string { return e.ln.Addr().String() }

// Close closes the listener and every connection, ends every stream opened
// for them, and returns when all are gone: after Close, every client has
// read EOF.
func (e *Endpoint) Close() error {
	e.cancel()
	err := e.ln.Close()
	e.mu.Lock()
	for c := range e.conns {
		c.Close()
	}
	e.mu.Unlock()
	e.wg.Wait()
	if errors.Is(err, net.ErrClosed) {
		return nil
	}
	return err
}

// refusal is the line a second connection reads before it is closed.
const refusal = "ironflow: this console is in use by another session; try again when it ends\r\n"

func (e *Endpoint) accept() {
	defer e.wg.Done()
	for {
		c, err := e.ln.Accept()
		if err != nil {
			return
		}
		e.mu.Lock()
		if e.ctx.Err() != nil {
			e.mu.Unlock()
			c.Close()
			return
		}
		if e.holder != nil {
			e.mu.Unlock()
			if e.refuseNotice {
				_, _ = io.WriteString(c, refusal)
			}
			c.Close()
			continue
		}
		e.holder = c
		e.conns[c] = struct{}{}
		e.mu.Unlock()
		e.wg.Add(1)
		go e.session(c)
	}
}

// session bridges c to a stream of the source until either side ends.
func (e *Endpoint) session(c net.Conn) {
	defer e.wg.Done()
	defer func() {
		c.Close()
		e.mu.Lock()
		delete(e.conns, c)
		if e.holder == c {
			e.holder = nil
		}
		e.mu.Unlock()
	}()
	stream, err := e.src.Open(e.ctx)
	if err != nil {
		// The reason stays on the worker (Manager logs it, without the
		// traffic); the client reads that the console could not open.
		if e.refuseNotice {
			_, _ = io.WriteString(c, "ironflow: the console could not be opened\r\n")
		}
		return
	}
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(stream, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, stream); done <- struct{}{} }()
	pending := 2
	select {
	case <-done:
		pending--
	case <-e.ctx.Done():
	}
	stream.Close()
	c.Close()
	for ; pending > 0; pending-- {
		<-done
	}
}
