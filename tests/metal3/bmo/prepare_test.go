package bmo

import (
	"reflect"
	"testing"

	"github.com/gophercloud/gophercloud/v2/openstack/baremetal/v1/nodes"
)

// BMO's manual cleaning steps, as its raid.go and buildManualCleaningSteps
// make them: hardware RAID deletes then creates; software RAID needs the
// agent's RAID interface and erases metadata between; a BIOS setting that
// already has its value is left out; firmware updates come last.
func TestManualCleaningSteps(t *testing.T) {
	size := 10
	p := &Provisioner{}
	redfish := &AccessDetails{RAIDInterface: "redfish"}
	steps, err := p.manualCleaningSteps(redfish, PrepareData{
		TargetRAIDConfig:         &RAIDConfig{HardwareRAIDVolumes: []HardwareRAIDVolume{{SizeGibibytes: &size, Level: "1"}}},
		ActualFirmwareSettings:   map[string]string{"ProcSMT": "Enabled", "ProcVirtualization": "Enabled"},
		TargetFirmwareSettings:   map[string]string{"ProcSMT": "Disabled", "ProcVirtualization": "Enabled"},
		TargetFirmwareComponents: []FirmwareUpdate{{Component: "bmc", URL: "http://x/bmc.bin"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []nodes.CleanStep{
		{Interface: nodes.InterfaceRAID, Step: "delete_configuration"},
		{Interface: nodes.InterfaceRAID, Step: "create_configuration"},
		{Interface: nodes.InterfaceBIOS, Step: "apply_configuration", Args: map[string]any{"settings": []map[string]any{{"name": "ProcSMT", "value": "Disabled"}}}},
		{Interface: nodes.InterfaceFirmware, Step: "update", Args: map[string]any{"settings": []map[string]string{{"component": "bmc", "url": "http://x/bmc.bin"}}}},
	}
	if !reflect.DeepEqual(steps, want) {
		t.Fatalf("steps %+v\nwant %+v", steps, want)
	}

	soft := &RAIDConfig{SoftwareRAIDVolumes: []SoftwareRAIDVolume{{Level: "1", PhysicalDisks: []string{"/dev/vda", "/dev/vdb"}}}}
	if iface, _ := raidInterface("redfish", soft, nil); iface != "agent" {
		t.Errorf("software RAID on redfish: interface %q, want agent", iface)
	}
	steps, _ = raidCleanSteps("agent", soft, nil)
	if len(steps) != 3 || steps[1].Step != "erase_devices_metadata" || steps[2].Step != "create_configuration" {
		t.Errorf("software RAID steps %+v", steps)
	}
	if steps, _ := raidCleanSteps("agent", soft, soft); len(steps) != 0 {
		t.Errorf("software RAID already there: %+v", steps)
	}
	disks, err := logicalDisks(soft)
	if err != nil || len(disks) != 1 || disks[0].Controller != "software" || len(disks[0].PhysicalDisks) != 2 {
		t.Errorf("software logical disks %+v, %v", disks, err)
	}
	if _, err := logicalDisks(&RAIDConfig{SoftwareRAIDVolumes: []SoftwareRAIDVolume{{Level: "0"}}}); err == nil {
		t.Error("a software RAID whose first volume is not RAID1 was accepted")
	}
	if _, err := raidCleanSteps("no-raid", &RAIDConfig{HardwareRAIDVolumes: []HardwareRAIDVolume{{Level: "1"}}}, nil); err == nil {
		t.Error("hardware RAID on no-raid was accepted")
	}
	// Without the actual settings BMO sends only the BMC driver's own.
	if steps, _ := p.manualCleaningSteps(redfish, PrepareData{TargetFirmwareSettings: map[string]string{"A": "b"}}); len(steps) != 0 {
		t.Errorf("steps without actual settings: %+v", steps)
	}
}
