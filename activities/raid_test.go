package activities_test

import (
	"context"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ironflow/ironflow/activities"
	"github.com/ironflow/ironflow/hardware"
	"github.com/ironflow/ironflow/internal/testkit/storetest"
	"github.com/ironflow/ironflow/provision"
	"github.com/ironflow/ironflow/store"
	"github.com/ironflow/ironflow/vbmc"
	"github.com/ironflow/ironflow/workflows"
)

// TestRedfishRAIDRootVolumeBecomesTheRootDevice: create_configuration on
// ironflow's virtual BMC records the root volume as Ironic's
// update_raid_info does: its world wide name as properties.root_device,
// its size as local_gb, its level in the capabilities (the others kept).
func TestRedfishRAIDRootVolumeBecomesTheRootDevice(t *testing.T) {
	dir := t.TempDir()
	extra := filepath.Join(dir, "vm0-d1.raw")
	disk := filepath.Join(dir, "vm0.raw")
	for p, size := range map[string]int64{extra: 2 << 30, disk: 3 << 30} {
		// Sparse: the controller reads only their sizes.
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(p, size); err != nil {
			t.Fatal(err)
		}
	}
	cfg := vbmc.Config{StateDir: filepath.Join(dir, "state"), Username: "admin", Password: "password",
		VMs: []vbmc.VM{{Name: "vm0", MAC: "52:54:00:dd:01:9c", Disk: disk, Netdev: "none", Drives: []string{extra}}}}
	srv, err := vbmc.NewServer(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(func() { hs.Close(); srv.Close() })

	st := storetest.New(t)
	ctx := context.Background()
	a := activities.New(st, activities.Config{Conductor: "c1"}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	n := &store.Node{Driver: "redfish", ProvisionState: provision.Manageable,
		Properties:       map[string]any{"capabilities": "boot_mode:uefi,raid_level:0", "local_gb": 40},
		DriverInfo:       map[string]any{"redfish_address": hs.URL, "redfish_system_id": "vm0", "redfish_username": "admin", "redfish_password": "password"},
		TargetRAIDConfig: map[string]any{"logical_disks": []any{map[string]any{"raid_level": "1", "size_gb": "MAX", "is_root_volume": true, "volume_name": "root"}}}}
	if err := st.CreateNode(ctx, n); err != nil {
		t.Fatal(err)
	}
	node := workflows.NodeInfo{UUID: n.UUID, Driver: "redfish", RAIDInterface: hardware.Redfish}
	if err := a.RunInterfaceStep(ctx, workflows.InterfaceStepInput{Node: node, Kind: provision.StepKindClean,
		Step: provision.Step{StepID: provision.StepID{Interface: "raid", Step: "create_configuration"}}}); err != nil {
		t.Fatal(err)
	}
	got := mustNode(t, st, n.UUID)
	hint, _ := got.Properties["root_device"].(map[string]any)
	wwn, _ := hint["wwn"].(string)
	if len(wwn) != 18 || !strings.HasPrefix(wwn, "0x5") {
		t.Fatalf("root_device %v, want the volume's NAA name", got.Properties["root_device"])
	}
	if got.Properties["capabilities"] != "boot_mode:uefi,raid_level:1" || got.Properties["local_gb"] != float64(2) {
		t.Fatalf("properties %v", got.Properties)
	}
	ld := got.RAIDConfig["logical_disks"].([]any)[0].(map[string]any)
	if h, _ := ld["root_device_hint"].(map[string]any); h["wwn"] != wwn || ld["size_gb"] != float64(2) {
		t.Fatalf("raid_config logical disk %v", ld)
	}
}
