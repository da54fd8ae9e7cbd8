package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/ironflow/ironflow/embedded"
	"github.com/ironflow/ironflow/internal/testkit/devstack"
)

// Debian's Ironic (python3-ironic) is the baseline of the ironic part. Its
// modules load only under Debian's own interpreter.
const (
	ironicPython = "/usr/bin/python3"
	// ironicProbe is a file of the package: its all-in-one entry point.
	ironicProbe        = "/usr/lib/python3/dist-packages/ironic/cmd/singleprocess.py"
	ironicReadyTimeout = 2 * time.Minute
	ironicStopGrace    = 10 * time.Second
)

// errNoIronic says how to get the baseline when it is missing.
var errNoIronic = errors.New("Debian's Ironic (python3-ironic) is not installed: run 'scripts/install-deps.sh bench' as root (or apt-get install python3-ironic), or leave the ironic part out (-parts)")

// ironicConfig is Ironic's all-in-one on fake hardware: every interface of
// fake-hardware is a fake one, no authentication, no RPC bus (API and
// conductor in one process), SQLite in the work directory, loopback only.
const ironicConfig = `[DEFAULT]
auth_strategy = noauth
rpc_transport = none
host = ironflow-bench-ironic
enabled_hardware_types = fake-hardware
enabled_bios_interfaces = fake,no-bios
enabled_boot_interfaces = fake
enabled_console_interfaces = fake,no-console
enabled_deploy_interfaces = fake
enabled_inspect_interfaces = fake,no-inspect
enabled_management_interfaces = fake
enabled_network_interfaces = noop
enabled_power_interfaces = fake
enabled_raid_interfaces = fake,no-raid
enabled_rescue_interfaces = fake,no-rescue
enabled_storage_interfaces = noop
enabled_vendor_interfaces = fake,no-vendor
default_network_interface = noop
default_deploy_interface = fake
minimum_memory_warning_only = true
use_stderr = true
debug = false
[api]
host_ip = 127.0.0.1
port = %d
[conductor]
automated_clean = false
[database]
connection = sqlite:///%s
[dhcp]
dhcp_provider = none
[oslo_concurrency]
lock_path = %s
`

// ironicSeedScript inserts nodes through Ironic's own database API (setup
// of the list and show measures, as seedNodes is ironflow's): the fields
// match seedNodes'.
const ironicSeedScript = `import sys, uuid
conf, n, base = sys.argv[1], int(sys.argv[2]), sys.argv[3]
from ironic.common import service as ironic_service
ironic_service.prepare_service("ironic-bench-seed", ["seed", "--config-file", conf])
from ironic import objects
from ironic.db import api as dbapi
objects.register_all()
db = dbapi.get_instance()
states = ["enroll", "manageable", "available", "active"]
for i in range(n):
    db.create_node({
        "uuid": str(uuid.uuid4()), "name": "bench-fleet-%s-%d" % (base, i), "driver": "fake-hardware",
        "version": objects.Node.VERSION, "provision_state": states[i % 4], "power_state": "power off", "conductor_group": "rack%d" % (i % 8),
        "resource_class": "baremetal",
        "driver_info": {"redfish_address": "https://10.0.%d.%d" % (i // 250 % 250, i % 250), "redfish_username": "admin",
                        "redfish_password": "secret", "redfish_system_id": "/redfish/v1/Systems/%d" % i},
        "properties": {"cpus": 64, "memory_mb": 262144, "local_gb": 960, "cpu_arch": "x86_64"},
        "instance_info": {"image_source": "http://images.example/ubuntu.raw", "root_gb": 100},
        "boot_interface": "fake", "console_interface": "no-console", "deploy_interface": "fake",
        "inspect_interface": "no-inspect", "management_interface": "fake", "network_interface": "noop",
        "power_interface": "fake", "raid_interface": "no-raid", "rescue_interface": "no-rescue",
        "storage_interface": "noop", "vendor_interface": "no-vendor", "bios_interface": "no-bios",
    })
`

// ironicServer is a running Ironic all-in-one (ironic.cmd.singleprocess).
type ironicServer struct {
	dir, conf, URL string
	proc           *embedded.Process
}

func ironicInstalled() bool {
	_, err := os.Stat(ironicProbe)
	return err == nil
}

// python runs code under Debian's interpreter with args as sys.argv[1:].
func ironicPythonCmd(ctx context.Context, code string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, ironicPython, append([]string{"-c", code}, args...)...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	return cmd
}

// startIronic writes the config, creates the SQLite schema with Ironic's
// dbsync and starts the all-in-one, waiting until its API answers.
func startIronic(ctx context.Context, dir string, log *slog.Logger) (*ironicServer, error) {
	if !ironicInstalled() {
		return nil, errNoIronic
	}
	if err := os.MkdirAll(filepath.Join(dir, "lock"), 0o755); err != nil {
		return nil, fmt.Errorf("create Ironic's directory: %w", err)
	}
	port, err := embedded.FreePort("127.0.0.1")
	if err != nil {
		return nil, err
	}
	s := &ironicServer{dir: dir, conf: filepath.Join(dir, "ironic.conf"), URL: fmt.Sprintf("http://127.0.0.1:%d", port)}
	conf := fmt.Sprintf(ironicConfig, port, filepath.Join(dir, "ironic.db"), filepath.Join(dir, "lock"))
	if err := os.WriteFile(s.conf, []byte(conf), 0o644); err != nil {
		return nil, fmt.Errorf("write Ironic's config: %w", err)
	}
	// ironic-dbsync's module has no __main__: call its main as the
	// packaged console script does.
	sync := ironicPythonCmd(ctx, "import sys; from ironic.cmd.dbsync import main; sys.argv[0] = 'ironic-dbsync'; sys.exit(main())",
		"--config-file", s.conf, "create_schema")
	if out, err := sync.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("ironic-dbsync create_schema: %w\n%s", err, tailString(string(out), 3000))
	}
	cmd := ironicPythonCmd(ctx, "import sys; from ironic.cmd.singleprocess import main; sys.argv[0] = 'ironic'; sys.exit(main())",
		"--config-file", s.conf)
	if s.proc, err = embedded.StartProcess("ironic", filepath.Join(dir, "ironic.log"), cmd); err != nil {
		return nil, fmt.Errorf("start Ironic: %w", err)
	}
	rctx, cancel := context.WithTimeout(ctx, ironicReadyTimeout)
	defer cancel()
	if err := devstack.WaitReady(rctx, func(ctx context.Context, url string) error {
		_, err := doJSON(ctx, newHTTPClient(1), "GET", url, nil, nil)
		return err
	}, s.URL+"/v1/nodes", s.proc); err != nil {
		s.stop()
		return nil, fmt.Errorf("Ironic: %w", err)
	}
	log.Info("Ironic up", "url", s.URL, "pid", s.proc.Pid(), "dir", dir)
	return s, nil
}

// seed adds n nodes through Ironic's database API (setup, not measured).
func (s *ironicServer) seed(ctx context.Context, n int) error {
	if n <= 0 {
		return nil
	}
	base := fmt.Sprint(time.Now().UnixNano() % 1_000_000)
	out, err := ironicPythonCmd(ctx, ironicSeedScript, s.conf, fmt.Sprint(n), base).CombinedOutput()
	if err != nil {
		return fmt.Errorf("seed Ironic's database: %w\n%s", err, tailString(string(out), 3000))
	}
	return nil
}

func (s *ironicServer) pid() int {
	if s.proc == nil {
		return 0
	}
	return s.proc.Pid()
}

func (s *ironicServer) stop() {
	if s.proc != nil {
		s.proc.Stop(ironicStopGrace)
	}
}

func tailString(s string, n int) string {
	if len(s) > n {
		s = s[len(s)-n:]
	}
	return strings.TrimSpace(s)
}
