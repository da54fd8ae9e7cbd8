package vbmc

import (
	"context"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"reflect"
	"testing"

	agentclient "github.com/ironflow/ironflow/agent/client"
	"github.com/ironflow/ironflow/bmc"
)

// TestInspectThroughRedfish runs ironflow's redfish driver's out-of-band
// inspection against the vbmc's Redfish service. The resources come from the
// VM's configuration and its disk file, so QEMU is never started (the
// config's cleanup checks that no QEMU process is left).
func TestInspectThroughRedfish(t *testing.T) {
	cases := []struct {
		name     string
		mutate   func(t *testing.T, dir string, vm map[string]any)
		wantDisk int64 // 0: no disk listed
	}{
		{name: "raw-disk-file", wantDisk: 16 << 20},
		{
			// A qcow2 file is far smaller than the disk the guest sees.
			name: "qcow2-virtual-size", wantDisk: 64 << 20,
			mutate: func(t *testing.T, dir string, vm map[string]any) {
				requireTools(t, "qemu-img")
				disk := filepath.Join(dir, "vm0.qcow2")
				if out, err := exec.Command("qemu-img", "create", "-q", "-f", "qcow2", disk, "64M").CombinedOutput(); err != nil {
					t.Fatalf("qemu-img create: %v: %s", err, out)
				}
				vm["disk"], vm["cpus"], vm["memory_mb"] = disk, 2, 512
			},
		},
		{
			// Not created until the first power on: disk_size says how big.
			name: "disk-not-created-yet", wantDisk: 1 << 30,
			mutate: func(t *testing.T, dir string, vm map[string]any) {
				vm["disk"], vm["disk_size"] = filepath.Join(dir, "later.raw"), "1G"
			},
		},
		{
			name: "diskless",
			mutate: func(t *testing.T, dir string, vm map[string]any) {
				delete(vm, "disk")
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg := newTestConfigWith(t, func(top, vm map[string]any) {
				if tc.mutate != nil {
					tc.mutate(t, filepath.Dir(top["state_dir"].(string)), vm) // state_dir is <dir>/state
				}
			})
			srv, err := NewServer(cfg, testLogger(t))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { srv.Close() })
			ts := httptest.NewServer(srv)
			t.Cleanup(ts.Close)

			d, err := bmc.New("redfish", map[string]any{
				"redfish_address": ts.URL, "redfish_username": "admin", "redfish_password": "password",
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { d.Close() })
			in, ok := d.(bmc.Inspector)
			if !ok {
				t.Fatal("redfish driver does not implement bmc.Inspector")
			}
			got, err := in.Inspect(context.Background())
			if err != nil {
				t.Fatalf("Inspect: %v", err)
			}
			vm := cfg.VMs[0]
			want := agentclient.Inventory{
				CPU:          agentclient.CPU{Count: vm.CPUs, Architecture: "x86_64", ModelName: "QEMU Virtual CPU"},
				Memory:       agentclient.Memory{PhysicalMB: int64(vm.MemoryMB), Total: int64(vm.MemoryMB) << 20},
				Disks:        []agentclient.Disk{},
				Interfaces:   []agentclient.Interface{{Name: "nic0", MACAddress: "52:54:00:00:00:10"}},
				SystemVendor: agentclient.SystemVendor{Manufacturer: "QEMU", ProductName: "Standard PC (Q35 + ICH9, 2009)", SerialNumber: "vm0"},
				Boot:         agentclient.Boot{CurrentBootMode: "bios"},
			}
			if tc.wantDisk > 0 {
				want.Disks = []agentclient.Disk{{Name: "disk0", Size: tc.wantDisk, Model: "virtio-blk"}}
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("Inspect:\n got %+v\nwant %+v", got, want)
			}
			if m := srv.machines["vm0"]; m.pid() != 0 {
				t.Error("inspection started QEMU")
			}
		})
	}
}

func TestParseQEMUSize(t *testing.T) {
	for in, want := range map[string]int64{"1G": 1 << 30, "512M": 512 << 20, "64k": 64 << 10, "1.5G": 3 << 29, "4096": 4096, "2T": 2 << 40} {
		if got, err := parseQEMUSize(in); err != nil || got != want {
			t.Errorf("parseQEMUSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "G", "big", "-1G"} {
		if _, err := parseQEMUSize(bad); err == nil {
			t.Errorf("parseQEMUSize(%q) accepted", bad)
		}
	}
}
