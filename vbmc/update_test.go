package vbmc

import (
	"context"
	"net/http/httptest"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ironflow/ironflow/bmc"
)

// firmwareClient is ironflow's redfish driver on the vbmc's VM vm.
func firmwareClient(t *testing.T, url, vm string) bmc.Firmware {
	t.Helper()
	d, err := bmc.New("redfish", map[string]any{"redfish_address": url, "redfish_username": "admin",
		"redfish_password": "password", "redfish_system_id": vm, "redfish_connection_retry_interval": "10ms"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { d.Close() })
	return d.(bmc.Firmware)
}

func waitUpdate(t *testing.T, fw bmc.Firmware, task bmc.FirmwareTask) bmc.FirmwareTaskStatus {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		st, err := fw.FirmwareTaskStatus(context.Background(), task.URI)
		if err == nil && st.Done {
			return st
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("task %s did not end", task.URI)
	return bmc.FirmwareTaskStatus{}
}

func versionOf(t *testing.T, fw bmc.Firmware, comp string) string {
	t.Helper()
	comps, err := fw.FirmwareComponents(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range comps {
		if c.Component == comp {
			return c.Version
		}
	}
	return ""
}

// The UpdateService, driven by ironflow's redfish driver with no VM
// running: SimpleUpdate targets the VM's own inventory member (two VMs
// share the service), the task runs update_seconds and reports its
// progress, the version changes at the end and outlives the server; an
// invalid image fails the task with a message; a BMC update leaves the
// service answering 503 for bmc_reset_seconds.
func TestUpdateServiceRunsTasksThatChangeTheVersion(t *testing.T) {
	cfg := newTestConfigWith(t, func(top, vm map[string]any) {
		top["update_seconds"] = 0.5
		top["bmc_reset_seconds"] = 1
		vm1 := map[string]any{"name": "vm1", "mac": "52:54:00:00:00:1f", "disk": vm["disk"], "memory_mb": 256, "cpus": 1, "firmware": "bios", "netdev": "none"}
		top["vms"] = []any{vm, vm1}
	})
	srv, err := NewServer(cfg, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(func() { hs.Close(); srv.Close() })
	fw, other := firmwareClient(t, hs.URL, "vm0"), firmwareClient(t, hs.URL, "vm1")
	ctx := context.Background()

	if v := versionOf(t, fw, "bios"); v != "ironflow-vbmc-bios-1.0" {
		t.Fatalf("initial bios version %q", v)
	}
	task, err := fw.StartFirmwareUpdate(ctx, bmc.FirmwareUpdate{Component: "bios", URL: "http://images.example/fw/bios-2.5.bin"})
	if err != nil || task.URI == "" || task.Done {
		t.Fatalf("start: %+v %v", task, err)
	}
	st, err := fw.FirmwareTaskStatus(ctx, task.URI)
	if err != nil || st.State != "Running" || st.Done {
		t.Fatalf("right after the start: %+v %v, want Running", st, err)
	}
	if st := waitUpdate(t, fw, task); st.Failed || st.State != "Completed" {
		t.Fatalf("bios task ended %+v", st)
	}
	if v := versionOf(t, fw, "bios"); v != "bios-2.5" {
		t.Fatalf("bios version after the update %q, want bios-2.5", v)
	}
	if v := versionOf(t, other, "bios"); v != "ironflow-vbmc-bios-1.0" {
		t.Fatalf("the other VM's bios changed to %q", v)
	}
	// The version is kept in the VM's state directory.
	srv2, _ := NewServer(cfg, testLogger(t))
	if v := srv2.machines["vm0"].FirmwareVersions()["BIOS"]; v != "bios-2.5" {
		t.Fatalf("version after a restart of the vbmc %q", v)
	}
	srv2.Close()

	bad, err := fw.StartFirmwareUpdate(ctx, bmc.FirmwareUpdate{Component: "bios", URL: "http://images.example/fw/bios-invalid.bin"})
	if err != nil {
		t.Fatal(err)
	}
	if st := waitUpdate(t, fw, bad); !st.Failed || st.State != "Exception" || len(st.Messages) != 1 || !strings.Contains(st.Messages[0], "failed signature verification") {
		t.Fatalf("invalid image: %+v", st)
	}
	if v := versionOf(t, fw, "bios"); v != "bios-2.5" {
		t.Fatalf("bios version after a failed update %q", v)
	}

	bt, err := fw.StartFirmwareUpdate(ctx, bmc.FirmwareUpdate{Component: "bmc", URL: "http://images.example/fw/vbmc-2.0.img"})
	if err != nil {
		t.Fatal(err)
	}
	if st := waitUpdate(t, fw, bt); st.Failed {
		t.Fatalf("bmc task %+v", st)
	}
	if _, err := fw.FirmwareTaskStatus(ctx, bt.URI); !bmc.Retryable(err) || !strings.Contains(err.Error(), "resetting") {
		t.Fatalf("right after the BMC update: %v, want a retryable error (503 while it resets)", err)
	}
	time.Sleep(time.Second)
	if v := versionOf(t, fw, "bmc"); v != "vbmc-2.0" {
		t.Fatalf("bmc version %q", v)
	}
}

// A BIOS flashed while the VM runs waits for the host's reset: the task
// stays Running with the Base registry's ResetRequired message and the
// old version, and completes with the new one once the reset applied it.
func TestBIOSUpdateWaitsForTheHostReset(t *testing.T) {
	cfg := newTestConfigWith(t, func(top, vm map[string]any) { top["update_seconds"] = 0.1 })
	srv, err := NewServer(cfg, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(func() { hs.Close(); srv.Close() })
	m := srv.machines["vm0"]
	// A process whose command line names the VM's QMP socket is its QEMU
	// for the vbmc (Machine.pid).
	fake := exec.Command("sh", "-c", "sleep 60; true", m.qmpSocket())
	if err := fake.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = fake.Process.Kill(); _ = fake.Wait() })
	if err := os.MkdirAll(m.dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(m.pidFile(), []byte(strconv.Itoa(fake.Process.Pid)), 0o644); err != nil {
		t.Fatal(err)
	}
	if m.pid() == 0 {
		t.Fatal("the fake QEMU is not seen as running")
	}
	fw := firmwareClient(t, hs.URL, "vm0")
	ctx := context.Background()
	task, err := fw.StartFirmwareUpdate(ctx, bmc.FirmwareUpdate{Component: bmc.ComponentBIOS, URL: "http://images.example/bios-4.0.bin"})
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	st, err := fw.FirmwareTaskStatus(ctx, task.URI)
	if err != nil || st.Done || !st.ResetRequired || st.State != "Running" || !strings.Contains(strings.Join(st.Messages, " "), "a component reset is required") {
		t.Fatalf("flashed while running: %+v %v", st, err)
	}
	if v := versionOf(t, fw, bmc.ComponentBIOS); v != "ironflow-vbmc-bios-1.0" {
		t.Fatalf("version before the reset: %s", v)
	}
	if err := m.applyPendingFirmware(); err != nil { // what start and ForceRestart do
		t.Fatal(err)
	}
	st = waitUpdate(t, fw, task)
	if st.Failed || st.ResetRequired || versionOf(t, fw, bmc.ComponentBIOS) != "bios-4.0" {
		t.Fatalf("after the reset: %+v, version %s", st, versionOf(t, fw, bmc.ComponentBIOS))
	}
}
