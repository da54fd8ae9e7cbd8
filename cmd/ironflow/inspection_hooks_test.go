package main

import (
	"slices"
	"strings"
	"testing"

	"github.com/ironflow/ironflow/inspection/hooks"
)

// The worker's hook settings: the default is Ironic's hooks as ironflow
// runs them; an unknown hook, a list without ramdisk-error or
// validate-interfaces, a bad CIDR map entry and a bad PCI alias are
// refused with the flag named.
func TestInspectionHookFlags(t *testing.T) {
	parse := func(args ...string) ([]string, hooks.Config, error) {
		t.Helper()
		s := newSettings("worker")
		f := addWorkerFlags(s, nil)
		if err := s.parse(args); err != nil {
			t.Fatal(err)
		}
		return f.hookSettings()
	}
	names, def, err := parse()
	if err != nil || !slices.Equal(names, hooks.DefaultHooks) || def.AddPorts != "all" || def.KeepPorts != "all" || def.KeepPXEEnabled {
		t.Fatalf("default hooks %v, config %+v, %v; want %v, all ports added and kept, pxe_enabled updated", names, def, err, hooks.DefaultHooks)
	}
	if _, c, err := parse("--inspection-add-ports", "pxe", "--inspection-keep-ports", "present", "--inspection-update-pxe-enabled=false"); err != nil ||
		c.AddPorts != "pxe" || c.KeepPorts != "present" || !c.KeepPXEEnabled {
		t.Fatalf("port settings: %+v, %v", c, err)
	}
	names, cfg, err := parse("--inspection-hooks", "ramdisk-error,validate-interfaces,ports,boot-mode,physical-network,pci-devices",
		"--inspection-physical-network-cidr-map", "10.0.0.0/24:physnet1,2001:db8::/64:physnet2",
		"--inspection-pci-device-alias", `[{"vendor_id": "10de", "product_id": "1eb8", "name": "gpu_t4"}]`)
	if err != nil || len(names) != 6 || len(cfg.PhysicalNetworkCIDRMap) != 2 || len(cfg.PCIDeviceAlias) != 1 || cfg.PCIDeviceAlias[0].Name != "gpu_t4" {
		t.Fatalf("hooks %v, config %+v, %v", names, cfg, err)
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--inspection-hooks", "ramdisk-error,validate-interfaces,extra-hardwar"}, `--inspection-hooks: unknown hook "extra-hardwar"`},
		{[]string{"--inspection-hooks", "ramdisk-error,ports"}, "validate-interfaces is required"},
		{[]string{"--inspection-physical-network-cidr-map", "10.0.0.0/24"}, "--inspection-physical-network-cidr-map"},
		{[]string{"--inspection-pci-device-alias", `[{"vendor_id": "10de", "name": "gpu"}]`}, "--inspection-pci-device-alias"},
		{[]string{"--inspection-pci-device-alias", `{"vendor_id": "10de"}`}, "want a JSON list"},
		{[]string{"--inspection-add-ports", "some"}, "--inspection-add-ports"},
		{[]string{"--inspection-keep-ports", "none"}, "--inspection-keep-ports"},
	} {
		if _, _, err := parse(tc.args...); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v: %v; want an error saying %q", tc.args, err, tc.want)
		}
	}
}
