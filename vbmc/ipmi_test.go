package vbmc

import (
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// freeUDPPort returns a UDP port on 127.0.0.1 that was free a moment ago.
func freeUDPPort(t *testing.T) int {
	t.Helper()
	c, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	return c.LocalAddr().(*net.UDPAddr).Port
}

// TestIPMIWithQEMU runs OpenIPMI's ipmi_sim with this package's
// chassis_control (the test binary in that role) and drives it with
// ipmitool over lanplus: power on/status/off and boot device pxe reach a
// real QEMU.
func TestIPMIWithQEMU(t *testing.T) {
	requireTools(t, DefaultQEMUBinary, "qemu-img", "ipmi_sim", "ipmitool", "pgrep")
	cfg := newTestConfig(t)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	port := freeUDPPort(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	stop, err := StartIPMISim(ctx, cfg, "vm0", "127.0.0.1:"+strconv.Itoa(port), "admin", "password",
		[]string{"env", chassisControlEnv + "=1", exe, "--config", cfg.Path, "--vm", "vm0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := stop(); err != nil {
			t.Errorf("stop ipmi_sim: %v", err)
		}
	})
	m := newMachine(&cfg, cfg.VMs[0], testLogger(t))

	ipmitool := func(args ...string) string {
		t.Helper()
		// Cipher suite 3: ipmi_sim does not answer cipher suite discovery.
		full := append([]string{"-I", "lanplus", "-C", "3", "-H", "127.0.0.1", "-p", strconv.Itoa(port),
			"-U", "admin", "-P", "password", "-N", "5", "-R", "3"}, args...)
		var out, errb bytes.Buffer
		cmd := exec.Command("ipmitool", full...)
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			t.Fatalf("ipmitool %s: %v: %s %s", strings.Join(args, " "), err, out.String(), errb.String())
		}
		return out.String()
	}

	if out := ipmitool("chassis", "power", "status"); !strings.Contains(out, "is off") {
		t.Fatalf("power status before power on: %q", out)
	}
	ipmitool("chassis", "power", "on")
	pid := m.pid()
	if pid == 0 {
		t.Fatal("no QEMU process after ipmitool power on")
	}
	if st := queryStatus(t, m); st != "running" {
		t.Fatalf("QMP status after IPMI power on: %s", st)
	}
	if out := ipmitool("chassis", "power", "status"); !strings.Contains(out, "is on") {
		t.Fatalf("power status after power on: %q", out)
	}
	if first(bootIndexes(t, m)) != "disk0" {
		t.Fatalf("default boot order: %v", bootIndexes(t, m))
	}

	ipmitool("chassis", "bootdev", "pxe")
	if idx := bootIndexes(t, m); first(idx) != "net0" {
		t.Fatalf("boot order after bootdev pxe: %v, want net0 first", idx)
	}
	if b, _ := m.Boot(); b.Target != BootTargetPxe || b.Enabled != BootContinuous {
		t.Fatalf("stored boot override after bootdev pxe: %+v", b)
	}
	ipmitool("chassis", "bootdev", "disk")
	if idx := bootIndexes(t, m); first(idx) != "disk0" {
		t.Fatalf("boot order after bootdev disk: %v, want disk0 first", idx)
	}

	// Power cycle: ipmi_sim powers off, then on again a second later.
	ipmitool("chassis", "power", "cycle")
	waitFor(t, "a new QEMU after power cycle", func() bool {
		if p := m.pid(); p == 0 || p == pid {
			return false
		}
		// Started through and through: its monitor answers.
		return qmpDo(context.Background(), m.qmpSocket(), func(*qmpConn) error { return nil }) == nil
	})
	if processAlive(pid) {
		t.Fatalf("QEMU pid %d survived power cycle", pid)
	}
	pid = m.pid()
	if idx := bootIndexes(t, m); first(idx) != "disk0" {
		t.Fatalf("boot order after power cycle: %v, want disk0 first (bootdev disk is kept)", idx)
	}

	ipmitool("chassis", "power", "off")
	if processAlive(pid) || m.pid() != 0 {
		t.Fatalf("QEMU pid %d alive after ipmitool power off", pid)
	}
	if out := ipmitool("chassis", "power", "status"); !strings.Contains(out, "is off") {
		t.Fatalf("power status after power off: %q", out)
	}
}

// TestChassisControlProtocol runs the chassis_control entry point the way
// ipmi_sim does, without QEMU: boot devices round-trip through the VM's
// state, and what a VM cannot do is refused.
func TestChassisControlProtocol(t *testing.T) {
	cfg := newTestConfig(t)
	run := func(args ...string) (string, error) {
		var out bytes.Buffer
		err := ChassisControl(context.Background(), cfg, "vm0", args, &out, testLogger(t))
		return out.String(), err
	}
	tests := []struct {
		name    string
		args    []string
		want    string
		wantErr bool
	}{
		{"power while off", []string{"get", "power"}, "power:0\n", false},
		{"boot unset", []string{"get", "boot"}, "boot:none\n", false},
		{"set pxe", []string{"set", "boot", "pxe"}, "", false},
		{"read pxe", []string{"get", "boot"}, "boot:pxe\n", false},
		{"set cdrom", []string{"set", "boot", "cdrom"}, "", false},
		{"read cdrom with mc address", []string{"0x20", "get", "boot", "power"}, "boot:cdrom\npower:0\n", false},
		{"set default (disk)", []string{"set", "boot", "default"}, "", false},
		{"read default", []string{"get", "boot"}, "boot:default\n", false},
		{"bios setup refused", []string{"set", "boot", "bios"}, "", true},
		{"identify ignored", []string{"set", "identify", "15 0"}, "", false},
		{"shutdown while off", []string{"set", "shutdown", "1"}, "", false},
		{"unknown name", []string{"get", "fan"}, "", true},
		{"odd set", []string{"set", "power"}, "", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out, err := run(tc.args...)
			if (err != nil) != tc.wantErr || out != tc.want {
				t.Fatalf("chassis_control %q: %q, %v; want %q (error %v)", tc.args, out, err, tc.want, tc.wantErr)
			}
		})
	}
}

// waitFor polls cond with a generous deadline (power cycles are carried out
// by ipmi_sim after its own one-second timer, on a possibly loaded host).
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(120 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
