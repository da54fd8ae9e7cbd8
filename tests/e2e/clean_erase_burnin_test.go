package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Manual cleaning and burn-in on a VM (docs/api.md, "Manual cleaning"):
// the agent's erase and burn-in steps on a real (emulated) machine,
// through the baremetal CLI and the API.

// eraseMarker is written into the VM's disk before its first boot, at
// each of markerOffsets: the first sector (what erasing the metadata
// covers) and deep inside the disk (what only a whole-disk erase covers).
const eraseMarker = "IRONFLOW-E2E-ERASE-ME"

var markerOffsets = []int64{0, 512 << 20, 3 << 30}

// cleanWait bounds a manual cleaning of the VM tests: the agent's boot
// under TCG and the steps' own time.
const cleanWait = 12 * time.Minute

// writeMarkedDisk creates the VM's sparse raw disk of vmDiskSize with
// eraseMarker at markerOffsets (the vbmc keeps a disk that exists).
func writeMarkedDisk(t *testing.T, path string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(5 << 30); err != nil { // vmDiskSize
		t.Fatal(err)
	}
	for _, off := range markerOffsets {
		if _, err := f.WriteAt(bytes.Repeat([]byte(eraseMarker), 200), off); err != nil {
			t.Fatal(err)
		}
	}
}

// markersLeft counts the markers still at markerOffsets.
func markersLeft(t *testing.T, path string) int {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	n := 0
	b := make([]byte, len(eraseMarker))
	for _, off := range markerOffsets {
		if _, err := f.ReadAt(b, off); err == nil && string(b) == eraseMarker {
			n++
		}
	}
	return n
}

// labAPI calls ironflow's API inside the lab at microversion version and
// decodes the answer into out (when not nil); it returns the status code.
func labAPI(t *testing.T, lab *Lab, version, method, path string, body, out any) int {
	t.Helper()
	var r io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		r = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, "http://"+apiListen+path, r)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-OpenStack-Ironic-API-Version", version)
	req.Header.Set("Content-Type", "application/json")
	resp, err := labHTTPClient(lab).Do(req)
	if err != nil {
		t.Fatalf("%s %s in the lab: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if out != nil && len(data) > 0 {
		if err := json.Unmarshal(data, out); err != nil {
			t.Fatalf("%s %s: decode %q: %v", method, path, data, err)
		}
	}
	return resp.StatusCode
}

// nodeState is what the VM tests poll of a node.
type nodeState struct {
	ProvisionState     string         `json:"provision_state"`
	LastError          *string        `json:"last_error"`
	CleanStep          map[string]any `json:"clean_step"`
	ServiceStep        map[string]any `json:"service_step"`
	DriverInternalInfo map[string]any `json:"driver_internal_info"`
}

// watchNode polls the node every two seconds until it reaches one of
// final (or the deadline passes), calling seen with each answer.
func watchNode(t *testing.T, lab *Lab, uuid string, timeout time.Duration, seen func(nodeState), final ...string) nodeState {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		var n nodeState
		if code := labAPI(t, lab, "1.87", http.MethodGet, "/v1/nodes/"+uuid, nil, &n); code != http.StatusOK {
			t.Fatalf("GET node %s: HTTP %d", uuid, code)
		}
		if seen != nil {
			seen(n)
		}
		for _, f := range final {
			if n.ProvisionState == f {
				return n
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("node %s still %s after %s (want %v)", uuid, n.ProvisionState, timeout, final)
		}
		time.Sleep(2 * time.Second)
	}
}

// historyEvents are the node's history events (GET /v1/nodes/{id}/history).
func historyEvents(t *testing.T, lab *Lab, uuid string) []string {
	t.Helper()
	var h struct {
		History []struct {
			Event string `json:"event"`
		} `json:"history"`
	}
	if code := labAPI(t, lab, "1.87", http.MethodGet, "/v1/nodes/"+uuid+"/history", nil, &h); code != http.StatusOK {
		t.Fatalf("GET history of %s: HTTP %d", uuid, code)
	}
	out := make([]string, 0, len(h.History))
	for _, e := range h.History {
		out = append(out, e.Event)
	}
	return out
}

// stepResult finds the last event that ended step name and decodes the
// result it quotes.
func stepResult(events []string, name string) (map[string]any, bool) {
	prefix := "Step " + name + " finished: "
	for i := len(events) - 1; i >= 0; i-- {
		if rest, ok := strings.CutPrefix(events[i], prefix); ok {
			var m map[string]any
			if json.Unmarshal([]byte(rest), &m) == nil {
				return m, true
			}
		}
	}
	return nil, false
}

// progressOf is the node's running step progress (clean_step_progress or
// service_step_progress), nil when none is kept.
func progressOf(n nodeState, kind string) map[string]any {
	p, _ := n.DriverInternalInfo[kind+"_step_progress"].(map[string]any)
	return p
}

// TestManualCleaningBurninAndErase is one manual cleaning of a SeaBIOS VM
// behind ipmi_sim whose disk holds markers: burnin_memory (30 s, a small
// vm_bytes) and burnin_disk (30 s), then erase_devices_express and
// erase_devices. While the burn-ins run the node shows their progress
// (driver_internal_info clean_step_progress); each burn-in's result is in
// the node's history; the node ends manageable and, once the VM is off,
// no marker is left on its disk and the disk reads as zeros.
func TestManualCleaningBurninAndErase(t *testing.T) {
	RequireQEMU(t)
	lab := NewLab(t)
	s := startStack(t, lab)
	vm := lab.AddVM("node-cl", "52:54:00:e2:18:01", FirmwareBIOS, filepath.Join(lab.Dir, "vm-node-cl", "disk.raw"))
	writeMarkedDisk(t, vm.Disk)
	if n := markersLeft(t, vm.Disk); n != len(markerOffsets) {
		t.Fatalf("wrote %d markers, read back %d", len(markerOffsets), n)
	}
	password := newBMCPassword()
	startIPMISim(t, s, agentVM(vm), password)
	uuid := createIPMINode(t, s, vm, "e2e-cl", password, "--deploy-interface", "direct", "--no-automated-clean")
	defer printNodeHistory(t, s, uuid)
	s.mustCLI(t, "node", "manage", uuid, "--wait", seconds(manageWait))

	steps := `[{"interface":"deploy","step":"burnin_memory","args":{"timeout":30,"vm_bytes":"64M"}},` +
		`{"interface":"deploy","step":"burnin_disk","args":{"runtime":30}},` +
		`{"interface":"deploy","step":"erase_devices_express"},` +
		`{"interface":"deploy","step":"erase_devices","args":{"shred_random_overwrite_iterations":0,"shred_final_overwrite_with_zeros":true}}]`
	begin := time.Now()
	s.mustCLI(t, "node", "clean", uuid, "--clean-steps", steps)
	progress := map[string]float64{} // highest fraction seen per step
	var stepStarted = map[string]time.Time{}
	n := watchNode(t, lab, uuid, cleanWait, func(n nodeState) {
		if name, _ := n.CleanStep["step"].(string); name != "" {
			if _, ok := stepStarted[name]; !ok {
				stepStarted[name] = time.Now()
				t.Logf("%.0fs: step %s running", time.Since(begin).Seconds(), name)
			}
		}
		if p := progressOf(n, "clean"); p != nil {
			stage, _ := p["stage"].(string)
			f, _ := p["fraction"].(float64)
			step, _, _ := strings.Cut(stage, ":")
			if f > progress[step] {
				progress[step] = f
			}
		}
	}, "manageable", "clean failed")
	if n.ProvisionState != "manageable" {
		s.failStep(t, uuid, vm.SerialLog, fmt.Errorf("cleaning ended %s: %v", n.ProvisionState, deref(n.LastError)))
	}
	t.Logf("manual cleaning (2 burn-ins of 30 s, 2 erases) took %.0fs; progress seen: %v", time.Since(begin).Seconds(), progress)
	printTimeline(t, s, uuid, "manual cleaning")
	for _, step := range []string{"burnin_memory", "burnin_disk"} {
		if progress[step] <= 0 {
			t.Errorf("the node never showed %s's progress in driver_internal_info clean_step_progress", step)
		}
	}
	if p := progressOf(n, "clean"); p != nil {
		t.Errorf("clean_step_progress is still set after the cleaning: %v", p)
	}

	events := historyEvents(t, lab, uuid)
	for _, step := range []string{"burnin_memory", "burnin_disk"} {
		res, ok := stepResult(events, "deploy."+step)
		if !ok {
			t.Errorf("the node's history has no result of %s:\n%s", step, strings.Join(events, "\n"))
			continue
		}
		t.Logf("history: %s result %v", step, res)
		if errs, _ := res["errors"].(float64); errs != 0 {
			t.Errorf("%s counted %v errors: %v", step, errs, res)
		}
		if secs, _ := res["seconds"].(float64); secs < 29 {
			t.Errorf("%s ran %.1fs, want its 30 s: %v", step, secs, res)
		}
	}
	if res, ok := stepResult(events, "deploy.erase_devices"); !ok || res["erased"] == nil {
		t.Errorf("the node's history has no result of erase_devices (%v):\n%s", res, strings.Join(events, "\n"))
	}

	// The cleaning powered the VM off: its disk is quiet.
	if f := s.nodeFields(t, uuid); f["power_state"] != "power off" {
		t.Fatalf("node power %v after cleaning, want power off", f["power_state"])
	}
	if left := markersLeft(t, vm.Disk); left != 0 {
		t.Errorf("%d of %d markers are still on the disk after erase_devices", left, len(markerOffsets))
	}
	off, err := firstNonZero(vm.Disk)
	if err != nil {
		t.Fatal(err)
	}
	if off >= 0 {
		t.Errorf("the erased disk has a non-zero byte at offset %d", off)
	} else {
		t.Log("the disk reads as zeros after erase_devices (its markers are gone)")
	}
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// requireHistoryOrder fails t unless the node's history has an event
// containing each of substrs, in that order.
func requireHistoryOrder(t *testing.T, lab *Lab, uuid string, substrs ...string) {
	t.Helper()
	events := historyEvents(t, lab, uuid)
	at := make([]int, len(substrs))
	ordered := true
	for k, substr := range substrs {
		at[k] = -1
		for i, e := range events {
			if strings.Contains(e, substr) {
				at[k] = i
				break
			}
		}
		ordered = ordered && at[k] >= 0 && (k == 0 || at[k-1] < at[k])
	}
	if !ordered {
		t.Fatalf("history order of %q: positions %v:\n%s", substrs, at, strings.Join(events, "\n"))
	}
}
