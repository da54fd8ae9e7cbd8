package activities

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ironflow/ironflow/internal/testkit/registry"
	"github.com/ironflow/ironflow/store"
)

// TestAgentImageInfoOCI: for an oci:// image the agent is told the cache's
// URL, the layer's digest as its checksum and the index's disk format,
// and never the pull secret or the registry (docs/oci-images.md).
func TestAgentImageInfoOCI(t *testing.T) {
	reg := registry.Start(t)
	ca := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(ca, reg.CAPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	p := reg.PushIndex(t, "os/disk", []string{"1"},
		registry.Disk{Arch: "amd64", DiskType: "qemu", MediaType: "application/octet-stream", Data: []byte("QFI\xfb qcow2 bytes")})
	secret := reg.User + ":" + reg.Password
	n := &store.Node{UUID: "n1",
		InstanceInfo: map[string]any{"image_source": "oci://" + reg.Host + "/os/disk:1", "image_pull_secret": secret, "image_checksum": "ignored"},
		DriverInfo:   map[string]any{"image_verify_ca": ca},
		Properties:   map[string]any{"cpu_arch": "x86_64"},
	}
	a := &Activities{Config: Config{BootURL: "http://boot:8080/"}}
	got, err := a.agentImageInfo(context.Background(), n)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"image_source":        "http://boot:8080/cache/n1/image",
		"image_os_hash_algo":  "sha256",
		"image_os_hash_value": strings.TrimPrefix(p.Layers[0].String(), "sha256:"),
		"image_disk_format":   "qcow2",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	for _, k := range []string{"image_pull_secret", "image_checksum"} {
		if _, ok := got[k]; ok {
			t.Errorf("the agent is told %s", k)
		}
	}
	if n.InstanceInfo["image_pull_secret"] != secret {
		t.Errorf("the node's own instance_info was changed")
	}
	// A bad pull secret: refused as the user's mistake (not retried).
	n.InstanceInfo["image_pull_secret"] = reg.User + ":wrong"
	if _, err := a.agentImageInfo(context.Background(), n); !nonRetryable(err) || !strings.Contains(err.Error(), "requires authentication") || strings.Contains(err.Error(), "wrong") {
		t.Errorf("bad pull secret: %v, want a non-retryable authentication error without the secret", err)
	}
}
