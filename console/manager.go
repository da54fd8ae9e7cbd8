package console

import (
	"context"
	"errors"
	"fmt"
	"github.com/ironflow/ironflow/console/web"
	"io"
	"log/slog"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Kinds of endpoint, as tokens and the browser pages name them.
const (
	KindSerial    = web.KindSerial
	KindGraphical = web.KindGraphical
)

// PortRange is the ports a worker's console listeners take, as Ironic's
// [console] port_range; the zero range lets the kernel pick a free port.
type PortRange struct{ Min, Max int }

// ParsePortRange reads "MIN:MAX" (Ironic's notation) or "" (any free port).
func ParsePortRange(s string) (PortRange, error) {
	if s == "" {
		return PortRange{}, nil
	}
	lo, hi, ok := strings.Cut(s, ":")
	a, err1 := strconv.Atoi(lo)
	b, err2 := strconv.Atoi(hi)
	if !ok || err1 != nil || err2 != nil || a < 1 || b > 65535 || a > b {
		return PortRange{}, fmt.Errorf("console port range %q: want MIN:MAX with 1 <= MIN <= MAX <= 65535", s)
	}
	return PortRange{a, b}, nil
}

// Spec is what a node's console needs on the worker: the streams of its
// endpoints (nil: none of that kind) and the serial port it asks for (0:
// one of the range).
type Spec struct {
	Node       string
	Serial     Source
	Graphical  Source
	SerialPort int
}

// Endpoints are the host:port of a node's listeners ("" for none).
type Endpoints struct {
	Serial    string `json:"serial,omitempty"`
	Graphical string `json:"graphical,omitempty"`
}

// Manager holds the consoles of one worker process: per node, its
// endpoints. Its methods are safe for concurrent use.
type Manager struct {
	// Host the listeners bind to; loopback when empty.
	Host  string
	Ports PortRange
	Log   *slog.Logger

	mu    sync.Mutex
	held  map[string][]*Endpoint
	since map[string]time.Time
	next  int
	ports map[int]bool
}

// ErrNoFreePort: every port of the range is taken.
var ErrNoFreePort = errors.New("no free console port")

// Start opens the node's endpoints, or returns those it already has (an
// activity retried after the worker answered).
func (m *Manager) Start(spec Spec) (Endpoints, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.held == nil {
		m.held, m.ports, m.since = map[string][]*Endpoint{}, map[int]bool{}, map[string]time.Time{}
	}
	if eps, ok := m.held[spec.Node]; ok {
		return endpointsOf(eps), nil
	}
	var eps []*Endpoint
	fail := func(err error) (Endpoints, error) {
		for _, e := range eps {
			m.release(e)
		}
		return Endpoints{}, fmt.Errorf("start the console of node %s: %w", spec.Node, err)
	}
	if spec.Serial != nil {
		ln, err := m.listen(spec.SerialPort)
		if err != nil {
			return fail(err)
		}
		eps = append(eps, Serve(spec.Node, ln, logged{spec.Serial, m.log(), spec.Node}, true))
	}
	if spec.Graphical != nil {
		ln, err := m.listen(0)
		if err != nil {
			return fail(err)
		}
		eps = append(eps, Serve(spec.Node, ln, logged{spec.Graphical, m.log(), spec.Node}, false))
	}
	m.held[spec.Node] = eps
	m.since[spec.Node] = time.Now()
	return endpointsOf(eps), nil
}

// endpointsOf: the serial endpoint comes first when there is one.
func endpointsOf(eps []*Endpoint) Endpoints {
	var out Endpoints
	for _, e := range eps {
		if e.refuseNotice {
			out.Serial = e.Addr()
		} else {
			out.Graphical = e.Addr()
		}
	}
	return out
}

// Stop closes the node's endpoints and every session on them; a node
// without endpoints here is no error (the worker restarted, or never held
// it).
func (m *Manager) Stop(node string) {
	m.mu.Lock()
	eps := m.held[node]
	delete(m.held, node)
	delete(m.since, node)
	m.mu.Unlock()
	for _, e := range eps {
		m.release(e)
	}
}

// Held reports whether the node's console has endpoints here.
func (m *Manager) Held(node string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.held[node]
	return ok
}

// HeldSince lists the nodes whose consoles are held here and started
// before t.
func (m *Manager) HeldSince(t time.Time) []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for n, at := range m.since {
		if at.Before(t) {
			out = append(out, n)
		}
	}
	return out
}

// StopAll closes every endpoint (the worker stops).
func (m *Manager) StopAll() {
	m.mu.Lock()
	var nodes []string
	for n := range m.held {
		nodes = append(nodes, n)
	}
	m.mu.Unlock()
	for _, n := range nodes {
		m.Stop(n)
	}
}

func (m *Manager) release(e *Endpoint) {
	_, port, _ := net.SplitHostPort(e.Addr())
	_ = e.Close()
	p, _ := strconv.Atoi(port)
	m.mu.Lock()
	delete(m.ports, p)
	m.mu.Unlock()
}

func (m *Manager) log() *slog.Logger {
	if m.Log == nil {
		return slog.Default()
	}
	return m.Log
}

// listen binds a port: the one asked, else one of the range (round robin
// from the last one taken, as ports of stopped consoles are freed), else
// any. m.mu is held.
func (m *Manager) listen(port int) (net.Listener, error) {
	host := m.Host
	if host == "" {
		host = "127.0.0.1"
	}
	bind := func(p int) (net.Listener, error) {
		ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(p)))
		if err == nil {
			_, s, _ := net.SplitHostPort(ln.Addr().String())
			got, _ := strconv.Atoi(s)
			m.ports[got] = true
		}
		return ln, err
	}
	if port != 0 {
		return bind(port)
	}
	if m.Ports.Min == 0 {
		return bind(0)
	}
	n := m.Ports.Max - m.Ports.Min + 1
	for i := 0; i < n; i++ {
		p := m.Ports.Min + (m.next+i)%n
		if m.ports[p] {
			continue
		}
		if ln, err := bind(p); err == nil {
			m.next = (p - m.Ports.Min + 1) % n
			return ln, nil
		}
	}
	return nil, fmt.Errorf("%w in %d:%d on %s", ErrNoFreePort, m.Ports.Min, m.Ports.Max, host)
}

// logged logs why a session's stream did not open (never the traffic).
type logged struct {
	Source
	log  *slog.Logger
	node string
}

func (l logged) Open(ctx context.Context) (io.ReadWriteCloser, error) {
	s, err := l.Source.Open(ctx)
	if err != nil && ctx.Err() == nil {
		l.log.Warn("console stream did not open", "node", l.node, "error", err)
	}
	return s, err
}
