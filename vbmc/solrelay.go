package vbmc

import (
	"io"
	"net"
	"sync"
	"time"
)

// solRelay stands between ipmi_sim's serial over LAN and a VM's serial line
// on TCP. ipmi_sim connects to its SOL device ("tcp:address:port",
// ipmi_lan(5)) once, when it starts, and never again; the VM's QEMU, and
// with it the serial line, comes and goes with the VM's power. The relay
// listens for ipmi_sim and keeps dialling the VM's serial line (QEMU's
// socket chardev, server=on), copying both ways while both are there; what
// ipmi_sim sends while the VM is off is dropped, as a powered-off serial
// port drops it.
type solRelay struct {
	ln     net.Listener
	target string

	mu     sync.Mutex
	vm     net.Conn
	closed bool
	done   chan struct{}
}

// solRelayRetry is how often the relay dials a VM whose serial line is
// not there (powered off).
const solRelayRetry = 200 * time.Millisecond

func startSOLRelay(target string) (*solRelay, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	r := &solRelay{ln: ln, target: target, done: make(chan struct{})}
	go r.run()
	return r, nil
}

// Addr is where ipmi_sim connects.
func (r *solRelay) Addr() string { return r.ln.Addr().String() }

func (r *solRelay) run() {
	bmc, err := r.ln.Accept()
	r.ln.Close()
	if err != nil {
		return
	}
	defer bmc.Close()
	// ipmi_sim to the VM.
	go func() {
		buf := make([]byte, 4096)
		for {
			n, err := bmc.Read(buf)
			if err != nil {
				r.Close()
				return
			}
			r.mu.Lock()
			vm := r.vm
			r.mu.Unlock()
			if vm != nil {
				_, _ = vm.Write(buf[:n])
			}
		}
	}()
	// The VM to ipmi_sim, through each power cycle.
	for {
		select {
		case <-r.done:
			return
		default:
		}
		vm, err := net.DialTimeout("tcp", r.target, time.Second)
		if err != nil {
			select {
			case <-r.done:
				return
			case <-time.After(solRelayRetry):
			}
			continue
		}
		r.mu.Lock()
		if r.closed {
			r.mu.Unlock()
			vm.Close()
			return
		}
		r.vm = vm
		r.mu.Unlock()
		_, _ = io.Copy(bmc, vm)
		r.mu.Lock()
		r.vm = nil
		r.mu.Unlock()
		vm.Close()
	}
}

// Close stops the relay.
func (r *solRelay) Close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return
	}
	r.closed = true
	close(r.done)
	r.ln.Close()
	if r.vm != nil {
		r.vm.Close()
	}
}
