package vbmc

import (
	"context"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ironflow/ironflow/bmc"
)

// Storage, driven by ironflow's redfish driver with no VM running: the
// VM's disk and its extra drives are the controller's drives; a RAID-1
// volume takes two of them, is recorded in the VM's state directory and
// outlives the server; a second RAID-1 lacks free drives; delete frees
// them.
func TestStorageVolumesCreateAndDelete(t *testing.T) {
	var extra string
	cfg := newTestConfigWith(t, func(top, vm map[string]any) {
		extra = filepath.Join(filepath.Dir(vm["disk"].(string)), "vm0-d1.raw")
		if err := os.WriteFile(extra, make([]byte, 8<<20), 0o644); err != nil {
			t.Fatal(err)
		}
		vm["drives"] = []any{extra}
	})
	srv, err := NewServer(cfg, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(func() { hs.Close(); srv.Close() })
	d, err := bmc.New("redfish", map[string]any{"redfish_address": hs.URL, "redfish_username": "admin", "redfish_password": "password", "redfish_system_id": "vm0"})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	r := d.(bmc.RAID)
	ctx := context.Background()
	v, err := r.CreateVolume(ctx, bmc.VolumeSpec{Name: "root", RAIDLevel: "1"})
	if err != nil {
		t.Fatal(err)
	}
	if v.RAIDType != "RAID1" || strings.Join(v.Drives, ",") != "Disk0,Disk1" || v.CapacityBytes != 8<<20 || v.Name != "root" {
		t.Fatalf("volume %+v, want RAID1 on Disk0 and Disk1 of the smaller drive's size", v)
	}
	if v.RootDeviceHint["wwn"] != "0x"+volumeWWN("vm0", "1") || len(volumeWWN("vm0", "1")) != 16 || volumeWWN("vm0", "1") == volumeWWN("vm1", "1") {
		t.Fatalf("root device hint %v of the volume named %s", v.RootDeviceHint, volumeWWN("vm0", "1"))
	}
	if _, err := r.CreateVolume(ctx, bmc.VolumeSpec{RAIDLevel: "1"}); err == nil || !strings.Contains(err.Error(), "0 free drives") {
		t.Fatalf("a second RAID-1: %v", err)
	}
	srv2, _ := NewServer(cfg, testLogger(t))
	if vols, _ := srv2.machines["vm0"].volumes(); len(vols) != 1 || vols[0].RAIDType != "RAID1" {
		t.Fatalf("volumes after a restart of the vbmc: %+v", vols)
	}
	srv2.Close()
	if err := r.DeleteVolume(ctx, v.URI); err != nil {
		t.Fatal(err)
	}
	if vols, err := r.Volumes(ctx); err != nil || len(vols) != 0 {
		t.Fatalf("after delete: %+v %v", vols, err)
	}
}

// A volume is one SCSI disk with the volume's WWN in the next QEMU, in
// place of its drives, and takes the disk's boot index when it holds the
// disk; without volumes the drives are attached as before.
func TestVolumesAreDisksOfTheNextQEMU(t *testing.T) {
	var extra string
	cfg := newTestConfigWith(t, func(top, vm map[string]any) {
		extra = filepath.Join(filepath.Dir(vm["disk"].(string)), "vm0-d1.raw")
		if err := os.WriteFile(extra, make([]byte, 8<<20), 0o644); err != nil {
			t.Fatal(err)
		}
		vm["drives"] = []any{extra}
	})
	srv, err := NewServer(cfg, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	m := srv.machines["vm0"]
	if err := os.MkdirAll(m.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	before := strings.Join(m.diskArgs(7), " ")
	if !strings.Contains(before, "virtio-blk-pci,id=disk0,drive=disk0drive,bootindex=7") || !strings.Contains(before, "virtio-blk-pci,id=disk1,drive=disk1drive") || strings.Contains(before, "scsi") {
		t.Fatalf("without volumes: %s", before)
	}
	if m.volumesChanged() {
		t.Fatal("no volume, yet a QEMU with the drives is said to need a restart")
	}
	if err := m.saveVolumes([]vmVolume{{ID: "1", RAIDType: "RAID1", CapacityBytes: 8 << 20, Drives: []string{"Disk0", "Disk1"}, WWN: volumeWWN("vm0", "1")}}); err != nil {
		t.Fatal(err)
	}
	if !m.volumesChanged() {
		t.Fatal("a QEMU started before the volume is not said to need a restart")
	}
	after := strings.Join(m.diskArgs(7), " ")
	if m.volumesChanged() {
		t.Fatal("a QEMU started with the volume is said to need a restart")
	}
	want := "scsi-hd,id=disk0,drive=disk0drive,bus=scsi0.0,wwn=0x" + volumeWWN("vm0", "1") + ",bootindex=7"
	if !strings.Contains(after, want) || strings.Contains(after, "virtio-blk") || !strings.Contains(after, m.volumeImage("1")) {
		t.Fatalf("with a RAID-1 over both drives: %s\nwant %s", after, want)
	}
	if st, err := os.Stat(m.volumeImage("1")); err != nil || st.Size() == 0 {
		t.Fatalf("the volume's image: %v", err)
	}
}
