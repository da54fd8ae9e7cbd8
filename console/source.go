package console

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/ironflow/ironflow/bmc"
)

// TCPSource is a serial line or VNC server reachable over TCP: QEMU's
// serial chardev (-serial tcp:...,server) of a lab machine, a BMC's VNC port.
type TCPSource struct{ Address string }

// Open dials the address.
func (s TCPSource) Open(ctx context.Context) (io.ReadWriteCloser, error) {
	var d net.Dialer
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	c, err := d.DialContext(dctx, "tcp", s.Address)
	if err != nil {
		return nil, fmt.Errorf("connect to console %s: %w", s.Address, err)
	}
	return c, nil
}

// IPMISOL is the BMC's serial-over-LAN through Debian's ipmitool, run under
// a pty as Ironic's socat console runs it (EXEC:"ipmitool ... sol
// activate",pty). The password reaches ipmitool through IPMI_PASSWORD
// (ipmitool -E), never its command line.
type IPMISOL struct {
	Address     string
	Port        int // 623 when 0
	Username    string
	Password    string
	CipherSuite string // "" for ipmitool's default
	PrivLevel   string // "" for ipmitool's default (ADMINISTRATOR)
	// Binary is ipmitool's path; "ipmitool" when empty.
	Binary string
}

// args are ipmitool's arguments before the sol command.
func (s IPMISOL) args() []string {
	port := s.Port
	if port == 0 {
		port = 623
	}
	a := []string{"-I", "lanplus", "-H", s.Address, "-p", strconv.Itoa(port)}
	if s.Username != "" {
		a = append(a, "-U", s.Username)
	}
	a = append(a, "-E")
	if s.CipherSuite != "" {
		a = append(a, "-C", s.CipherSuite)
	}
	if s.PrivLevel != "" {
		a = append(a, "-L", s.PrivLevel)
	}
	return a
}

func (s IPMISOL) command(ctx context.Context, sub ...string) *exec.Cmd {
	bin := s.Binary
	if bin == "" {
		bin = "ipmitool"
	}
	cmd := exec.CommandContext(ctx, bin, append(s.args(), sub...)...)
	cmd.Env = append(os.Environ(), "IPMI_PASSWORD="+s.Password)
	return cmd
}

// Open ends a SOL session the BMC may still hold (a worker that died with
// it open; Ironic's start_console stops the old one first), then runs
// ipmitool sol activate under a pty.
func (s IPMISOL) Open(ctx context.Context) (io.ReadWriteCloser, error) {
	dctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	_ = s.command(dctx, "sol", "deactivate").Run()
	cancel()
	master, slave, err := openPTY()
	if err != nil {
		return nil, err
	}
	cmd := s.command(context.Background(), "sol", "activate")
	cmd.Stdin, cmd.Stdout, cmd.Stderr = slave, slave, slave
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true, Setctty: true}
	if err := cmd.Start(); err != nil {
		master.Close()
		slave.Close()
		return nil, fmt.Errorf("start ipmitool sol activate: %w", err)
	}
	slave.Close()
	p := &ptyProcess{master: master, cmd: cmd, exited: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.exited) }()
	return p, nil
}

// ptyProcess is a process behind a pty's master side.
type ptyProcess struct {
	master *os.File
	cmd    *exec.Cmd
	exited chan struct{}
	once   sync.Once
}

func (p *ptyProcess) Read(b []byte) (int, error) {
	n, err := p.master.Read(b)
	// Linux answers EIO on the master once the slave side is gone.
	if err != nil && errors.Is(err, syscall.EIO) {
		err = io.EOF
	}
	return n, err
}

func (p *ptyProcess) Write(b []byte) (int, error) { return p.master.Write(b) }

// Close asks ipmitool to end the SOL session (its escape sequence "~." at
// the start of a line), so that the BMC frees it for the next one, and
// kills it if it has not gone within two seconds.
func (p *ptyProcess) Close() error {
	p.once.Do(func() {
		_, _ = p.master.Write([]byte("\r~."))
		select {
		case <-p.exited:
		case <-time.After(2 * time.Second):
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
		p.master.Close()
	})
	return nil
}

// FakeSource is the fake console interface's line (as Ironic's fake
// console, for tests and demonstrations without hardware): it greets with
// the node's UUID and echoes what it is sent.
type FakeSource struct{ Node string }

// Open returns an in-memory line.
func (s FakeSource) Open(ctx context.Context) (io.ReadWriteCloser, error) {
	ours, theirs := net.Pipe()
	go func() {
		defer ours.Close()
		if _, err := io.WriteString(ours, "ironflow fake console of node "+s.Node+"\r\n"); err != nil {
			return
		}
		_, _ = io.Copy(ours, ours)
	}()
	return theirs, nil
}

// BMCVNCSource is a graphical console whose VNC address the BMC announces
// (redfish-graphical without driver_info console_vnc_address): each
// session asks the BMC (bmc.GraphicalConsole) where its VNC server listens,
// then dials it, so a BMC that moves its service is followed.
type BMCVNCSource struct {
	// Driver is the node's hardware type; Info its driver_info.
	Driver string
	Info   map[string]any
}

// Open resolves the address through the BMC and dials it.
func (s BMCVNCSource) Open(ctx context.Context) (io.ReadWriteCloser, error) {
	d, err := bmc.New(s.Driver, s.Info)
	if err != nil {
		return nil, fmt.Errorf("graphical console: %w", err)
	}
	defer d.Close()
	gc, ok := d.(bmc.GraphicalConsole)
	if !ok {
		return nil, fmt.Errorf("graphical console: the %s BMC driver cannot tell where its VNC server is", s.Driver)
	}
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	addr, err := gc.GraphicalConsoleAddress(rctx)
	if err != nil {
		return nil, fmt.Errorf("graphical console: ask the BMC: %w", err)
	}
	return TCPSource{Address: addr}.Open(ctx)
}
