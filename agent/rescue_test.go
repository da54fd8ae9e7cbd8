package agent

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ironflow/ironflow/shadow"
)

// TestFinalizeRescueSetsTheRescueUserAndStopsTheAgent: finalize_rescue with
// Ironic's hashed password writes the rescue user's shadow entry with that
// hash, answers SUCCEEDED, then the agent stops heartbeating and serving
// its API, and no disk was written.
func TestFinalizeRescueSetsTheRescueUserAndStopsTheAgent(t *testing.T) {
	api := newFakeAPI(t)
	root := t.TempDir()
	hw := &rescueHardware{fileHardware: newFileHardware(t, 8<<20), lh: &LinuxHardware{AccountRoot: root}}
	before, _ := os.ReadFile(hw.path(0))
	a, c := startAgent(t, api, hw, nil)
	api.waitHeartbeat(t)
	hash, err := shadow.Hash("tenant's password")
	if err != nil {
		t.Fatal(err)
	}
	if err := c.FinalizeRescue(context.Background(), hash); err != nil {
		t.Fatalf("finalize_rescue: %v", err)
	}
	line, ok := shadow.Entry(root, "shadow", "rescue")
	if !ok || strings.Split(line, ":")[1] != hash || !shadow.Verify("tenant's password", strings.Split(line, ":")[1]) {
		t.Fatalf("rescue's shadow entry %q does not hold the hash sent", line)
	}
	if l, _ := shadow.Entry(root, "passwd", "rescue"); !strings.HasPrefix(l, "rescue:x:1000:1000:") {
		t.Fatalf("rescue's passwd entry: %q", l)
	}
	select {
	case <-a.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the agent still runs after finalize_rescue")
	}
	if !a.Rescued() {
		t.Fatal("Rescued() is false")
	}
	beats := a.Heartbeats()
	time.Sleep(300 * time.Millisecond)
	if a.Heartbeats() != beats {
		t.Fatal("the agent heartbeats after finalize_rescue")
	}
	if _, err := c.Status(context.Background()); err == nil {
		t.Fatal("the command API still answers after finalize_rescue")
	}
	after, _ := os.ReadFile(hw.path(0))
	if string(before) != string(after) {
		t.Fatal("finalize_rescue wrote to the disk")
	}
}

func TestFinalizeRescueRefusesWithoutAPlaceForTheUser(t *testing.T) {
	api := newFakeAPI(t)
	_, c := startAgent(t, api, newFileHardware(t, 8<<20), nil)
	hash, _ := shadow.Hash("pw")
	if err := c.FinalizeRescue(context.Background(), hash); err == nil || !strings.Contains(err.Error(), "cannot set up a rescue user") {
		t.Fatalf("finalize_rescue on hardware without accounts: %v", err)
	}
	root := t.TempDir()
	h := &LinuxHardware{}
	if err := h.SetRescueUser(context.Background(), hash); err == nil {
		t.Fatal("LinuxHardware without AccountRoot wrote an account")
	}
	if _, err := os.Stat(filepath.Join(root, "etc", "shadow")); err == nil {
		t.Fatal("shadow written")
	}
}

// rescueHardware is file disks with LinuxHardware's accounts.
type rescueHardware struct {
	*fileHardware
	lh *LinuxHardware
}

func (h *rescueHardware) SetRescueUser(ctx context.Context, hash string) error {
	return h.lh.SetRescueUser(ctx, hash)
}
