package tests

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ironflow/ironflow/vbmc"
)

// startFirmwareBMC serves ironflow's vbmc for one VM that never starts
// (the UpdateService needs no QEMU), its update tasks taking
// updateSeconds.
func startFirmwareBMC(t *testing.T, vm string, updateSeconds float64, drives ...string) string {
	t.Helper()
	dir := t.TempDir()
	cfg := map[string]any{
		"state_dir": filepath.Join(dir, "state"), "username": "admin", "password": "password",
		"update_seconds": updateSeconds,
		"vms": []map[string]any{{"name": vm, "mac": "52:54:00:f1:a9:01", "disk": filepath.Join(dir, vm+".raw"),
			"disk_size": "16M", "memory_mb": 128, "firmware": "bios", "netdev": "none", "drives": drives}},
	}
	b, _ := json.Marshal(cfg)
	path := filepath.Join(dir, "vms.json")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	vc, err := vbmc.LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := vbmc.NewServer(vc, slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(func() { hs.Close(); srv.Close() })
	return hs.URL
}

// enrollFirmwareNode creates a redfish node with the redfish firmware
// interface on the vbmc and makes it manageable.
func enrollFirmwareNode(t *testing.T, name, bmcURL, vm string) string {
	t.Helper()
	var n node
	code, _ := callAt(t, lab.APIURL, "1.86", "POST", "/v1/nodes", map[string]any{
		"name": name, "driver": "redfish", "firmware_interface": "redfish",
		"driver_info": map[string]any{"redfish_address": bmcURL, "redfish_username": "admin", "redfish_password": "password",
			"redfish_system_id": vm, "firmware_update_poll_interval": 1},
	}, &n)
	if code != 201 {
		t.Fatalf("create node %s: %d", name, code)
	}
	if code, _ := call(t, "PUT", "/v1/nodes/"+n.UUID+"/states/provision", map[string]any{"target": "manage"}, nil); code != 202 {
		t.Fatalf("manage %s: %d", name, code)
	}
	waitState(t, n.UUID, "manageable", 60*time.Second)
	return n.UUID
}

type firmwareComponent struct {
	Component          string  `json:"component"`
	InitialVersion     string  `json:"initial_version"`
	CurrentVersion     string  `json:"current_version"`
	LastVersionFlashed *string `json:"last_version_flashed"`
}

func nodeFirmware(t *testing.T, uuid string) map[string]firmwareComponent {
	t.Helper()
	var out struct {
		Firmware []firmwareComponent `json:"firmware"`
	}
	if code, _ := callAt(t, lab.APIURL, "1.86", "GET", "/v1/nodes/"+uuid+"/firmware", nil, &out); code != 200 {
		t.Fatalf("GET firmware: %d", code)
	}
	m := map[string]firmwareComponent{}
	for _, c := range out.Firmware {
		m[c.Component] = c
	}
	return m
}

func firmwareClean(t *testing.T, uuid, image string) {
	t.Helper()
	code, _ := callAt(t, lab.APIURL, "1.86", "PUT", "/v1/nodes/"+uuid+"/states/provision", map[string]any{
		"target": "clean", "disable_ramdisk": true, "clean_steps": []map[string]any{{"interface": "firmware", "step": "update",
			"args": map[string]any{"settings": []map[string]any{{"component": "bios", "url": image}}}}}}, nil)
	if code != 202 {
		t.Fatalf("clean with firmware.update: %d", code)
	}
}

// TestFirmwareUpdateOutlivesAWorkerRestart: manual cleaning with the
// firmware interface's update step on the vbmc, whose task runs longer
// than the worker that started it lives: the worker is killed while the
// task runs, a new one takes the wait over, and the node ends manageable
// with the new BIOS version in GET /v1/nodes/{id}/firmware.
func TestFirmwareUpdateOutlivesAWorkerRestart(t *testing.T) {
	const vm = "fwnode0"
	bmcURL := startFirmwareBMC(t, vm, 12)
	uuid := enrollFirmwareNode(t, "firmware-restart-0", bmcURL, vm)

	firmwareClean(t, uuid, "http://images.example/firmware/bios-7.1.bin")
	// The update's start is the history entry's time, not when the test
	// sees it: under load a poll can see it seconds late.
	started := firmwareUpdateStarted(t, uuid, 60*time.Second)
	if fw := nodeFirmware(t, uuid)["bios"]; fw.InitialVersion != "ironflow-vbmc-bios-1.0" || fw.CurrentVersion != fw.InitialVersion {
		t.Fatalf("firmware before the update ends: %+v", fw)
	}
	lab.KillWorker()
	restarted := false
	t.Cleanup(func() {
		if restarted {
			return
		}
		if err := lab.StartWorker(); err != nil {
			t.Errorf("restart the lab worker: %v", err)
		}
	})
	time.Sleep(4 * time.Second)
	if n := getNode(t, uuid); n.ProvisionState != "cleaning" {
		t.Fatalf("with the worker down: %s", n.ProvisionState)
	}
	if err := lab.StartWorker(); err != nil {
		t.Fatal(err)
	}
	restarted = true
	n := waitState(t, uuid, "manageable", 120*time.Second)
	took := nodeProvisionUpdatedAt(t, uuid).Sub(started)
	if took < 8*time.Second {
		t.Fatalf("cleaning ended %s after the update started: it did not wait for the 12s task", took)
	}
	t.Logf("cleaning ended %s after the update started", took)
	if !strings.Contains(mustCLI(t, "node", "history", "list", uuid, "-f", "json"), "Firmware update of bios") {
		t.Fatalf("baremetal node history list does not show the update")
	}
	if n.LastError != nil {
		t.Fatalf("last_error %q", *n.LastError)
	}
	fw := nodeFirmware(t, uuid)
	bios := fw["bios"]
	if bios.InitialVersion != "ironflow-vbmc-bios-1.0" || bios.CurrentVersion != "bios-7.1" || bios.LastVersionFlashed == nil || *bios.LastVersionFlashed != "bios-7.1" {
		t.Fatalf("bios after the update: %+v", bios)
	}
	if fw["bmc"].CurrentVersion != "1.0" {
		t.Fatalf("bmc after a bios update: %+v", fw["bmc"])
	}
}

// TestFirmwareUpdateFailedTaskFailsTheCleaning: an image the BMC refuses
// ends the task in Exception; the cleaning fails naming the step and the
// BMC's message, and the version is unchanged.
func TestFirmwareUpdateFailedTaskFailsTheCleaning(t *testing.T) {
	const vm = "fwnode1"
	bmcURL := startFirmwareBMC(t, vm, 1)
	uuid := enrollFirmwareNode(t, "firmware-fail-0", bmcURL, vm)
	firmwareClean(t, uuid, "http://images.example/firmware/bios-invalid.bin")
	n := waitState(t, uuid, "clean failed", 60*time.Second)
	msg := deref(n.LastError)
	for _, want := range []string{"Clean failed at step firmware.update", "ended Exception", "failed signature verification"} {
		if !strings.Contains(msg, want) {
			t.Fatalf("last_error %q lacks %q", msg, want)
		}
	}
	if fw := nodeFirmware(t, uuid)["bios"]; fw.CurrentVersion != "ironflow-vbmc-bios-1.0" {
		t.Fatalf("bios after a failed update: %+v", fw)
	}
	// The operator takes the node back, as from any clean failed.
	code, _ := callAt(t, lab.APIURL, "1.86", "PUT", "/v1/nodes/"+uuid+"/states/provision", map[string]any{"target": "manage"}, nil)
	if code != 202 {
		t.Fatalf("manage after clean failed: %d", code)
	}
	waitState(t, uuid, "manageable", 60*time.Second)
}

// firmwareUpdateStarted waits for the node's history entry of the bios
// update and returns the time the service recorded it.
func firmwareUpdateStarted(t *testing.T, uuid string, timeout time.Duration) time.Time {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		var hist struct {
			History []struct {
				CreatedAt string `json:"created_at"`
				Event     string `json:"event"`
			} `json:"history"`
		}
		if code, _ := callAt(t, lab.APIURL, "1.78", "GET", "/v1/nodes/"+uuid+"/history", nil, &hist); code != 200 {
			t.Fatalf("GET history: %d", code)
		}
		for _, e := range hist.History {
			if strings.Contains(e.Event, "Firmware update of bios") {
				at, err := time.Parse(time.RFC3339Nano, e.CreatedAt)
				if err != nil {
					t.Fatalf("history created_at %q: %v", e.CreatedAt, err)
				}
				return at
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("the update never started\nworker log:\n%s", workerLog())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// nodeProvisionUpdatedAt is the time the service recorded the node's last
// provision state change.
func nodeProvisionUpdatedAt(t *testing.T, uuid string) time.Time {
	t.Helper()
	var n struct {
		ProvisionUpdatedAt string `json:"provision_updated_at"`
	}
	if code, _ := call(t, "GET", "/v1/nodes/"+uuid, nil, &n); code != 200 {
		t.Fatalf("GET node: %d", code)
	}
	at, err := time.Parse(time.RFC3339Nano, n.ProvisionUpdatedAt)
	if err != nil {
		t.Fatalf("provision_updated_at %q: %v", n.ProvisionUpdatedAt, err)
	}
	return at
}
