package vbmc

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// chassisControlEnv makes the test binary act as ipmi_sim's chassis_control
// program, so that the IPMI tests run the same code `ironflow vbmc
// chassis-control` runs.
const chassisControlEnv = "VBMC_TEST_CHASSIS_CONTROL"

func TestMain(m *testing.M) {
	if os.Getenv(chassisControlEnv) == "1" {
		args := append([]string{"chassis-control"}, os.Args[1:]...)
		if err := Main(context.Background(), args, os.Stdout, os.Stderr); err != nil {
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// requireTools skips, loudly, when the machine lacks a real part the test
// drives.
func requireTools(t *testing.T, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("SKIP: %s is not installed (Debian packages qemu-system-x86, openipmi, ipmitool, xorriso): %v", tool, err)
		}
	}
}

// newTestConfig writes a one-VM configuration: a 256 MiB VM with an empty
// 16 MiB raw disk and a NIC without a network. The state directory is short
// (QMP socket paths are limited to 108 bytes) and is checked at cleanup for
// QEMU processes left behind.
func newTestConfig(t *testing.T) Config {
	t.Helper()
	return newTestConfigWith(t, nil)
}

// newTestConfigWith lets a test change the raw configuration (top level and
// the VM) before it is written.
func newTestConfigWith(t *testing.T, mutate func(top, vm map[string]any)) Config {
	t.Helper()
	dir, err := os.MkdirTemp("", "vbmc")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		assertNoProcesses(t, dir)
		os.RemoveAll(dir)
	})
	disk := filepath.Join(dir, "vm0.raw")
	if err := os.WriteFile(disk, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(disk, 16<<20); err != nil {
		t.Fatal(err)
	}
	vm := map[string]any{
		"name": "vm0", "mac": "52:54:00:00:00:10", "disk": disk,
		"memory_mb": 256, "cpus": 1, "firmware": "bios", "netdev": "none",
	}
	raw := map[string]any{
		"state_dir": filepath.Join(dir, "state"),
		"username":  "admin",
		"password":  "password",
		"vms":       []any{vm},
	}
	// VBMC_TEST_ACCEL=tcg runs the tests the way a CI machine without KVM does.
	if a := os.Getenv("VBMC_TEST_ACCEL"); a != "" {
		raw["accel"] = a
	}
	if mutate != nil {
		mutate(raw, vm)
	}
	b, _ := json.Marshal(raw)
	path := filepath.Join(dir, "vms.json")
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
	cfg, err := LoadConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// assertNoProcesses fails the test if any process (QEMU, ipmi_sim) still
// refers to dir.
func assertNoProcesses(t *testing.T, dir string) {
	t.Helper()
	out, _ := exec.Command("pgrep", "-a", "-f", dir).Output()
	var left []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if line == "" {
			continue
		}
		var pid int
		fmt.Sscanf(line, "%d", &pid)
		if processAlive(pid) {
			left = append(left, line)
		}
	}
	if len(left) > 0 {
		t.Errorf("processes left behind under %s:\n%s", dir, strings.Join(left, "\n"))
		for _, line := range left {
			var pid int
			fmt.Sscanf(line, "%d", &pid)
			_ = exec.Command("kill", "-9", fmt.Sprint(pid)).Run()
		}
	}
}

// queryCD returns the file in the VM's CD drive ("" when empty), from QMP
// query-block.
func queryCD(t *testing.T, m *Machine) string {
	t.Helper()
	var blocks []struct {
		Device   string `json:"device"`
		Inserted *struct {
			File string `json:"file"`
		} `json:"inserted"`
	}
	err := qmpDo(context.Background(), m.qmpSocket(), func(q *qmpConn) error {
		raw, err := q.execute("query-block", nil)
		if err != nil {
			return err
		}
		return json.Unmarshal(raw, &blocks)
	})
	if err != nil {
		t.Fatalf("query-block: %v", err)
	}
	for _, b := range blocks {
		if b.Device == "cd0drive" {
			if b.Inserted == nil {
				return ""
			}
			return b.Inserted.File
		}
	}
	t.Fatalf("no cd0drive in query-block: %+v", blocks)
	return ""
}

// queryStatus is QMP query-status of the running VM.
func queryStatus(t *testing.T, m *Machine) string {
	t.Helper()
	var st struct {
		Status string `json:"status"`
	}
	err := qmpDo(context.Background(), m.qmpSocket(), func(q *qmpConn) error {
		raw, err := q.execute("query-status", nil)
		if err != nil {
			return err
		}
		return json.Unmarshal(raw, &st)
	})
	if err != nil {
		t.Fatalf("query-status: %v", err)
	}
	return st.Status
}

// bootIndexes reads the bootindex of the three devices from QEMU.
func bootIndexes(t *testing.T, m *Machine) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, d := range []string{"disk0", "net0", "cd0"} {
		idx, err := m.BootIndex(context.Background(), d)
		if err != nil {
			t.Fatalf("bootindex of %s: %v", d, err)
		}
		out[d] = idx
	}
	return out
}

// first returns the device QEMU will boot first.
func first(idx map[string]int) string {
	best := ""
	for d, i := range idx {
		if best == "" || i < idx[best] {
			best = d
		}
	}
	return best
}
