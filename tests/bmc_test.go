package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ironflow/ironflow/bmc"
	"github.com/ironflow/ironflow/embedded"
	"github.com/ironflow/ironflow/internal/testkit/promcheck"
	"github.com/ironflow/ironflow/internal/testkit/syncbuf"
	"github.com/ironflow/ironflow/store"
	"github.com/ironflow/ironflow/vbmc"
)

// bmcLab is two QEMU VMs behind ironflow's virtual BMC: one on its Redfish
// service, one on OpenIPMI's ipmi_sim with vbmc's chassis_control.
type bmcLab struct {
	cfgPath, stateDir string
	redfishURL        string
	ipmiPort          int
	// vbmcLog is what the Redfish vbmc logged: each power action, boot
	// override and virtual media change it carried out.
	vbmcLog *syncbuf.Buffer
}

func requireQEMU(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("SKIPPED LOUDLY: real-BMC tests start QEMU and ipmi_sim and need root (make test runs as root in CI)")
	}
	for _, bin := range []string{"qemu-system-x86_64", "ipmi_sim", "qemu-img"} {
		if _, err := exec.LookPath(bin); err != nil {
			t.Fatalf("%s is missing: make test installs it (scripts/install-deps.sh)", bin)
		}
	}
}

func startBMCLab(t *testing.T) *bmcLab {
	t.Helper()
	requireQEMU(t)
	dir, err := os.MkdirTemp("", "ironflow-bmc-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	cfg := map[string]any{
		"state_dir": filepath.Join(dir, "state"), "username": "admin", "password": "password",
		"vms": []map[string]any{
			{"name": "rf0", "mac": "52:54:00:dd:00:01", "disk": filepath.Join(dir, "rf0.raw"), "disk_size": "16M", "memory_mb": 128, "firmware": "bios", "netdev": "none"},
			{"name": "ipmi0", "mac": "52:54:00:dd:00:02", "disk": filepath.Join(dir, "ipmi0.raw"), "disk_size": "16M", "memory_mb": 128, "firmware": "bios", "netdev": "none"},
		},
	}
	b, _ := json.Marshal(cfg)
	l := &bmcLab{cfgPath: filepath.Join(dir, "vms.json"), stateDir: filepath.Join(dir, "state"), vbmcLog: &syncbuf.Buffer{}}
	if err := os.WriteFile(l.cfgPath, b, 0o600); err != nil {
		t.Fatal(err)
	}
	vc, err := vbmc.LoadConfig(l.cfgPath)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := vbmc.NewServer(vc, slog.New(slog.NewTextHandler(l.vbmcLog, nil)))
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(srv)
	t.Cleanup(func() { hs.Close(); srv.Close() })
	l.redfishURL = hs.URL
	if l.ipmiPort, err = embedded.FreePort("127.0.0.1"); err != nil {
		t.Fatal(err)
	}
	stop, err := vbmc.StartIPMISim(context.Background(), vc, "ipmi0", "127.0.0.1:"+strconv.Itoa(l.ipmiPort), "admin", "password",
		[]string{lab.Bin, "vbmc", "chassis-control", "--config", l.cfgPath, "--vm", "ipmi0"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = stop() })
	return l
}

// qemuRunning is the peer's own view: is the VM's QEMU process alive?
func (l *bmcLab) qemuRunning(vm string) bool {
	b, err := os.ReadFile(filepath.Join(l.stateDir, vm, "qemu.pid"))
	if err != nil {
		return false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return false
	}
	return syscall.Kill(pid, 0) == nil
}

// qemuPID is the VM's QEMU process ID.
func (l *bmcLab) qemuPID(t *testing.T, vm string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(l.stateDir, vm, "qemu.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

// killQEMU ends the VM's QEMU process, as a machine losing power would.
func (l *bmcLab) killQEMU(t *testing.T, vm string) {
	_ = syscall.Kill(l.qemuPID(t, vm), syscall.SIGKILL)
}

// bootOverride is the peer's recorded boot override.
func (l *bmcLab) bootOverride(t *testing.T, vm string) string {
	b, _ := os.ReadFile(filepath.Join(l.stateDir, vm, "boot.json"))
	return string(b)
}

func waitFor(t *testing.T, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if cond() {
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("timed out after %s waiting for %s\nworker log:\n%s", timeout, what, workerLog())
}

// TestRealBMCsThroughTheCLI manages, powers and switches the boot device of a
// redfish node and an ipmi node with the baremetal CLI; the virtual BMCs'
// own state (the QEMU process, the recorded boot override) shows each change.
func TestRealBMCsThroughTheCLI(t *testing.T) {
	l := startBMCLab(t)
	nodes := []struct {
		name, vm string
		args     []string
	}{
		{"bmc-redfish-0", "rf0", []string{"--driver", "redfish", "--driver-info", "redfish_address=" + l.redfishURL,
			"--driver-info", "redfish_system_id=/redfish/v1/Systems/rf0", "--driver-info", "redfish_username=admin",
			"--driver-info", "redfish_password=password"}},
		{"bmc-ipmi-0", "ipmi0", []string{"--driver", "ipmi", "--driver-info", "ipmi_address=127.0.0.1",
			"--driver-info", "ipmi_port=" + strconv.Itoa(l.ipmiPort), "--driver-info", "ipmi_username=admin",
			"--driver-info", "ipmi_password=password"}},
	}
	for _, n := range nodes {
		t.Run(n.name, func(t *testing.T) {
			mustCLI(t, append([]string{"node", "create", "--name", n.name}, n.args...)...)
			show := mustCLI(t, "node", "show", n.name, "-f", "json", "-c", "driver_info")
			if strings.Contains(show, `"password"`) || !strings.Contains(show, "******") {
				t.Fatalf("the BMC password is not masked: %s", show)
			}
			mustCLI(t, "node", "manage", n.name, "--wait", "120")
			if st := getNode(t, n.name); st.ProvisionState != "manageable" || deref(st.PowerState) != "power off" {
				t.Fatalf("after manage: %+v", st)
			}
			if v := mustCLI(t, "node", "validate", n.name, "-f", "json"); !strings.Contains(v, `"Interface": "power"`) {
				t.Fatalf("validate: %s", v)
			}
			l.checkHealth(t, n.name, n.vm)

			mustCLI(t, "node", "power", "on", n.name)
			waitFor(t, n.vm+" QEMU running", 60*time.Second, func() bool { return l.qemuRunning(n.vm) })
			waitFor(t, n.name+" power on recorded", 60*time.Second, func() bool { return deref(getNode(t, n.name).PowerState) == "power on" })
			if n.vm == "rf0" {
				l.checkRunningSensors(t)
			}

			// The VM boots nothing, so no OS hears the ACPI power button:
			// a soft power off outlives its timeout and fails as Ironic's
			// does, the machine left on for the client to power off hard.
			start := time.Now()
			mustCLI(t, "node", "power", "off", "--soft", "--power-timeout", "3", n.name)
			var ps map[string]any
			waitFor(t, n.name+" soft power off to give up", 60*time.Second, func() bool {
				ps = nil
				call(t, "GET", "/v1/nodes/"+n.name+"/states", nil, &ps)
				return ps["target_power_state"] == nil && ps["last_error"] != nil
			})
			if want := "Failed to change power state to 'power off' by 'soft power off': Failed to set node power state to power off."; ps["last_error"] != want || ps["power_state"] != "power on" || !l.qemuRunning(n.vm) {
				t.Fatalf("after an ignored soft power off: last_error %v, power_state %v, QEMU running %v; want %q, power on, running",
					ps["last_error"], ps["power_state"], l.qemuRunning(n.vm), want)
			}
			if took := time.Since(start); took < 3*time.Second {
				t.Fatalf("the soft power off gave up after %s, before its 3 s timeout", took)
			} else {
				t.Logf("the ignored soft power off took %s, the CLI call included", took.Round(100*time.Millisecond))
			}

			// disable_power_off (API 1.95): a power off is refused, a
			// reboot resets the machine through the BMC without a power
			// off: the same QEMU process runs on.
			setDisablePowerOff(t, n.name, true)
			if _, stderr, err := baremetal(t, "node", "power", "off", n.name); err == nil || !strings.Contains(stderr, "Failed to set node power state to power off.") {
				t.Fatalf("power off of a disable_power_off node: %v %s", err, stderr)
			}
			pid := l.qemuPID(t, n.vm)
			mustCLI(t, "node", "reboot", n.name)
			waitFor(t, n.name+" reboot recorded", 60*time.Second, func() bool {
				ps = nil
				call(t, "GET", "/v1/nodes/"+n.name+"/states", nil, &ps)
				return ps["target_power_state"] == nil && ps["power_state"] == "power on"
			})
			if got := l.qemuPID(t, n.vm); got != pid || ps["last_error"] != nil {
				t.Fatalf("reboot of a disable_power_off node: QEMU pid %d, was %d (a power off restarts it); last_error %v", got, pid, ps["last_error"])
			}
			setDisablePowerOff(t, n.name, false)

			mustCLI(t, "node", "boot", "device", "set", n.name, "pxe", "--persistent")
			if b := l.bootOverride(t, n.vm); !strings.Contains(strings.ToLower(b), "pxe") {
				t.Fatalf("the BMC did not record boot device pxe: %q", b)
			}
			if out := mustCLI(t, "node", "boot", "device", "show", n.name, "-f", "json"); !strings.Contains(out, "pxe") {
				t.Fatalf("boot device show: %s", out)
			}
			mustCLI(t, "node", "boot", "device", "set", n.name, "disk")
			if b := l.bootOverride(t, n.vm); !strings.Contains(strings.ToLower(b), "hdd") && !strings.Contains(strings.ToLower(b), "disk") {
				t.Fatalf("the BMC did not record boot device disk: %q", b)
			}

			if n.vm == "rf0" {
				// Behind ironflow's back: the machine dies. The periodic
				// power-state sync notices and records it.
				l.killQEMU(t, n.vm)
			} else {
				mustCLI(t, "node", "power", "off", n.name)
			}
			waitFor(t, n.vm+" QEMU stopped", 60*time.Second, func() bool { return !l.qemuRunning(n.vm) })
			waitFor(t, n.name+" power off recorded", 60*time.Second, func() bool { return deref(getNode(t, n.name).PowerState) == "power off" })
			if n.vm == "rf0" {
				if hist := mustCLI(t, "node", "history", "list", n.name, "-f", "json"); !strings.Contains(hist, "(sync)") {
					t.Fatalf("no power sync history event:\n%s", hist)
				}
			}

			mustCLI(t, "node", "maintenance", "set", n.name, "--reason", "cabling")
			if out := mustCLI(t, "node", "show", n.name, "-f", "json", "-c", "maintenance_reason"); !strings.Contains(out, "cabling") {
				t.Fatalf("maintenance reason: %s", out)
			}
			mustCLI(t, "node", "maintenance", "unset", n.name)
			mustCLI(t, "node", "delete", n.name)
		})
	}
}

// TestManageWithWrongBMCPasswordGoesBackToEnroll shows the operator why: the
// node returns to enroll with a last_error that names the authentication
// failure, and the password appears nowhere.
func TestManageWithWrongBMCPasswordGoesBackToEnroll(t *testing.T) {
	l := startBMCLab(t)
	for _, c := range []struct{ name, driver string }{{"bad-redfish-0", "redfish"}, {"bad-ipmi-0", "ipmi"}} {
		args := []string{"node", "create", "--name", c.name, "--driver", c.driver}
		if c.driver == "redfish" {
			args = append(args, "--driver-info", "redfish_address="+l.redfishURL, "--driver-info", "redfish_system_id=/redfish/v1/Systems/rf0",
				"--driver-info", "redfish_username=admin", "--driver-info", "redfish_password=Wr0ngSecret")
		} else {
			args = append(args, "--driver-info", "ipmi_address=127.0.0.1", "--driver-info", "ipmi_port="+strconv.Itoa(l.ipmiPort),
				"--driver-info", "ipmi_username=admin", "--driver-info", "ipmi_password=Wr0ngSecret")
		}
		mustCLI(t, args...)
		if code, _ := call(t, "PUT", "/v1/nodes/"+c.name+"/states/provision", map[string]any{"target": "manage"}, nil); code != 202 {
			t.Fatalf("manage %s: %d", c.name, code)
		}
		var n node
		waitFor(t, c.name+" back in enroll with last_error", 120*time.Second, func() bool {
			n = getNode(t, c.name)
			return n.ProvisionState == "enroll" && n.LastError != nil
		})
		msg := strings.ToLower(*n.LastError)
		if !strings.Contains(msg, "auth") || strings.Contains(*n.LastError, "Wr0ngSecret") {
			t.Errorf("%s last_error %q should name the authentication failure without the password", c.name, *n.LastError)
		}
		fmt.Println(c.name, "last_error:", *n.LastError)
		mustCLI(t, "node", "delete", c.name)
	}
}

// checkHealth follows the node's health (API 1.109) through the lab's
// power sync: the redfish VM reports OK, then Warning once its BMC says so
// (vbmc's Ironflow.SetHealth), each change a monitoring event in the
// history the CLI lists, and in the API's ironflow_nodes_health series (one
// node more in Warning of its conductor group); the ipmi node reads none:
// its health is null. The stack serves 1.93, so the value itself is read
// from the store.
func (l *bmcLab) checkHealth(t *testing.T, name, vm string) {
	t.Helper()
	ctx := context.Background()
	st, err := store.Open(ctx, lab.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	health := func() string {
		n, err := st.GetNode(ctx, getNode(t, name).UUID)
		if err != nil {
			t.Fatal(err)
		}
		return deref(n.Health)
	}
	history := func() string { return mustCLI(t, "node", "history", "list", name, "-f", "json") }
	if vm != "rf0" {
		// IPMI reads no health. A value left from an earlier driver (set
		// here in the store) is cleared by the next sync tick.
		uuid := getNode(t, name).UUID
		if _, err := st.UpdateNode(ctx, uuid, func(n *store.Node) error { ok := "OK"; n.Health = &ok; return nil }); err != nil {
			t.Fatal(err)
		}
		waitFor(t, name+" health cleared by the power sync", 60*time.Second, func() bool { return health() == "<nil>" })
		if hist := history(); !strings.Contains(hist, "Node health status changed: health='None' (previously 'OK')") {
			t.Fatalf("no health event in the ipmi node's history:\n%s", hist)
		}
		return
	}
	waitFor(t, name+" health OK from the power sync", 60*time.Second, func() bool { return health() == "OK" })
	n, err := st.GetNode(ctx, getNode(t, name).UUID)
	if err != nil {
		t.Fatal(err)
	}
	warning := func() float64 { return nodesHealthGauge(t, n.ConductorGroup, "Warning") }
	before := warning()
	if err := vbmc.SetHealth(ctx, l.redfishURL, "admin", "password", vm, "Warning"); err != nil {
		t.Fatal(err)
	}
	waitFor(t, name+" health Warning from the power sync", 60*time.Second, func() bool { return health() == "Warning" })
	hist := history()
	for _, want := range []string{
		"Node health status changed: health='OK' (previously 'None')",
		"Node health status changed: health='Warning' (previously 'OK')",
	} {
		if !strings.Contains(hist, want) {
			t.Fatalf("history lacks %q:\n%s", want, hist)
		}
	}
	if after := warning(); after != before+1 {
		t.Fatalf("ironflow_nodes_health{conductor_group=%q,health=\"Warning\"} = %v after the change, want %v", n.ConductorGroup, after, before+1)
	}
}

// nodesHealthGauge reads ironflow_nodes_health of a conductor group and
// health from the lab API's metrics endpoint (0 when absent).
func nodesHealthGauge(t *testing.T, group, health string) float64 {
	t.Helper()
	body, err := promcheck.Scrape("http://" + labAPIMetrics + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	prefix := fmt.Sprintf("ironflow_nodes_health{conductor_group=%q,health=%q} ", group, health)
	for _, line := range strings.Split(string(body), "\n") {
		if v, ok := strings.CutPrefix(line, prefix); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			return f
		}
	}
	return 0
}

// checkRunningSensors reads the running redfish VM's sensors through the
// redfish driver, as the sensor poller does: a machine that is on is warm,
// spins its fans and draws power (vbmc's sensors follow QEMU).
func (l *bmcLab) checkRunningSensors(t *testing.T) {
	t.Helper()
	d, err := bmc.New("redfish", map[string]any{"redfish_address": l.redfishURL, "redfish_system_id": "/redfish/v1/Systems/rf0",
		"redfish_username": "admin", "redfish_password": "password"})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	ss, err := d.(bmc.SensorReader).Sensors(context.Background())
	if err != nil {
		t.Fatalf("read the running VM's sensors: %v", err)
	}
	got := map[string]float64{}
	for _, s := range ss {
		got[string(s.Kind)+"/"+s.ID] = s.Value
	}
	if got["temperature/0@rf0"] != 45 || got["fan/1@rf0"] != 5600 || got["power/0@rf0"] != 120 {
		t.Fatalf("sensors of the running VM: %v, want CPU 45 °C, fan 5600 RPM, 120 W", got)
	}
}
