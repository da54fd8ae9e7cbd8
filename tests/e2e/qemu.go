package e2e

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ironflow/ironflow/embedded"
)

// Firmwares a VM can boot with.
const (
	FirmwareBIOS = "bios" // SeaBIOS
	FirmwareUEFI = "uefi" // OVMF
)

// Defaults of the VMs the tests start.
const (
	// DefaultMemoryMB is enough for the test image; the agent needs more
	// (it runs in RAM while the image streams through it).
	DefaultMemoryMB = 256
	// AgentMemoryMB is the memory of VMs that boot ironflow's agent.
	AgentMemoryMB = 512
	// DefaultBootTimeout bounds one boot to a serial-console marker under
	// TCG on a loaded 2-core machine (measured: 6.5 s SeaBIOS, 10 s OVMF).
	DefaultBootTimeout = 3 * time.Minute
	// serialPollInterval is how often a serial log is re-read.
	serialPollInterval = 200 * time.Millisecond
	// qemuStopTimeout is how long QEMU gets to exit after SIGTERM.
	qemuStopTimeout = 5 * time.Second
)

// OVMF firmware (Debian package ovmf).
var (
	OVMFCode = "/usr/share/OVMF/OVMF_CODE_4M.fd"
	OVMFVars = "/usr/share/OVMF/OVMF_VARS_4M.fd"
)

// QEMUBinary is the emulator the tests run.
var QEMUBinary = "qemu-system-x86_64"

// KVMUsable reports whether /dev/kvm opens read-write; without it VMs run
// under TCG, slower but the same.
func KVMUsable() bool {
	f, err := os.OpenFile("/dev/kvm", os.O_RDWR, 0)
	if err != nil {
		return false
	}
	f.Close()
	return true
}

// RequireQEMU skips the test, loudly, when the machine cannot run the VM
// tests at all (not root: network namespaces, taps; no QEMU) or when only
// unit tests were asked for (-short).
func RequireQEMU(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("SKIPPED in -short mode: VM end-to-end test (run without -short)")
	}
	if os.Geteuid() != 0 {
		t.Skip("SKIPPED: the VM end-to-end tests need root (network namespaces, tap devices); run them as root")
	}
	if _, err := exec.LookPath(QEMUBinary); err != nil {
		t.Skipf("SKIPPED: %s is not installed (Debian package qemu-system-x86): %v", QEMUBinary, err)
	}
	runBesideOthers(t)
}

// parallelTests are the top-level tests already marked parallel.
var parallelTests sync.Map

// runBesideOthers marks a top-level VM test parallel (once: a test may
// call RequireQEMU again through NewLab), so that go test runs VM tests
// as many at a time as its -parallel flag, GOMAXPROCS by default. Each
// test has its own network namespace, bridge, taps, stack and VMs; one
// test keeps about half of a 2-core machine busy (measured 0.49: most of
// a test waits on firmware, DHCP, TFTP and the agent), so two at a time
// nearly halve the suite. Subtests are left alone: a parent that checks
// something after its subtest returns (TestLabNetworkAndTeardown) needs
// that subtest to have run.
func runBesideOthers(t testing.TB) {
	tt, ok := t.(*testing.T)
	if !ok || strings.Contains(t.Name(), "/") {
		return
	}
	if _, marked := parallelTests.LoadOrStore(t.Name(), true); marked {
		return
	}
	tt.Parallel()
}

// QEMUConfig describes one VM started directly (no BMC).
type QEMUConfig struct {
	Name     string
	MemoryMB int
	Firmware string
	// Disks are attached as virtio disks; the first is the boot disk.
	Disks []string
	// Tap and MAC give the VM a virtio NIC on that tap (network boot
	// first); empty Tap: no NIC.
	Tap, MAC string
	// Snapshot keeps the disk files unchanged: the guest's writes go to a
	// temporary overlay.
	Snapshot bool
	// Netns runs QEMU inside that network namespace (where Tap lives).
	Netns string
	// Dir holds the VM's serial log and UEFI variable store.
	Dir string
}

// VMProcess is a QEMU process the test started.
type VMProcess struct {
	Name      string
	SerialLog string
	QEMULog   string
	Accel     string
	cmd       *exec.Cmd
	exited    chan struct{}
}

// qemuArgs is the VM's command line: q35, serial console into a file that
// survives resets (append), a virtio RNG so the guest's getrandom does not
// stall under TCG.
func qemuArgs(c QEMUConfig, serialLog, accel string) ([]string, error) {
	a := []string{"-name", c.Name, "-machine", "q35"}
	switch accel {
	case AccelKVM:
		a = append(a, "-accel", "kvm", "-accel", "tcg")
	case "kvm-only":
		a = append(a, "-accel", "kvm")
	default:
		a = append(a, "-accel", "tcg")
	}
	a = append(a,
		// Without arch-capabilities: nested KVM rejects that MSR.
		"-cpu", "max,-arch-capabilities",
		"-m", strconv.Itoa(c.MemoryMB), "-smp", "1",
		"-nodefaults", "-nographic",
		"-chardev", "file,id=s0,path="+serialLog+",append=on",
		"-serial", "chardev:s0",
		"-device", "virtio-rng-pci",
	)
	switch c.Firmware {
	case FirmwareUEFI:
		vars := filepath.Join(c.Dir, "OVMF_VARS.fd")
		data, err := os.ReadFile(OVMFVars)
		if err != nil {
			return nil, fmt.Errorf("read the OVMF variable store template (Debian package ovmf): %w", err)
		}
		if err := os.WriteFile(vars, data, 0o644); err != nil {
			return nil, fmt.Errorf("copy the OVMF variable store: %w", err)
		}
		a = append(a,
			"-drive", "if=pflash,format=raw,unit=0,readonly=on,file="+OVMFCode,
			"-drive", "if=pflash,format=raw,unit=1,file="+vars)
	case FirmwareBIOS:
		// SeaBIOS prints to the serial port only when told (no VGA here).
		sercon := filepath.Join(c.Dir, "sercon-port.bin")
		if err := os.WriteFile(sercon, []byte{0xf8, 0x03}, 0o644); err != nil {
			return nil, fmt.Errorf("write SeaBIOS serial console setting: %w", err)
		}
		a = append(a, "-fw_cfg", "name=etc/sercon-port,file="+sercon)
	default:
		return nil, fmt.Errorf("firmware %q is neither %q nor %q", c.Firmware, FirmwareBIOS, FirmwareUEFI)
	}
	boot := 1
	if c.Tap != "" {
		a = append(a,
			"-netdev", "tap,id=n0,ifname="+c.Tap+",script=no,downscript=no",
			"-device", fmt.Sprintf("virtio-net-pci,netdev=n0,mac=%s,bootindex=%d", c.MAC, boot))
		boot++
	}
	for i, d := range c.Disks {
		dev := fmt.Sprintf("virtio-blk-pci,drive=d%d", i)
		if i == 0 {
			dev += fmt.Sprintf(",bootindex=%d", boot)
		}
		drive := fmt.Sprintf("if=none,id=d%d,format=raw,file=%s", i, d)
		if c.Snapshot {
			drive += ",snapshot=on"
		}
		a = append(a,
			"-drive", drive,
			"-device", dev)
	}
	return a, nil
}

// StartQEMU starts a VM and stops it when the test ends.
func StartQEMU(t testing.TB, c QEMUConfig) *VMProcess {
	t.Helper()
	if c.Dir == "" {
		c.Dir = t.TempDir()
	}
	v, err := startQEMU(c, Accel())
	if err != nil {
		t.Fatalf("VM %s: %v", c.Name, err)
	}
	t.Logf("VM %s: QEMU pid %d (%s, %s), serial console %s", c.Name, v.cmd.Process.Pid, c.Firmware, v.Accel, v.SerialLog)
	t.Cleanup(v.Stop)
	return v
}

func startQEMU(c QEMUConfig, accel string) (*VMProcess, error) {
	if c.MemoryMB == 0 {
		c.MemoryMB = DefaultMemoryMB
	}
	v := &VMProcess{Name: c.Name, SerialLog: filepath.Join(c.Dir, "console.log"), QEMULog: filepath.Join(c.Dir, "qemu.log"),
		Accel: accel, exited: make(chan struct{})}
	args, err := qemuArgs(c, v.SerialLog, accel)
	if err != nil {
		return nil, err
	}
	argv := append([]string{QEMUBinary}, args...)
	if c.Netns != "" {
		argv = append([]string{"ip", "netns", "exec", c.Netns}, argv...)
	}
	logf, err := os.Create(v.QEMULog)
	if err != nil {
		return nil, fmt.Errorf("create QEMU log: %w", err)
	}
	fmt.Fprintf(logf, "%s\n", strings.Join(argv, " "))
	v.cmd = exec.Command(argv[0], argv[1:]...)
	v.cmd.Stdout, v.cmd.Stderr = logf, logf
	v.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := v.cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start QEMU: %w", err)
	}
	go func() {
		_ = v.cmd.Wait()
		logf.Close()
		close(v.exited)
	}()
	return v, nil
}

// Stop ends QEMU (SIGTERM, then SIGKILL) and waits for it.
func (v *VMProcess) Stop() {
	select {
	case <-v.exited:
		return
	default:
	}
	_ = v.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-v.exited:
	case <-time.After(qemuStopTimeout):
		_ = v.cmd.Process.Kill()
		<-v.exited
	}
}

// Exited is closed when QEMU has exited.
func (v *VMProcess) Exited() <-chan struct{} { return v.exited }

// WaitSerial waits until a line of the serial log contains substr and
// returns that line. It fails when done closes first (QEMU exited), or on
// ctx's end, with the log's tail.
func WaitSerial(ctx context.Context, serialLog, substr string, done <-chan struct{}) (string, error) {
	line, err := waitLine(ctx, serialLog, substr, done)
	if err != nil {
		return "", fmt.Errorf("%w; console tail:\n%s", err, embedded.Tail(serialLog, 2000))
	}
	return line, nil
}

// waitLine polls a file until a line contains substr.
func waitLine(ctx context.Context, serialLog, substr string, done <-chan struct{}) (string, error) {
	t := time.NewTicker(serialPollInterval)
	defer t.Stop()
	for {
		if line, ok := findLine(serialLog, substr); ok {
			return line, nil
		}
		select {
		case <-ctx.Done():
			return "", fmt.Errorf("no %q in %s: %w", substr, serialLog, ctx.Err())
		case <-done:
			if line, ok := findLine(serialLog, substr); ok {
				return line, nil
			}
			return "", fmt.Errorf("VM stopped before %q appeared in %s", substr, serialLog)
		case <-t.C:
		}
	}
}

func findLine(path, substr string) (string, bool) {
	f, err := os.Open(path)
	if err != nil {
		return "", false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if strings.Contains(sc.Text(), substr) {
			return strings.TrimRight(sc.Text(), "\r"), true
		}
	}
	return "", false
}
