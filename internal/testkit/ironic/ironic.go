// Package ironic starts Debian's Ironic (python3-ironic, 21.4, API 1.82)
// as an all-in-one process on loopback: the baseline the benchmark
// measures ironflow against, and the oracle the differential tests
// (tests/ironic_oracle_test.go) ask what Ironic answers. Tooling only: no
// product package imports it (internal/tooling_test.go).
package ironic

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/ironflow/ironflow/embedded"
	"github.com/ironflow/ironflow/internal/testkit/devstack"
)

// Debian's Ironic loads only under Debian's own interpreter.
const (
	pythonBin = "/usr/bin/python3"
	// Probe is a file of Package: its all-in-one entry point.
	Probe = "/usr/lib/python3/dist-packages/ironic/cmd/singleprocess.py"
	// Package is Debian's package of Ironic; the test set of
	// scripts/install-deps.sh installs it.
	Package      = "python3-ironic"
	readyTimeout = 2 * time.Minute
	stopGrace    = 10 * time.Second
)

// ErrNotInstalled says how to get Ironic when it is missing.
var ErrNotInstalled = errors.New("Debian's Ironic (python3-ironic) is not installed: run 'scripts/install-deps.sh test' as root (or apt-get install python3-ironic)")

// config is Ironic's all-in-one: no authentication, no RPC bus (API and
// conductor in one process), SQLite in the work directory, loopback only.
// Three hardware types are enabled, as ironflow has them: fake-hardware
// (whose defaults are its fake interfaces, so that a node created without
// interfaces works without a BMC), and ipmi and redfish with interfaces
// that load without a BMC (one is only reached when an operation runs).
// No interface is given a default: each type takes the first of its own
// that is enabled, as Ironic does. The PXE boot interfaces load only once
// their directories exist ({dir}/httpboot, {dir}/tftpboot); nothing is
// served from them.
const config = `[DEFAULT]
auth_strategy = noauth
rpc_transport = none
host = ironflow-oracle-ironic
enabled_hardware_types = fake-hardware,ipmi,redfish
enabled_bios_interfaces = fake,no-bios,redfish
enabled_boot_interfaces = fake,ipxe,pxe,redfish-virtual-media
enabled_console_interfaces = fake,no-console
enabled_deploy_interfaces = fake,direct,ramdisk
enabled_inspect_interfaces = fake,no-inspect,redfish
enabled_management_interfaces = fake,ipmitool,redfish
enabled_network_interfaces = noop,flat
enabled_power_interfaces = fake,ipmitool,redfish
enabled_raid_interfaces = fake,no-raid,agent
enabled_rescue_interfaces = fake,no-rescue
enabled_storage_interfaces = noop
enabled_vendor_interfaces = fake,no-vendor,ipmitool,redfish
default_network_interface = noop
minimum_memory_warning_only = true
use_stderr = true
debug = false
[api]
host_ip = 127.0.0.1
port = {port}
[conductor]
automated_clean = false
[database]
connection = sqlite:///{dir}/ironic.db
[deploy]
http_root = {dir}/httpboot
http_url = http://127.0.0.1:1/
[dhcp]
dhcp_provider = none
[oslo_concurrency]
lock_path = {dir}/lock
[pxe]
tftp_root = {dir}/tftpboot
tftp_master_path = {dir}/tftpboot/master
`

// Server is a running Ironic all-in-one (ironic.cmd.singleprocess).
type Server struct {
	// Conf is its configuration file (for Python run against its
	// database, see Python), URL its API's root.
	Dir, Conf, URL string
	proc           *embedded.Process
}

// Installed reports whether Debian's Ironic is on the machine.
func Installed() bool {
	_, err := os.Stat(Probe)
	return err == nil
}

// Python runs code under Debian's interpreter with args as sys.argv[1:].
func Python(ctx context.Context, code string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, pythonBin, append([]string{"-c", code}, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return cmd
}

// Start writes the config, creates the SQLite schema with Ironic's dbsync
// and starts the all-in-one in dir, waiting until its API answers (at most
// two minutes). The process is killed when ctx is done.
func Start(ctx context.Context, dir string, log *slog.Logger) (*Server, error) {
	if !Installed() {
		return nil, ErrNotInstalled
	}
	for _, sub := range []string{"lock", "httpboot", "tftpboot/master"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
			return nil, fmt.Errorf("create Ironic's directory: %w", err)
		}
	}
	port, err := embedded.FreePort("127.0.0.1")
	if err != nil {
		return nil, err
	}
	s := &Server{Dir: dir, Conf: filepath.Join(dir, "ironic.conf"), URL: fmt.Sprintf("http://127.0.0.1:%d", port)}
	conf := strings.NewReplacer("{port}", fmt.Sprint(port), "{dir}", dir).Replace(config)
	if err := os.WriteFile(s.Conf, []byte(conf), 0o644); err != nil {
		return nil, fmt.Errorf("write Ironic's config: %w", err)
	}
	// ironic-dbsync's module has no __main__: call its main as the
	// packaged console script does.
	sync := Python(ctx, "import sys; from ironic.cmd.dbsync import main; sys.argv[0] = 'ironic-dbsync'; sys.exit(main())",
		"--config-file", s.Conf, "create_schema")
	if out, err := sync.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("ironic-dbsync create_schema: %w\n%s", err, Tail(string(out), 3000))
	}
	cmd := Python(ctx, "import sys; from ironic.cmd.singleprocess import main; sys.argv[0] = 'ironic'; sys.exit(main())",
		"--config-file", s.Conf)
	if s.proc, err = embedded.StartProcess("ironic", filepath.Join(dir, "ironic.log"), cmd); err != nil {
		return nil, fmt.Errorf("start Ironic: %w", err)
	}
	rctx, cancel := context.WithTimeout(ctx, readyTimeout)
	defer cancel()
	if err := devstack.WaitReady(rctx, probe, s.URL+"/v1/nodes", s.proc); err != nil {
		s.Stop()
		return nil, fmt.Errorf("Ironic: %w", err)
	}
	log.Info("Ironic up", "url", s.URL, "pid", s.proc.Pid(), "dir", dir)
	return s, nil
}

// probe is ready once Ironic lists nodes (the conductor has registered
// its drivers by then).
func probe(ctx context.Context, url string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return nil
}

// Pid is the all-in-one's process ID (0 once stopped).
func (s *Server) Pid() int {
	if s.proc == nil {
		return 0
	}
	return s.proc.Pid()
}

// Log is the end of Ironic's log, for a failure message.
func (s *Server) Log(n int64) string {
	if s.proc == nil {
		return ""
	}
	return s.proc.Tail(n)
}

// Stop ends the process (SIGTERM, then SIGKILL after a grace period).
func (s *Server) Stop() {
	if s.proc != nil {
		s.proc.Stop(stopGrace)
	}
}

// Tail is the last n bytes of s, trimmed.
func Tail(s string, n int) string {
	if len(s) > n {
		s = s[len(s)-n:]
	}
	return strings.TrimSpace(s)
}
