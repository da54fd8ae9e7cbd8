package agent

import (
	"testing"
)

func TestChooseRootDevice(t *testing.T) {
	devs := []BlockDevice{
		{Name: "/dev/sr0", Size: 8 << 30, Kind: "cdrom"},
		{Name: "/dev/sdb", Size: 100 * gib, Kind: "disk", Serial: "S2", WWN: "0x5000c500a1b2c3d4", Rotational: true, ByPath: "/dev/disk/by-path/pci-0000:00:05.0-scsi-0:0:1:0"},
		{Name: "/dev/sda", Size: 200 * gib, Kind: "disk", Serial: "S1", Model: "Fast SSD"},
		{Name: "/dev/sdc", Size: 2 * gib, Kind: "disk", Serial: "S3"},
		{Name: "/dev/sdd", Size: 50 * gib, Kind: "disk", ReadOnly: true},
		{Name: "/dev/vda", Size: 20 * gib, Kind: "disk", Serial: "V1", ByPath: "/dev/disk/by-path/pci-0000:00:04.0"},
	}
	for _, tc := range []struct {
		name  string
		hints map[string]any
		min   int64
		want  string
		err   bool
	}{
		{"no hints: smallest >= 4 GiB", nil, DefaultMinRootDiskSize, "/dev/vda", false},
		{"no hints, small minimum", nil, 1 << 30, "/dev/sdc", false},
		{"no hints, none big enough", nil, 500 * gib, "", true},
		{"size exact", map[string]any{"size": float64(100)}, 0, "/dev/sdb", false},
		{"size operator", map[string]any{"size": ">= 150"}, 0, "/dev/sda", false},
		{"name short", map[string]any{"name": "sdb"}, 0, "/dev/sdb", false},
		{"name full", map[string]any{"name": "/dev/vda"}, 0, "/dev/vda", false},
		{"serial case-insensitive", map[string]any{"serial": "s1"}, 0, "/dev/sda", false},
		{"wwn", map[string]any{"wwn": "0x5000C500A1B2C3D4"}, 0, "/dev/sdb", false},
		{"by_path", map[string]any{"by_path": "/dev/disk/by-path/pci-0000:00:04.0"}, 0, "/dev/vda", false},
		{"rotational false + size", map[string]any{"rotational": false, "size": "> 100"}, 0, "/dev/sda", false},
		{"rotational string", map[string]any{"rotational": "true"}, 0, "/dev/sdb", false},
		{"model <in>", map[string]any{"model": "<in> ssd"}, 0, "/dev/sda", false},
		{"never a cdrom", map[string]any{"name": "sr0"}, 0, "", true},
		{"never read-only", map[string]any{"name": "sdd"}, 0, "", true},
		{"no match", map[string]any{"serial": "nope"}, 0, "", true},
		{"unknown hint refused", map[string]any{"wwn_vendor_extension": "x"}, 0, "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d, err := chooseRootDevice(devs, tc.hints, tc.min)
			if tc.err {
				if err == nil {
					t.Fatalf("want error, got %s", d.Name)
				}
				return
			}
			if err != nil || d.Name != tc.want {
				t.Fatalf("got %s %v, want %s", d.Name, err, tc.want)
			}
		})
	}
}
