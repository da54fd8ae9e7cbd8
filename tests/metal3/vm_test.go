//go:build linux && amd64

package metal3

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/ironflow/ironflow/tests/metal3/bmo"
)

// The VM lab: a network namespace with a bridge, ironflow dev (DHCP on
// the bridge, the boot service, the API) and `ironflow vbmc serve` (a
// Redfish BMC whose power on starts QEMU) inside it, one QEMU machine on a
// tap of the bridge. tests/e2e's lab does the same for its scenarios; this
// one is the minimum BMO's virtual media path needs.
const (
	vmLabAddress = "10.78.0.1"
	vmLabNetwork = "10.78.0.0/24"
	vmLabBridge  = "m3br0"
	vmLabTap     = "m3tap0"
	vmAPIListen  = vmLabAddress + ":6385"
	vmBootListen = vmLabAddress + ":8080"
	vmBMCListen  = "127.0.0.1:8000"
	vmMAC        = "52:54:00:3a:0f:01"
	// sysSetns is setns(2) on linux/amd64; Go's syscall package lacks the
	// constant there.
	sysSetns = 308
	// linkMarker is the network_data link of the config drive, found
	// again on the machine's disk after provisioning.
	linkMarker = "metal3-vm-link-0"
)

// vmLab is the namespace and what runs in it.
type vmLab struct {
	t     *testing.T
	ns    string
	dir   string
	bin   string
	procs []*exec.Cmd
}

func (l *vmLab) ip(args ...string) {
	l.t.Helper()
	if out, err := exec.Command("ip", append([]string{"-n", l.ns}, args...)...).CombinedOutput(); err != nil {
		l.t.Fatalf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
}

// start runs argv inside the namespace, its output in <dir>/<name>.log;
// it is stopped (SIGTERM, then SIGKILL) when the test ends.
func (l *vmLab) start(name string, env []string, argv ...string) string {
	l.t.Helper()
	log := filepath.Join(l.dir, name+".log")
	f, err := os.Create(log)
	if err != nil {
		l.t.Fatal(err)
	}
	cmd := exec.Command("ip", append([]string{"netns", "exec", l.ns}, argv...)...)
	cmd.Stdout, cmd.Stderr = f, f
	cmd.Env = append(os.Environ(), env...)
	// SIGTERM if the test binary dies: ironflow dev stops its PostgreSQL
	// and Temporal, the vbmc its QEMU.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		l.t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	l.t.Cleanup(func() {
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
		f.Close()
	})
	return log
}

// inNetns runs fn on this goroutine's thread moved into the namespace: a
// socket made there stays in the namespace.
func inNetns(ns string, fn func() error) error {
	runtime.LockOSThread()
	orig, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		runtime.UnlockOSThread()
		return err
	}
	defer orig.Close()
	target, err := os.Open("/var/run/netns/" + ns)
	if err != nil {
		runtime.UnlockOSThread()
		return err
	}
	defer target.Close()
	if _, _, e := syscall.RawSyscall(sysSetns, target.Fd(), syscall.CLONE_NEWNET, 0); e != 0 {
		runtime.UnlockOSThread()
		return fmt.Errorf("setns %s: %w", ns, e)
	}
	ferr := fn()
	if _, _, e := syscall.RawSyscall(sysSetns, orig.Fd(), syscall.CLONE_NEWNET, 0); e != 0 {
		// The thread stays locked, and dies with the goroutine, rather
		// than serve others in the wrong namespace.
		return fmt.Errorf("setns back: %w", e)
	}
	runtime.UnlockOSThread()
	return ferr
}

// transport dials inside the namespace: the client reaches the API as a
// BMO pod on the provisioning network would.
func (l *vmLab) transport() http.RoundTripper {
	return &http.Transport{DisableKeepAlives: true, DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		var c net.Conn
		err := inNetns(l.ns, func() (err error) {
			c, err = (&net.Dialer{}).DialContext(ctx, network, addr)
			return err
		})
		return c, err
	}}
}

func (l *vmLab) waitHTTP(url string, log string) {
	l.t.Helper()
	client := &http.Client{Transport: l.transport(), Timeout: 5 * time.Second}
	deadline := time.Now().Add(3 * time.Minute)
	for {
		resp, err := client.Get(url)
		if err == nil {
			resp.Body.Close()
			return
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(log)
			l.t.Fatalf("%s does not answer: %v\n%s", url, err, tail(b, 4000))
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// logTail is the end of the lab's logs.
func (l *vmLab) logTail() string {
	var b strings.Builder
	for _, name := range []string{"ironflow-dev", "vbmc", "vm0-console"} {
		data, _ := os.ReadFile(filepath.Join(l.dir, name+".log"))
		fmt.Fprintf(&b, "--- %s:\n%s\n", name, tail(data, 3000))
	}
	return b.String()
}

func tail(b []byte, n int) string {
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// agentImageDir is where `make ramdisk` put the agent kernel and
// initramfs: $IRONFLOW_IMAGES_DIR, else the repository's .data/images.
func agentImageDir(t *testing.T) string {
	for _, d := range []string{os.Getenv("IRONFLOW_IMAGES_DIR"), "../../.data/images"} {
		if d == "" {
			continue
		}
		if _, err := os.Stat(filepath.Join(d, "agent.initramfs")); err == nil {
			return d
		}
	}
	t.Fatal("no agent ramdisk: run `make ramdisk` (or set IRONFLOW_IMAGES_DIR)")
	return ""
}

// vmCustomStep is the custom deploy step the lab's agent carries; it
// writes vmCustomMarker and the node's UUID on the machine's console.
const (
	vmCustomStep   = "metal3_custom"
	vmCustomMarker = "METAL3-CUSTOM-STEP ran on"
)

// customStepRamdisk builds the lab's agent ramdisk with ironflow's
// mkramdisk from the repository's kernel (make ramdisk fetched it) and the
// agent binary, adding vmCustomStep; it answers the kernel and the
// initramfs.
func customStepRamdisk(t *testing.T, dir string) (string, string) {
	t.Helper()
	root, _ := filepath.Abs("../..")
	agentDir := agentImageDir(t) // the shared ramdisk exists: make ramdisk ran
	steps := filepath.Join(dir, "custom-steps")
	if err := os.MkdirAll(steps, 0o755); err != nil {
		t.Fatal(err)
	}
	script := "#!/bin/sh\nread -r args\necho \"" + vmCustomMarker + " $IRONFLOW_NODE_UUID\" > /dev/console\necho done\n"
	if err := os.WriteFile(filepath.Join(steps, vmCustomStep), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "ramdisk")
	args := []string{"run", "./agent/ramdisk/cmd/mkramdisk", "-kernel", filepath.Join(root, ".data", "kernel"), "-out", out, "-custom-steps", steps}
	if agent := os.Getenv("IRONFLOW_AGENT_BIN"); agent != "" {
		args = append(args, "-agent", agent)
	} else if _, err := os.Stat(filepath.Join(root, "bin", "ironflow-agent")); err == nil {
		args = append(args, "-agent", filepath.Join(root, "bin", "ironflow-agent"))
	}
	cmd := exec.Command("go", args...)
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("mkramdisk with a custom step (the shared agent is in %s): %v\n%s", agentDir, err, b)
	}
	return filepath.Join(out, "vmlinuz"), filepath.Join(out, "initramfs.cpio.gz")
}

// writeQCOW2 makes a small whole-disk image (wholeDiskImage) as qcow2
// into dir and returns its name and sha256.
func writeQCOW2(t *testing.T, dir string) (string, string) {
	t.Helper()
	data := wholeDiskImage(16 << 20)
	raw := filepath.Join(dir, "metal3.raw")
	if err := os.WriteFile(raw, data, 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "metal3.qcow2")
	if b, err := exec.Command("qemu-img", "convert", "-f", "raw", "-O", "qcow2", raw, out).CombinedOutput(); err != nil {
		t.Fatalf("qemu-img convert: %v: %s", err, b)
	}
	q, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(q)
	return "metal3.qcow2", hex.EncodeToString(sum[:])
}

// newVMLab builds the namespace, starts ironflow dev and the Redfish BMC
// of one UEFI machine in it, and returns the lab.
func newVMLab(t *testing.T) *vmLab {
	t.Helper()
	if os.Getuid() != 0 {
		t.Skip("the VM lab needs root (network namespaces, taps): CI runs as root")
	}
	for _, tool := range []string{"ip", "qemu-system-x86_64", "qemu-img"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed (scripts/install-deps.sh test installs it)", tool)
		}
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	l := &vmLab{t: t, ns: "ironflow-metal3-" + hex.EncodeToString(b[:]), dir: t.TempDir()}
	if os.Getenv("IRONFLOW_KEEP_TEST_DIR") != "" {
		l.dir, _ = os.MkdirTemp("", "ironflow-metal3-vm-")
		t.Logf("lab directory kept: %s", l.dir)
	}
	_ = os.Chmod(l.dir, 0o755)
	if out, err := exec.Command("ip", "netns", "add", l.ns).CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", l.ns).Run() })
	l.ip("link", "set", "lo", "up")
	l.ip("link", "add", vmLabBridge, "type", "bridge", "forward_delay", "0")
	l.ip("addr", "add", vmLabAddress+"/24", "dev", vmLabBridge)
	l.ip("link", "set", vmLabBridge, "up")
	l.ip("tuntap", "add", "dev", vmLabTap, "mode", "tap")
	l.ip("link", "set", vmLabTap, "master", vmLabBridge)
	l.ip("link", "set", vmLabTap, "up")
	l.startSwitchLLDP()

	var err error
	if l.bin, err = ironflowBinary(l.dir); err != nil {
		t.Fatal(err)
	}
	images := filepath.Join(l.dir, "images")
	if err := os.MkdirAll(images, 0o755); err != nil {
		t.Fatal(err)
	}
	// The lab's agent carries a custom deploy step, as an operator's
	// ramdisk for BMO's customDeploy does (mkramdisk -custom-steps).
	kernel, initramfs := customStepRamdisk(t, l.dir)
	for name, src := range map[string]string{"agent.kernel": kernel, "agent.initramfs": initramfs} {
		if err := os.Symlink(src, filepath.Join(images, name)); err != nil {
			t.Fatal(err)
		}
	}
	htpasswd := filepath.Join(l.dir, "htpasswd")
	if err := os.WriteFile(htpasswd, []byte(apiUser+":"+apiHash+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	dev := l.start("ironflow-dev", []string{"IRONFLOW_LOG_LEVEL=debug"}, l.bin, "dev",
		"--data-dir", filepath.Join(l.dir, "data"),
		"--listen", vmAPIListen, "--agent-api-url", "http://"+vmAPIListen,
		"--boot-listen", vmBootListen, "--boot-url", "http://"+vmBootListen, "--images-dir", images,
		"--dhcp-interface", vmLabBridge, "--dhcp-server-address", vmLabAddress,
		"--dhcp-pool", vmLabNetwork+",10.78.0.100,10.78.0.200",
		"--temporal-port", "7233", "--temporal-ui-port", "-1", "--codec-listen", "127.0.0.1:8089",
		"--agent-insecure", "--auth-strategy", "http_basic", "--htpasswd-file", htpasswd)
	l.waitHTTP("http://"+vmAPIListen+"/v1/", dev)

	// KVM only when asked, as tests/e2e's IRONFLOW_E2E_ACCEL says: some
	// nested-KVM hosts open /dev/kvm and then stop OVMF with an internal
	// error (tests/e2e probes for that; this test does not boot twice).
	accel := "tcg"
	if os.Getenv("IRONFLOW_E2E_ACCEL") == "kvm" {
		accel = "kvm"
	}
	cfg := map[string]any{"state_dir": filepath.Join(l.dir, "vbmc"), "username": "admin", "password": "metal3-bmc-password",
		"media_networks": []string{vmLabNetwork}, "accel": accel,
		"vms": []map[string]any{{"name": "vm0", "mac": vmMAC, "disk": filepath.Join(l.dir, "vm0.raw"), "disk_size": "5G",
			"memory_mb": 512, "firmware": "uefi", "netdev": "tap:" + vmLabTap, "serial_log": filepath.Join(l.dir, "vm0-console.log")}}}
	data, _ := json.Marshal(cfg)
	path := filepath.Join(l.dir, "vbmc.json")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	bmc := l.start("vbmc", nil, l.bin, "vbmc", "serve", "--config", path, "--listen", vmBMCListen)
	l.waitHTTP("http://"+vmBMCListen+"/redfish/v1", bmc)
	return l
}

// The lab's switch announces itself over LLDP, as a top-of-rack switch
// does: Debian's lldpd on a veth port of the lab's bridge, which forwards
// LLDP frames (group_fwd_mask bit 14: 01:80:c2:00:00:0e; a Linux bridge
// otherwise keeps them to itself). The machine's agent hears it on its NIC
// during inspection. (ironflow's internal/testkit/lldpswitch is the same
// switch for the e2e labs; this module does not import ironflow's.)
const (
	vmLabSwitchName = "metal3-lab-switch"
	vmLabSwitchPort = "swp7"
)

func (l *vmLab) startSwitchLLDP() {
	l.t.Helper()
	if _, err := exec.LookPath("lldpd"); err != nil {
		l.t.Fatal("lldpd is missing: make test installs it (scripts/install-deps.sh)")
	}
	l.ip("link", "add", vmLabSwitchPort, "type", "veth", "peer", "name", vmLabSwitchPort+"-br")
	l.ip("link", "set", vmLabSwitchPort+"-br", "master", vmLabBridge)
	l.ip("link", "set", vmLabBridge, "type", "bridge", "group_fwd_mask", "0x4000")
	l.ip("link", "set", vmLabSwitchPort+"-br", "up")
	l.ip("link", "set", vmLabSwitchPort, "up")
	// lldpd's own lldpcli applies the configuration as an unprivileged
	// user: the socket and the file live where every user reaches.
	dir, err := os.MkdirTemp("", "ironflow-lldpd-")
	if err != nil {
		l.t.Fatal(err)
	}
	l.t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		l.t.Fatal(err)
	}
	conf := filepath.Join(dir, "lldpd.conf")
	if err := os.WriteFile(conf, []byte("configure system hostname "+vmLabSwitchName+"\nconfigure lldp portidsubtype ifname\nconfigure lldp tx-interval 1\n"), 0o644); err != nil {
		l.t.Fatal(err)
	}
	l.start("lldpd", nil, "lldpd", "-d", "-u", filepath.Join(dir, "lldpd.socket"), "-O", conf, "-I", vmLabSwitchPort)
}

// diskHas reports whether the machine's sparse disk holds marker in its
// data (holes skipped with SEEK_DATA).
func diskHas(t *testing.T, path, marker string) bool {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	const seekData, seekHole = 3, 4
	buf := make([]byte, 1<<20)
	var off int64
	for {
		start, err := f.Seek(off, seekData)
		if err != nil {
			return false // no data after off
		}
		end, err := f.Seek(start, seekHole)
		if err != nil {
			return false
		}
		for pos := start; pos < end; pos += int64(len(buf)) - int64(len(marker)) {
			n, err := f.ReadAt(buf, pos)
			if bytes.Contains(buf[:n], []byte(marker)) {
				return true
			}
			if err == io.EOF {
				break
			}
		}
		off = end
	}
}

func hasMBR(t *testing.T, path string) bool {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sig := make([]byte, 2)
	if _, err := f.ReadAt(sig, 510); err != nil {
		t.Fatal(err)
	}
	return sig[0] == 0x55 && sig[1] == 0xaa
}

// TestBMOVirtualMediaVM is BMO's path on a QEMU machine behind a Redfish
// BMC with virtual media: register, inspect (the agent boots from the ISO
// ironflow builds), provision a qcow2 image with a network_data config
// drive, deprovision with metadata cleaning, delete; then the same machine
// registered again as externally provisioned, adopted and deleted.
func TestBMOVirtualMediaVM(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: no VM")
	}
	l := newVMLab(t)
	imgName, imgSum := writeQCOW2(t, filepath.Join(l.dir, "images"))
	disk := filepath.Join(l.dir, "vm0.raw")
	h := &bmo.Host{Namespace: "metal3", Name: "vm0", UID: "6f5d6a2c-3f0b-4c1e-9d55-0a1b2c3d4e10",
		BMCAddress: "redfish-virtualmedia+http://" + vmBMCListen + "/redfish/v1/Systems/vm0", BMCUsername: "admin", BMCPassword: "metal3-bmc-password",
		BootMACAddress: vmMAC, BootMode: "UEFI", CPUArchitecture: "x86_64", AutomatedCleaningMode: "metadata",
		Image:    bmo.Image{URL: "http://" + vmBootListen + "/images/" + imgName, Checksum: imgSum, ChecksumType: "sha256", DiskFormat: "qcow2"},
		UserData: "#cloud-config\nhostname: vm0\n",
		NetworkData: map[string]any{
			"links":    []any{map[string]any{"id": linkMarker, "type": "phy", "ethernet_mac_address": vmMAC}},
			"networks": []any{map[string]any{"id": "net0", "link": linkMarker, "type": "ipv4_dhcp"}},
			"services": []any{},
		}}
	newVMClient := func() *client {
		rec := &bmo.Recorder{Next: l.transport()}
		p, err := bmo.New(bmo.Config{Endpoint: "http://" + vmAPIListen + "/v1", Username: apiUser, Password: apiPassword,
			DeployKernelURL: "http://" + vmBootListen + "/images/agent.kernel", DeployRamdiskURL: "http://" + vmBootListen + "/images/agent.initramfs",
			RequeueDelay: time.Second, Transport: rec}, h)
		if err != nil {
			t.Fatal(err)
		}
		return &client{t: t, p: p, rec: rec, h: h, logs: l.logTail}
	}
	c := newVMClient()
	vmediaIfaces := []string{"boot_interface", "firmware_interface", "raid_interface"}
	vmediaValues := map[string]any{"driver": "redfish", "boot_interface": "redfish-virtual-media"}
	c.initAndRegisterWith(vmMAC, goldenRegisterWith(vmMAC, vmediaIfaces, vmediaValues))

	var details *bmo.HardwareDetails
	c.run("inspect", 5*time.Minute, func(ctx context.Context) (bmo.Result, error) {
		r, d, err := c.p.InspectHardware(ctx, false)
		details = d
		return r, err
	})
	// A virtual media host skips BMO's busy-host count.
	c.check("inspect", goldenInspect[1:])
	checkDetails(t, details, vmMAC)
	for _, n := range details.NIC {
		if !strings.EqualFold(n.MAC, vmMAC) {
			continue
		}
		// The NIC's switch port, from the agent's LLDP through Ironic's
		// parse-lldp, as BMO shows it.
		if n.LLDP == nil || n.LLDP.SwitchSystemName != vmLabSwitchName || n.LLDP.PortID != vmLabSwitchPort || n.LLDP.SwitchID == "" {
			t.Errorf("NIC %s: LLDP %+v; want switch %s port %s with its chassis ID", n.Name, n.LLDP, vmLabSwitchName, vmLabSwitchPort)
		}
		t.Logf("NIC %s (%s, PCI %s, PXE %v): switch %+v", n.Name, n.Model, n.PCIAddress, n.PXE, n.LLDP)
		if n.PCIAddress == "" || n.Model == "" {
			t.Errorf("NIC %s: PCI address %q, model %q; want the agent's PCI facts", n.Name, n.PCIAddress, n.Model)
		}
	}

	c.run("provision", 15*time.Minute, c.p.Provision)
	c.check("provision", goldenProvision[1:])
	if !diskHas(t, disk, linkMarker) {
		t.Errorf("provision: the machine's disk holds no config drive with the network_data link %q", linkMarker)
	}

	c.run("deprovision", 15*time.Minute, c.p.Deprovision)
	c.check("deprovision", goldenDeprovision[1:])
	if hasMBR(t, disk) {
		t.Errorf("deprovision: metadata cleaning left the partition table on the machine's disk")
	}
	c.run("power-off-before-delete", 2*time.Minute, func(ctx context.Context) (bmo.Result, error) { return c.p.PowerOff(ctx, false, false) })
	c.check("power-off-before-delete", goldenPowerOffBeforeDelete)
	c.run("delete", 2*time.Minute, c.p.Delete)
	c.check("delete", goldenDeleteAvailable)

	// The same machine as an externally provisioned host.
	h.ProvisioningID, h.Name = "", "vm0-ext"
	c = newVMClient()
	c.initAndRegisterWith(vmMAC, goldenRegisterWith(vmMAC, vmediaIfaces, vmediaValues))
	c.adopt(5 * time.Minute)
	// A DataImage on the adopted host: attached as the BMC's CD, ejected.
	dataURL := "http://" + vmBootListen + "/images/" + writeISO(t, filepath.Join(l.dir, "images"), "data.iso", "METAL3DATA")
	c.dataImage(dataURL, func(inserted bool, image string) {
		if cd := l.cd(); cd.Inserted != inserted || (inserted && cd.Image != image) {
			t.Errorf("data image: the BMC's CD is %+v; want inserted %v with %s", cd, inserted, image)
		}
	})
	// A BMCEventSubscription on it: the BMC holds the subscription, with
	// BMO's destination and context, until BMO deletes it.
	subCtx := ctxFor(t, time.Minute)
	subID, err := c.p.AddBMCEventSubscriptionForNode(subCtx, "http://"+vmLabAddress+":9090/metal3-events", "metal3-ctx",
		[]map[string]string{{"Authorization": "Bearer event-secret"}})
	if err != nil {
		t.Fatalf("BMC event subscription: %v\n%s", err, l.logTail())
	}
	if sub, code := l.redfish("/redfish/v1/EventService/Subscriptions/" + subID); code != http.StatusOK ||
		sub["Destination"] != "http://"+vmLabAddress+":9090/metal3-events" || sub["Context"] != "metal3-ctx" {
		t.Errorf("subscription %s on the BMC: HTTP %d, %v", subID, code, sub)
	}
	if err := c.p.RemoveBMCEventSubscriptionForNode(subCtx, subID); err != nil {
		t.Fatalf("remove the BMC event subscription: %v", err)
	}
	if _, code := l.redfish("/redfish/v1/EventService/Subscriptions/" + subID); code != http.StatusNotFound {
		t.Errorf("subscription %s after BMO deleted it: HTTP %d, want 404", subID, code)
	}
	c.check("bmc-event-subscription", goldenBMCEventSubscription)
	c.run("power-off-before-delete", 2*time.Minute, func(ctx context.Context) (bmo.Result, error) { return c.p.PowerOff(ctx, false, false) })
	c.check("power-off-before-delete", goldenPowerOffBeforeDelete)
	c.run("delete", 2*time.Minute, c.p.Delete)
	c.check("delete", goldenDeleteActive)

	// The same machine as a live-ISO host: provisioning inserts the ISO
	// and boots it (deploy interface ramdisk); nothing is written to disk.
	liveURL := "http://" + vmBootListen + "/images/" + writeISO(t, filepath.Join(l.dir, "images"), "live.iso", "METAL3LIVE")
	h.ProvisioningID, h.Name = "", "vm0-live"
	h.Image = bmo.Image{URL: liveURL, DiskFormat: "live-iso"}
	h.AutomatedCleaningMode, h.UserData, h.NetworkData = "disabled", "", nil
	c = newVMClient()
	c.initAndRegisterWith(vmMAC, goldenRegisterWith(vmMAC, vmediaIfaces, vmediaValues))
	c.run("provision-live-iso", 10*time.Minute, c.p.Provision)
	c.check("provision-live-iso", goldenProvisionLiveISO[1:])
	if cd := l.cd(); !cd.Inserted || cd.Image != liveURL {
		t.Errorf("live ISO: the BMC's CD is %+v; want %s inserted", cd, liveURL)
	}
	if n := l.node(h.ProvisioningID); n.DeployInterface != "ramdisk" || n.ProvisionState != "active" {
		t.Errorf("live ISO host: deploy_interface %q, provision_state %q; want ramdisk, active", n.DeployInterface, n.ProvisionState)
	}
	c.run("power-off-before-delete", 2*time.Minute, func(ctx context.Context) (bmo.Result, error) { return c.p.PowerOff(ctx, false, false) })
	c.check("power-off-before-delete", goldenPowerOffBeforeDelete)
	c.run("delete", 2*time.Minute, c.p.Delete)
	c.check("delete", goldenDeleteActive)

	// The same machine as a customDeploy host: the agent boots from the
	// virtual CD and runs the step its ramdisk carries, by BMO's method.
	h.ProvisioningID, h.Name = "", "vm0-custom"
	h.Image, h.CustomDeployMethod, h.UserData = bmo.Image{}, vmCustomStep, "#cloud-config\nhostname: vm0-custom\n"
	c = newVMClient()
	customValues := map[string]any{"deploy_interface": "custom-agent"}
	for k, v := range vmediaValues {
		customValues[k] = v
	}
	c.initAndRegisterWith(vmMAC, goldenRegisterWith(vmMAC, append(slices.Clone(vmediaIfaces), "deploy_interface"), customValues))
	c.run("provision-custom", 10*time.Minute, c.p.Provision)
	c.check("provision-custom", goldenCustomProvision[1:])
	if console, _ := os.ReadFile(filepath.Join(l.dir, "vm0-console.log")); !strings.Contains(string(console), vmCustomMarker+" "+h.ProvisioningID) {
		t.Errorf("the machine's console does not show the custom step running for node %s", h.ProvisioningID)
	}
	c.run("power-off-before-delete", 2*time.Minute, func(ctx context.Context) (bmo.Result, error) { return c.p.PowerOff(ctx, false, false) })
	c.check("power-off-before-delete", goldenPowerOffBeforeDelete)
	c.run("delete", 2*time.Minute, c.p.Delete)
	c.check("delete", goldenDeleteActive)
}

// writeISO makes a small ISO 9660 image named name in dir (xorriso), with
// volume label label, and returns its name.
func writeISO(t *testing.T, dir, name, label string) string {
	t.Helper()
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "README"), []byte(label+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("xorriso", "-as", "mkisofs", "-quiet", "-V", label, "-o", filepath.Join(dir, name), src).CombinedOutput(); err != nil {
		t.Fatalf("xorriso: %v\n%s", err, out)
	}
	return name
}

// node reads a node from the API outside BMO's recorded calls.
func (l *vmLab) node(uuid string) (n struct {
	DeployInterface string `json:"deploy_interface"`
	ProvisionState  string `json:"provision_state"`
}) {
	l.t.Helper()
	req, _ := http.NewRequest("GET", "http://"+vmAPIListen+"/v1/nodes/"+uuid, nil)
	req.SetBasicAuth(apiUser, apiPassword)
	req.Header.Set("X-OpenStack-Ironic-API-Version", "1.110")
	resp, err := (&http.Client{Transport: l.transport(), Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		l.t.Fatalf("read node %s: %v", uuid, err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&n); err != nil || resp.StatusCode != http.StatusOK {
		l.t.Fatalf("node %s: HTTP %d, %v", uuid, resp.StatusCode, err)
	}
	return n
}

// cdState is the Redfish VirtualMedia of the machine's CD, as its BMC
// reports it.
type cdState struct {
	Image    string
	Inserted bool
}

// cd reads the machine's CD from its BMC.
func (l *vmLab) cd() cdState {
	l.t.Helper()
	v, code := l.redfish("/redfish/v1/Managers/vm0/VirtualMedia/Cd")
	if code != http.StatusOK {
		l.t.Fatalf("the BMC's CD: HTTP %d", code)
	}
	image, _ := v["Image"].(string)
	inserted, _ := v["Inserted"].(bool)
	return cdState{Image: image, Inserted: inserted}
}

// redfish reads a resource of the machine's BMC: its JSON and status.
func (l *vmLab) redfish(path string) (map[string]any, int) {
	l.t.Helper()
	req, _ := http.NewRequest("GET", "http://"+vmBMCListen+path, nil)
	req.SetBasicAuth("admin", "metal3-bmc-password")
	resp, err := (&http.Client{Transport: l.transport(), Timeout: 30 * time.Second}).Do(req)
	if err != nil {
		l.t.Fatalf("read %s from the BMC: %v", path, err)
	}
	defer resp.Body.Close()
	var v map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&v)
	return v, resp.StatusCode
}
