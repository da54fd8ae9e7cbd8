package vbmc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Timing of the ipmi_sim process.
const (
	// DefaultIPMISimStartTimeout bounds the wait for ipmi_sim to listen.
	DefaultIPMISimStartTimeout = 10 * time.Second
	// DefaultIPMISimStopTimeout is how long stop waits after SIGTERM before SIGKILL.
	DefaultIPMISimStopTimeout = 5 * time.Second
	// DefaultChassisControlTimeout bounds one chassis_control call; ipmi_sim
	// waits for it, single-threaded, so it must never hang.
	DefaultChassisControlTimeout = 90 * time.Second
)

// ipmiBootDevices maps ipmi_sim's boot device names (its boot_map: the IPMI
// boot flags device selector) to boot override targets. "default" is IPMI's
// "force boot from default hard drive". "bios" (enter setup) is left out:
// a VM cannot be sent into its firmware setup, so it is refused.
var ipmiBootDevices = map[string]string{
	"none":    BootTargetNone,
	"pxe":     BootTargetPxe,
	"default": BootTargetHdd,
	"cdrom":   BootTargetCd,
}

func ipmiBootName(target string) string {
	for name, t := range ipmiBootDevices {
		if t == target && name != "none" {
			return name
		}
	}
	return "none"
}

// ChassisControl is the chassis_control program ipmi_sim runs as
// `<program> get NAME...` or `<program> set NAME VALUE...` (NAME: power,
// reset, boot, shutdown, identify). For get it prints `NAME:VALUE` lines on
// stdout. Power and boot go to the same Machine code as Redfish; QEMU is
// started detached, so the call returns as soon as the VM runs.
func ChassisControl(ctx context.Context, cfg Config, vmName string, args []string, stdout io.Writer, log *slog.Logger) error {
	cfg.VMs = slices.Clone(cfg.VMs)
	if err := cfg.normalize(); err != nil {
		return fmt.Errorf("vbmc config: %w", err)
	}
	vm, ok := cfg.vm(vmName)
	if !ok {
		return fmt.Errorf("no vm %q in the vbmc config", vmName)
	}
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	m := newMachine(&cfg, vm, log.With("via", "ipmi"))
	ctx, cancel := context.WithTimeout(ctx, DefaultChassisControlTimeout)
	defer cancel()

	// Some ipmi_sim builds put the MC address first.
	if len(args) > 0 && strings.HasPrefix(args[0], "0x") {
		args = args[1:]
	}
	if len(args) < 2 {
		return fmt.Errorf("chassis_control: want get NAME... or set NAME VALUE..., got %q", args)
	}
	switch args[0] {
	case "get":
		for _, name := range args[1:] {
			val, err := chassisGet(ctx, m, name)
			if err != nil {
				return err
			}
			fmt.Fprintf(stdout, "%s:%s\n", name, val)
		}
		return nil
	case "set":
		rest := args[1:]
		if len(rest)%2 != 0 {
			return fmt.Errorf("chassis_control set: want NAME VALUE pairs, got %q", rest)
		}
		for i := 0; i < len(rest); i += 2 {
			m.log.Info("ipmi chassis control", "name", rest[i], "value", rest[i+1])
			if err := chassisSet(ctx, m, rest[i], rest[i+1]); err != nil {
				m.log.Error("ipmi chassis control failed", "name", rest[i], "value", rest[i+1], "err", err)
				return err
			}
		}
		return nil
	case "check":
		return nil
	default:
		return fmt.Errorf("chassis_control: unknown operation %q", args[0])
	}
}

func chassisGet(ctx context.Context, m *Machine, name string) (string, error) {
	switch name {
	case "power":
		p, err := m.PowerState(ctx)
		if err != nil {
			return "", err
		}
		if p == PowerOn {
			return "1", nil
		}
		return "0", nil
	case "boot":
		b, err := m.Boot()
		if err != nil {
			return "", err
		}
		return ipmiBootName(b.Target), nil
	case "reset", "shutdown":
		return "0", nil
	default:
		return "", fmt.Errorf("chassis_control get: unknown name %q", name)
	}
}

func chassisSet(ctx context.Context, m *Machine, name, value string) error {
	switch name {
	case "power":
		switch value {
		case "1":
			return m.PowerOn(ctx)
		case "0":
			return m.ForceOff(ctx)
		}
		return fmt.Errorf("chassis_control set power: value %q is not 0 or 1", value)
	case "reset":
		if value == "0" {
			return nil
		}
		return m.ForceRestart(ctx)
	case "shutdown":
		if value == "0" {
			return nil
		}
		return m.GracefulShutdown(ctx)
	case "boot":
		target, ok := ipmiBootDevices[value]
		if !ok {
			return fmt.Errorf("chassis_control set boot: device %q is not supported by a VM", value)
		}
		enabled := BootContinuous
		if target == BootTargetNone {
			enabled = BootDisabled
		}
		return m.SetBoot(ctx, BootOverride{Target: target, Enabled: enabled})
	case "identify":
		// No chassis light to blink.
		return nil
	default:
		return fmt.Errorf("chassis_control set: unknown name %q", name)
	}
}

// StartIPMISim runs OpenIPMI's ipmi_sim as the IPMI BMC of one VM, listening
// on listenAddr (host:port, UDP) with one admin user. Its chassis_control
// program is chassisControlCmd (the argv of `ironflow vbmc chassis-control
// --config PATH --vm NAME` or an equivalent; nil means this executable).
// stop ends ipmi_sim and powers the VM off, so that nothing outlives it.
func StartIPMISim(ctx context.Context, cfg Config, vmName, listenAddr, user, password string, chassisControlCmd []string) (stop func() error, err error) {
	cfg.VMs = slices.Clone(cfg.VMs)
	if err := cfg.normalize(); err != nil {
		return nil, fmt.Errorf("vbmc config: %w", err)
	}
	vm, ok := cfg.vm(vmName)
	if !ok {
		return nil, fmt.Errorf("no vm %q in the vbmc config", vmName)
	}
	host, port, err := net.SplitHostPort(listenAddr)
	if err != nil {
		return nil, fmt.Errorf("ipmi_sim listen address %q: %w", listenAddr, err)
	}
	if user == "" || password == "" {
		return nil, errors.New("ipmi_sim needs a user and a password")
	}
	if strings.ContainsAny(user+password, "\"\n") {
		return nil, errors.New("ipmi_sim user and password may not contain quotes or newlines")
	}
	if chassisControlCmd == nil {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("find own executable for chassis_control: %w", err)
		}
		if cfg.Path == "" {
			return nil, errors.New("chassis_control needs the config file path (load the config with LoadConfig)")
		}
		chassisControlCmd = []string{exe, "vbmc", "chassis-control", "--config", cfg.Path, "--vm", vmName}
	}
	m := newMachine(&cfg, vm, slog.New(slog.NewTextHandler(io.Discard, nil)))
	dir := filepath.Join(m.dir, "ipmi")
	if err := os.MkdirAll(filepath.Join(dir, "state"), 0o700); err != nil {
		return nil, fmt.Errorf("create ipmi_sim dir for %s: %w", vmName, err)
	}
	quoted := make([]string, len(chassisControlCmd))
	for i, a := range chassisControlCmd {
		if strings.ContainsAny(a, "'\"") {
			return nil, fmt.Errorf("chassis_control argument %q may not contain quotes", a)
		}
		// ipmi_sim hands the program line to sh (popen).
		quoted[i] = "'" + a + "'"
	}
	lanConf := fmt.Sprintf(`name "%s"
set_working_mc 0x20
  startlan 1
    addr %s %s
    priv_limit admin
    allowed_auths_callback none md2 md5 straight
    allowed_auths_user none md2 md5 straight
    allowed_auths_operator none md2 md5 straight
    allowed_auths_admin none md2 md5 straight
    guid %s
  endlan
  chassis_control "%s"
  user 2 true "%s" "%s" admin 10 none md2 md5 straight
`, vmName, host, port, strings.ReplaceAll(m.UUID(), "-", ""), strings.Join(quoted, " "), user, password)
	var relay *solRelay
	if vm.SerialAddress != "" {
		// Serial over LAN to the VM's serial line (ipmi_lan(5): sol
		// "tcp:address:port" for QEMU ports), through a relay that
		// outlives the VM's power cycles (solrelay.go).
		if relay, err = startSOLRelay(vm.SerialAddress); err != nil {
			return nil, fmt.Errorf("serial over LAN relay for %s: %w", vmName, err)
		}
		lanConf += fmt.Sprintf("  sol \"tcp:%s\" 115200\n", relay.Addr())
	}
	closeRelay := func() {
		if relay != nil {
			relay.Close()
		}
	}
	// The emulated BMC: one MC at 0x20 with a SEL, as OpenIPMI's example,
	// and sensors with their SDRs.
	simEmu := "mc_setbmc 0x20\n" +
		"mc_add 0x20 0 no-device-sdrs 0x23 9 8 0x9f 0x1291 0xf02\n" +
		"sel_enable 0x20 1000 0x0a\n" +
		ipmiSensorEmu() + // ipmi_sensors.go
		"mc_enable 0x20\n"
	lanPath, emuPath := filepath.Join(dir, "lan.conf"), filepath.Join(dir, "sim.emu")
	// lan.conf holds the password: owner-only.
	if err := os.WriteFile(lanPath, []byte(lanConf), 0o600); err != nil {
		closeRelay()
		return nil, fmt.Errorf("write lan.conf for %s: %w", vmName, err)
	}
	if err := os.WriteFile(emuPath, []byte(simEmu), 0o644); err != nil {
		closeRelay()
		return nil, fmt.Errorf("write sim.emu for %s: %w", vmName, err)
	}
	logPath := filepath.Join(dir, "ipmi_sim.log")
	logf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		closeRelay()
		return nil, fmt.Errorf("open ipmi_sim log for %s: %w", vmName, err)
	}
	cmd := exec.Command("ipmi_sim", "-n", "-c", lanPath, "-f", emuPath, "-s", filepath.Join(dir, "state"))
	cmd.Dir = dir
	cmd.Stdout = logf
	cmd.Stderr = logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		closeRelay()
		return nil, fmt.Errorf("start ipmi_sim for %s: %w", vmName, err)
	}
	exited := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		logf.Close()
		close(exited)
	}()
	pgid := cmd.Process.Pid
	stopSim := func() {
		defer closeRelay()
		select {
		case <-exited:
		default:
			_ = cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-exited:
			case <-time.After(DefaultIPMISimStopTimeout):
				_ = cmd.Process.Kill()
				<-exited
			}
		}
		// A chassis_control call may still run (it ignores SIGTERM so that
		// a power-on is not cut in half): let it finish, so that the QEMU it
		// starts is on record before the VM is powered off.
		deadline := time.Now().Add(DefaultChassisControlTimeout)
		for syscall.Kill(-pgid, 0) == nil {
			if time.Now().After(deadline) {
				_ = syscall.Kill(-pgid, syscall.SIGKILL)
				break
			}
			time.Sleep(processPollInterval)
		}
	}
	stop = func() error {
		stopSim()
		offCtx, cancel := context.WithTimeout(context.Background(), DefaultActionTimeout)
		defer cancel()
		return m.ForceOff(offCtx)
	}
	if err := waitUDPListener(ctx, port, exited); err != nil {
		stopSim()
		return nil, fmt.Errorf("ipmi_sim for %s on %s: %w (%s)", vmName, listenAddr, err, tail(logPath, 400))
	}
	go func() {
		select {
		case <-ctx.Done():
			_ = stop()
		case <-exited:
		}
	}()
	return stop, nil
}

// waitUDPListener waits until a UDP socket is bound to port (ipmi_sim
// reports nothing when it is ready), reading /proc/net/udp{,6}.
func waitUDPListener(ctx context.Context, port string, exited <-chan struct{}) error {
	p, err := strconv.Atoi(port)
	if err != nil {
		return fmt.Errorf("port %q: %w", port, err)
	}
	hexPort := fmt.Sprintf(":%04X ", p)
	deadline := time.Now().Add(DefaultIPMISimStartTimeout)
	for {
		for _, f := range []string{"/proc/net/udp", "/proc/net/udp6"} {
			b, _ := os.ReadFile(f)
			for _, line := range strings.Split(string(b), "\n") {
				fields := strings.Fields(line)
				if len(fields) > 1 && strings.HasSuffix(fields[1]+" ", hexPort) {
					return nil
				}
			}
		}
		select {
		case <-exited:
			return errors.New("ipmi_sim exited")
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(processPollInterval):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not listening after %s", DefaultIPMISimStartTimeout)
		}
	}
}
