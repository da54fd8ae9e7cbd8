package bmc

import (
	"context"
	"errors"
	"reflect"
	"testing"

	agentclient "github.com/ironflow/ironflow/agent/client"
)

func TestRedfishInspect(t *testing.T) {
	const dmtf = "/redfish/v1/Systems/437XR1138R2"
	cases := []struct {
		name string
		dir  string
		edit func(b *recordedBMC)
		want agentclient.Inventory
	}{
		{
			// Every collection served: an absent socket, an FPGA, an empty
			// DIMM slot, empty bays, a VLAN and the BMC host interface are
			// all left out.
			name: "dmtf-all-collections", dir: "dmtf-public-rackmount1",
			want: agentclient.Inventory{
				CPU:    agentclient.CPU{Count: 16, Architecture: "x86_64", ModelName: "Multi-Core Intel(R) Xeon(R) processor 7xxx Series"},
				Memory: agentclient.Memory{PhysicalMB: 3 * 32768, Total: 3 * 32768 << 20},
				Disks: []agentclient.Disk{
					{Name: "SATA Bay 1", Size: 8000000000000, Model: "3000GT8"},
					{Name: "SATA Bay 2", Size: 4000000000000, Model: "3000GT7"},
				},
				Interfaces: []agentclient.Interface{
					{Name: "12446A3B0411", MACAddress: "12:44:6a:3b:04:11"},
					{Name: "12446A3B8890", MACAddress: "aa:bb:cc:dd:ee:00"},
				},
				SystemVendor: agentclient.SystemVendor{Manufacturer: "Contoso", ProductName: "3500", SerialNumber: "437XR1138R2"},
				Boot:         agentclient.Boot{CurrentBootMode: "uefi"},
			},
		},
		{
			// The iLO recording links Processors, Memory, Storage and
			// EthernetInterfaces but serves none of them: the summaries
			// stand in and the inspection still succeeds.
			name: "ilo-collections-missing", dir: "hpe-ilo-dl325",
			want: agentclient.Inventory{
				CPU:          agentclient.CPU{Count: 1, ModelName: "AMD EPYC 7302P 16-Core Processor"},
				Memory:       agentclient.Memory{PhysicalMB: 64 * 1024, Total: 64 << 30},
				Disks:        []agentclient.Disk{},
				Interfaces:   []agentclient.Interface{},
				SystemVendor: agentclient.SystemVendor{Manufacturer: "HPE", ProductName: "ProLiant DL325 Gen10 Plus", SerialNumber: "MXQ019020B"},
				Boot:         agentclient.Boot{CurrentBootMode: "uefi"},
			},
		},
		{
			// Storage → Drives as iLO 5 serves it when a Smart Array is
			// present; an empty bay is skipped.
			name: "ilo-storage-drives", dir: "hpe-ilo-dl325",
			edit: func(b *recordedBMC) {
				b.docs["/redfish/v1/Systems/1/Storage"] = map[string]any{
					"Members": []any{map[string]any{"@odata.id": "/redfish/v1/Systems/1/Storage/DE00A000"}},
				}
				b.docs["/redfish/v1/Systems/1/Storage/DE00A000"] = map[string]any{"Drives": []any{
					map[string]any{"@odata.id": "/redfish/v1/Systems/1/Storage/DE00A000/Drives/0"},
					map[string]any{"@odata.id": "/redfish/v1/Systems/1/Storage/DE00A000/Drives/1"},
				}}
				b.docs["/redfish/v1/Systems/1/Storage/DE00A000/Drives/0"] = map[string]any{
					"Id": "0", "Name": "480GB 6G SATA SSD", "Model": "MR000480GWFLU  ", "SerialNumber": "S4NNNA0N912345",
					"CapacityBytes": 480103981056, "MediaType": "SSD", "Status": map[string]any{"State": "Enabled"},
				}
				b.docs["/redfish/v1/Systems/1/Storage/DE00A000/Drives/1"] = map[string]any{
					"Id": "1", "Name": "Bay 2", "Status": map[string]any{"State": "Absent"},
				}
				b.docs["/redfish/v1/Systems/1/Processors"] = map[string]any{
					"Members": []any{map[string]any{"@odata.id": "/redfish/v1/Systems/1/Processors/1"}},
				}
				b.docs["/redfish/v1/Systems/1/Processors/1"] = map[string]any{
					"ProcessorType": "CPU", "ProcessorArchitecture": "x86", "InstructionSet": "x86-64",
					"Model": "AMD EPYC 7302P 16-Core Processor               ", "TotalCores": 16, "TotalThreads": 32,
					"Status": map[string]any{"State": "Enabled"},
				}
			},
			want: agentclient.Inventory{
				CPU:          agentclient.CPU{Count: 32, Architecture: "x86_64", ModelName: "AMD EPYC 7302P 16-Core Processor"},
				Memory:       agentclient.Memory{PhysicalMB: 64 * 1024, Total: 64 << 30},
				Disks:        []agentclient.Disk{{Name: "480GB 6G SATA SSD", Size: 480103981056, Model: "MR000480GWFLU", Serial: "S4NNNA0N912345"}},
				Interfaces:   []agentclient.Interface{},
				SystemVendor: agentclient.SystemVendor{Manufacturer: "HPE", ProductName: "ProLiant DL325 Gen10 Plus", SerialNumber: "MXQ019020B"},
				Boot:         agentclient.Boot{CurrentBootMode: "uefi"},
			},
		},
		{
			name: "legacy-boot-mode", dir: "dmtf-public-rackmount1",
			edit: func(b *recordedBMC) {
				b.docs[dmtf]["Boot"].(map[string]any)["BootSourceOverrideMode"] = "Legacy"
				delete(b.docs[dmtf], "SimpleStorage")
				delete(b.docs[dmtf], "Processors")
				delete(b.docs[dmtf], "Memory")
				delete(b.docs[dmtf], "EthernetInterfaces")
			},
			want: agentclient.Inventory{
				CPU:          agentclient.CPU{Count: 16, ModelName: "Multi-Core Intel(R) Xeon(R) processor 7xxx Series"},
				Memory:       agentclient.Memory{PhysicalMB: 96 * 1024, Total: 96 << 30},
				Disks:        []agentclient.Disk{},
				Interfaces:   []agentclient.Interface{},
				SystemVendor: agentclient.SystemVendor{Manufacturer: "Contoso", ProductName: "3500", SerialNumber: "437XR1138R2"},
				Boot:         agentclient.Boot{CurrentBootMode: "bios"},
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := startBMC(t, tc.dir, tc.edit)
			d := newTestRedfish(t, b.info(nil))
			in, ok := d.(Inspector)
			if !ok {
				t.Fatal("redfish driver does not implement Inspector")
			}
			got, err := in.Inspect(context.Background())
			if err != nil {
				t.Fatalf("Inspect: %v", err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Inspect:\n got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

// A collection the BMC refuses to show is not a missing one: the
// inspection fails with the authentication error instead of reporting a
// machine without memory.
func TestRedfishInspectForbiddenCollection(t *testing.T) {
	b := startBMC(t, "dmtf-public-rackmount1", func(b *recordedBMC) {
		b.forbidPath = "/redfish/v1/Systems/437XR1138R2/Memory/DIMM2"
	})
	d := newTestRedfish(t, b.info(nil))
	_, err := d.(Inspector).Inspect(context.Background())
	if !errors.Is(err, ErrAuth) {
		t.Fatalf("Inspect with a forbidden DIMM: got %v, want ErrAuth", err)
	}
}
