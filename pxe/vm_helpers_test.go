package pxe

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// bootMarker is what the test initramfs prints once the kernel runs its
// /init: reaching it proves firmware, loader, kernel and initrd all worked.
const bootMarker = "IRONFLOW-PXE-OK"

// vmBootTimeout bounds one VM boot; TCG on a loaded 2-core machine needs
// this much, KVM far less.
const vmBootTimeout = 180 * time.Second

// requireVMHost skips, loudly, when the machine cannot run the VM tests.
func requireVMHost(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("SKIPPING VM TEST: needs root (network namespaces, taps); run as root")
	}
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		t.Skip("SKIPPING VM TEST: qemu-system-x86_64 missing (apt-get install qemu-system-x86 ipxe-qemu ovmf)")
	}
}

// qemuAccel picks the accelerator: $IRONFLOW_QEMU_ACCEL (kvm or tcg) if
// set; else KVM when /dev/kvm opens on bare metal. Inside a virtual machine
// (cpuinfo flag "hypervisor") nested KVM was seen to crash isolinux and
// reject MSRs, so TCG is the default there.
func qemuAccel() []string {
	switch os.Getenv("IRONFLOW_QEMU_ACCEL") {
	case "kvm":
		return []string{"-accel", "kvm"}
	case "tcg":
		return []string{"-accel", "tcg", "-cpu", "max"}
	}
	cpuinfo, _ := os.ReadFile("/proc/cpuinfo")
	nested := strings.Contains(string(cpuinfo), " hypervisor")
	if f, err := os.OpenFile("/dev/kvm", os.O_RDWR, 0); err == nil && !nested {
		f.Close()
		return []string{"-accel", "kvm"}
	}
	return []string{"-accel", "tcg", "-cpu", "max"}
}

// repoRoot is the module root, two levels above this file's package.
func repoRoot(t *testing.T) string {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	return filepath.Dir(filepath.Dir(file))
}

// testKernel returns .data/kernel/vmlinuz, fetching it if missing.
func testKernel(t *testing.T) string {
	t.Helper()
	root := repoRoot(t)
	k := filepath.Join(root, ".data", "kernel", "vmlinuz")
	if _, err := os.Stat(k); err != nil {
		out, err := exec.Command(filepath.Join(root, "scripts", "fetch-kernel.sh")).CombinedOutput()
		if err != nil {
			t.Fatalf("fetch kernel: %v\n%s", err, out)
		}
	}
	return k
}

// testInitramfs builds a gzipped newc initramfs: busybox-static and an
// /init that prints the kernel command line and bootMarker, then powers off.
func testInitramfs(t *testing.T, dir string) string {
	t.Helper()
	bb, err := os.ReadFile("/bin/busybox")
	if err != nil {
		t.Skipf("SKIPPING VM TEST: /bin/busybox missing (apt-get install busybox-static): %v", err)
	}
	init := "#!/bin/busybox sh\n" +
		"/bin/busybox mkdir -p /proc\n" +
		"/bin/busybox mount -t proc proc /proc\n" +
		"echo \"cmdline: $(/bin/busybox cat /proc/cmdline)\"\n" +
		"echo " + bootMarker + "\n" +
		"/bin/busybox poweroff -f\n"
	var cpio bytes.Buffer
	w := newcWriter{w: &cpio}
	w.entry("dev", 0o40755, nil, 0, 0)
	w.entry("dev/console", 0o20600, nil, 5, 1)
	w.entry("bin", 0o40755, nil, 0, 0)
	w.entry("bin/busybox", 0o100755, bb, 0, 0)
	w.entry("init", 0o100755, []byte(init), 0, 0)
	w.entry("TRAILER!!!", 0, nil, 0, 0)
	var gz bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&gz, gzip.BestSpeed)
	zw.Write(cpio.Bytes())
	zw.Close()
	p := filepath.Join(dir, "initrd.gz")
	if err := os.WriteFile(p, gz.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// newcWriter writes the cpio "newc" format the kernel unpacks
// (Documentation/driver-api/early-userspace/buffer-format.rst), device
// numbers included, which /dev/console needs.
type newcWriter struct {
	w     *bytes.Buffer
	inode int
}

func (n *newcWriter) entry(name string, mode uint32, data []byte, rmaj, rmin int) {
	n.inode++
	fmt.Fprintf(n.w, "070701%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X%08X",
		n.inode, mode, 0, 0, 1, 0, len(data), 0, 0, rmaj, rmin, len(name)+1, 0)
	n.w.WriteString(name + "\x00")
	n.pad()
	n.w.Write(data)
	n.pad()
}

func (n *newcWriter) pad() {
	for n.w.Len()%4 != 0 {
		n.w.WriteByte(0)
	}
}

// ovmfArgs returns the pflash drives for OVMF, with a private VARS copy.
func ovmfArgs(t *testing.T, dir string) []string {
	t.Helper()
	code := "/usr/share/OVMF/OVMF_CODE_4M.fd"
	vars := "/usr/share/OVMF/OVMF_VARS_4M.fd"
	if _, err := os.Stat(code); err != nil {
		t.Skipf("SKIPPING UEFI VM TEST: %s missing (apt-get install ovmf)", code)
	}
	b, err := os.ReadFile(vars)
	if err != nil {
		t.Fatal(err)
	}
	myVars := filepath.Join(dir, "OVMF_VARS.fd")
	if err := os.WriteFile(myVars, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return []string{
		"-drive", "if=pflash,format=raw,readonly=on,file=" + code,
		"-drive", "if=pflash,format=raw,file=" + myVars,
	}
}

// runVM runs QEMU (prefixed by wrap, e.g. "ip netns exec ns") until the
// guest powers off or vmBootTimeout passes, and returns the serial console.
func runVM(t *testing.T, dir string, wrap []string, args ...string) string {
	t.Helper()
	return runVMUntil(t, dir, "", wrap, args...)
}

// runVMUntil is runVM that also stops the VM as soon as its console shows
// stop (when not empty): a machine whose firmware refuses to boot never
// powers off by itself.
func runVMUntil(t *testing.T, dir, stop string, wrap []string, args ...string) string {
	t.Helper()
	console := filepath.Join(dir, "console.log")
	base := []string{"qemu-system-x86_64", "-m", "256", "-nographic", "-no-reboot",
		"-device", "virtio-rng-pci",
		"-chardev", "file,id=s0,path=" + console + ",append=on", "-serial", "chardev:s0",
		"-monitor", "none"}
	base = append(base, qemuAccel()...)
	cmdline := append(append(append([]string{}, wrap...), base...), args...)
	ctx, cancel := context.WithTimeout(context.Background(), vmBootTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, cmdline[0], cmdline[1:]...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	var err error
	if err = cmd.Start(); err == nil {
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
	wait:
		for {
			select {
			case err = <-done:
				break wait
			case <-tick.C:
				if b, _ := os.ReadFile(console); stop != "" && bytes.Contains(b, []byte(stop)) {
					_ = cmd.Process.Kill()
					<-done
					err = nil
					break wait
				}
			}
		}
	}
	log, _ := os.ReadFile(console)
	if ctx.Err() != nil {
		t.Logf("VM did not power off within %s", vmBootTimeout)
	} else if err != nil {
		t.Logf("qemu exited: %v\n%s", err, out.String())
	}
	return string(log)
}

// assertBooted fails unless the console shows the marker and every
// expected kernel parameter.
func assertBooted(t *testing.T, console string, params ...string) {
	t.Helper()
	if !strings.Contains(console, bootMarker) {
		t.Fatalf("marker %q not on the serial console; console:\n%s", bootMarker, tail(console, 4000))
	}
	var cmdline string
	for _, l := range strings.Split(console, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), "cmdline: ") {
			cmdline = l
		}
	}
	for _, p := range params {
		if !strings.Contains(cmdline, p) {
			t.Errorf("kernel command line %q lacks %q", cmdline, p)
		}
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}
