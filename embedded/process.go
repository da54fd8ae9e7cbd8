package embedded

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// Process is a long-running program of a stack (an ironflow part, a BMC
// simulator, ...) in its own process group, with its output in a log file.
type Process struct {
	Name string
	// Log receives the program's stdout and stderr (appended).
	Log    string
	cmd    *exec.Cmd
	exited chan struct{}
	err    error
}

// StartProcess starts cmd, which must not have been started, in a process
// group of its own (so that Kill ends its children too) with its output
// appended to logPath. Other SysProcAttr settings of cmd are kept.
func StartProcess(name, logPath string, cmd *exec.Cmd) (*Process, error) {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open the log of %s: %w", name, err)
	}
	cmd.Stdout, cmd.Stderr = f, f
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	if err := cmd.Start(); err != nil {
		f.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &Process{Name: name, Log: logPath, cmd: cmd, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		f.Close()
		close(p.exited)
	}()
	return p, nil
}

// Pid is the process's id, also its process group's.
func (p *Process) Pid() int { return p.cmd.Process.Pid }

// Exited is closed when the process has exited.
func (p *Process) Exited() <-chan struct{} { return p.exited }

// Err is how the process ended (nil while it runs or after a clean exit).
func (p *Process) Err() error {
	select {
	case <-p.exited:
		return p.err
	default:
		return nil
	}
}

// Running reports whether the process has not exited yet.
func (p *Process) Running() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// Kill ends the process group at once, as a crash would (SIGKILL, no
// shutdown), and waits for the process.
func (p *Process) Kill() {
	_ = syscall.Kill(-p.Pid(), syscall.SIGKILL)
	<-p.exited
}

// Stop asks the process to shut down (SIGTERM) and, if it has not exited
// after grace, kills its process group; it waits for the process.
func (p *Process) Stop(grace time.Duration) {
	if !p.Running() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
	case <-time.After(grace):
		_ = syscall.Kill(-p.Pid(), syscall.SIGKILL)
		<-p.exited
	}
}

// Tail is the end of the process's log.
func (p *Process) Tail(n int64) string { return Tail(p.Log, n) }

// Tail returns the last n bytes of a file, for failure messages.
func Tail(path string, n int64) string {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Sprintf("(%v)", err)
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.Size() > n {
		if _, err := f.Seek(-n, io.SeekEnd); err != nil {
			return fmt.Sprintf("(%v)", err)
		}
	}
	b, err := io.ReadAll(f)
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Sprintf("(%v)", err)
	}
	return string(b)
}
