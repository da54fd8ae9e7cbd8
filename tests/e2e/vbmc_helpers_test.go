package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ironflow/ironflow/embedded"
	"github.com/ironflow/ironflow/vbmc"
)

// The lab's simulated BMCs: `ironflow vbmc ipmi-sim` (OpenIPMI's ipmi_sim)
// and `ironflow vbmc serve` (Redfish), each starting QEMU with the VM
// definitions the scenario gives them, and the nodes enrolled behind them.

const (
	ipmiSimListen = "127.0.0.1:6230"
	// ipmiSimReadyTimeout bounds ipmi_sim's start.
	ipmiSimReadyTimeout = 30 * time.Second
	// redfishListen is where `ironflow vbmc serve` answers inside a lab.
	redfishListen = "127.0.0.1:8000"
	// vmDiskSize is the VMs' (sparse) disk: the agent, like Ironic's,
	// skips disks under 4 GiB when it picks the root device.
	vmDiskSize = "5G"
)

// vbmcServer is `ironflow vbmc serve` running in a lab: a Redfish BMC for
// each of its VMs, whose power on starts QEMU with the VM's definition.
type vbmcServer struct {
	proc     *Process
	password string
	stateDir string
}

// agentVM is the vbmc definition of vm with the agent's defaults: the
// vbmc's CPUs, AgentMemoryMB and a vmDiskSize disk.
func agentVM(vm *LabVM) vbmc.VM { return vmDefinition(vm, 0, AgentMemoryMB, vmDiskSize) }

// vmDefinition is the vbmc definition of vm with the scenario's CPUs (0:
// the vbmc's default), memory and disk size; the VM's tap is its NIC.
func vmDefinition(vm *LabVM, cpus, memoryMB int, diskSize string) vbmc.VM {
	return vbmc.VM{Name: vm.Name, MAC: vm.MAC, Disk: vm.Disk, DiskSize: diskSize, MemoryMB: memoryMB, CPUs: cpus,
		Firmware: vm.Firmware, Netdev: "tap:" + vm.Tap, SerialLog: vm.SerialLog}
}

func vbmcAccel() string {
	if Accel() == AccelKVM {
		return vbmc.AccelKVM
	}
	return vbmc.AccelTCG
}

// newBMCPassword returns a random password that stays a string on the
// baremetal CLI's command line: the CLI parses each --driver-info value as
// JSON first, so bare hex such as 12e4567890123456 would leave it as a
// number (here Infinity, which is not JSON, and the create fails). It is 16
// characters, the most an IPMI 1.5 password holds.
func newBMCPassword() string {
	var pw [6]byte
	_, _ = rand.Read(pw[:])
	return "bmc-" + hex.EncodeToString(pw[:])
}

func writeVBMCConfig(t *testing.T, path string, cfg vbmc.Config) {
	t.Helper()
	data, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// startIPMISim runs `ironflow vbmc ipmi-sim` for vm inside the lab:
// OpenIPMI's ipmi_sim whose chassis control starts QEMU with vm.
func startIPMISim(t *testing.T, s *stack, vm vbmc.VM, password string) *Process {
	t.Helper()
	path := filepath.Join(s.lab.Dir, "vbmc-ipmi-"+vm.Name+".json")
	writeVBMCConfig(t, path, vbmc.Config{StateDir: filepath.Join(s.lab.Dir, "vbmc"), Username: "admin",
		Password: password, Accel: vbmcAccel(), VMs: []vbmc.VM{vm}})
	p := s.lab.Start("vbmc-ipmi-"+vm.Name, nil, s.bin, "vbmc", "ipmi-sim", "--config", path, "--vm", vm.Name, "--listen", ipmiSimListen)
	s.procs = append(s.procs, p)
	ctx, cancel := context.WithTimeout(context.Background(), ipmiSimReadyTimeout)
	defer cancel()
	if _, err := waitLine(ctx, p.Log, "ipmi_sim listening", p.Exited()); err != nil {
		t.Fatalf("ironflow vbmc ipmi-sim: %v\n%s", err, embedded.Tail(p.Log, 2000))
	}
	return p
}

// createIPMINode enrolls the VM behind startIPMISim with the baremetal CLI
// (boot interface ipxe), its port included, and returns the node's UUID;
// extra are more `node create` arguments.
func createIPMINode(t *testing.T, s *stack, vm *LabVM, name, password string, extra ...string) string {
	t.Helper()
	args := []string{"node", "create", "--name", name, "--driver", "ipmi", "--boot-interface", "ipxe",
		"--driver-info", "ipmi_address=127.0.0.1",
		"--driver-info", "ipmi_port=" + strings.Split(ipmiSimListen, ":")[1],
		"--driver-info", "ipmi_username=admin",
		"--driver-info", "ipmi_password=" + password,
		"--property", "capabilities=boot_mode:" + vm.Firmware,
		"-f", "value", "-c", "uuid"}
	uuid := strings.TrimSpace(s.mustCLI(t, append(args, extra...)...))
	t.Logf("node %s (VM %s) is %s", name, vm.Name, uuid)
	s.mustCLI(t, "port", "create", vm.MAC, "--node", uuid)
	return uuid
}

// startRedfishBMC serves Redfish for vms inside the lab. Virtual media may
// be downloaded from the lab network, where ironflow's boot service is
// (LabNetwork, or LabPrefix6 in an IPv6-only lab).
func startRedfishBMC(t *testing.T, s *stack, vms ...vbmc.VM) *vbmcServer {
	t.Helper()
	v := &vbmcServer{password: newBMCPassword(), stateDir: filepath.Join(s.lab.Dir, "vbmc-redfish")}
	path := filepath.Join(s.lab.Dir, "vbmc-redfish.json")
	writeVBMCConfig(t, path, vbmc.Config{StateDir: v.stateDir, Username: "admin", Password: v.password,
		MediaNetworks: []string{LabNetwork, LabPrefix6}, Accel: vbmcAccel(), VMs: vms})
	v.proc = s.lab.Start("vbmc-redfish", nil, s.bin, "vbmc", "serve", "--config", path, "--listen", redfishListen)
	s.procs = append(s.procs, v.proc)
	s.waitHTTP(t, "http://"+redfishListen+"/redfish/v1", v.proc)
	return v
}

// createRedfishNode enrolls a VM behind startRedfishBMC with the
// baremetal CLI and returns its UUID; extra are more `node create`
// arguments; mac "" creates no port (inspection is to find it).
func createRedfishNode(t *testing.T, s *stack, v *vbmcServer, vmName, firmware, mac string, extra ...string) string {
	t.Helper()
	args := []string{"node", "create", "--name", vmName, "--driver", "redfish",
		"--driver-info", "redfish_address=http://" + redfishListen,
		"--driver-info", "redfish_system_id=/redfish/v1/Systems/" + vmName,
		"--driver-info", "redfish_username=admin",
		"--driver-info", "redfish_password=" + v.password,
		"--property", "capabilities=boot_mode:" + firmware,
		"-f", "value", "-c", "uuid"}
	uuid := strings.TrimSpace(s.mustCLI(t, append(args, extra...)...))
	t.Logf("node %s is %s", vmName, uuid)
	if mac != "" {
		s.mustCLI(t, "port", "create", mac, "--node", uuid)
	}
	return uuid
}

// qemuStarts are the command lines the vbmc started vm's QEMU with, in
// order (its qemu.log).
func (v *vbmcServer) qemuStarts(vm *LabVM) []string {
	qlog, _ := os.ReadFile(filepath.Join(v.stateDir, vm.Name, "qemu.log"))
	var starts []string
	for _, line := range strings.Split(string(qlog), "\n") {
		if strings.Contains(line, " starting: ") {
			starts = append(starts, line)
		}
	}
	return starts
}

// checkSMPApplied checks that vm's QEMU first started with one vCPU and
// last with two: the ProcCores BIOS setting of a step took effect at the
// reboot the step asked for.
func (v *vbmcServer) checkSMPApplied(t *testing.T, vm *LabVM) {
	t.Helper()
	starts := v.qemuStarts(vm)
	if len(starts) < 2 || !strings.Contains(starts[len(starts)-1], "-smp 2") || !strings.Contains(starts[0], "-smp 1") {
		t.Errorf("QEMU starts, want -smp 1 first and -smp 2 last:\n%s", strings.Join(starts, "\n"))
	}
}
