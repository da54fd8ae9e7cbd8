package activities_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"

	"go.temporal.io/sdk/temporal"

	"github.com/ironflow/ironflow/activities"
	"github.com/ironflow/ironflow/internal/testkit/storetest"
	"github.com/ironflow/ironflow/provision"
	"github.com/ironflow/ironflow/store"
	"github.com/ironflow/ironflow/workflows"
)

// The agent a node network-boots follows its cpu_arch: the boot service's
// agent.kernel.aarch64 with the arm64 console for aarch64 (or arm64) when
// the worker boots that architecture; a cpu_arch the worker has no agent
// and loader for fails boot preparation with an error naming the
// architecture and the setting, and stores no boot configuration.
func TestPrepareBootPicksTheAgentByCPUArch(t *testing.T) {
	st := storetest.New(t)
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	both := activities.New(st, activities.Config{BootURL: "http://boot", AgentKernelParams: "console=ttyS0",
		AgentArchitectures: []string{"x86_64", "aarch64"}}, log)
	x86Only := activities.New(st, activities.Config{BootURL: "http://boot", AgentKernelParams: "console=ttyS0"}, log)
	for _, c := range []struct {
		name             string
		a                *activities.Activities
		cpuArch          any
		kernel, initrd   string
		console, noParam string
		fail             []string
	}{
		{name: "unset is x86_64", a: both, cpuArch: nil, kernel: "http://boot/images/agent.kernel", initrd: "http://boot/images/agent.initramfs", console: "console=ttyS0", noParam: "ttyAMA0"},
		{name: "x86_64", a: x86Only, cpuArch: "x86_64", kernel: "http://boot/images/agent.kernel", initrd: "http://boot/images/agent.initramfs", console: "console=ttyS0", noParam: "ttyAMA0"},
		{name: "aarch64", a: both, cpuArch: "aarch64", kernel: "http://boot/images/agent.kernel.aarch64", initrd: "http://boot/images/agent.initramfs.aarch64", console: "console=ttyAMA0", noParam: "ttyS0"},
		{name: "arm64 is aarch64", a: both, cpuArch: "arm64", kernel: "http://boot/images/agent.kernel.aarch64", initrd: "http://boot/images/agent.initramfs.aarch64", console: "console=ttyAMA0", noParam: "ttyS0"},
		{name: "aarch64 on an x86_64-only worker", a: x86Only, cpuArch: "aarch64", fail: []string{"cpu_arch aarch64", "--agent-architectures", "boots x86_64"}},
		{name: "an architecture nobody boots", a: both, cpuArch: "ppc64le", fail: []string{"cpu_arch ppc64le", "--agent-architectures", "boots aarch64, x86_64"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			props := map[string]any{}
			if c.cpuArch != nil {
				props["cpu_arch"] = c.cpuArch
			}
			n := &store.Node{Driver: "fake-hardware", ProvisionState: provision.Inspecting, Properties: props}
			if err := st.CreateNode(ctx, n); err != nil {
				t.Fatal(err)
			}
			err := c.a.PrepareBoot(ctx, workflows.BootInput{Node: workflows.NodeInfo{UUID: n.UUID, BootMode: "uefi", MACs: []string{"52:54:00:00:00:01"}}, Kind: workflows.BootInspect})
			bc, gerr := st.GetBootConfig(ctx, n.UUID)
			if c.fail != nil {
				var app *temporal.ApplicationError
				if !errors.As(err, &app) || app.Type() != workflows.ErrTypeInvalidConfig || !app.NonRetryable() {
					t.Fatalf("PrepareBoot: %v, want a non-retryable %s error", err, workflows.ErrTypeInvalidConfig)
				}
				for _, want := range c.fail {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("error %q does not say %q", err, want)
					}
				}
				if gerr == nil {
					t.Errorf("a boot configuration was stored for an architecture without an agent: %+v", bc)
				}
				return
			}
			if err != nil || gerr != nil {
				t.Fatalf("PrepareBoot: %v; boot config: %v", err, gerr)
			}
			if bc.KernelURL != c.kernel || bc.InitrdURL != c.initrd {
				t.Errorf("agent %s + %s, want %s + %s", bc.KernelURL, bc.InitrdURL, c.kernel, c.initrd)
			}
			if !strings.Contains(bc.KernelParams, c.console) || strings.Contains(bc.KernelParams, c.noParam) || !strings.Contains(bc.KernelParams, "ipa-api-url=") {
				t.Errorf("kernel params %q: want %q and the API URL, not %q", bc.KernelParams, c.console, c.noParam)
			}
		})
	}
	// Virtual media carries the x86_64 agent ISO only: an aarch64 node
	// there fails the same way, before any ISO is built.
	n := &store.Node{Driver: "fake-hardware", ProvisionState: provision.Inspecting, Properties: map[string]any{"cpu_arch": "aarch64"}}
	if err := st.CreateNode(ctx, n); err != nil {
		t.Fatal(err)
	}
	err := both.PrepareBoot(ctx, workflows.BootInput{Node: workflows.NodeInfo{UUID: n.UUID, BootMode: "uefi", BootInterface: "redfish-virtual-media",
		MACs: []string{"52:54:00:00:00:02"}}, Kind: workflows.BootInspect})
	var app *temporal.ApplicationError
	if !errors.As(err, &app) || app.Type() != workflows.ErrTypeInvalidConfig || !strings.Contains(err.Error(), "cpu_arch aarch64") || !strings.Contains(err.Error(), "virtual media") {
		t.Errorf("virtual media for an aarch64 node: %v, want an invalid-config error naming cpu_arch aarch64 and virtual media", err)
	}
	if got := activities.NormalizeArch(" ARM64 "); got != activities.ArchAArch64 {
		t.Errorf("NormalizeArch(ARM64) = %q", got)
	}
}

// An agent booted to inspect gets the inspection parameters (LLDP by
// default) on its command line; one booted for anything else does not.
func TestPrepareBootAddsInspectionParamsToInspectionBoots(t *testing.T) {
	st := storetest.New(t)
	ctx := context.Background()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	a := activities.New(st, activities.Config{BootURL: "http://boot", AgentKernelParams: "console=ttyS0",
		InspectionKernelParams: activities.DefaultInspectionKernelParams}, log)
	for _, c := range []struct {
		kind  workflows.BootKind
		state provision.State
		lldp  bool
	}{
		{workflows.BootInspect, provision.Inspecting, true},
		{workflows.BootAgent, provision.Cleaning, false},
		{workflows.BootRescue, provision.Rescuing, false},
	} {
		n := &store.Node{Driver: "fake-hardware", ProvisionState: c.state}
		if err := st.CreateNode(ctx, n); err != nil {
			t.Fatal(err)
		}
		if err := a.PrepareBoot(ctx, workflows.BootInput{Node: workflows.NodeInfo{UUID: n.UUID, BootMode: "uefi", MACs: []string{"52:54:00:00:00:02"}}, Kind: c.kind}); err != nil {
			t.Fatalf("%s: PrepareBoot: %v", c.kind, err)
		}
		bc, err := st.GetBootConfig(ctx, n.UUID)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(bc.KernelParams, "ipa-collect-lldp=1"); got != c.lldp || !strings.Contains(bc.KernelParams, "console=ttyS0") {
			t.Errorf("%s boot: kernel params %q; want ipa-collect-lldp=1: %v", c.kind, bc.KernelParams, c.lldp)
		}
	}
}
