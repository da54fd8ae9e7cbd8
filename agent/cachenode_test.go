package agent

import (
	"bytes"
	"io"
	"os"
	"testing"
	"time"

	"github.com/ironflow/ironflow/agent/client"
)

// TestInstallBootloaderUsesTheDeployStepsNode: the node of
// execute_deploy_step replaces the lookup's for later commands (IPA's
// hardware.cache_node). The lookup knows only a Glance image's UUID; the
// conductor's write_image node says it is a partition image with kernel
// and ramdisk URLs (as the worker makes them from Glance's kernel_id and
// ramdisk_id); install_bootloader then installs that kernel and ramdisk.
func TestInstallBootloaderUsesTheDeployStepsNode(t *testing.T) {
	root, kernel, initrd := testImage(1<<20), bytes.Repeat([]byte("kernel"), 50<<10), bytes.Repeat([]byte("initrd"), 90<<10)
	srv := newImageServer(t, map[string][]byte{"root.img": root, "vmlinuz": kernel, "initrd": initrd})
	sdboot := t.TempDir() + "/systemd-bootx64.efi"
	if err := os.WriteFile(sdboot, append([]byte("MZ"), bytes.Repeat([]byte{0x90}, 4<<10)...), 0o644); err != nil {
		t.Fatal(err)
	}
	api := newFakeAPI(t)
	api.instance = map[string]any{"image_source": "0b3e9a4c-7c4b-4f3e-8b53-2d0b6b0a9a11"}
	hw := newFileHardware(t, 2<<30)
	_, c := startAgent(t, api, hw, func(cfg *Config) { cfg.SystemdBoot = sdboot })
	node := map[string]any{"uuid": api.node, "instance_info": map[string]any{
		"image_type": "partition", "image_source": srv.URL + "/root.img", "image_checksum": sha256hex(root),
		"root_gb": 1, "capabilities": `{"boot_mode": "uefi"}`, "kernel": srv.URL + "/vmlinuz", "ramdisk": srv.URL + "/initrd"}}
	if _, err := runWriteImage(t, c, nil, node); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	r, err := c.InstallBootloader(ctx, client.InstallBootloaderParams{TargetBootMode: "uefi"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err = c.WaitCommand(ctx, r.ID, 10*time.Millisecond, nil); err != nil {
		t.Fatal(err)
	}
	_, _, fs := openESP(t, hw.path(0), 2<<30)
	for p, want := range map[string][]byte{"/vmlinuz": kernel, "/initrd": initrd} {
		f, err := fs.OpenFile(p, os.O_RDONLY)
		if err != nil {
			t.Fatalf("%s on the ESP: %v", p, err)
		}
		if got, _ := io.ReadAll(f); !bytes.Equal(got, want) {
			t.Errorf("%s on the ESP: %d bytes, want the deploy step's %d", p, len(got), len(want))
		}
	}
}
