package bmc

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// ipmiSim is a real OpenIPMI ipmi_sim on 127.0.0.1 whose chassis is a shell
// script keeping power and boot device in files: the files, not the driver's
// answers, prove what changed.
type ipmiSim struct {
	t     *testing.T
	dir   string
	state string
	port  int
	cmd   *exec.Cmd
	done  chan struct{}
}

const (
	simUser = "admin"
	simPass = "ironflow-pw"
)

// chassisControl follows ipmi_sim's chassis_control protocol:
// "<prog> <mc> get power boot" prints "power:1" lines; "<prog> <mc> set
// power 1 boot pxe" changes them. reset counts reboots; shutdown powers off
// only when the test says an OS answers ACPI.
const chassisControl = `#!/bin/sh
state="$1"; shift
mc="$1"; op="$2"; shift 2
echo "$op $*" >> "$state/log"
case "$op" in
get)
	for p in "$@"; do
		case "$p" in
		power) echo "power:$(cat "$state/power")" ;;
		boot) echo "boot:$(cat "$state/boot")" ;;
		esac
	done ;;
set)
	while [ $# -ge 2 ]; do
		case "$1" in
		power) echo "$2" > "$state/power" ;;
		boot) echo "$2" > "$state/boot" ;;
		reset) [ "$(cat "$state/power")" = 1 ] && echo x >> "$state/resets" ;;
		shutdown) [ -e "$state/acpi" ] && echo 0 > "$state/power" ;;
		*) echo "unknown parameter $1"; exit 1 ;;
		esac
		shift 2
	done ;;
*) echo "unknown operation $op"; exit 1 ;;
esac
exit 0
`

func startIPMISim(t *testing.T) *ipmiSim {
	t.Helper()
	bin, err := exec.LookPath("ipmi_sim")
	if err != nil {
		t.Skip("SKIP: ipmi_sim (Debian package openipmi) is not installed; the IPMI driver tests need the real simulator")
	}
	dir := t.TempDir()
	s := &ipmiSim{t: t, dir: dir, state: filepath.Join(dir, "chassis"), done: make(chan struct{})}
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(dir, "simstate"), 0o755))
	must(os.MkdirAll(s.state, 0o755))
	must(os.WriteFile(filepath.Join(s.state, "power"), []byte("0\n"), 0o644))
	must(os.WriteFile(filepath.Join(s.state, "boot"), []byte("default\n"), 0o644))
	prog := filepath.Join(dir, "chassis_control")
	must(os.WriteFile(prog, []byte(chassisControl), 0o755))

	emu := "mc_setbmc 0x20\nmc_add 0x20 0 no-device-sdrs 0x23 9 8 0x9f 0x1291 0xf02 persist_sdr\nmc_enable 0x20\n"
	must(os.WriteFile(filepath.Join(dir, "sim.emu"), []byte(emu), 0o644))
	// The port is free when chosen, but another test process may take it
	// before the simulator binds it: then it exits at once saying so, and
	// it starts again on another port.
	for attempt := 1; ; attempt++ {
		log, started := s.launch(bin, prog, must)
		if started {
			t.Cleanup(s.stop)
			return s
		}
		if !strings.Contains(log, "Address already in use") || attempt == 5 {
			t.Fatalf("ipmi_sim exited at start:\n%s", log)
		}
		s.done = make(chan struct{})
	}
}

// launch starts the simulator on a free port and waits until it holds it;
// when it exits first, launch returns its log.
func (s *ipmiSim) launch(bin, prog string, must func(error)) (string, bool) {
	t, dir := s.t, s.dir
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	must(err)
	s.port = pc.LocalAddr().(*net.UDPAddr).Port
	pc.Close()

	lan := fmt.Sprintf(`name "ironflowtest"
set_working_mc 0x20
  startlan 1
    addr 127.0.0.1 %d
    priv_limit admin
    allowed_auths_callback none md2 md5 straight
    allowed_auths_user none md2 md5 straight
    allowed_auths_operator none md2 md5 straight
    allowed_auths_admin none md2 md5 straight
    guid a123456789abcdefa123456789abcdef
  endlan
  chassis_control "%s %s 0x20"
  user 2 true "%s" "%s" admin 10 none md2 md5 straight
`, s.port, prog, s.state, simUser, simPass)
	must(os.WriteFile(filepath.Join(dir, "lan.conf"), []byte(lan), 0o644))

	logf, err := os.Create(filepath.Join(dir, "ipmi_sim.log"))
	must(err)
	s.cmd = exec.Command(bin, "-n", "-c", filepath.Join(dir, "lan.conf"), "-f", filepath.Join(dir, "sim.emu"), "-s", filepath.Join(dir, "simstate"))
	s.cmd.Dir = dir
	s.cmd.Stdin, s.cmd.Stdout, s.cmd.Stderr = nil, logf, logf
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // its own group: the chassis script dies with it
	must(s.cmd.Start())
	done := s.done
	go func() { _ = s.cmd.Wait(); logf.Close(); close(done) }()

	exited := func() string {
		log, _ := os.ReadFile(filepath.Join(dir, "ipmi_sim.log"))
		return string(log)
	}
	// Ready once the port is held and the simulator still runs a moment
	// later (a simulator that lost the port to another process exits).
	for range 500 {
		pc, err := net.ListenPacket("udp4", fmt.Sprintf("127.0.0.1:%d", s.port))
		if err != nil {
			select {
			case <-done:
				return exited(), false
			case <-time.After(100 * time.Millisecond):
				return "", true
			}
		}
		pc.Close()
		select {
		case <-done:
			return exited(), false
		case <-time.After(10 * time.Millisecond):
		}
	}
	s.stop()
	t.Fatalf("ipmi_sim did not bind 127.0.0.1:%d", s.port)
	return "", false
}

func (s *ipmiSim) stop() {
	select {
	case <-s.done:
		return
	default:
	}
	_ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGKILL)
	<-s.done
}

func (s *ipmiSim) info(extra map[string]any) map[string]any {
	m := map[string]any{
		"ipmi_address":         "127.0.0.1",
		"ipmi_port":            float64(s.port), // as JSON delivers it
		"ipmi_username":        simUser,
		"ipmi_password":        simPass,
		"ipmi_timeout":         "1s",
		"ipmi_retries":         2,
		KeyPowerPollInterval:   "20ms",
		KeyPowerStateTimeout:   "10s",
		KeySoftPowerOffTimeout: "300ms",
	}
	maps.Copy(m, extra)
	return m
}

func (s *ipmiSim) file(name string) string {
	b, _ := os.ReadFile(filepath.Join(s.state, name))
	return strings.TrimSpace(string(b))
}

// sets returns the "set ..." lines the chassis received since the log was
// last cleared.
func (s *ipmiSim) sets() []string {
	var out []string
	for _, l := range strings.Split(s.file("log"), "\n") {
		if strings.HasPrefix(l, "set ") {
			out = append(out, l)
		}
	}
	os.Remove(filepath.Join(s.state, "log"))
	return out
}

func newTestIPMI(t *testing.T, info map[string]any) Driver {
	t.Helper()
	d, err := New("ipmi", info)
	if err != nil {
		t.Fatalf("New(ipmi): %v", err)
	}
	t.Cleanup(func() { d.Close() })
	return d
}

func TestIPMISimPower(t *testing.T) {
	ctx := context.Background()
	sim := startIPMISim(t)
	d := newTestIPMI(t, sim.info(nil))

	if err := d.Validate(ctx); err != nil {
		t.Fatalf("Validate: %v", err)
	}
	steps := []struct {
		name   string
		acpi   bool
		action PowerAction
		sets   []string
		power  string
	}{
		{"power on", false, ActionPowerOn, []string{"set power 1"}, "1"},
		{"power on when on does nothing", false, ActionPowerOn, nil, "1"},
		{"reboot is verified off then on", false, ActionReboot, []string{"set power 0", "set power 1"}, "1"},
		{"power off", false, ActionPowerOff, []string{"set power 0"}, "0"},
		{"power off when off does nothing", false, ActionPowerOff, nil, "0"},
		{"reboot when off only powers on", false, ActionReboot, []string{"set power 1"}, "1"},
		{"soft off answered by the OS", true, ActionSoftOff, []string{"set shutdown 1"}, "0"},
		{"power on again", false, ActionPowerOn, []string{"set power 1"}, "1"},
		{"power off before the soft reboot", false, ActionPowerOff, []string{"set power 0"}, "0"},
		{"soft reboot when off powers on", false, ActionSoftReboot, []string{"set power 1"}, "1"},
	}
	sim.sets()
	for _, st := range steps {
		acpi := filepath.Join(sim.state, "acpi")
		if st.acpi {
			os.WriteFile(acpi, nil, 0o644)
		} else {
			os.Remove(acpi)
		}
		if err := d.SetPower(ctx, st.action); err != nil {
			t.Fatalf("%s: SetPower(%s): %v", st.name, st.action, err)
		}
		if got := sim.sets(); strings.Join(got, ",") != strings.Join(st.sets, ",") {
			t.Fatalf("%s: chassis received %q, want %q", st.name, got, st.sets)
		}
		if got := sim.file("power"); got != st.power {
			t.Fatalf("%s: chassis power file %q, want %q", st.name, got, st.power)
		}
		want := map[string]PowerState{"1": PowerOn, "0": PowerOff}[st.power]
		if ps, err := d.PowerState(ctx); err != nil || ps != want {
			t.Fatalf("%s: PowerState = %q, %v; want %q", st.name, ps, err, want)
		}
	}
}

// TestIPMISimSoftPowerOffIgnored: a machine whose OS ignores the soft
// shutdown (ACPI) stays on: the soft power off and the soft reboot fail at
// the deadline with Ironic's PowerStateFailure and never cut the power
// themselves. WithPowerTimeout (the API's timeout) sets that deadline.
func TestIPMISimSoftPowerOffIgnored(t *testing.T) {
	sim := startIPMISim(t)
	d := newTestIPMI(t, sim.info(map[string]any{KeySoftPowerOffTimeout: "1h"}))
	if err := d.SetPower(context.Background(), ActionPowerOn); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(sim.state, "acpi"))
	for _, action := range []PowerAction{ActionSoftOff, ActionSoftReboot} {
		sim.sets()
		start := time.Now()
		err := d.SetPower(WithPowerTimeout(context.Background(), 300*time.Millisecond), action)
		if !errors.Is(err, ErrSoftPowerOffTimeout) || errors.Is(err, ErrBusy) {
			t.Fatalf("%s ignored by the OS: %v; want ErrSoftPowerOffTimeout, not retryable", action, err)
		}
		if took := time.Since(start); took > 20*time.Second {
			t.Fatalf("%s took %s: the 300ms timeout was not applied", action, took)
		}
		if got := sim.sets(); strings.Join(got, ",") != "set shutdown 1" {
			t.Fatalf("%s: chassis received %q, want the soft shutdown only", action, got)
		}
		if got := sim.file("power"); got != "1" {
			t.Fatalf("%s: power %q, want still on", action, got)
		}
	}
}

func TestIPMISimBootDevice(t *testing.T) {
	ctx := context.Background()
	sim := startIPMISim(t)
	d := newTestIPMI(t, sim.info(nil))
	cases := []struct {
		set  BootSetting
		file string // what the chassis was told
	}{
		{BootSetting{Device: BootPXE}, "pxe"},
		{BootSetting{Device: BootDisk}, "default"},
		{BootSetting{Device: BootCDROM}, "cdrom"},
		{BootSetting{Device: BootBIOS}, "bios"},
		// ipmi_sim drops the persistent and EFI flags; the device must
		// still be set and the call succeed.
		{BootSetting{Device: BootPXE, Persistent: true, Mode: BootModeUEFI}, "pxe"},
		{BootSetting{Device: BootDisk, Persistent: true}, "default"},
	}
	for _, tc := range cases {
		if err := d.SetBootDevice(ctx, tc.set); err != nil {
			t.Fatalf("SetBootDevice(%+v): %v", tc.set, err)
		}
		if got := sim.file("boot"); got != tc.file {
			t.Fatalf("SetBootDevice(%+v): chassis boot file %q, want %q", tc.set, got, tc.file)
		}
		got, err := d.GetBootDevice(ctx)
		if err != nil || got.Device != tc.set.Device {
			t.Fatalf("GetBootDevice after %+v = %+v, %v", tc.set, got, err)
		}
	}
	if err := d.SetBootDevice(ctx, BootSetting{Device: "floppy"}); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("SetBootDevice(floppy): %v; want ErrUnsupported", err)
	}
	if err := d.InsertMedia(ctx, "http://x/a.iso"); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("InsertMedia over IPMI: %v; want ErrUnsupported", err)
	}
}

func TestIPMISimWrongPassword(t *testing.T) {
	sim := startIPMISim(t)
	const bad = "wrong-pw-123"
	d := newTestIPMI(t, sim.info(map[string]any{"ipmi_password": bad}))
	err := d.Validate(context.Background())
	if !errors.Is(err, ErrAuth) || Retryable(err) || !strings.Contains(err.Error(), "authentication failed") || strings.Contains(err.Error(), bad) {
		t.Fatalf("Validate with a wrong password: %v", err)
	}
}

// TestIPMISimStopped: with the simulator hung (no answer at all) or gone
// (ICMP port unreachable) the driver gives up on its own with
// ErrUnreachable, well inside the caller's deadline.
func TestIPMISimStopped(t *testing.T) {
	for _, tc := range []struct {
		name string
		stop func(s *ipmiSim)
		text string
	}{
		{"hung", func(s *ipmiSim) { _ = syscall.Kill(-s.cmd.Process.Pid, syscall.SIGSTOP) }, "no answer within 200ms"},
		{"gone", func(s *ipmiSim) { s.stop() }, "nothing listens"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sim := startIPMISim(t)
			d := newTestIPMI(t, sim.info(map[string]any{"ipmi_timeout": "200ms", "ipmi_retries": 1}))
			if err := d.Validate(context.Background()); err != nil {
				t.Fatalf("Validate while running: %v", err)
			}
			tc.stop(sim)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			_, err := d.PowerState(ctx)
			if !errors.Is(err, ErrUnreachable) || !Retryable(err) || errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), tc.text) {
				t.Fatalf("PowerState: %v; want ErrUnreachable from the driver's own timeout saying %q", err, tc.text)
			}
		})
	}
}

// TestIPMISimConcurrentCalls: many callers on one BMC are serialized, so
// none of them fails for lack of a session slot.
func TestIPMISimConcurrentCalls(t *testing.T) {
	sim := startIPMISim(t)
	info := sim.info(nil)
	baseline := runtime.NumGoroutine()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			d, err := New("ipmi", info)
			if err != nil {
				errs <- err
				return
			}
			defer d.Close()
			for range 3 {
				if _, err := d.PowerState(context.Background()); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("concurrent PowerState: %v", err)
	}
	var now int
	for range 200 { // settle: sessions are closed, nothing may keep running
		if now = runtime.NumGoroutine(); now <= baseline {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("goroutines: %d before, %d after", baseline, now)
}

func TestIPMIConfig(t *testing.T) {
	cases := []struct {
		name    string
		info    map[string]any
		wantErr string
	}{
		{"defaults", map[string]any{"ipmi_address": "10.0.0.9"}, ""},
		{"missing address", map[string]any{"ipmi_username": "u"}, "ipmi_address"},
		{"port not a number", map[string]any{"ipmi_address": "h", "ipmi_port": "x"}, "ipmi_port"},
		{"port out of range", map[string]any{"ipmi_address": "h", "ipmi_port": 70000}, "ipmi_port"},
		{"priv level", map[string]any{"ipmi_address": "h", "ipmi_priv_level": "ROOT"}, "ipmi_priv_level"},
		{"cipher suite", map[string]any{"ipmi_address": "h", "ipmi_cipher_suite": "x"}, "ipmi_cipher_suite"},
		{"timeout", map[string]any{"ipmi_address": "h", "ipmi_timeout": "-1"}, "ipmi_timeout"},
		{"retries", map[string]any{"ipmi_address": "h", "ipmi_retries": "many"}, "ipmi_retries"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := parseIPMIConfig(tc.info)
			if tc.wantErr != "" {
				if !errors.Is(err, ErrInvalidConfig) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v; want ErrInvalidConfig naming %s", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.port != DefaultIPMIPort || cfg.cipherSuite != DefaultIPMICipherSuite || cfg.privName != DefaultIPMIPrivLevel ||
				cfg.timeout != DefaultIPMITimeout || cfg.retries != DefaultIPMIRetries {
				t.Fatalf("defaults not applied: %+v", cfg)
			}
		})
	}
}
