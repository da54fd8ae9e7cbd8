package activities_test

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ironflow/ironflow/activities"
	"github.com/ironflow/ironflow/hardware"
	"github.com/ironflow/ironflow/internal/testkit/storetest"
	"github.com/ironflow/ironflow/provision"
	"github.com/ironflow/ironflow/store"
	"github.com/ironflow/ironflow/vbmc"
	"github.com/ironflow/ironflow/workflows"
)

// TestFirmwareActivitiesThroughTheVirtualBMC: the firmware update's
// activities on ironflow's virtual BMC: the start caches the versions
// before the update and returns the task with the node's wait bounds, the
// poll follows the task to Completed, the record reads the new version
// into the store (initial kept, last flashed set).
func TestFirmwareActivitiesThroughTheVirtualBMC(t *testing.T) {
	dir := t.TempDir()
	cfg := vbmc.Config{StateDir: filepath.Join(dir, "state"), Username: "admin", Password: "password", UpdateSeconds: 0.3,
		VMs: []vbmc.VM{{Name: "vm0", MAC: "52:54:00:dd:01:7f", Disk: filepath.Join(dir, "vm0.raw"), DiskSize: "1M", Netdev: "none"}}}
	srv, err := vbmc.NewServer(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(func() { hs.Close(); srv.Close() })

	st := storetest.New(t)
	ctx := context.Background()
	a := activities.New(st, activities.Config{Conductor: "c1"}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	n := &store.Node{Driver: "redfish", ProvisionState: provision.Manageable, DriverInfo: map[string]any{
		"redfish_address": hs.URL, "redfish_system_id": "vm0", "redfish_username": "admin", "redfish_password": "password",
		"firmware_update_timeout": 120, "firmware_update_poll_interval": 2,
	}}
	if err := st.CreateNode(ctx, n); err != nil {
		t.Fatal(err)
	}
	node := workflows.NodeInfo{UUID: n.UUID, Driver: "redfish", FirmwareInterface: hardware.Redfish}
	step := provision.Step{StepID: provision.StepFirmwareUpdate}
	ref, err := a.StartFirmwareUpdate(ctx, workflows.FirmwareUpdateInput{Node: node, Kind: provision.StepKindClean, Step: step,
		Setting: workflows.FirmwareSetting{Component: "bios", URL: "http://images.example/bios-3.1.bin"}})
	if err != nil {
		t.Fatal(err)
	}
	if ref.URI == "" || ref.Done || ref.Timeout != 2*time.Minute || ref.PollInterval != 2*time.Second {
		t.Fatalf("task ref %+v", ref)
	}
	before, _ := st.ListFirmwareComponents(ctx, n.UUID)
	if len(before) != 2 || before[0].CurrentVersion != "ironflow-vbmc-bios-1.0" {
		t.Fatalf("cached before the update: %+v", before)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		s, err := a.PollFirmwareTask(ctx, workflows.FirmwareTaskInput{Node: node, Component: "bios", URI: ref.URI})
		if err != nil || s.Unreachable != "" {
			t.Fatalf("poll: %+v %v", s, err)
		}
		if s.Done {
			if s.Failed || s.State != "Completed" {
				t.Fatalf("task ended %+v", s)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the task never ended")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err := a.RecordFirmware(ctx, workflows.FirmwareRecordInput{Node: node, Kind: provision.StepKindClean}); err != nil {
		t.Fatal(err)
	}
	after, _ := st.ListFirmwareComponents(ctx, n.UUID)
	bios := after[0]
	if bios.Component != "bios" || bios.InitialVersion != "ironflow-vbmc-bios-1.0" || bios.CurrentVersion != "bios-3.1" || bios.LastVersionFlashed == nil {
		t.Fatalf("after the update: %+v", bios)
	}
}

// TestFirmwareChecksumIsVerified: a component whose image does not hash to
// its checksum fails before the BMC is asked for anything, with Ironic's
// message; the right checksum starts the update.
func TestFirmwareChecksumIsVerified(t *testing.T) {
	dir := t.TempDir()
	cfg := vbmc.Config{StateDir: filepath.Join(dir, "state"), Username: "admin", Password: "password", UpdateSeconds: 0.3,
		VMs: []vbmc.VM{{Name: "vm0", MAC: "52:54:00:dd:01:8e", Disk: filepath.Join(dir, "vm0.raw"), DiskSize: "1M", Netdev: "none"}}}
	srv, err := vbmc.NewServer(cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	images := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("bios image 3.2")) }))
	t.Cleanup(func() { hs.Close(); srv.Close(); images.Close() })

	st := storetest.New(t)
	ctx := context.Background()
	a := activities.New(st, activities.Config{Conductor: "c1"}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	n := &store.Node{Driver: "redfish", ProvisionState: provision.Manageable, DriverInfo: map[string]any{
		"redfish_address": hs.URL, "redfish_system_id": "vm0", "redfish_username": "admin", "redfish_password": "password",
	}}
	if err := st.CreateNode(ctx, n); err != nil {
		t.Fatal(err)
	}
	node := workflows.NodeInfo{UUID: n.UUID, Driver: "redfish", FirmwareInterface: hardware.Redfish}
	step := provision.Step{StepID: provision.StepFirmwareUpdate}
	sum := sha1.Sum([]byte("bios image 3.2"))
	good := hex.EncodeToString(sum[:])
	bad := strings.Repeat("0", 40)
	_, err = a.StartFirmwareUpdate(ctx, workflows.FirmwareUpdateInput{Node: node, Kind: provision.StepKindClean, Step: step,
		Setting: workflows.FirmwareSetting{Component: "bios", URL: images.URL + "/bios-3.2.bin", Checksum: bad}})
	want := "checksums do not match. Expected: " + bad + ", calculated: " + good + "."
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("bad checksum: %v, want %q", err, want)
	}
	// The message names the component whose image failed.
	if !strings.HasPrefix(err.Error(), "firmware update of bios: For node "+n.UUID+" firmware file ") {
		t.Fatalf("bad checksum: %v does not name the component first", err)
	}
	if c, ok := mustNode(t, st, n.UUID).DriverInternalInfo["firmware_update_call"]; ok {
		t.Fatalf("the BMC was asked after a checksum mismatch: %v", c)
	}
	ref, err := a.StartFirmwareUpdate(ctx, workflows.FirmwareUpdateInput{Node: node, Kind: provision.StepKindClean, Step: step,
		Setting: workflows.FirmwareSetting{Component: "bios", URL: images.URL + "/bios-3.2.bin", Checksum: "sha1:" + strings.ToUpper(good)}})
	if err != nil || ref.URI == "" {
		t.Fatalf("good checksum: %+v %v", ref, err)
	}
}

func mustNode(t *testing.T, st *store.Store, id string) *store.Node {
	t.Helper()
	n, err := st.GetNode(context.Background(), id)
	if err != nil {
		t.Fatal(err)
	}
	return n
}
