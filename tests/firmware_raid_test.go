package tests

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRedfishRAIDInManualCleaning: a target RAID-1 set through PUT
// states/raid is built by manual cleaning's raid.create_configuration on
// the vbmc's Storage (the VM's disk and a second drive), recorded in
// raid_config, and taken away by raid.delete_configuration.
func TestRedfishRAIDInManualCleaning(t *testing.T) {
	const vm = "raidnode0"
	extra := filepath.Join(t.TempDir(), "raidnode0-d1.raw")
	if err := os.WriteFile(extra, make([]byte, 16<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	bmcURL := startFirmwareBMC(t, vm, 1, extra)
	uuid := enrollFirmwareNode(t, "raid-clean-0", bmcURL, vm)
	if code, _ := callAt(t, lab.APIURL, "1.86", "PATCH", "/v1/nodes/"+uuid, []map[string]any{{"op": "replace", "path": "/raid_interface", "value": "redfish"}}, nil); code != 200 {
		t.Fatalf("raid_interface redfish: %d", code)
	}
	target := map[string]any{"logical_disks": []any{map[string]any{"raid_level": "1", "size_gb": "MAX", "is_root_volume": true, "volume_name": "root"}}}
	if code, _ := callAt(t, lab.APIURL, "1.12", "PUT", "/v1/nodes/"+uuid+"/states/raid", target, nil); code != 204 {
		t.Fatalf("PUT states/raid: %d", code)
	}
	clean := func(step string) {
		t.Helper()
		code, _ := callAt(t, lab.APIURL, "1.86", "PUT", "/v1/nodes/"+uuid+"/states/provision", map[string]any{
			"target": "clean", "disable_ramdisk": true, "clean_steps": []map[string]any{{"interface": "raid", "step": step}}}, nil)
		if code != 202 {
			t.Fatalf("clean with raid.%s: %d", step, code)
		}
		waitState(t, uuid, "manageable", 60*time.Second)
	}
	clean("create_configuration")
	var n struct {
		RAIDConfig map[string]any `json:"raid_config"`
		LastError  *string        `json:"last_error"`
	}
	callAt(t, lab.APIURL, "1.86", "GET", "/v1/nodes/"+uuid, nil, &n)
	disks, _ := n.RAIDConfig["logical_disks"].([]any)
	if len(disks) != 1 || n.LastError != nil {
		t.Fatalf("raid_config %v, last_error %v", n.RAIDConfig, deref(n.LastError))
	}
	ld := disks[0].(map[string]any)
	if ld["raid_level"] != "1" || ld["volume_name"] != "root" || ld["controller"] != "1" || strings.Join(strs(ld["physical_disks"]), ",") != "Disk0,Disk1" {
		t.Fatalf("logical disk %v", ld)
	}
	if vols := bmcVolumes(t, bmcURL, vm); len(vols) != 1 {
		t.Fatalf("BMC volumes after create: %v", vols)
	}
	clean("delete_configuration")
	n.RAIDConfig = nil
	callAt(t, lab.APIURL, "1.86", "GET", "/v1/nodes/"+uuid, nil, &n)
	if len(n.RAIDConfig) != 0 {
		t.Fatalf("raid_config after delete %v", n.RAIDConfig)
	}
	if vols := bmcVolumes(t, bmcURL, vm); len(vols) != 0 {
		t.Fatalf("BMC volumes after delete: %v", vols)
	}
}

func strs(v any) []string {
	l, _ := v.([]any)
	out := make([]string, len(l))
	for i, e := range l {
		out[i], _ = e.(string)
	}
	return out
}

// bmcVolumes reads the vbmc's Volumes collection of vm.
func bmcVolumes(t *testing.T, bmcURL, vm string) []any {
	t.Helper()
	req, _ := http.NewRequest("GET", bmcURL+"/redfish/v1/Systems/"+vm+"/Storage/1/Volumes", nil)
	req.SetBasicAuth("admin", "password")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var col struct{ Members []any }
	if err := json.NewDecoder(resp.Body).Decode(&col); err != nil {
		t.Fatal(err)
	}
	return col.Members
}
