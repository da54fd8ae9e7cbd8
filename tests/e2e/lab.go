package e2e

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ironflow/ironflow/embedded"
	"github.com/ironflow/ironflow/internal/testkit/lldpswitch"
)

// The lab's network: one bridge inside the namespace, the services'
// address on it, the VMs' taps enslaved to it. Every lab has its own
// namespace, so labs of concurrent tests do not see each other.
const (
	LabAddress = "10.77.0.1"
	LabPrefix  = 24
	LabNetwork = "10.77.0.0/24"
	LabBridge  = "e2ebr0"
	// LabPoolFirst and LabPoolLast bound the DHCP pool the scenarios give
	// ironflow.
	LabPoolFirst = "10.77.0.100"
	LabPoolLast  = "10.77.0.200"
	// processStopTimeout is how long a lab process gets between SIGTERM
	// and SIGKILL; ironflow dev stops PostgreSQL and Temporal in that time.
	processStopTimeout = 30 * time.Second
)

// Lab is a network namespace with a bridge where the tests' services and
// VMs meet. Nothing in it can reach the host's networks.
type Lab struct {
	t      testing.TB
	Netns  string
	Bridge string
	// Dir holds the lab's logs and VM state; kept for failure analysis
	// until the test's temporary directories go.
	Dir  string
	taps int
}

// NewLab creates the namespace (ironflow-e2e-<random>) with a bridge
// (forward delay 0, so taps forward at once) addressed LabAddress/24 and
// an IPv6 router advertisement on it (see AdvertiseIPv6Router), and
// deletes it, with everything still running inside, when the test ends.
func NewLab(t testing.TB) *Lab {
	t.Helper()
	l := newLab(t, []string{"addr", "add", LabAddress + "/" + strconv.Itoa(LabPrefix), "dev", LabBridge})
	l.AdvertiseIPv6Router()
	t.Logf("lab: network namespace %s, bridge %s %s/%d", l.Netns, l.Bridge, LabAddress, LabPrefix)
	return l
}

// The IPv6-only lab's network: no IPv4 address anywhere on the bridge.
const (
	LabAddress6   = "fd77::1"
	LabPrefix6    = "fd77::/64"
	LabPoolFirst6 = "fd77::100"
	LabPoolLast6  = "fd77::1ff"
)

// NewIPv6Lab is NewLab on an IPv6-only segment: the bridge has
// LabAddress6/64 (without duplicate address detection, so services bind it
// at once) and no IPv4 address, and the lab sends no router advertisement
// of its own: ironflow's (--router-advertisements) is the segment's.
func NewIPv6Lab(t testing.TB) *Lab {
	t.Helper()
	l := newLab(t, []string{"addr", "add", LabAddress6 + "/64", "dev", LabBridge, "nodad"})
	t.Logf("lab: network namespace %s, bridge %s %s/64, no IPv4", l.Netns, l.Bridge, LabAddress6)
	return l
}

// newLab creates the namespace and its bridge with the address addr (an
// "ip" command).
func newLab(t testing.TB, addr []string) *Lab {
	t.Helper()
	RequireQEMU(t)
	var b [4]byte
	_, _ = rand.Read(b[:])
	l := &Lab{t: t, Netns: "ironflow-e2e-" + hex.EncodeToString(b[:]), Bridge: LabBridge, Dir: t.TempDir()}
	if out, err := exec.Command("ip", "netns", "add", l.Netns).CombinedOutput(); err != nil {
		t.Fatalf("lab: create network namespace %s: %v: %s", l.Netns, err, out)
	}
	t.Cleanup(l.teardown)
	l.teardownOnExit()
	for _, args := range [][]string{
		{"link", "set", "lo", "up"},
		{"link", "add", l.Bridge, "type", "bridge", "forward_delay", "0"},
		addr,
		{"link", "set", l.Bridge, "up"},
	} {
		l.ip(args...)
	}
	return l
}

// StartLLDPSwitch makes the lab's bridge a switch that announces itself
// over LLDP as name, on a port of its own (internal/testkit/lldpswitch):
// the lab's machines hear it on their NICs.
func (l *Lab) StartLLDPSwitch(name, port string) {
	l.t.Helper()
	argv := lldpswitch.Command(l.t, name, port)
	for _, args := range lldpswitch.IPCommands(l.Bridge, port) {
		l.ip(args...)
	}
	l.Start("lldpd", nil, argv...)
}

func (l *Lab) ip(args ...string) {
	l.t.Helper()
	argv := append([]string{"-n", l.Netns}, args...)
	if out, err := exec.Command("ip", argv...).CombinedOutput(); err != nil {
		l.t.Fatalf("lab: ip %s: %v: %s", strings.Join(argv, " "), err, out)
	}
}

// teardown kills whatever still runs in the namespace (only the tests'
// own processes can be there: the namespace is private to this lab) and
// deletes it, which removes the bridge and the taps.
func (l *Lab) teardown() {
	for range 3 {
		out, _ := exec.Command("ip", "netns", "pids", l.Netns).Output()
		pids := strings.Fields(string(out))
		if len(pids) == 0 {
			break
		}
		for _, p := range pids {
			if pid, err := strconv.Atoi(p); err == nil {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
	if out, err := exec.Command("ip", "netns", "del", l.Netns).CombinedOutput(); err != nil {
		l.t.Errorf("lab: delete network namespace %s: %v: %s", l.Netns, err, out)
	}
}

// teardownOnExit starts a detached watchdog that does teardown's work once
// the test process has exited: a test binary killed by -timeout or a
// signal runs no cleanups, and would otherwise leave the namespace and the
// VMs and services inside it behind.
func (l *Lab) teardownOnExit() {
	ns := l.Netns
	script := fmt.Sprintf(`while kill -0 %d 2>/dev/null; do sleep 1; done
for i in 1 2 3; do
	pids=$(ip netns pids %s 2>/dev/null)
	[ -z "$pids" ] && break
	kill -9 $pids 2>/dev/null
	sleep 0.5
done
ip netns del %s 2>/dev/null
exit 0`, os.Getpid(), ns, ns)
	cmd := exec.Command("/bin/sh", "-c", script)
	cmd.Dir = "/"
	// Its own session: signals to the test's process group must not reach it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		l.t.Logf("lab: no exit watchdog for %s: %v", ns, err)
		return
	}
	_ = cmd.Process.Release()
}

// Command is name run inside the namespace.
func (l *Lab) Command(name string, args ...string) *exec.Cmd {
	return exec.Command("ip", append([]string{"netns", "exec", l.Netns, name}, args...)...)
}

// probeHTTP fetches url from inside the namespace.
func (l *Lab) probeHTTP(ctx context.Context, url string) error {
	cmd := l.Command("busybox", "wget", "-q", "-O", "/dev/null", url)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("wget %s in the lab: %w: %s", url, err, out)
	}
	return nil
}

// Process is a long-running program the lab started in its namespace.
type Process = embedded.Process

// Start runs argv inside the namespace with env added, output into
// <Dir>/<name>.log, and stops it (SIGTERM, then SIGKILL of its process
// group) when the test ends.
func (l *Lab) Start(name string, env []string, argv ...string) *Process {
	l.t.Helper()
	cmd := l.Command(argv[0], argv[1:]...)
	cmd.Env = append(os.Environ(), env...)
	p, err := embedded.StartProcess(name, filepath.Join(l.Dir, name+".log"), cmd)
	if err != nil {
		l.t.Fatalf("lab: %v", err)
	}
	l.t.Logf("lab: %s started, pid %d, log %s", name, p.Pid(), p.Log)
	l.t.Cleanup(func() { p.Stop(processStopTimeout) })
	return p
}

// LabVM is a machine of the lab: a tap on the bridge, a MAC, a firmware
// and a disk. It is started either directly (Start) or by a BMC that runs
// QEMU with the same definition.
type LabVM struct {
	Name     string
	MAC      string
	Firmware string
	Disk     string
	Tap      string
	// Dir holds the VM's state; SerialLog its serial console (appended
	// across power cycles).
	Dir       string
	SerialLog string
	lab       *Lab
}

// AddVM creates the VM's tap in the namespace, enslaved to the bridge.
func (l *Lab) AddVM(name, mac, firmware, disk string) *LabVM {
	l.t.Helper()
	if firmware != FirmwareBIOS && firmware != FirmwareUEFI {
		l.t.Fatalf("lab: VM %s: firmware %q is neither %q nor %q", name, firmware, FirmwareBIOS, FirmwareUEFI)
	}
	tap := fmt.Sprintf("e2etap%d", l.taps)
	l.taps++
	l.ip("tuntap", "add", "dev", tap, "mode", "tap")
	l.ip("link", "set", tap, "master", l.Bridge)
	l.ip("link", "set", tap, "up")
	dir := filepath.Join(l.Dir, "vm-"+name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		l.t.Fatalf("lab: VM %s: %v", name, err)
	}
	return &LabVM{Name: name, MAC: mac, Firmware: firmware, Disk: disk, Tap: tap, Dir: dir,
		SerialLog: filepath.Join(dir, "console.log"), lab: l}
}

// Start boots the VM directly (no BMC): network first, then its disk.
func (v *LabVM) Start(t testing.TB, memoryMB int) *VMProcess {
	t.Helper()
	return StartQEMU(t, QEMUConfig{Name: v.Name, MemoryMB: memoryMB, Firmware: v.Firmware, Disks: []string{v.Disk},
		Tap: v.Tap, MAC: v.MAC, Netns: v.lab.Netns, Dir: v.Dir})
}
