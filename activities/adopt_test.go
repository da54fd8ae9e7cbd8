package activities

import (
	"testing"

	"github.com/ironflow/ironflow/store"
)

// TestAdoptionProblem: Ironic's adoption validates the boot interface only
// for an instance that boots through it (deploy ramdisk, anaconda), with
// its PXE boot's checks and messages.
func TestAdoptionProblem(t *testing.T) {
	const id = "1be26c0b-03f2-4d2e-ae87-c02d7f33c123"
	macs := []string{"52:54:00:12:34:56"}
	missing := func(keys string) string {
		return "Cannot validate image information for node " + id + " because one or more parameters are missing from its " +
			"instance_info and insufficient information is present to boot from a remote volume. Missing are: " + keys
	}
	cases := []struct {
		name         string
		boot, deploy string
		instance     map[string]any
		macs         []string
		want         string
	}{
		{name: "direct, nothing in instance_info", boot: "ipxe", deploy: "direct", macs: nil},
		{name: "fake deploy", boot: "fake", deploy: "fake"},
		{name: "ramdisk, fake boot", boot: "fake", deploy: "ramdisk"},
		{name: "ramdisk without kernel and ramdisk", boot: "ipxe", deploy: "ramdisk", macs: macs, want: missing("['kernel', 'ramdisk']")},
		{name: "ramdisk without ramdisk", boot: "pxe", deploy: "ramdisk", macs: macs,
			instance: map[string]any{"kernel": "http://images.example/vmlinuz"}, want: missing("['ramdisk']")},
		{name: "ramdisk with both", boot: "ipxe", deploy: "ramdisk", macs: macs,
			instance: map[string]any{"kernel": "http://images.example/vmlinuz", "ramdisk": "http://images.example/initrd"}},
		{name: "ramdisk with a boot ISO", boot: "ipxe", deploy: "ramdisk", macs: macs, instance: map[string]any{"boot_iso": "http://images.example/boot.iso"}},
		{name: "boot ISO and image", boot: "ipxe", deploy: "ramdisk", macs: macs,
			instance: map[string]any{"boot_iso": "http://images.example/boot.iso", "image_source": "http://images.example/disk.img"},
			want:     "An 'image_source' and 'boot_iso' parameter may not be specified at the same time."},
		{name: "ramdisk without a port", boot: "ipxe", deploy: "ramdisk", want: "Node " + id + " does not have any port associated with it"},
		{name: "ramdisk on virtual media without a port", boot: "redfish-virtual-media", deploy: "ramdisk",
			instance: map[string]any{"boot_iso": "http://images.example/boot.iso"}},
		{name: "anaconda without anything", boot: "ipxe", deploy: "anaconda", macs: macs, want: missing("['image_source', 'kernel', 'ramdisk']")},
		{name: "anaconda with a Glance image", boot: "ipxe", deploy: "anaconda", macs: macs,
			instance: map[string]any{"image_source": "glance://0d2b9c4e-6f25-4a77-9b3c-5ee1d1a0c0de"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			n := &store.Node{UUID: id, BootInterface: c.boot, DeployInterface: c.deploy, InstanceInfo: c.instance}
			if got := adoptionProblem(n, c.macs); got != c.want {
				t.Errorf("got %q, want %q", got, c.want)
			}
		})
	}
}
