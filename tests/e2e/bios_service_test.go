package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ironflow/ironflow/embedded"
)

// biosAPI sends one request to ironflow's API from inside the lab at
// microversion version and returns the status and body.
func biosAPI(t *testing.T, s *stack, method, path, version string, body any) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequest(method, "http://"+apiListen+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-OpenStack-Ironic-API-Version", version)
	resp, err := labHTTPClient(s.lab).Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out
}

// TestRolloutServicesBIOSSettingOnTwoVMs: two SeaBIOS VMs behind
// `ironflow vbmc serve` (Redfish) with bios_interface redfish are deployed
// with the ramdisk deploy interface (nothing to write: the instances
// network-boot), then serviced by one rollout (docs/rollouts.md) with
// bios.apply_configuration ProcCores=2 and disable_ramdisk, a canary of
// one and an approval before the other. The canary's step writes the
// setting to the BMC's settings object and reboots the node, the vbmc
// applies it at the start (QEMU -smp 2) and the instance's kernel comes up
// with 2 CPUs; while the rollout waits for the approval the other VM still
// runs with one CPU; once approved it gets the setting too, and the
// rollout succeeds. The canary's setting shows in `baremetal node bios
// setting list` and its history names the step.
func TestRolloutServicesBIOSSettingOnTwoVMs(t *testing.T) {
	RequireQEMU(t)
	begin := time.Now()
	lab := NewLab(t)
	s := startStack(t, lab, "--automated-clean=false")
	kernelURL, ramdiskURL := publishRamdiskInstance(t, lab, s)

	vms := []*LabVM{
		lab.AddVM("node-bios", "52:54:00:e2:b1:05", FirmwareBIOS, filepath.Join(lab.Dir, "vm-node-bios", "disk.raw")),
		lab.AddVM("node-bios2", "52:54:00:e2:b1:07", FirmwareBIOS, filepath.Join(lab.Dir, "vm-node-bios2", "disk.raw")),
	}
	bmc := startRedfishBMC(t, s, vmDefinition(vms[0], 1, DefaultMemoryMB, vmDiskSize), vmDefinition(vms[1], 1, DefaultMemoryMB, vmDiskSize))
	uuids := make([]string, len(vms))
	for i, vm := range vms {
		uuids[i] = createRedfishNode(t, s, bmc, vm.Name, vm.Firmware, vm.MAC,
			"--deploy-interface", "ramdisk", "--boot-interface", "ipxe", "--bios-interface", "redfish")
		defer printNodeHistory(t, s, uuids[i])
		s.mustCLI(t, "node", "manage", uuids[i], "--wait", seconds(manageWait))
		s.mustCLI(t, "node", "provide", uuids[i], "--wait", seconds(provideWait))
		s.mustCLI(t, "node", "set", uuids[i],
			"--instance-info", "kernel="+kernelURL,
			"--instance-info", "ramdisk="+ramdiskURL,
			"--instance-info", "ramdisk_kernel_arguments=console=ttyS0,115200 no_timer_check")
	}
	// Both deploys at once.
	errs := make(chan error, len(vms))
	for i := range vms {
		go func() {
			_, err := s.baremetal(t, "node", "deploy", uuids[i], "--wait", seconds(deployWait))
			errs <- err
		}()
	}
	for range vms {
		if err := <-errs; err != nil {
			t.Fatalf("deploy: %v", err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), DefaultBootTimeout)
	defer cancel()
	for _, vm := range vms {
		if _, err := WaitSerial(ctx, vm.SerialLog, ramdiskInstanceMarker, nil); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("bios: both nodes active with their ramdisk instance %.1fs after start", time.Since(begin).Seconds())

	serviceStart := time.Now()
	steps := []any{map[string]any{"interface": "bios", "step": "apply_configuration",
		"args": map[string]any{"settings": []any{map[string]any{"name": "ProcCores", "value": "2"}}}}}
	code, body := biosAPI(t, s, http.MethodPost, "/ironflow/v1/rollouts", "1.108", map[string]any{
		"operation": map[string]any{"target": "service", "service_steps": steps, "disable_ramdisk": true},
		"selector":  map[string]any{"nodes": uuids}, "canary": 1, "wave_size": 1, "approval": true, "poll_seconds": 0.5})
	if code != http.StatusCreated {
		t.Fatalf("create the rollout: HTTP %d: %s", code, body)
	}
	var created struct{ UUID string }
	_ = json.Unmarshal(body, &created)
	type rolloutView struct {
		State     string
		Running   bool
		Succeeded int
		Nodes     []struct{ UUID, State, LastError string } `json:"nodes"`
	}
	waitRollout := func(what string, cond func(rolloutView) bool) rolloutView {
		t.Helper()
		deadline := time.Now().Add(provideWait)
		for {
			var v rolloutView
			code, body := biosAPI(t, s, http.MethodGet, "/ironflow/v1/rollouts/"+created.UUID, "1.108", nil)
			_ = json.Unmarshal(body, &v)
			if code == http.StatusOK && cond(v) {
				return v
			}
			if time.Now().After(deadline) {
				t.Fatalf("rollout %s: not %s: HTTP %d %s; vbmc log:\n%s", created.UUID, what, code, body, embedded.Tail(bmc.proc.Log, 3000))
			}
			time.Sleep(time.Second)
		}
	}
	waitRollout("awaiting approval after the canary", func(v rolloutView) bool { return v.State == "awaiting_approval" || !v.Running })
	printTimeline(t, s, uuids[0], "service with a BIOS setting (the canary)")
	t.Logf("bios: the canary's servicing took %.1fs", time.Since(serviceStart).Seconds())

	// The canary: the vbmc started QEMU again with the setting.
	bmc.checkSMPApplied(t, vms[0])
	if _, err := WaitSerial(ctx, vms[0].SerialLog, "2 CPUs", nil); err != nil {
		t.Errorf("the canary's instance did not come up with 2 CPUs after the BIOS step's reboot: %v", err)
	}
	// The other waits for the approval: untouched, one CPU.
	if starts := bmc.qemuStarts(vms[1]); len(starts) != 1 || !strings.Contains(starts[0], "-smp 1") {
		t.Fatalf("before the approval the second VM was restarted or changed:\n%s", strings.Join(starts, "\n"))
	}
	if f := s.nodeFields(t, uuids[1]); f["provision_state"] != "active" {
		t.Fatalf("before the approval the second node is %v", f["provision_state"])
	}
	if code, body := biosAPI(t, s, http.MethodPost, "/ironflow/v1/rollouts/"+created.UUID+"/approve", "1.108", nil); code != http.StatusAccepted {
		t.Fatalf("approve: HTTP %d: %s", code, body)
	}
	v := waitRollout("ended", func(v rolloutView) bool { return !v.Running })
	if v.State != "succeeded" || v.Succeeded != 2 {
		t.Fatalf("rollout: %s with %d of 2 succeeded: %+v", v.State, v.Succeeded, v.Nodes)
	}
	bmc.checkSMPApplied(t, vms[1])
	if _, err := WaitSerial(ctx, vms[1].SerialLog, "2 CPUs", nil); err != nil {
		t.Errorf("the second instance did not come up with 2 CPUs after the approval: %v", err)
	}
	t.Logf("bios: the rollout took %.1fs", time.Since(serviceStart).Seconds())

	// The canary's cached settings, through the CLI and the API with
	// registry fields; its history names the step.
	uuid := uuids[0]
	out := s.mustCLI(t, "node", "bios", "setting", "list", uuid, "-f", "json")
	var list []map[string]any
	if err := json.Unmarshal([]byte(out), &list); err != nil {
		t.Fatalf("bios setting list: %v: %s", err, out)
	}
	got := map[string]string{}
	for _, e := range list {
		got[biosStr(e["BIOS setting name"])] = biosStr(e["BIOS setting value"])
	}
	if got["ProcCores"] != "2" || got["BootMode"] != "LegacyBios" {
		t.Errorf("baremetal node bios setting list shows ProcCores %q BootMode %q, want 2 and LegacyBios:\n%s", got["ProcCores"], got["BootMode"], out)
	}
	code, body = biosAPI(t, s, http.MethodGet, "/v1/nodes/"+uuid+"/bios/ProcCores", "1.74", nil)
	if code != http.StatusOK || !strings.Contains(string(body), `"upper_bound":16`) || !strings.Contains(string(body), `"value":"2"`) {
		t.Errorf("GET bios/ProcCores at 1.74: HTTP %d: %s", code, body)
	}
	hist := s.mustCLI(t, "node", "history", "list", uuid, "-f", "value", "-c", "Description of the event")
	if !strings.Contains(hist, "BIOS settings ProcCores=2 written") || !strings.Contains(hist, "the BIOS settings are in effect") {
		t.Errorf("the node history does not show the BIOS step:\n%s", hist)
	}
	t.Logf("bios: scenario took %.1fs", time.Since(begin).Seconds())
}

func biosStr(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	return ""
}

// TestBootModeSwitchToUEFIThenDeploy: a SeaBIOS VM behind `ironflow vbmc
// serve` is switched to UEFI with `baremetal node boot mode set` (PUT
// states/boot_mode, API 1.76): the node's boot_mode reads uefi once the
// BMC reports it, and the next deploy (ramdisk, network boot) boots the
// VM under OVMF.
func TestBootModeSwitchToUEFIThenDeploy(t *testing.T) {
	RequireQEMU(t)
	begin := time.Now()
	lab := NewLab(t)
	s := startStack(t, lab, "--automated-clean=false")
	kernelURL, ramdiskURL := publishRamdiskInstance(t, lab, s)

	vm := lab.AddVM("node-bmode", "52:54:00:e2:b1:06", FirmwareBIOS, filepath.Join(lab.Dir, "vm-node-bmode", "disk.raw"))
	bmc := startRedfishBMC(t, s, vmDefinition(vm, 1, DefaultMemoryMB, vmDiskSize))
	uuid := createRedfishNode(t, s, bmc, vm.Name, vm.Firmware, vm.MAC, "--deploy-interface", "ramdisk", "--boot-interface", "ipxe")
	defer printNodeHistory(t, s, uuid)
	s.mustCLI(t, "node", "manage", uuid, "--wait", seconds(manageWait))
	s.mustCLI(t, "node", "provide", uuid, "--wait", seconds(provideWait))

	s.mustCLI(t, "--os-baremetal-api-version", "1.76", "node", "boot", "mode", "set", uuid, "uefi")
	deadline := time.Now().Add(manageWait)
	for s.nodeFields(t, uuid)["boot_mode"] != "uefi" {
		if time.Now().After(deadline) {
			f := s.nodeFields(t, uuid)
			t.Fatalf("boot_mode is %v after the switch (last_error %v)", f["boot_mode"], f["last_error"])
		}
		time.Sleep(time.Second)
	}

	s.mustCLI(t, "node", "set", uuid,
		"--instance-info", "kernel="+kernelURL,
		"--instance-info", "ramdisk="+ramdiskURL,
		"--instance-info", "ramdisk_kernel_arguments=console=ttyS0,115200 no_timer_check")
	if _, err := s.baremetal(t, "node", "deploy", uuid, "--wait", seconds(deployWait)); err != nil {
		s.failStep(t, uuid, vm.SerialLog, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), DefaultBootTimeout)
	defer cancel()
	if _, err := WaitSerial(ctx, vm.SerialLog, ramdiskInstanceMarker, nil); err != nil {
		t.Fatal(err)
	}
	qlog, _ := os.ReadFile(filepath.Join(bmc.stateDir, vm.Name, "qemu.log"))
	var last string
	for _, line := range strings.Split(string(qlog), "\n") {
		if strings.Contains(line, " starting: ") {
			last = line
		}
	}
	if !strings.Contains(last, "OVMF_CODE") {
		t.Errorf("the deploy's QEMU start is not under OVMF:\n%s", last)
	}
	if line, ok := findLine(vm.SerialLog, "EFI stub"); ok {
		t.Logf("bmode: %s", line)
	} else if _, ok := findLine(vm.SerialLog, "efi: EFI v"); !ok {
		t.Errorf("the instance's kernel did not boot through UEFI; console tail:\n%s", embedded.Tail(vm.SerialLog, 2000))
	}
	t.Logf("bmode: scenario took %.1fs", time.Since(begin).Seconds())
}
