package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/ironflow/ironflow/internal/testkit/ironic"
)

// Debian's Ironic (python3-ironic) is the baseline of the ironic part,
// started by the test kit's ironic package.

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

// ironicServer is a running Ironic all-in-one with the bench's seeding.
type ironicServer struct{ *ironic.Server }

func ironicInstalled() bool { return ironic.Installed() }

// errNoIronic says how to get the baseline when it is missing.
var errNoIronic = fmt.Errorf("%w, or leave the ironic part out (-parts)", ironic.ErrNotInstalled)

func startIronic(ctx context.Context, dir string, log *slog.Logger) (*ironicServer, error) {
	s, err := ironic.Start(ctx, dir, log)
	if err != nil {
		return nil, err
	}
	return &ironicServer{s}, nil
}

// seed adds n nodes through Ironic's database API (setup, not measured).
func (s *ironicServer) seed(ctx context.Context, n int) error {
	if n <= 0 {
		return nil
	}
	base := fmt.Sprint(time.Now().UnixNano() % 1_000_000)
	out, err := ironic.Python(ctx, ironicSeedScript, s.Conf, fmt.Sprint(n), base).CombinedOutput()
	if err != nil {
		return fmt.Errorf("seed Ironic's database: %w\n%s", err, ironic.Tail(string(out), 3000))
	}
	return nil
}

func (s *ironicServer) pid() int { return s.Pid() }
func (s *ironicServer) stop()    { s.Stop() }
