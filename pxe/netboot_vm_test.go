package pxe

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The network boot tests run the pxe services in a child process inside a
// network namespace the test creates: a bridge with 10.99.0.1/24 and one
// tap per VM. A child process, not setns on a locked thread, because the
// TFTP library opens a socket per transfer from whatever thread it runs on.

const (
	labAddr   = "10.99.0.1"
	labHTTP   = "http://" + labAddr + ":8080"
	labAPIURL = "http://" + labAddr + ":6385"
)

// helperEnv carries the child's configuration.
const helperEnv = "IRONFLOW_PXE_HELPER"

type helperConfig struct {
	Config      Config       `json:"config"`
	BootConfigs []BootConfig `json:"boot_configs"`
	// HTTPS, when set, serves the HTTP boot service over TLS too, at
	// HTTPS.Addr (httpboot_vm_test.go).
	HTTPS *helperHTTPS `json:"https,omitempty"`
}

// TestHelperPXEServices is not a test: it is the child process that runs
// pxe.Run inside the lab namespace for the TestNetbootQEMU_* tests.
func TestHelperPXEServices(t *testing.T) {
	raw := os.Getenv(helperEnv)
	if raw == "" {
		t.Skip("helper process for TestNetbootQEMU_*; runs only when started by them")
	}
	var hc helperConfig
	if err := json.Unmarshal([]byte(raw), &hc); err != nil {
		t.Fatal(err)
	}
	backend := NewMemoryBackend()
	for _, bc := range hc.BootConfigs {
		if err := backend.Put(bc); err != nil {
			t.Fatal(err)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	log := slog.New(slog.NewJSONHandler(os.Stderr, nil))
	if hc.HTTPS != nil {
		serveHTTPS(t, ctx, *hc.HTTPS, *hc.Config.HTTP, backend, log)
	}
	if err := Run(ctx, hc.Config, backend, NewMemoryLeases(), log); err != nil {
		t.Fatal(err)
	}
}

// lab is one network namespace with a bridge, a tap and the pxe services.
type lab struct {
	ns, tap string
	mu      sync.Mutex
	logs    strings.Builder
}

func (l *lab) serviceLog() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.logs.String()
}

func run(t *testing.T, args ...string) {
	t.Helper()
	if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// newLab creates the namespace and starts the services with bcs.
func newLab(t *testing.T, dir string, bcs ...BootConfig) *lab {
	t.Helper()
	return newLabWith(t, dir, nil, bcs...)
}

// newLabWith is newLab whose helper's configuration edit changes first.
func newLabWith(t *testing.T, dir string, edit func(*helperConfig), bcs ...BootConfig) *lab {
	t.Helper()
	l := newNetns(t, []string{"addr", "add", labAddr + "/24", "dev", "br0"})
	images := labImages(t, dir)
	hc := helperConfig{
		Config: Config{
			DHCP: &DHCPConfig{
				Mode: DHCPModeReservation, Interface: "br0", Addr: netip.MustParseAddr(labAddr),
				HTTPBaseURL: labHTTP,
				Pools: []DHCPPool{{
					Subnet: netip.MustParsePrefix("10.99.0.0/24"),
					First:  netip.MustParseAddr("10.99.0.100"), Last: netip.MustParseAddr("10.99.0.150"),
					Router: netip.MustParseAddr(labAddr), DNS: []netip.Addr{netip.MustParseAddr(labAddr)},
				}},
			},
			TFTP: &TFTPConfig{Addr: labAddr + ":69"},
			HTTP: &HTTPConfig{Addr: labAddr + ":8080", ImagesDir: images},
		},
		BootConfigs: bcs,
	}
	if edit != nil {
		edit(&hc)
	}
	l.start(t, hc)
	return l
}

// newNetns creates the lab's namespace: a bridge br0 with addr (an "ip"
// command), and a tap on it for the VM.
func newNetns(t *testing.T, addr []string) *lab {
	t.Helper()
	l := &lab{ns: fmt.Sprintf("ifpxe%d", os.Getpid()%100000), tap: "tap0"}
	exec.Command("ip", "netns", "del", l.ns).Run() // a leftover from a killed run
	run(t, "ip", "netns", "add", l.ns)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", l.ns).Run() })
	for _, c := range [][]string{
		{"link", "set", "lo", "up"},
		{"link", "add", "br0", "type", "bridge", "forward_delay", "0"},
		addr,
		{"link", "set", "br0", "up"},
		{"tuntap", "add", "dev", l.tap, "mode", "tap"},
		{"link", "set", l.tap, "master", "br0"},
		{"link", "set", l.tap, "up"},
	} {
		run(t, append([]string{"ip", "-n", l.ns}, c...)...)
	}
	return l
}

// labImages places the test kernel and initramfs in dir/images.
func labImages(t *testing.T, dir string) string {
	t.Helper()
	images := filepath.Join(dir, "images")
	if err := os.MkdirAll(images, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := placeFile(testKernel(t), filepath.Join(images, "vmlinuz")); err != nil {
		t.Fatal(err)
	}
	if err := placeFile(testInitramfs(t, dir), filepath.Join(images, "initrd.gz")); err != nil {
		t.Fatal(err)
	}
	return images
}

// start runs the pxe services of hc in the lab's namespace, in a child
// process, until the test ends.
func (l *lab) start(t *testing.T, hc helperConfig) {
	t.Helper()
	raw, _ := json.Marshal(hc)
	cmd := exec.Command("ip", "netns", "exec", l.ns, os.Args[0], "-test.run=^TestHelperPXEServices$", "-test.count=1")
	cmd.Env = append(os.Environ(), helperEnv+"="+string(raw))
	stderr, _ := cmd.StderrPipe()
	cmd.Stdout = io.Discard
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	ready := make(chan struct{})
	go func() {
		sc := bufio.NewScanner(stderr)
		var once sync.Once
		for sc.Scan() {
			l.mu.Lock()
			l.logs.WriteString(sc.Text() + "\n")
			l.mu.Unlock()
			if strings.Contains(sc.Text(), "pxe services ready") {
				once.Do(func() { close(ready) })
			}
		}
	}()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			cmd.Process.Kill()
		}
		if t.Failed() {
			t.Logf("pxe service log:\n%s", tail(l.serviceLog(), 6000))
		}
	})
	select {
	case <-ready:
	case <-time.After(60 * time.Second):
		t.Fatalf("pxe services did not start; log:\n%s", l.serviceLog())
	}
}

func labBootConfig(node, mac, mode string) BootConfig {
	return BootConfig{
		NodeUUID: node, MACs: []string{mac}, BootMode: mode, Method: MethodPXE, Kind: "agent",
		KernelURL:    labHTTP + "/images/vmlinuz",
		InitrdURL:    labHTTP + "/images/initrd.gz",
		KernelParams: "console=ttyS0 ipa-api-url=" + labAPIURL + " ipa-node-uuid=" + node,
	}
}

func TestNetbootQEMU_BIOS(t *testing.T) {
	requireVMHost(t)
	dir := t.TempDir()
	const node, mac = "0b0f6c1e-2a4d-4a9e-8c7b-1d2e3f4a5b01", "52:54:00:99:00:01"
	l := newLab(t, dir, labBootConfig(node, mac, BootModeBIOS))
	// SeaBIOS runs the NIC's iPXE ROM (ipxe-qemu): DHCP gives it the node's
	// script URL straight away.
	console := runVM(t, dir, []string{"ip", "netns", "exec", l.ns},
		"-netdev", "tap,id=n0,ifname="+l.tap+",script=no,downscript=no",
		"-device", "virtio-net-pci,netdev=n0,mac="+mac+",bootindex=1")
	assertBooted(t, console, "ipa-api-url="+labAPIURL, "ipa-node-uuid="+node, "BOOTIF=")
	if !strings.Contains(l.serviceLog(), "/boot/"+node+"/boot.ipxe") {
		t.Errorf("the node's iPXE script was never fetched")
	}
}

func TestNetbootQEMU_UEFI(t *testing.T) {
	requireVMHost(t)
	dir := t.TempDir()
	const node, mac = "0b0f6c1e-2a4d-4a9e-8c7b-1d2e3f4a5b02", "52:54:00:99:00:02"
	l := newLab(t, dir, labBootConfig(node, mac, BootModeUEFI))
	// romfile= drops the NIC's iPXE ROM so OVMF's own PXE client boots:
	// DHCP (93=0007) → TFTP ipxe.efi → iPXE → the node's script.
	args := append(ovmfArgs(t, dir),
		"-netdev", "tap,id=n0,ifname="+l.tap+",script=no,downscript=no",
		"-device", "virtio-net-pci,netdev=n0,mac="+mac+",bootindex=1,romfile=")
	console := runVM(t, dir, []string{"ip", "netns", "exec", l.ns}, args...)
	assertBooted(t, console, "ipa-api-url="+labAPIURL, "ipa-node-uuid="+node)
	logs := l.serviceLog()
	if !logLine(logs, `"msg":"TFTP transfer done"`, `"file":"ipxe.efi"`) {
		t.Errorf("ipxe.efi was not fetched over TFTP")
	}
	if !strings.Contains(logs, "/boot/"+node+"/boot.ipxe") {
		t.Errorf("the node's iPXE script was never fetched")
	}
}

// logLine reports whether one line of the JSON log holds every part.
func logLine(logs string, parts ...string) bool {
	for _, l := range strings.Split(logs, "\n") {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(l, p)
		}
		if all {
			return true
		}
	}
	return false
}

// TestNetbootQEMU_UEFISecureBoot boots a node whose secure_boot is true
// over PXE on OVMF's secure-boot build with Microsoft's keys enrolled,
// without iPXE (it is not signed): DHCP offers shim over TFTP, shim loads
// Debian's signed network GRUB, GRUB reads the master grub.cfg and the
// node's config by MAC, then Debian's signed kernel and the initrd, all
// over TFTP. The kernel reports secure boot on and has the node's params.
func TestNetbootQEMU_UEFISecureBoot(t *testing.T) {
	requireVMHost(t)
	const code, msVars = "/usr/share/OVMF/OVMF_CODE_4M.secboot.fd", "/usr/share/OVMF/OVMF_VARS_4M.ms.fd"
	for _, f := range []string{code, msVars, DefaultShim, DefaultSignedNetGrub} {
		if _, err := os.Stat(f); err != nil {
			t.Skipf("SKIPPING SECURE BOOT VM TEST: %s missing (apt-get install ovmf shim-signed grub-efi-amd64-signed)", f)
		}
	}
	dir := t.TempDir()
	const node, mac = "0b0f6c1e-2a4d-4a9e-8c7b-1d2e3f4a5b5b", "52:54:00:99:5b:03"
	bc := labBootConfig(node, mac, BootModeUEFI)
	bc.SecureBoot = true
	l := newLab(t, dir, bc)
	b, err := os.ReadFile(msVars)
	if err != nil {
		t.Fatal(err)
	}
	vars := filepath.Join(dir, "OVMF_VARS.fd")
	if err := os.WriteFile(vars, b, 0o600); err != nil {
		t.Fatal(err)
	}
	// As TestNetbootQEMU_AgentISOSecureBoot: q35 with SMM and a secure
	// flash for the secboot build, 512 MiB for the kernel's EFI stub;
	// romfile= drops the NIC's iPXE ROM so OVMF's own PXE client boots.
	console := runVM(t, dir, []string{"ip", "netns", "exec", l.ns}, "-m", "512", "-machine", "q35,smm=on",
		"-global", "driver=cfi.pflash01,property=secure,value=on",
		"-drive", "if=pflash,format=raw,readonly=on,file="+code,
		"-drive", "if=pflash,format=raw,file="+vars,
		"-netdev", "tap,id=n0,ifname="+l.tap+",script=no,downscript=no",
		"-device", "virtio-net-pci,netdev=n0,mac="+mac+",bootindex=1,romfile=")
	assertBooted(t, console, "ipa-api-url="+labAPIURL, "ipa-node-uuid="+node, "BOOTIF=01-52-54-00-99-5b-03")
	if !strings.Contains(console, "Secure boot enabled") {
		t.Errorf("the kernel does not report secure boot on; console:\n%s", tail(console, 4000))
	}
	logs := l.serviceLog()
	for _, f := range []string{"shimx64.efi", "grubx64.efi", "grub/grub.cfg", "grub/ironflow/" + mac + ".cfg", "ironflow/" + mac + "/kernel", "ironflow/" + mac + "/initrd"} {
		if !logLine(logs, `"msg":"TFTP transfer done"`, `"file":"`+f+`"`) {
			t.Errorf("%s was not fetched over TFTP", f)
		}
	}
	if logLine(logs, `"file":"ipxe.efi"`) {
		t.Errorf("iPXE was offered to a secure boot node")
	}
}
