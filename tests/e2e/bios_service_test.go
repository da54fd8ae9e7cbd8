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

// TestServiceAppliesBIOSSettingOnActiveVM: a SeaBIOS VM behind `ironflow
// vbmc serve` (Redfish) with bios_interface redfish is deployed with the
// ramdisk deploy interface (nothing to write: the instance network-boots),
// then serviced with bios.apply_configuration ProcCores=2 and
// disable_ramdisk: the step writes the setting to the BMC's settings
// object, reboots the node, the vbmc applies it at the start (QEMU -smp 2)
// and the instance's kernel comes up with 2 CPUs; the node is active
// again and the setting shows in `baremetal node bios setting list`.
func TestServiceAppliesBIOSSettingOnActiveVM(t *testing.T) {
	RequireQEMU(t)
	begin := time.Now()
	lab := NewLab(t)
	s := startStack(t, lab, "--automated-clean=false")
	kernelURL, ramdiskURL := publishRamdiskInstance(t, lab, s)

	vm := lab.AddVM("node-bios", "52:54:00:e2:b1:05", FirmwareBIOS, filepath.Join(lab.Dir, "vm-node-bios", "disk.raw"))
	bmc := startRedfishBMC(t, s, vmDefinition(vm, 1, DefaultMemoryMB, vmDiskSize))
	uuid := createRedfishNode(t, s, bmc, vm.Name, vm.Firmware, vm.MAC,
		"--deploy-interface", "ramdisk", "--boot-interface", "ipxe", "--bios-interface", "redfish")
	defer printNodeHistory(t, s, uuid)
	s.mustCLI(t, "node", "manage", uuid, "--wait", seconds(manageWait))
	s.mustCLI(t, "node", "provide", uuid, "--wait", seconds(provideWait))
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
	t.Logf("bios: node active with its ramdisk instance %.1fs after start", time.Since(begin).Seconds())

	serviceStart := time.Now()
	steps := []any{map[string]any{"interface": "bios", "step": "apply_configuration",
		"args": map[string]any{"settings": []any{map[string]any{"name": "ProcCores", "value": "2"}}}}}
	// disable_ramdisk with service: API 1.108.
	code, body := biosAPI(t, s, http.MethodPut, "/v1/nodes/"+uuid+"/states/provision", "1.108",
		map[string]any{"target": "service", "service_steps": steps, "disable_ramdisk": true})
	if code != http.StatusAccepted {
		t.Fatalf("service: HTTP %d: %s", code, body)
	}
	deadline := time.Now().Add(provideWait)
	var f map[string]any
	for {
		f = s.nodeFields(t, uuid)
		if f["provision_state"] == "active" || strings.HasSuffix(biosStr(f["provision_state"]), "failed") || time.Now().After(deadline) {
			break
		}
		time.Sleep(2 * time.Second)
	}
	printTimeline(t, s, uuid, "service with a BIOS setting")
	if f["provision_state"] != "active" {
		t.Fatalf("after servicing the node is %v (last_error %v); vbmc log:\n%s", f["provision_state"], f["last_error"], embedded.Tail(bmc.proc.Log, 3000))
	}
	t.Logf("bios: servicing took %.1fs", time.Since(serviceStart).Seconds())

	// The vbmc started QEMU again with the setting.
	bmc.checkSMPApplied(t, vm)
	if _, err := WaitSerial(ctx, vm.SerialLog, "2 CPUs", nil); err != nil {
		t.Errorf("the instance did not come up with 2 CPUs after the BIOS step's reboot: %v", err)
	}

	// The cached settings, through the CLI and the API with registry fields.
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
