package activities_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"

	"github.com/ironflow/ironflow/activities"
	"github.com/ironflow/ironflow/hardware"
	"github.com/ironflow/ironflow/internal/testkit/storetest"
	"github.com/ironflow/ironflow/store"
	"github.com/ironflow/ironflow/workflows"
)

// A node whose boot interface is http-ipxe gets a boot config that the
// DHCP service answers UEFI HTTP boot with: method http-ipxe and the loader
// for its cpu_arch on the boot service. A BIOS node, or an architecture
// without a loader, fails the preparation (before any power action) with
// an error that names the architecture and the setting, and gets no boot
// config.
func TestPrepareBootHTTPIPXE(t *testing.T) {
	st := storetest.New(t)
	ctx := context.Background()
	// The worker boots an aarch64 agent (arch.go), so that an aarch64
	// node reaches the question of its UEFI HTTP boot loader.
	a := activities.New(st, activities.Config{BootURL: "http://10.99.0.1:8080/", AgentArchitectures: []string{activities.ArchX8664, activities.ArchAArch64}},
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	for _, c := range []struct {
		name, mode, arch string
		loader           string
		fail             []string
	}{
		{name: "x86_64 by default", mode: "uefi", loader: "http://10.99.0.1:8080/loaders/snponly.efi"},
		{name: "x86_64 named", mode: "uefi", arch: "x86_64", loader: "http://10.99.0.1:8080/loaders/snponly.efi"},
		{name: "no loader for aarch64", mode: "uefi", arch: "aarch64", fail: []string{"architecture aarch64", "--ipxe-bootfile-name-by-arch", "x86_64"}},
		{name: "bios", mode: "bios", fail: []string{"needs boot mode uefi", "boot mode is bios"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			props := map[string]any{}
			if c.arch != "" {
				props["cpu_arch"] = c.arch
			}
			n := &store.Node{Driver: "fake-hardware", BootInterface: string(hardware.HTTPIPXE), ProvisionState: "cleaning", Properties: props}
			if err := st.CreateNode(ctx, n); err != nil {
				t.Fatal(err)
			}
			err := a.PrepareBoot(ctx, workflows.BootInput{Node: workflows.NodeInfo{UUID: n.UUID, BootInterface: hardware.HTTPIPXE,
				BootMode: c.mode, MACs: []string{"52:54:00:00:16:01"}}, Kind: workflows.BootAgent})
			bc, gerr := st.GetBootConfig(ctx, n.UUID)
			if c.fail != nil {
				for _, want := range c.fail {
					if err == nil || !strings.Contains(err.Error(), want) {
						t.Errorf("PrepareBoot: %v, want an error with %q", err, want)
					}
				}
				if !errors.Is(gerr, store.ErrNotFound) {
					t.Errorf("boot config stored after a failed preparation: %+v", bc)
				}
				return
			}
			if err != nil || gerr != nil || bc.Method != store.BootMethodHTTPIPXE || bc.LoaderURL != c.loader || bc.KernelURL == "" {
				t.Errorf("boot config %+v (%v, %v), want method http-ipxe, loader %s", bc, err, gerr, c.loader)
			}
		})
	}

	// --http-boot-loader-url: the loader from another (HTTPS) boot
	// service, the agent's images still from --boot-url.
	a = activities.New(st, activities.Config{BootURL: "http://10.99.0.1:8080", LoaderBaseURL: "https://10.99.0.1:8443"}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	n := &store.Node{Driver: "fake-hardware", BootInterface: string(hardware.HTTPIPXE), ProvisionState: "cleaning"}
	if err := st.CreateNode(ctx, n); err != nil {
		t.Fatal(err)
	}
	err := a.PrepareBoot(ctx, workflows.BootInput{Node: workflows.NodeInfo{UUID: n.UUID, BootInterface: hardware.HTTPIPXE,
		BootMode: "uefi", MACs: []string{"52:54:00:00:16:02"}}, Kind: workflows.BootAgent})
	bc, gerr := st.GetBootConfig(ctx, n.UUID)
	if err != nil || gerr != nil || bc.LoaderURL != "https://10.99.0.1:8443/loaders/snponly.efi" || !strings.HasPrefix(bc.KernelURL, "http://10.99.0.1:8080/") {
		t.Errorf("with a loader base URL: boot config %+v (%v, %v)", bc, err, gerr)
	}
}

// redfish-https boots the virtual-media ISO by the firmware's UEFI HTTP
// boot: a BIOS node fails the preparation before any power action, with
// no boot config; a uefihttp boot with no ISO prepared is refused before
// the BMC is called.
func TestRedfishHTTPSNeedsUEFIAndAnISO(t *testing.T) {
	st := storetest.New(t)
	ctx := context.Background()
	a := activities.New(st, activities.Config{BootURL: "http://10.99.0.1:8080/"}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	n := &store.Node{Driver: "redfish", BootInterface: string(hardware.RedfishHTTPS), ProvisionState: "cleaning"}
	if err := st.CreateNode(ctx, n); err != nil {
		t.Fatal(err)
	}
	node := workflows.NodeInfo{UUID: n.UUID, Driver: "redfish", BootInterface: hardware.RedfishHTTPS, BootMode: "bios", MACs: []string{"52:54:00:00:16:09"}}
	err := a.PrepareBoot(ctx, workflows.BootInput{Node: node, Kind: workflows.BootAgent})
	for _, want := range []string{"redfish-https", "needs boot mode uefi", "boot mode is bios"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("PrepareBoot of a BIOS node: %v, want an error with %q", err, want)
		}
	}
	if bc, gerr := st.GetBootConfig(ctx, n.UUID); !errors.Is(gerr, store.ErrNotFound) {
		t.Errorf("boot config stored after a failed preparation: %+v", bc)
	}
	node.BootMode = "uefi"
	err = a.SetBootDevice(ctx, workflows.BootDeviceInput{Node: node, Device: workflows.BootDeviceUefiHTTP})
	if err == nil || !strings.Contains(err.Error(), "no ISO was prepared") {
		t.Errorf("SetBootDevice uefihttp without an ISO: %v", err)
	}
}
