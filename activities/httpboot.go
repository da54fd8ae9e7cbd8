package activities

import (
	"slices"
	"strings"

	"github.com/ironflow/ironflow/hardware"
	"github.com/ironflow/ironflow/pxe"
	"github.com/ironflow/ironflow/store"
	"github.com/ironflow/ironflow/workflows"
)

// DefaultIPXEBootfileByArch is the iPXE loader per cpu_arch for UEFI HTTP
// boot: iPXE over the firmware's network stack (Debian's ipxe package
// builds it for x86_64 only).
var DefaultIPXEBootfileByArch = map[string]string{"x86_64": pxe.DefaultHTTPIPXELoader}

// netbootMethod is how a node boots the agent over the network: PXE, or
// for a boot interface that boots over UEFI HTTP boot, the loader URL its
// firmware fetches. A UEFI HTTP boot of a BIOS node, or of an architecture
// without a loader, fails here, before the machine is powered.
func (a *Activities) netbootMethod(node workflows.NodeInfo, n *store.Node) (method, loaderURL string, err error) {
	if !hardware.BootOf(node.BootInterface).HTTPBoot() {
		return store.BootMethodPXE, "", nil
	}
	if node.BootMode != store.BootModeUEFI {
		return "", "", invalidConfig("node %s: boot interface %s boots over UEFI HTTP boot, which needs boot mode uefi; the node's boot mode is %s",
			node.UUID, node.BootInterface, node.BootMode)
	}
	arch := ArchX8664
	if n != nil {
		arch = NormalizeArch(cpuArch(n))
	}
	loaders := a.Config.IPXEBootfileByArch
	if loaders == nil {
		loaders = DefaultIPXEBootfileByArch
	}
	file, ok := loaders[arch]
	if !ok || file == "" {
		var have []string
		for k := range loaders {
			have = append(have, k)
		}
		slices.Sort(have)
		return "", "", invalidConfig("node %s: no UEFI HTTP boot loader for architecture %s (properties/cpu_arch): add one to the worker's --ipxe-bootfile-name-by-arch, e.g. %s:snponly.efi (loaders are configured for: %s)",
			node.UUID, arch, arch, strings.Join(have, ", "))
	}
	base := a.Config.LoaderBaseURL
	if base == "" {
		base = a.Config.BootURL
	}
	if base == "" {
		return "", "", invalidConfig("node %s boots over UEFI HTTP boot, but this worker has no boot service URL (--boot-url)", node.UUID)
	}
	return store.BootMethodHTTPIPXE, strings.TrimRight(base, "/") + pxe.LoaderPath(file), nil
}
