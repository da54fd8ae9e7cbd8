package vbmc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/google/uuid"

	"github.com/ironflow/ironflow/pxe"
)

// Timeouts and poll intervals of power operations.
const (
	// DefaultStartTimeout bounds QEMU's start-up until it has daemonized.
	DefaultStartTimeout = 60 * time.Second
	// DefaultStopTimeout is how long ForceOff waits for QEMU to leave after
	// QMP quit before it kills the process.
	DefaultStopTimeout = 10 * time.Second
	// DefaultGracefulRestartTimeout is how long GracefulRestart waits for
	// the guest to power off after the ACPI power button before it gives up
	// (and leaves the machine on, as a server whose OS ignores ACPI does).
	DefaultGracefulRestartTimeout = 120 * time.Second
	// processPollInterval is how often a waiting stop or lock looks again.
	processPollInterval = 50 * time.Millisecond
)

// Redfish boot override values, shared by the IPMI path.
const (
	BootTargetNone = "None"
	BootTargetPxe  = "Pxe"
	BootTargetHdd  = "Hdd"
	BootTargetCd   = "Cd"
	// BootTargetUefiHTTP boots the firmware's UEFI HTTP boot: from the
	// override's HTTPBootURI when it has one (efivars.go), else from the
	// URL DHCP gives.
	BootTargetUefiHTTP = "UefiHttp"

	BootDisabled   = "Disabled"
	BootOnce       = "Once"
	BootContinuous = "Continuous"
)

// BootOverride is a VM's boot source override, kept in state_dir/NAME/boot.json.
type BootOverride struct {
	Target  string `json:"target"`
	Enabled string `json:"enabled"`
	// HTTPBootURI is Boot.HttpBootUri: what a UefiHttp boot fetches.
	HTTPBootURI string `json:"http_boot_uri,omitempty"`
}

// httpBootURI is the URI a start with override b boots from ("" for none).
func (m *Machine) httpBootURI(b BootOverride) string {
	if b.Target != BootTargetUefiHTTP || b.Enabled == BootDisabled || m.vm.Firmware != FirmwareUEFI {
		return ""
	}
	return b.HTTPBootURI
}

// MediaState is the virtual CD, kept in state_dir/NAME/media.json.
type MediaState struct {
	// Image is the URL the media was inserted from.
	Image string `json:"image"`
	// Path is the downloaded copy QEMU reads.
	Path string `json:"path"`
}

// PowerState values, named as Redfish's.
const (
	PowerOn  = "On"
	PowerOff = "Off"
)

// bootDevice is one of the three bootable devices, by its QEMU qdev id.
type bootDevice string

const (
	devDisk bootDevice = "disk0"
	devNet  bootDevice = "net0"
	devCD   bootDevice = "cd0"
)

// The two disjoint bootindex ranges a running VM alternates between.
const (
	bootIndexBaseA = 1
	bootIndexBaseB = 11
)

// Machine is one VM: its QEMU process and its state directory. Several
// Machine values (in several processes) may act on the same VM; mutations
// take the VM's file lock.
type Machine struct {
	cfg *Config
	vm  VM
	dir string
	log *slog.Logger

	// internalErrorPID is the QEMU whose internal-error was logged, so
	// that polling clients do not repeat the error every few seconds.
	internalErrorPID atomic.Int64
}

func newMachine(cfg *Config, vm VM, log *slog.Logger) *Machine {
	return &Machine{
		cfg: cfg,
		vm:  vm,
		dir: filepath.Join(cfg.StateDir, vm.Name),
		log: log.With("vm", vm.Name),
	}
}

func (m *Machine) qmpSocket() string   { return filepath.Join(m.dir, "qmp.sock") }
func (m *Machine) pidFile() string     { return filepath.Join(m.dir, "qemu.pid") }
func (m *Machine) cacertsFile() string { return filepath.Join(m.dir, "https-cacerts.bin") }
func (m *Machine) bootFile() string    { return filepath.Join(m.dir, "boot.json") }
func (m *Machine) mediaFile() string   { return filepath.Join(m.dir, "media.json") }
func (m *Machine) mediaDir() string    { return filepath.Join(m.dir, "media") }
func (m *Machine) serconFile() string  { return filepath.Join(m.dir, "sercon-port.bin") }

// UUID is the SMBIOS system UUID QEMU presents, stable for a VM name.
func (m *Machine) UUID() string { return nameUUID(m.vm.Name) }

// nameUUID derives a stable UUID from a name, so that a VM keeps its
// identity across restarts of the service.
func nameUUID(name string) string {
	return uuid.NewSHA1(uuid.NameSpaceOID, []byte("ironflow-vbmc/"+name)).String()
}

// lock takes the VM's file lock, shared with every other vbmc process.
func (m *Machine) lock(ctx context.Context) (unlock func(), err error) {
	if err := os.MkdirAll(m.dir, 0o755); err != nil {
		return nil, fmt.Errorf("create state dir for %s: %w", m.vm.Name, err)
	}
	f, err := os.OpenFile(filepath.Join(m.dir, "lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open lock of %s: %w", m.vm.Name, err)
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() { f.Close() }, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", m.vm.Name, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", m.vm.Name, ctx.Err())
		case <-time.After(processPollInterval):
		}
	}
}

// pid returns the live QEMU process of this VM, or 0. The pidfile alone is
// not trusted: the process must be alive (not a zombie) and be the QEMU with
// this VM's monitor socket, so that a recycled pid is never mistaken for it.
func (m *Machine) pid() int {
	b, err := os.ReadFile(m.pidFile())
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || pid <= 0 {
		return 0
	}
	if !processAlive(pid) {
		return 0
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil || !bytes.Contains(cmdline, []byte(m.qmpSocket())) {
		return 0
	}
	return pid
}

// processAlive reports whether pid exists and is not a zombie.
func processAlive(pid int) bool {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// The state follows the parenthesized command name, which may hold spaces.
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 || i+2 >= len(stat) {
		return false
	}
	state := stat[i+2]
	return state != 'Z' && state != 'X'
}

// PowerState is On while the VM's QEMU runs. QMP query-status tells a VM
// whose guest has shut down (QEMU about to exit) from a running one.
func (m *Machine) PowerState(ctx context.Context) (string, error) {
	if m.pid() == 0 {
		return PowerOff, nil
	}
	var status struct {
		Status string `json:"status"`
	}
	err := qmpDo(ctx, m.qmpSocket(), func(q *qmpConn) error {
		raw, err := q.execute("query-status", nil)
		if err != nil {
			return err
		}
		return json.Unmarshal(raw, &status)
	})
	if err != nil {
		// The process is there; its monitor may be busy or not yet up.
		m.log.Debug("query-status failed on a running VM", "err", err)
		return PowerOn, nil
	}
	switch status.Status {
	case "shutdown":
		return PowerOff, nil
	case "internal-error":
		// Seen with OVMF under nested KVM that lacks read-only memory
		// slots: the firmware cannot run from pflash. The machine is on
		// but dead; "accel": "tcg" in the configuration avoids it.
		if pid := int64(m.pid()); m.internalErrorPID.Swap(pid) != pid {
			m.log.Error("QEMU reports internal-error: the guest CPU stopped; if this is KVM, try \"accel\": \"tcg\"", "pid", pid)
		}
	}
	return PowerOn, nil
}

// PowerOn starts QEMU unless it runs already.
func (m *Machine) PowerOn(ctx context.Context) error {
	unlock, err := m.lock(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	if m.pid() != 0 {
		m.log.Info("power on: already on")
		return nil
	}
	return m.start(ctx)
}

// ForceOff stops QEMU (QMP quit, then SIGKILL) unless it is off already.
func (m *Machine) ForceOff(ctx context.Context) error {
	unlock, err := m.lock(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	return m.stop(ctx)
}

// ForceRestart resets a running VM (QMP system_reset); a VM that is off is
// powered on, since either way the caller wants it to boot now.
func (m *Machine) ForceRestart(ctx context.Context) error {
	unlock, err := m.lock(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	if m.pid() == 0 {
		m.log.Info("force restart while off: powering on")
		return m.start(ctx)
	}
	if err := m.applyPendingFirmware(); err != nil { // a flashed BIOS (update.go)
		return err
	}
	boot, err := m.Boot()
	if err != nil {
		return err
	}
	// New firmware settings (bios.go), volumes (storage.go) or a URI to
	// boot from (efivars.go: the variable store is read at QEMU's start)
	// need a new QEMU.
	if m.biosPending() || m.volumesChanged() || m.httpBootURI(boot) != "" {
		if err := m.stop(ctx); err != nil {
			return err
		}
		return m.start(ctx)
	}
	err = qmpDo(ctx, m.qmpSocket(), func(q *qmpConn) error {
		if _, err := q.execute("system_reset", nil); err != nil {
			return err
		}
		// The boot order in force is the one at the reset; only after it
		// may a Once override be given back.
		if err := q.waitEvent("RESET"); err != nil {
			return err
		}
		return m.consumeOnce(q)
	})
	if err != nil {
		return fmt.Errorf("reset %s: %w", m.vm.Name, err)
	}
	m.log.Info("force restart: system reset")
	return nil
}

// PowerCycle is off (if on) then on.
func (m *Machine) PowerCycle(ctx context.Context) error {
	unlock, err := m.lock(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	if err := m.stop(ctx); err != nil {
		return err
	}
	return m.start(ctx)
}

// GracefulShutdown presses the ACPI power button. A guest that does not
// answer stays on, as a real server does.
func (m *Machine) GracefulShutdown(ctx context.Context) error {
	return m.monitorCommand(ctx, "system_powerdown", "graceful shutdown: ACPI power button pressed")
}

// NMI injects a non-maskable interrupt.
func (m *Machine) NMI(ctx context.Context) error {
	return m.monitorCommand(ctx, "inject-nmi", "nmi injected")
}

// monitorCommand runs an argument-less QMP command on a running VM; on a VM
// that is off it does nothing, as the button on a powered-off server does.
func (m *Machine) monitorCommand(ctx context.Context, cmd, what string) error {
	unlock, err := m.lock(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	if m.pid() == 0 {
		m.log.Info(what+": machine is off, nothing done", "command", cmd)
		return nil
	}
	if err := qmpDo(ctx, m.qmpSocket(), func(q *qmpConn) error {
		_, err := q.execute(cmd, nil)
		return err
	}); err != nil {
		return fmt.Errorf("%s on %s: %w", cmd, m.vm.Name, err)
	}
	m.log.Info(what, "command", cmd)
	return nil
}

// GracefulRestart presses the power button, waits for the guest to power
// off within timeout and powers it on again. If the guest ignores ACPI the
// machine stays on and an error says so.
func (m *Machine) GracefulRestart(ctx context.Context, timeout time.Duration) error {
	if err := m.GracefulShutdown(ctx); err != nil {
		return err
	}
	deadline := time.Now().Add(timeout)
	for m.pid() != 0 {
		if time.Now().After(deadline) {
			return fmt.Errorf("graceful restart of %s: guest did not power off within %s", m.vm.Name, timeout)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("graceful restart of %s: %w", m.vm.Name, ctx.Err())
		case <-time.After(processPollInterval):
		}
	}
	return m.PowerOn(ctx)
}

// Boot returns the stored boot override.
func (m *Machine) Boot() (BootOverride, error) {
	b := BootOverride{Target: BootTargetNone, Enabled: BootDisabled}
	if _, err := readJSON(m.bootFile(), &b); err != nil {
		return b, fmt.Errorf("read boot override of %s: %w", m.vm.Name, err)
	}
	return b, nil
}

// SetBoot stores a boot override and, on a running VM, applies the boot
// order now (QEMU follows it from the next reset).
func (m *Machine) SetBoot(ctx context.Context, b BootOverride) error {
	if b.Target == BootTargetNone || b.Enabled == BootDisabled {
		b = BootOverride{Target: BootTargetNone, Enabled: BootDisabled, HTTPBootURI: b.HTTPBootURI}
	}
	if _, ok := bootOrders[b.Target]; !ok {
		return fmt.Errorf("boot target %q is not one of None, Pxe, Hdd, Cd, UefiHttp", b.Target)
	}
	if b.Target == BootTargetUefiHTTP && m.vm.Firmware != FirmwareUEFI {
		return fmt.Errorf("boot target UefiHttp needs UEFI firmware; %s has %s", m.vm.Name, m.vm.Firmware)
	}
	switch b.Enabled {
	case BootDisabled, BootOnce, BootContinuous:
	default:
		return fmt.Errorf("boot override enabled %q is not one of Disabled, Once, Continuous", b.Enabled)
	}
	unlock, err := m.lock(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	if err := writeJSON(m.bootFile(), b); err != nil {
		return fmt.Errorf("store boot override of %s: %w", m.vm.Name, err)
	}
	if m.pid() != 0 {
		if err := qmpDo(ctx, m.qmpSocket(), func(q *qmpConn) error {
			return m.applyOrder(q, m.bootOrder(b))
		}); err != nil {
			return fmt.Errorf("apply boot order of %s: %w", m.vm.Name, err)
		}
	}
	m.log.Info("boot override set", "target", b.Target, "enabled", b.Enabled, "running", m.pid() != 0)
	return nil
}

// bootOrders lists, per override target, the devices first to last.
var bootOrders = map[string][]bootDevice{
	BootTargetNone: {devDisk, devNet, devCD},
	BootTargetHdd:  {devDisk, devNet, devCD},
	BootTargetPxe:  {devNet, devDisk, devCD},
	BootTargetCd:   {devCD, devDisk, devNet},
	// The firmware's boot option for the URI comes first (BootNext); the
	// network is next, as for Pxe.
	BootTargetUefiHTTP: {devNet, devDisk, devCD},
}

// bootOrder is the device order for an override, without devices the VM lacks.
func (m *Machine) bootOrder(b BootOverride) []bootDevice {
	var order []bootDevice
	for _, d := range bootOrders[b.Target] {
		if d == devDisk && m.vm.Disk == "" {
			continue
		}
		order = append(order, d)
	}
	return order
}

// BootIndex reads a device's bootindex from the running QEMU ("disk0",
// "net0", "cd0"); tests use it to see what the firmware will follow.
func (m *Machine) BootIndex(ctx context.Context, device string) (int, error) {
	var idx int
	err := qmpDo(ctx, m.qmpSocket(), func(q *qmpConn) error {
		var err error
		idx, err = qomBootIndex(q, bootDevice(device))
		return err
	})
	return idx, err
}

func qomBootIndex(q *qmpConn, d bootDevice) (int, error) {
	raw, err := q.execute("qom-get", map[string]any{"path": "/machine/peripheral/" + string(d), "property": "bootindex"})
	if err != nil {
		return 0, err
	}
	var idx int
	if err := json.Unmarshal(raw, &idx); err != nil {
		return 0, fmt.Errorf("decode bootindex of %s: %w", d, err)
	}
	return idx, nil
}

// applyOrder sets the bootindex of every device through qom-set. QEMU
// rejects an index in use, so the new order goes into the range the devices
// do not use now.
func (m *Machine) applyOrder(q *qmpConn, order []bootDevice) error {
	cur, err := qomBootIndex(q, order[0])
	if err != nil {
		return err
	}
	base := bootIndexBaseB
	if cur >= bootIndexBaseB {
		base = bootIndexBaseA
	}
	for i, d := range order {
		if _, err := q.execute("qom-set", map[string]any{
			"path": "/machine/peripheral/" + string(d), "property": "bootindex", "value": base + i,
		}); err != nil {
			return err
		}
	}
	return nil
}

// consumeOnce ends a Once override after the boot that used it: the stored
// override becomes Disabled and the running VM gets the default order back
// for its later resets.
func (m *Machine) consumeOnce(q *qmpConn) error {
	b, err := m.Boot()
	if err != nil {
		return err
	}
	if b.Enabled != BootOnce {
		return nil
	}
	none := BootOverride{Target: BootTargetNone, Enabled: BootDisabled}
	if err := writeJSON(m.bootFile(), none); err != nil {
		return fmt.Errorf("clear boot override of %s: %w", m.vm.Name, err)
	}
	m.log.Info("one-time boot override used, default boot order restored", "target", b.Target)
	return m.applyOrder(q, m.bootOrder(none))
}

// Media returns the inserted virtual CD, if any.
func (m *Machine) Media() (MediaState, bool, error) {
	var ms MediaState
	ok, err := readJSON(m.mediaFile(), &ms)
	if err != nil {
		return ms, false, fmt.Errorf("read virtual media of %s: %w", m.vm.Name, err)
	}
	return ms, ok, nil
}

// attachMedia puts a local image into the CD drive (now if running, else at
// the next start) and removes the image it replaces.
func (m *Machine) attachMedia(ctx context.Context, image, path string) error {
	unlock, err := m.lock(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	old, hadOld, err := m.Media()
	if err != nil {
		return err
	}
	if m.pid() != 0 {
		if err := qmpDo(ctx, m.qmpSocket(), func(q *qmpConn) error {
			_, err := q.execute("blockdev-change-medium", map[string]any{
				"id": string(devCD), "filename": path, "format": "raw", "read-only-mode": "read-only",
			})
			return err
		}); err != nil {
			return fmt.Errorf("insert media into %s: %w", m.vm.Name, err)
		}
	}
	if err := writeJSON(m.mediaFile(), MediaState{Image: image, Path: path}); err != nil {
		return fmt.Errorf("store virtual media of %s: %w", m.vm.Name, err)
	}
	if hadOld && old.Path != path {
		_ = os.Remove(old.Path)
	}
	m.log.Info("virtual media inserted", "image", image, "running", m.pid() != 0)
	return nil
}

// EjectMedia empties the CD drive. It is idempotent.
func (m *Machine) EjectMedia(ctx context.Context) error {
	unlock, err := m.lock(ctx)
	if err != nil {
		return err
	}
	defer unlock()
	old, hadOld, err := m.Media()
	if err != nil {
		return err
	}
	if m.pid() != 0 {
		if err := qmpDo(ctx, m.qmpSocket(), func(q *qmpConn) error {
			// force: a guest may have locked the tray; the BMC wins.
			_, err := q.execute("eject", map[string]any{"id": string(devCD), "force": true})
			return err
		}); err != nil {
			return fmt.Errorf("eject media of %s: %w", m.vm.Name, err)
		}
	}
	if err := os.Remove(m.mediaFile()); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("clear virtual media of %s: %w", m.vm.Name, err)
	}
	if hadOld {
		_ = os.Remove(old.Path)
	}
	m.log.Info("virtual media ejected", "image", old.Image)
	return nil
}

// start launches QEMU, detached from the caller, with the stored boot order
// and media. The caller holds the lock and has checked that it is off.
func (m *Machine) start(ctx context.Context) error {
	// Pending BIOS settings, boot mode and secure boot apply now (bios.go),
	// and a flashed BIOS image (update.go).
	if err := m.applyBIOS(); err != nil {
		return err
	}
	if err := m.applyPendingFirmware(); err != nil {
		return err
	}
	if err := m.prepare(); err != nil {
		return err
	}
	boot, err := m.Boot()
	if err != nil {
		return err
	}
	media, hasMedia, err := m.Media()
	if err != nil {
		return err
	}
	if hasMedia {
		if _, err := os.Stat(media.Path); err != nil {
			m.log.Warn("inserted media file is gone, starting with an empty CD drive", "image", media.Image, "err", err)
			hasMedia = false
		}
	}
	mediaPath := ""
	if hasMedia {
		mediaPath = media.Path
	}
	if m.vm.HTTPSCACerts != "" {
		b, err := edk2CACerts(m.vm.HTTPSCACerts)
		if err == nil {
			err = os.WriteFile(m.cacertsFile(), b, 0o644)
		}
		if err != nil {
			return fmt.Errorf("HTTPS boot CA certificates of %s: %w", m.vm.Name, err)
		}
	}
	if uri := m.httpBootURI(boot); uri != "" {
		_, vars, _ := m.secureBootFirmware()
		if err := setHTTPBootNext(vars, uri); err != nil {
			return fmt.Errorf("UEFI HTTP boot of %s from %s: %w", m.vm.Name, uri, err)
		}
		m.log.Info("UEFI HTTP boot option set", "uri", uri)
	}
	args := m.qemuArgs(m.bootOrder(boot), mediaPath)

	logPath := filepath.Join(m.dir, "qemu.log")
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("open QEMU log of %s: %w", m.vm.Name, err)
	}
	defer logf.Close()
	fmt.Fprintf(logf, "%s starting: %s %s\n", time.Now().UTC().Format(time.RFC3339), m.qemuBinary(), strings.Join(args, " "))
	_ = os.Remove(m.qmpSocket())

	// -daemonize: the process we start exits once the VM is set up (monitor
	// socket and pidfile in place); the VM itself is nobody's child, so a
	// chassis_control process may exit and ipmi_sim is not kept waiting.
	cmd := exec.Command(m.qemuBinary(), args...)
	cmd.Stdin = nil
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("start QEMU for %s: %w", m.vm.Name, err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	timer := time.NewTimer(DefaultStartTimeout)
	defer timer.Stop()
	select {
	case err = <-done:
	case <-timer.C:
		_ = cmd.Process.Kill()
		<-done
		err = fmt.Errorf("did not finish starting within %s", DefaultStartTimeout)
	case <-ctx.Done():
		_ = cmd.Process.Kill()
		<-done
		err = ctx.Err()
	}
	if err != nil {
		return fmt.Errorf("start QEMU for %s: %w (%s)", m.vm.Name, err, tail(logPath, 400))
	}
	if m.pid() == 0 {
		return fmt.Errorf("start QEMU for %s: no live process after start (%s)", m.vm.Name, tail(logPath, 400))
	}
	m.log.Info("powered on", "pid", m.pid(), "boot_target", boot.Target, "boot_enabled", boot.Enabled, "media", media.Image, "http_boot_uri", m.httpBootURI(boot))
	if boot.Enabled == BootOnce {
		if err := qmpDo(ctx, m.qmpSocket(), m.consumeOnce); err != nil {
			return fmt.Errorf("restore default boot order of %s after one-time override: %w", m.vm.Name, err)
		}
	}
	return nil
}

// stop ends QEMU: QMP quit, then SIGKILL when it lingers. The caller holds
// the lock.
func (m *Machine) stop(ctx context.Context) error {
	pid := m.pid()
	if pid == 0 {
		m.log.Info("power off: already off")
		return nil
	}
	if err := qmpDo(ctx, m.qmpSocket(), func(q *qmpConn) error {
		_, err := q.execute("quit", nil)
		return err
	}); err != nil {
		m.log.Warn("QMP quit failed, killing QEMU", "pid", pid, "err", err)
	}
	if !waitGone(ctx, pid, DefaultStopTimeout) {
		m.log.Warn("QEMU still running after quit, killing it", "pid", pid)
		_ = syscall.Kill(pid, syscall.SIGKILL)
		if !waitGone(ctx, pid, DefaultStopTimeout) {
			return fmt.Errorf("power off %s: QEMU pid %d survived SIGKILL", m.vm.Name, pid)
		}
	}
	_ = os.Remove(m.qmpSocket())
	_ = os.Remove(m.pidFile())
	m.log.Info("powered off", "pid", pid)
	return nil
}

func waitGone(ctx context.Context, pid int, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for processAlive(pid) {
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		time.Sleep(processPollInterval)
	}
	return true
}

// prepare creates what QEMU needs before its first start: the state
// directory, the disk and the UEFI variable store.
func (m *Machine) prepare() error {
	if err := os.MkdirAll(m.dir, 0o755); err != nil {
		return fmt.Errorf("create state dir of %s: %w", m.vm.Name, err)
	}
	if err := os.MkdirAll(filepath.Dir(m.vm.SerialLog), 0o755); err != nil {
		return fmt.Errorf("create serial log dir of %s: %w", m.vm.Name, err)
	}
	if m.vm.Disk != "" {
		if _, err := os.Stat(m.vm.Disk); errors.Is(err, fs.ErrNotExist) {
			if m.vm.DiskSize == "" {
				return fmt.Errorf("disk %s of %s is missing and no disk_size is given", m.vm.Disk, m.vm.Name)
			}
			out, err := exec.Command("qemu-img", "create", "-q", "-f", diskFormat(m.vm.Disk), m.vm.Disk, m.vm.DiskSize).CombinedOutput()
			if err != nil {
				return fmt.Errorf("create disk %s of %s: %w: %s", m.vm.Disk, m.vm.Name, err, out)
			}
			m.log.Info("disk created", "disk", m.vm.Disk, "size", m.vm.DiskSize)
		} else if err != nil {
			return fmt.Errorf("disk of %s: %w", m.vm.Name, err)
		}
	}
	// SeaBIOS reads etc/sercon-port as a little-endian integer: COM1, 0x3f8.
	if err := os.WriteFile(m.serconFile(), []byte{0xf8, 0x03}, 0o644); err != nil {
		return fmt.Errorf("write SeaBIOS serial console setting for %s: %w", m.vm.Name, err)
	}
	if m.vm.Firmware == FirmwareUEFI {
		_, vars, secure := m.secureBootFirmware()
		src := OVMFVars
		if m.vm.Arch == ArchAArch64 {
			src = AAVMFVars
		}
		if secure {
			src = OVMFSecureVars
		}
		if _, err := os.Stat(vars); errors.Is(err, fs.ErrNotExist) {
			if err := copyFile(src, vars); err != nil {
				return fmt.Errorf("copy UEFI variable store for %s: %w", m.vm.Name, err)
			}
		}
	}
	return nil
}

func diskFormat(path string) string {
	if strings.HasSuffix(path, ".qcow2") {
		return "qcow2"
	}
	return "raw"
}

// qemuBinary is the QEMU that runs the VM's architecture.
func (m *Machine) qemuBinary() string {
	if m.vm.Arch == ArchAArch64 {
		return m.cfg.QEMUBinaryAArch64
	}
	return m.cfg.QEMUBinary
}

// qemuArgs is the QEMU command line for the given boot order and CD image.
func (m *Machine) qemuArgs(order []bootDevice, cdImage string) []string {
	if m.vm.Arch == ArchAArch64 {
		return m.qemuArgsAArch64(order, cdImage)
	}
	idx := map[bootDevice]int{}
	for i, d := range order {
		idx[d] = bootIndexBaseA + i
	}
	a := []string{
		"-name", m.vm.Name,
		"-uuid", m.UUID(),
		"-machine", "q35",
	}
	// Secure boot needs SMM, which nested KVM often lacks: auto means TCG
	// then (bios.go).
	_, _, secure := m.secureBootFirmware()
	secure = secure && m.vm.Firmware == FirmwareUEFI
	switch {
	case m.cfg.Accel == AccelKVM:
		a = append(a, "-accel", "kvm")
	case m.cfg.Accel == AccelAuto && kvmUsable() && !secure:
		a = append(a, "-accel", "kvm", "-accel", "tcg")
	default:
		a = append(a, "-accel", "tcg")
	}
	a = append(a,
		// max: the host CPU under KVM, and RDRAND under TCG so that the
		// guest's getrandom does not block. Without arch-capabilities:
		// nested KVM (CI VMs) rejects that MSR and QEMU aborts at start.
		"-cpu", "max,-arch-capabilities",
		"-m", strconv.Itoa(m.vm.MemoryMB),
		"-smp", strconv.Itoa(m.vm.CPUs),
		// No default NIC, CD or VGA: only the devices below, with known ids.
		"-nodefaults",
		"-display", "none",
		"-daemonize",
		"-pidfile", m.pidFile(),
		"-qmp", "unix:"+m.qmpSocket()+",server=on,wait=off",
		"-chardev", m.serialChardev(),
		"-serial", "chardev:s0",
		"-device", "virtio-rng-pci",
	)
	a = append(a, m.vncArgs()...)
	if m.vm.Firmware == FirmwareUEFI {
		code, vars, secure := m.secureBootFirmware()
		if secure { // OVMF's secure-boot build runs its variable store in SMM
			a[slices.Index(a, "q35")] = "q35,smm=on"
			a = append(a, "-global", "driver=cfi.pflash01,property=secure,value=on")
		}
		a = append(a,
			"-drive", "if=pflash,format=raw,unit=0,readonly=on,file="+code,
			"-drive", "if=pflash,format=raw,unit=1,file="+vars,
		)
	} else {
		// Without a VGA device SeaBIOS (and the iPXE ROM, which prints
		// through it) stays silent; its serial console puts both into the
		// console log.
		a = append(a, "-fw_cfg", "name=etc/sercon-port,file="+m.serconFile())
	}
	a = append(a, m.netdevArgs()...)
	nic := fmt.Sprintf("virtio-net-pci,id=%s,mac=%s,bootindex=%d", devNet, m.vm.MAC, idx[devNet])
	if m.vm.Netdev != "none" {
		nic += ",netdev=n0"
	}
	if secure || m.vm.HTTPBoot {
		// OVMF starts unsigned option ROMs even under secure boot; QEMU's
		// iPXE ROM would then take the network boot and fail to start any
		// kernel. Without it OVMF's own network stack boots, as a real
		// machine's signed PXE firmware does (shim over TFTP, pxe/grubnet.go),
		// and its UEFI HTTP boot client is the one that runs.
		nic += ",romfile="
	}
	if m.vm.HTTPSCACerts != "" {
		a = append(a, "-fw_cfg", "name=etc/edk2/https/cacerts,file="+m.cacertsFile())
	}
	if m.vm.HTTPBoot {
		// OVMF's switches for its PXE boot options (IPv4 and IPv6): off,
		// the NIC's boot options are UEFI HTTP boot's alone.
		a = append(a, "-fw_cfg", "name=opt/org.tianocore/IPv4PXESupport,string=n",
			"-fw_cfg", "name=opt/org.tianocore/IPv6PXESupport,string=n")
	}
	a = append(a, "-device", nic)
	// The disk, the Storage controller's other drives, and its volumes
	// in place of their drives (storage.go).
	a = append(a, m.diskArgs(idx[devDisk])...)
	cd := "if=none,id=cd0drive,media=cdrom,readonly=on"
	if cdImage != "" {
		cd += ",format=raw,file=" + cdImage
	}
	a = append(a,
		"-drive", cd,
		"-device", fmt.Sprintf("ide-cd,id=%s,drive=cd0drive,bus=ide.0,bootindex=%d", devCD, idx[devCD]),
	)
	return append(a, m.vm.QEMUExtra...)
}

// kvmUsable reports whether /dev/kvm can be opened; QEMU still falls back
// to TCG if KVM then fails.
func kvmUsable() bool {
	f, err := os.OpenFile("/dev/kvm", os.O_RDWR, 0)
	if err != nil {
		return false
	}
	f.Close()
	return true
}

// readJSON decodes path into v; a missing file is not an error (false).
func readJSON(path string, v any) (bool, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return true, json.Unmarshal(b, v)
}

// writeJSON replaces path atomically, so that lock-free readers (power and
// boot queries from ipmi_sim) never see half a file.
func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// tail returns the last n bytes of a log file, for error messages.
func tail(path string, n int64) string {
	f, err := os.Open(path)
	if err != nil {
		return "no log"
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return "no log"
	}
	off := st.Size() - n
	if off < 0 {
		off = 0
	}
	b := make([]byte, st.Size()-off)
	_, _ = f.ReadAt(b, off)
	return strings.TrimSpace(string(b))
}

// edk2CACerts reads a PEM file of CAs and encodes them as OVMF takes them
// for HTTPS boot.
func edk2CACerts(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return pxe.EDK2CACerts(b)
}

// netdevArgs is the VM's network backend n0 (none for netdev "none").
func (m *Machine) netdevArgs() []string {
	switch {
	case m.vm.Netdev == "user":
		return []string{"-netdev", "user,id=n0"}
	case strings.HasPrefix(m.vm.Netdev, "tap:"):
		return []string{"-netdev", "tap,id=n0,ifname=" + strings.TrimPrefix(m.vm.Netdev, "tap:") + ",script=no,downscript=no"}
	}
	return nil
}
