package e2e

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ironflow/ironflow/embedded"
)

// resetVM presses the VM's reset button through its Redfish BMC
// (ForceRestart: QMP system_reset), behind ironflow's back.
func resetVM(t *testing.T, lab *Lab, bmc *vbmcServer, vmName string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, "http://"+redfishListen+"/redfish/v1/Systems/"+vmName+"/Actions/ComputerSystem.Reset",
		strings.NewReader(`{"ResetType":"ForceRestart"}`))
	if err != nil {
		t.Fatal(err)
	}
	req.SetBasicAuth("admin", bmc.password)
	req.Header.Set("Content-Type", "application/json")
	resp, err := labHTTPClient(lab).Do(req)
	if err != nil {
		t.Fatalf("reset %s: %v", vmName, err)
	}
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		t.Fatalf("reset %s: HTTP %d", vmName, resp.StatusCode)
	}
}

// timedEvents are the node's history events with their times.
type timedEvent struct {
	At    time.Time
	Event string
}

func timedHistory(t *testing.T, lab *Lab, uuid string) []timedEvent {
	t.Helper()
	var h struct {
		History []struct {
			CreatedAt string `json:"created_at"`
			Event     string `json:"event"`
		} `json:"history"`
	}
	if code := labAPI(t, lab, "1.87", http.MethodGet, "/v1/nodes/"+uuid+"/history", nil, &h); code != http.StatusOK {
		t.Fatalf("GET history of %s: HTTP %d", uuid, code)
	}
	out := make([]timedEvent, 0, len(h.History))
	for _, e := range h.History {
		at, err := time.Parse(time.RFC3339Nano, e.CreatedAt)
		if err != nil {
			t.Fatalf("history time %q: %v", e.CreatedAt, err)
		}
		out = append(out, timedEvent{At: at, Event: e.Event})
	}
	return out
}

var resumedFrom = regexp.MustCompile(`running it again from its checkpoint \(([0-9]+)s done\)`)

// TestBurninResumesAfterResetThenService is one SeaBIOS VM behind the
// Redfish vbmc, booting the agent from virtual media (whose ISO carries
// the agent's token, so that the agent of a new boot looks up again):
//
// Reset: a manual cleaning runs burnin_cpu for 60 s; some 20 s in, the VM
// is reset behind ironflow's back. The VM boots the agent again, the
// workflow finds its command gone and runs the step again with its last
// checkpoint, and the burn-in finishes: about 60 s of burn-in in all, the
// resumed run taking only what was left, not another 60 s from zero.
//
// Service: the node is deployed, then serviced with a short burnin_cpu;
// it ends active and the instance boots from its disk again.
func TestBurninResumesAfterResetThenService(t *testing.T) {
	RequireQEMU(t)
	lab := NewLab(t)
	s := startStack(t, lab)
	_, sum, err := BuildTestImage(DefaultCacheDir())
	if err != nil {
		t.Fatal(err)
	}
	vm := lab.AddVM("node-rs", "52:54:00:e2:18:02", FirmwareBIOS, filepath.Join(lab.Dir, "vm-node-rs", "disk.raw"))
	bmc := startRedfishBMC(t, s, agentVM(vm))
	uuid := createRedfishNode(t, s, bmc, vm.Name, vm.Firmware, vm.MAC,
		"--deploy-interface", "direct", "--boot-interface", "redfish-virtual-media", "--no-automated-clean")
	defer printNodeHistory(t, s, uuid)
	s.mustCLI(t, "node", "manage", uuid, "--wait", seconds(manageWait))

	// Reset under a burn-in.
	const burn = 60
	begin := time.Now()
	s.mustCLI(t, "node", "clean", uuid, "--clean-steps", fmt.Sprintf(`[{"interface":"deploy","step":"burnin_cpu","args":{"timeout":%d}}]`, burn))
	var resetAt time.Time
	var beforeReset float64
	n := watchNode(t, lab, uuid, cleanWait, func(n nodeState) {
		p := progressOf(n, "clean")
		elapsed, _ := p["elapsed_seconds"].(float64)
		if resetAt.IsZero() && elapsed >= 20 {
			beforeReset = elapsed
			resetAt = time.Now()
			t.Logf("%.0fs: burnin_cpu at %.1fs of %ds (%v): resetting the VM", time.Since(begin).Seconds(), elapsed, burn, p["stage"])
			resetVM(t, lab, bmc, vm.Name)
		}
	}, "manageable", "clean failed")
	if resetAt.IsZero() {
		t.Fatalf("the cleaning ended (%s) before the burn-in showed 20 s of progress", n.ProvisionState)
	}
	if n.ProvisionState != "manageable" {
		s.failStep(t, uuid, vm.SerialLog, fmt.Errorf("cleaning with a reset ended %s: %v", n.ProvisionState, deref(n.LastError)))
	}
	t.Logf("reset: cleaning manageable %.0fs after it started, %.0fs after the reset", time.Since(begin).Seconds(), time.Since(resetAt).Seconds())
	printTimeline(t, s, uuid, "manual cleaning with a reset")
	var lost, finished *timedEvent
	var from int
	for _, e := range timedHistory(t, lab, uuid) {
		if m := resumedFrom.FindStringSubmatch(e.Event); m != nil && lost == nil {
			lost = &e
			from, _ = strconv.Atoi(m[1])
		}
		if strings.HasPrefix(e.Event, "Step deploy.burnin_cpu finished: ") {
			finished = &e
		}
	}
	if lost == nil || finished == nil {
		t.Fatalf("the history shows no resume (%v) or no end (%v) of burnin_cpu:\n%v", lost, finished, historyEvents(t, lab, uuid))
	}
	res, _ := stepResult([]string{finished.Event}, "deploy.burnin_cpu")
	secs, _ := res["seconds"].(float64)
	resumed := finished.At.Sub(lost.At).Seconds()
	t.Logf("reset: %q; resumed run took %.1fs; result %v", lost.Event, resumed, res)
	if from < 15 || float64(from) > beforeReset+5 {
		t.Errorf("resumed from %ds, but the burn-in was at %.1fs when reset", from, beforeReset)
	}
	if secs < burn-1 || secs > burn+5 {
		t.Errorf("the burn-in counts %.1fs in all, want its %d s (once, not twice)", secs, burn)
	}
	if left := float64(burn - from); resumed > left+20 || resumed >= burn {
		t.Errorf("the resumed run took %.1fs: it did not resume from %ds (%.0fs were left)", resumed, from, left)
	}

	// Service an active node.
	s.mustCLI(t, "node", "provide", uuid, "--wait", seconds(provideWait))
	s.mustCLI(t, "node", "set", uuid,
		"--instance-info", "image_source="+s.imageURL("e2e-test.img"),
		"--instance-info", "image_os_hash_algo=sha256",
		"--instance-info", "image_os_hash_value="+sum)
	const pubKey = "ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIE2EserviceRS e2e"
	s.deploy(t, uuid, vm, "e2e-rs", pubKey)
	waitBootedFromDisk(t, vm, "e2e-rs", pubKey)
	marker := "IRONFLOW-E2E hostname=e2e-rs key=" + pubKey
	boots := countLines(vm.SerialLog, marker)
	begin = time.Now()
	body := map[string]any{"target": "service", "service_steps": []map[string]any{
		{"interface": "deploy", "step": "burnin_cpu", "args": map[string]any{"timeout": 10}}}}
	if code := labAPI(t, lab, "1.87", http.MethodPut, "/v1/nodes/"+uuid+"/states/provision", body, nil); code != http.StatusAccepted {
		t.Fatalf("service: HTTP %d", code)
	}
	var sawServicing bool
	n = watchNode(t, lab, uuid, cleanWait, func(n nodeState) {
		sawServicing = sawServicing || n.ProvisionState == "service wait" || n.ProvisionState == "servicing"
	}, "active", "service failed")
	if n.ProvisionState != "active" || !sawServicing {
		s.failStep(t, uuid, vm.SerialLog, fmt.Errorf("service ended %s (servicing seen: %v): %v", n.ProvisionState, sawServicing, deref(n.LastError)))
	}
	t.Logf("service: node active again %.0fs after the request", time.Since(begin).Seconds())
	if res, ok := stepResult(historyEvents(t, lab, uuid), "deploy.burnin_cpu"); !ok {
		t.Errorf("the history has no result of the service step")
	} else {
		t.Logf("service: burnin_cpu result %v", res)
	}
	ctx, cancel := context.WithTimeout(context.Background(), DefaultBootTimeout)
	defer cancel()
	for countLines(vm.SerialLog, marker) <= boots {
		select {
		case <-ctx.Done():
			t.Fatalf("the instance did not boot from its disk again after servicing:\n%s", embedded.Tail(vm.SerialLog, 3000))
		case <-time.After(2 * time.Second):
		}
	}
	if f := s.nodeFields(t, uuid); f["provision_state"] != "active" || f["power_state"] != "power on" {
		t.Errorf("service: node is %v / %v, want active / power on", f["provision_state"], f["power_state"])
	}
	t.Logf("service: the instance booted from its disk again %.0fs after the request", time.Since(begin).Seconds())
}
