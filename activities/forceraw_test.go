package activities

import (
	"context"
	"strings"
	"testing"

	"github.com/ironflow/ironflow/store"
)

func TestForceRawTellsTheAgentRawAndTheCachesChecksum(t *testing.T) {
	sum := strings.Repeat("a", 64)
	for _, tc := range []struct {
		name          string
		force         bool
		ii            map[string]any
		format, cksum string
		keepsOSHash   bool
	}{
		{"qcow2 converted", true, map[string]any{"image_disk_format": "qcow2", "image_download_source": "http"}, "raw", "http://boot:8080/cache/n1/checksum", false},
		{"undeclared: the cache tells", true, map[string]any{"image_download_source": "http"}, "", "http://boot:8080/cache/n1/checksum", false},
		{"declared raw: untouched", true, map[string]any{"image_disk_format": "raw", "image_download_source": "http"}, "raw", "", true},
		{"direct: untouched", true, map[string]any{"image_disk_format": "qcow2", "image_download_source": "direct"}, "qcow2", "", true},
		{"off: untouched", false, map[string]any{"image_disk_format": "qcow2", "image_download_source": "http"}, "qcow2", "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ii := map[string]any{"image_source": "https://images.example/disk.qcow2", "image_os_hash_algo": "sha256", "image_os_hash_value": sum}
			for k, v := range tc.ii {
				ii[k] = v
			}
			a := &Activities{Config: Config{BootURL: "http://boot:8080/", ForceRawImages: tc.force}}
			got, err := a.agentImageInfo(context.Background(), &store.Node{UUID: "n1", InstanceInfo: ii})
			if err != nil {
				t.Fatal(err)
			}
			if f, _ := got["image_disk_format"].(string); f != tc.format {
				t.Errorf("image_disk_format %q, want %q", f, tc.format)
			}
			if c, _ := got["image_checksum"].(string); c != tc.cksum {
				t.Errorf("image_checksum %q, want %q", c, tc.cksum)
			}
			if _, ok := got["image_os_hash_value"]; ok != tc.keepsOSHash {
				t.Errorf("image_os_hash_value kept %v, want %v", ok, tc.keepsOSHash)
			}
			if ii["image_disk_format"] != tc.ii["image_disk_format"] {
				t.Error("the node's instance_info was changed")
			}
		})
	}
}
