package activities

import (
	"reflect"
	"testing"

	"github.com/ironflow/ironflow/store"
)

// TestWithPartitionImageInfo: write_image of a partition image gets IPA's
// image_info keys from instance_info, sizes in MiB, the node's boot mode
// when it is known, and keys already in the args win.
func TestWithPartitionImageInfo(t *testing.T) {
	uefi := "uefi"
	n := &store.Node{BootMode: &uefi, InstanceInfo: map[string]any{"image_type": "partition", "root_gb": float64(10), "swap_mb": "512",
		"ephemeral_gb": float64(2), "ephemeral_format": "vfat", "preserve_ephemeral": true, "capabilities": `{"disk_label": "gpt"}`}}
	got := withPartitionImageInfo(map[string]any{"image_info": map[string]any{"swap_mb": 1}}, n)["image_info"]
	want := map[string]any{"image_type": "partition", "root_mb": int64(10240), "swap_mb": 1, "ephemeral_mb": int64(2048),
		"ephemeral_format": "vfat", "preserve_ephemeral": true, "boot_mode": "uefi", "disk_label": "gpt"}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("image_info %v, want %v", got, want)
	}
	n = &store.Node{InstanceInfo: map[string]any{"image_type": "partition", "root_gb": "1"}}
	info := withPartitionImageInfo(nil, n)["image_info"].(map[string]any)
	if _, ok := info["boot_mode"]; ok || info["root_mb"] != int64(1024) {
		t.Fatalf("no boot mode known: image_info %v, want root_mb 1024 and no boot_mode", info)
	}
}
