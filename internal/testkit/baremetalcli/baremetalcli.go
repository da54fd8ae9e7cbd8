// Package baremetalcli runs Debian's unmodified baremetal CLI
// (python3-ironicclient) for ironflow's tests, many times over, without
// paying the interpreter's start and the CLI's imports on every run.
//
// A fork server (forkserver.py) imports the CLI once; each Run forks a
// child of it that calls the CLI's own entry point, ironicclient.shell.main
// (what /usr/bin/baremetal runs), with the run's arguments, its whole
// environment and directory, and hands back the exit status and both
// outputs. What a run does over the network, which client it builds and
// from which settings, is a fresh /usr/bin/baremetal's: only the imports
// are shared. A run costs a few tens of milliseconds of CPU where a fresh
// CLI costs about two seconds, which across the suite's thousand runs is
// minutes of a two-core machine.
//
// It is tooling for ironflow's tests, never imported by ironflow's code.
package baremetalcli

import (
	"bufio"
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// Python is Debian's interpreter, the only one that loads Debian's
// python3-ironicclient; CLI is the entry point a fresh run would use.
const (
	Python = "/usr/bin/python3"
	CLI    = "/usr/bin/baremetal"
)

//go:embed forkserver.py
var forkServer []byte

// startTimeout bounds the server's imports (a few seconds on an idle
// machine, much more on a loaded one).
const startTimeout = 3 * time.Minute

// Server is a running fork server.
type Server struct {
	sock  string
	cmd   *exec.Cmd
	stdin io.WriteCloser
	done  chan struct{}
	log   string
}

// Result is one run's outcome.
type Result struct {
	Stdout, Stderr string
	// Exit is the CLI's exit status (negative: killed by a signal).
	Exit int
}

// Err is nil for exit status 0, else an error naming the status, as
// exec.Cmd.Run's would.
func (r Result) Err() error {
	if r.Exit == 0 {
		return nil
	}
	return fmt.Errorf("exit status %d", r.Exit)
}

// Missing says what to install when the CLI is not on this machine (nil
// when it is).
func Missing() error {
	for _, p := range []string{Python, CLI} {
		if _, err := os.Stat(p); err != nil {
			return fmt.Errorf("the baremetal CLI is missing (%s): install Debian's python3-ironicclient (make test does): %w", p, err)
		}
	}
	return nil
}

// Start starts a fork server whose socket and log live in dir. wrap builds
// the command that runs a program where the CLI's runs must run (the e2e
// lab's network namespace); nil runs it here. The server ends with Close,
// or when the test process ends (it watches its standard input).
func Start(dir string, wrap func(name string, args ...string) *exec.Cmd) (*Server, error) {
	if err := Missing(); err != nil {
		return nil, err
	}
	if wrap == nil {
		wrap = exec.Command
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	script := filepath.Join(dir, "baremetal-forkserver.py")
	if err := os.WriteFile(script, forkServer, 0o644); err != nil {
		return nil, err
	}
	s := &Server{sock: filepath.Join(dir, "baremetal.sock"), log: filepath.Join(dir, "baremetal-forkserver.log"), done: make(chan struct{})}
	_ = os.Remove(s.sock)
	logf, err := os.Create(s.log)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	s.cmd = wrap(Python, script, s.sock)
	s.cmd.Stderr = logf
	if s.stdin, err = s.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	stdout, err := s.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the baremetal CLI's fork server: %w", err)
	}
	ready := make(chan error, 1)
	go func() {
		line, err := bufio.NewReader(stdout).ReadString('\n')
		if err == nil && strings.TrimSpace(line) != "ready" {
			err = fmt.Errorf("said %q", line)
		}
		ready <- err
		_, _ = io.Copy(io.Discard, stdout)
	}()
	go func() { _ = s.cmd.Wait(); close(s.done) }()
	select {
	case err = <-ready:
	case <-time.After(startTimeout):
		err = fmt.Errorf("not ready after %v", startTimeout)
	}
	if err != nil {
		s.Close()
		tail, _ := os.ReadFile(s.log)
		return nil, fmt.Errorf("the baremetal CLI's fork server: %w\n%s", err, tail)
	}
	return s, nil
}

// Close stops the server (runs under way finish).
func (s *Server) Close() {
	_ = s.stdin.Close()
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
}

// request and answer are forkserver.py's protocol.
type request struct {
	Args []string          `json:"args"`
	Env  map[string]string `json:"env"`
	Dir  string            `json:"dir,omitempty"`
}

type answer struct {
	Exit   int    `json:"exit"`
	Stdout string `json:"stdout"`
	Stderr string `json:"stderr"`
}

// Run runs `baremetal args...` with env as its whole environment (as
// exec.Cmd.Env: KEY=VALUE, the last of a key wins) in the current
// directory. Cancelling ctx kills the run. The error is the server's
// (the CLI's own failures are in Result).
func (s *Server) Run(ctx context.Context, env []string, args ...string) (Result, error) {
	req := request{Args: args, Env: map[string]string{}}
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok {
			req.Env[k] = v
		}
	}
	if wd, err := os.Getwd(); err == nil {
		req.Dir = wd
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", s.sock)
	if err != nil {
		return Result{}, fmt.Errorf("reach the baremetal CLI's fork server: %w", err)
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
	defer stop()
	line, _ := json.Marshal(req)
	if _, err := conn.Write(append(line, '\n')); err != nil {
		return Result{}, fmt.Errorf("send to the baremetal CLI's fork server: %w", err)
	}
	var a answer
	if err := json.NewDecoder(conn).Decode(&a); err != nil {
		if ctx.Err() != nil {
			return Result{}, ctx.Err()
		}
		return Result{}, fmt.Errorf("the baremetal CLI's fork server gave no answer: %w", err)
	}
	return Result{Stdout: a.Stdout, Stderr: a.Stderr, Exit: a.Exit}, nil
}

var (
	sharedOnce sync.Once
	shared     *Server
	sharedErr  error
)

// Shared is one fork server for the whole test process, started at the
// first call in a directory of its own under the system's temporary
// directory, running here (not in a namespace). It ends with the process.
func Shared() (*Server, error) {
	sharedOnce.Do(func() {
		dir, err := os.MkdirTemp("", "ironflow-baremetal-cli-")
		if err != nil {
			sharedErr = err
			return
		}
		shared, sharedErr = Start(dir, nil)
	})
	if sharedErr != nil {
		return nil, sharedErr
	}
	return shared, nil
}
