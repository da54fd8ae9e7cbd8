package e2e

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ironflow/ironflow/embedded"
)

// TestLabNetworkAndTeardown builds a lab, checks its bridge and tap, that
// a VM's NIC reaches the bridge, and that teardown leaves neither the
// namespace nor its processes behind.
func TestLabNetworkAndTeardown(t *testing.T) {
	RequireQEMU(t)
	img, _, err := BuildTestImage(DefaultCacheDir())
	if err != nil {
		t.Fatal(err)
	}
	var netns string
	var sleeper int
	t.Run("lab", func(t *testing.T) {
		lab := NewLab(t)
		netns = lab.Netns
		vm := lab.AddVM("net", "52:54:00:e2:00:01", FirmwareBIOS, img)

		out, err := exec.Command("ip", "-n", lab.Netns, "-br", "addr", "show", lab.Bridge).CombinedOutput()
		if err != nil || !strings.Contains(string(out), LabAddress+"/24") {
			t.Fatalf("bridge address: %v: %s", err, out)
		}
		out, err = exec.Command("ip", "-n", lab.Netns, "link", "show", vm.Tap).CombinedOutput()
		if err != nil || !strings.Contains(string(out), "master "+lab.Bridge) {
			t.Fatalf("tap %s not on the bridge: %v: %s", vm.Tap, err, out)
		}
		// The namespace's only routes are the lab's: no way out.
		out, err = exec.Command("ip", "-n", lab.Netns, "route", "show").CombinedOutput()
		if err != nil || strings.TrimSpace(string(out)) == "" || strings.Contains(string(out), "default") {
			t.Fatalf("routes in the lab: %v: %q", err, out)
		}

		p := lab.Start("sleeper", nil, "sleep", "600")
		sleeper = p.Pid()

		// The VM's network boot ROM (iPXE) sends DHCP discovers through
		// the tap: the bridge side counts them as the tap's received packets.
		qemu := StartQEMU(t, QEMUConfig{Name: vm.Name, Firmware: vm.Firmware, Disks: []string{img}, Snapshot: true,
			Tap: vm.Tap, MAC: vm.MAC, Netns: lab.Netns, Dir: vm.Dir})
		ctx, cancel := context.WithTimeout(context.Background(), DefaultBootTimeout)
		defer cancel()
		for rxPackets(t, lab.Netns, vm.Tap) == 0 {
			select {
			case <-ctx.Done():
				t.Fatalf("no frame from the VM on %s; console:\n%s", vm.Tap, embedded.Tail(qemu.SerialLog, 1500))
			case <-qemu.Exited():
				t.Fatalf("QEMU exited: %s", embedded.Tail(qemu.QEMULog, 1500))
			case <-time.After(serialPollInterval):
			}
		}
	})
	if out, _ := exec.Command("ip", "netns", "list").Output(); strings.Contains(string(out), netns) {
		t.Errorf("namespace %s still exists after the test", netns)
	}
	if sleeper != 0 && syscall.Kill(sleeper, 0) == nil {
		if b, _ := os.ReadFile("/proc/" + strconv.Itoa(sleeper) + "/stat"); !strings.Contains(string(b), ") Z ") {
			t.Errorf("process %d started in the lab still runs after the test", sleeper)
		}
	}
}

// rxPackets reads a link's received-packets counter inside netns.
func rxPackets(t *testing.T, netns, link string) int {
	t.Helper()
	out, err := exec.Command("ip", "netns", "exec", netns, "cat", "/sys/class/net/"+link+"/statistics/rx_packets").Output()
	if err != nil {
		t.Fatalf("read %s counters: %v", link, err)
	}
	n, _ := strconv.Atoi(strings.TrimSpace(string(out)))
	return n
}
