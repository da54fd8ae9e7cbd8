package activities

import (
	"sort"
	"strings"
)

// Machine architectures, by the names of the node's properties/cpu_arch
// (Ironic's, as `uname -m` prints them). docs/bmcs-and-boot.md, "arm64",
// says what boots each.
const (
	ArchX8664   = "x86_64"
	ArchAArch64 = "aarch64"
)

// DefaultAgentArchitectures are the architectures a worker boots the
// agent of when configuration says nothing: the boot service's
// agent.kernel and agent.initramfs, and Debian's iPXE.
var DefaultAgentArchitectures = []string{ArchX8664}

// DefaultAgentKernelParamsAArch64 is the arm64 agent's console: the PL011
// UART of QEMU's virt machine and of arm64 servers' SBSA consoles.
const DefaultAgentKernelParamsAArch64 = "console=ttyAMA0"

// NormalizeArch maps the spellings of cpu_arch to one name: "" (unset, as
// Ironic's default) and amd64 are x86_64, arm64 is aarch64; any other
// value is returned lower-cased.
func NormalizeArch(cpuArch string) string {
	switch a := strings.ToLower(strings.TrimSpace(cpuArch)); a {
	case "", "x86_64", "amd64", "x86-64":
		return ArchX8664
	case "aarch64", "arm64":
		return ArchAArch64
	default:
		return a
	}
}

// agentArch is what a worker boots the agent of one architecture with.
type agentArch struct {
	KernelURL, InitrdURL, KernelParams string
}

// agentArchitectures is the table of the configured architectures: x86_64
// from AgentKernelURL, AgentInitrdURL and AgentKernelParams; any other
// from the boot service's agent.kernel.<arch> and agent.initramfs.<arch>
// beside them, with its own kernel parameters.
func (c Config) agentArchitectures() map[string]agentArch {
	archs := c.AgentArchitectures
	if len(archs) == 0 {
		archs = DefaultAgentArchitectures
	}
	out := map[string]agentArch{}
	for _, a := range archs {
		switch a = NormalizeArch(a); a {
		case ArchX8664:
			out[a] = agentArch{KernelURL: c.AgentKernelURL, InitrdURL: c.AgentInitrdURL, KernelParams: c.AgentKernelParams}
		default:
			params := c.AgentKernelParamsByArch[a]
			if params == "" && a == ArchAArch64 {
				params = DefaultAgentKernelParamsAArch64
			}
			out[a] = agentArch{KernelURL: c.AgentKernelURL + "." + a, InitrdURL: c.AgentInitrdURL + "." + a, KernelParams: params}
		}
	}
	return out
}

// archNames lists the table's architectures, sorted, for messages.
func archNames(m map[string]agentArch) string {
	names := make([]string, 0, len(m))
	for n := range m {
		names = append(names, n)
	}
	sort.Strings(names)
	return strings.Join(names, ", ")
}
