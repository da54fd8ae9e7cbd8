// Package metal3 proves that ironflow serves Metal3's baremetal-operator:
// the bmo client (BMO v0.13.2's provisioner calls) drives hosts through
// every phase against ironflow's real stack (`ironflow dev`: PostgreSQL,
// the Temporal dev server, the API and the worker), and what it sent is
// compared with the golden list typed from BMO's source (golden_test.go).
// docs/metal3.md says how to point BMO at ironflow.
package metal3

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The API's user, as BMO's ironic-auth secret holds it: the stack runs
// http_basic, the authentication BMO deployments use. The hash is bcrypt
// (cost 4) of apiPassword, made once for this test.
const (
	apiUser     = "metal3"
	apiPassword = "metal3-ironic-password"
	apiHash     = "$2a$04$TJkce1zFecNituXhrgo8zudBnsPyeEVgKKhpe7MarCNvuyWzB.6MO"
)

// stack is the `ironflow dev` the package's tests share.
var stack struct {
	APIURL string
	dir    string
	cmd    *exec.Cmd
}

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(func() int {
		if testing.Short() {
			return m.Run()
		}
		dir, err := os.MkdirTemp("", "ironflow-metal3-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		// PostgreSQL runs as the postgres user when we are root.
		_ = os.Chmod(dir, 0o755)
		defer func() {
			if os.Getenv("IRONFLOW_KEEP_TEST_DIR") == "" {
				_ = os.RemoveAll(dir)
			}
		}()
		stop, err := startDev(dir)
		if stop != nil {
			defer stop()
		}
		if err != nil {
			fmt.Fprintf(os.Stderr, "metal3: ironflow dev did not start: %v\n", err)
			return 1
		}
		return m.Run()
	}())
}

// ironflowBinary is $IRONFLOW_BIN (make build), else a build of the
// repository's cmd/ironflow into dir.
func ironflowBinary(dir string) (string, error) {
	if b := os.Getenv("IRONFLOW_BIN"); b != "" {
		if _, err := os.Stat(b); err == nil {
			return b, nil
		}
	}
	out := filepath.Join(dir, "ironflow")
	cmd := exec.Command("go", "build", "-o", out, "./cmd/ironflow")
	cmd.Dir = "../.."
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build ironflow: %w: %s", err, b)
	}
	return out, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// startDev runs `ironflow dev` on loopback, every port free, the Web UI
// off, http_basic with the test's user, and waits until the API answers (as tests/e2e's startStack does,
// without the lab's network namespace: fake-hardware needs none).
func startDev(dir string) (func(), error) {
	bin, err := ironflowBinary(dir)
	if err != nil {
		return nil, err
	}
	ports := make([]int, 4)
	for i := range ports {
		if ports[i], err = freePort(); err != nil {
			return nil, err
		}
	}
	api := fmt.Sprintf("127.0.0.1:%d", ports[0])
	htpasswd := filepath.Join(dir, "htpasswd")
	if err := os.WriteFile(htpasswd, []byte(apiUser+":"+apiHash+"\n"), 0o600); err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "dev",
		"--data-dir", filepath.Join(dir, "data"),
		"--listen", api,
		"--agent-api-url", "http://"+api,
		"--boot-listen", fmt.Sprintf("127.0.0.1:%d", ports[1]),
		"--temporal-port", fmt.Sprint(ports[2]),
		"--temporal-ui-port", "-1",
		"--codec-listen", fmt.Sprintf("127.0.0.1:%d", ports[3]),
		"--metrics-listen", "", // no fixed metrics port on the host's loopback
		"--agent-insecure",
		"--auth-strategy", "http_basic", "--htpasswd-file", htpasswd,
	)
	log, err := os.Create(filepath.Join(dir, "ironflow-dev.log"))
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = log, log
	cmd.Env = append(os.Environ(), "IRONFLOW_LOG_LEVEL=debug")
	// SIGTERM if the test binary dies (-timeout): ironflow dev then stops
	// its PostgreSQL and Temporal, which a SIGKILL would leave running.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM, Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	stop := func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-exited
		}
		log.Close()
	}
	stack.APIURL, stack.dir, stack.cmd = "http://"+api, dir, cmd
	deadline := time.Now().Add(3 * time.Minute)
	for {
		resp, err := http.Get(stack.APIURL + "/v1/")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return stop, nil
			}
		}
		select {
		case err := <-exited:
			exited <- err
			return stop, fmt.Errorf("ironflow dev exited: %v\n%s", err, devLog())
		case <-time.After(250 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return stop, fmt.Errorf("the API did not answer in 3m\n%s", devLog())
		}
	}
}

// devLog is the end of ironflow dev's log, for failure messages.
func devLog() string {
	b, _ := os.ReadFile(filepath.Join(stack.dir, "ironflow-dev.log"))
	if len(b) > 6000 {
		b = b[len(b)-6000:]
	}
	return strings.TrimSpace(string(b))
}

// ctxFor is a context that ends at timeout or the test's deadline.
func ctxFor(t *testing.T, timeout time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	t.Cleanup(cancel)
	return ctx
}
