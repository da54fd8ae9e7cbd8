package tests

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestNMIAndIndicatorsThroughRealBMCs: `baremetal node inject nmi` (API
// 1.29) and the indicators (API 1.63, plain HTTP: python-ironicclient 5.0.1
// has no indicator command) on the real stack, against ironflow's vbmc
// (Redfish) and OpenIPMI's ipmi_sim (IPMI).
//
// Redfish: the NMI is a ComputerSystem.Reset with ResetType Nmi (the VM is
// off here, and the vbmc takes it without effect; the VM test
// TestDeployRedfishVirtualMediaUEFIThenClean shows the guest kernel
// receiving one). The vbmc's system and chassis have IndicatorLED, its
// drive LocationIndicatorActive; what is set is what the vbmc recorded
// (its indicators.json) and what a read answers.
//
// IPMI: ironflow sends Chassis Control "pulse diagnostic interrupt", as
// ipmitool's `power diag` does; ipmi_sim, with no VM attached to it
// through QEMU's ipmi-bmc-extern, answers completion code 0xcc (invalid
// data field), which shows that the request reached it, and the API
// answers as Debian's Ironic does behind the same ipmi_sim: 500 "IPMI call
// failed: power diag.", the BMC's answer in the node's history. Ironic's
// ipmitool management has no indicators.
func TestNMIAndIndicatorsThroughRealBMCs(t *testing.T) {
	l := startBMCLab(t)
	mustCLI(t, "node", "create", "--name", "nmi-redfish", "--driver", "redfish",
		"--driver-info", "redfish_address="+l.redfishURL, "--driver-info", "redfish_system_id=/redfish/v1/Systems/rf0",
		"--driver-info", "redfish_username=admin", "--driver-info", "redfish_password=password")
	mustCLI(t, "node", "create", "--name", "nmi-ipmi", "--driver", "ipmi", "--driver-info", "ipmi_address=127.0.0.1",
		"--driver-info", "ipmi_port="+strconv.Itoa(l.ipmiPort), "--driver-info", "ipmi_username=admin",
		"--driver-info", "ipmi_password=password")
	rf, ipmi := getNode(t, "nmi-redfish").UUID, getNode(t, "nmi-ipmi").UUID
	defer mustCLI(t, "node", "delete", "nmi-redfish", "nmi-ipmi")

	mustCLI(t, "node", "inject", "nmi", "nmi-redfish")
	if h := mustCLI(t, "node", "history", "list", "nmi-redfish", "-f", "value", "-c", "Description of the event"); !strings.Contains(h, "NMI injected") {
		t.Errorf("redfish NMI: no history event:\n%s", h)
	}
	out, errOut, err := baremetal(t, "node", "inject", "nmi", "nmi-ipmi")
	if err == nil || !strings.Contains(errOut, "IPMI call failed: power diag. (HTTP 500)") {
		t.Errorf("ipmi NMI behind ipmi_sim: err %v, stdout %s, stderr %s", err, out, errOut)
	}
	if h := mustCLI(t, "node", "history", "list", "nmi-ipmi", "-f", "value", "-c", "Description of the event"); !strings.Contains(h, "IPMI call failed: power diag.") || !strings.Contains(strings.ToLower(h), "inject nmi on 127.0.0.1") {
		t.Errorf("ipmi NMI: the history does not keep ipmi_sim's answer:\n%s", h)
	}

	ind := "/v1/nodes/nmi-redfish/management/indicators"
	var list struct {
		Indicators []struct {
			Name, Component string
			Readonly        bool
			States          []string
		}
	}
	if code := at(t, "1.63", "GET", ind, nil, &list); code != 200 || len(list.Indicators) != 3 {
		t.Fatalf("list: %d %+v\nworker log:\n%s", code, list, workerLog())
	}
	names := map[string]string{}
	for _, in := range list.Indicators {
		names[in.Component] = in.Name
	}
	if names["disk"] != "1:Disk0@disk" || !strings.HasSuffix(names["system"], "@system") || !strings.HasSuffix(names["chassis"], "@chassis") {
		t.Fatalf("indicator names: %v", names)
	}
	state := func(name string) string {
		t.Helper()
		var s struct{ State string }
		if code := at(t, "1.63", "GET", ind+"/"+name, nil, &s); code != 200 {
			t.Fatalf("get %s: %d", name, code)
		}
		return s.State
	}
	if got := state(names["system"]); got != "off" {
		t.Errorf("system indicator before any change: %s", got)
	}
	for _, c := range []struct{ component, state, recorded string }{
		{"system", "blinking", `"system": "Blinking"`},
		{"chassis", "on", `"chassis": "Lit"`},
		{"disk", "on", `"drive/Disk0": "Lit"`},
	} {
		if code := at(t, "1.63", "PUT", ind+"/"+names[c.component], map[string]any{"state": c.state}, nil); code != 204 {
			t.Fatalf("set %s %s: %d\nworker log:\n%s", c.component, c.state, code, workerLog())
		}
		b, _ := os.ReadFile(filepath.Join(l.stateDir, "rf0", "indicators.json"))
		if !strings.Contains(string(b), c.recorded) {
			t.Errorf("set %s %s: the vbmc recorded %s", c.component, c.state, b)
		}
		if got := state(names[c.component]); got != c.state {
			t.Errorf("%s reads %s after set %s", c.component, got, c.state)
		}
	}
	var fault apiFault
	if code, _ := callAt(t, lab.APIURL, "1.63", "PUT", ind+"/"+names["disk"], map[string]any{"state": "blinking"}, &fault); code != 400 ||
		fault.faultstring() != "Indicator 1:Disk0 for component disk of node "+rf+" cannot be set to blinking" {
		t.Errorf("blinking drive: %d %q", code, fault.faultstring())
	}
	if code, _ := callAt(t, lab.APIURL, "1.63", "PUT", ind+"/Disk9@disk", map[string]any{"state": "on"}, &fault); code != 400 ||
		fault.faultstring() != "Unknown indicator Disk9 for component disk of node "+rf {
		t.Errorf("unknown drive: %d %q", code, fault.faultstring())
	}
	// Ironic's indicator controller never checks the version: served below 1.63 too.
	if code, _ := callAt(t, lab.APIURL, "1.62", "GET", ind, nil, nil); code != 200 {
		t.Errorf("list at 1.62: %d, want 200 as Ironic", code)
	}
	if code, _ := callAt(t, lab.APIURL, "1.63", "GET", "/v1/nodes/"+ipmi+"/management/indicators", nil, &fault); code != 400 ||
		fault.faultstring() != "Driver ipmi does not support get_supported_indicators (disabled or not implemented)." {
		t.Errorf("ipmi indicators: %d %q", code, fault.faultstring())
	}
}
