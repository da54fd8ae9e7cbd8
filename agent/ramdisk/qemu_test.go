package ramdisk_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/diskfs/go-diskfs/partition/gpt"
	"github.com/insomniacslk/dhcp/dhcpv4"
	"github.com/insomniacslk/dhcp/dhcpv4/server4"
	"golang.org/x/sys/unix"

	"github.com/ironflow/ironflow/agent/client"
	"github.com/ironflow/ironflow/agent/ramdisk"
)

// Addresses inside the network namespace the test creates; nothing leaves it.
const (
	nsBridgeIP = "10.77.0.1"
	nsVMIP     = "10.77.0.10"
	vmMAC      = "52:54:00:aa:bb:01"
	qemuToken  = "qemu-test-token-0123456789abcdefghijklmnopq"
	// bootTimeout bounds boot to first heartbeat; TCG on a loaded 2-core
	// machine is slow.
	bootTimeout = 240 * time.Second
)

func repoRoot(t *testing.T) string {
	wd, _ := os.Getwd()
	return filepath.Join(wd, "..", "..")
}

func run(t *testing.T, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

// netns is a network namespace with a bridge and one tap for the VM.
type netns struct {
	name   string
	handle int
	orig   int
}

func newNetns(t *testing.T) *netns {
	name := fmt.Sprintf("ifagent%d", os.Getpid())
	run(t, "ip", "netns", "add", name)
	t.Cleanup(func() { exec.Command("ip", "netns", "del", name).Run() })
	ns := func(args ...string) { run(t, "ip", append([]string{"netns", "exec", name, "ip"}, args...)...) }
	ns("link", "set", "lo", "up")
	ns("link", "add", "br0", "type", "bridge", "forward_delay", "0")
	ns("addr", "add", nsBridgeIP+"/24", "dev", "br0")
	ns("link", "set", "br0", "up")
	ns("tuntap", "add", "tap0", "mode", "tap")
	ns("link", "set", "tap0", "master", "br0")
	ns("link", "set", "tap0", "up")
	h, err := unix.Open("/run/netns/"+name, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	o, err := unix.Open("/proc/self/ns/net", unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(h); unix.Close(o) })
	return &netns{name: name, handle: h, orig: o}
}

// do runs f with the calling thread inside the namespace: sockets created
// by f stay in it.
func (n *netns) do(f func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := unix.Setns(n.handle, unix.CLONE_NEWNET); err != nil {
		return err
	}
	defer unix.Setns(n.orig, unix.CLONE_NEWNET)
	return f()
}

func (n *netns) dial(ctx context.Context, network, addr string) (conn net.Conn, err error) {
	err = n.do(func() error {
		var d net.Dialer
		conn, err = d.DialContext(ctx, network, addr)
		return err
	})
	return conn, err
}

// dhcpHandler gives the VM its address, as pxe/ will in production.
func dhcpHandler(t *testing.T) server4.Handler {
	return func(conn net.PacketConn, peer net.Addr, m *dhcpv4.DHCPv4) {
		var typ dhcpv4.MessageType
		switch m.MessageType() {
		case dhcpv4.MessageTypeDiscover:
			typ = dhcpv4.MessageTypeOffer
		case dhcpv4.MessageTypeRequest:
			typ = dhcpv4.MessageTypeAck
		default:
			return
		}
		reply, err := dhcpv4.NewReplyFromRequest(m, dhcpv4.WithMessageType(typ), dhcpv4.WithYourIP(net.ParseIP(nsVMIP)),
			dhcpv4.WithServerIP(net.ParseIP(nsBridgeIP)), dhcpv4.WithNetmask(net.CIDRMask(24, 32)),
			dhcpv4.WithOption(dhcpv4.OptServerIdentifier(net.ParseIP(nsBridgeIP))), dhcpv4.WithLeaseTime(3600))
		if err != nil {
			t.Logf("dhcp reply: %v", err)
			return
		}
		if _, err := conn.WriteTo(reply.ToBytes(), peer); err != nil {
			t.Logf("dhcp send: %v", err)
		}
	}
}

// fakeIronflowAPI answers lookup and heartbeat and serves the image.
type fakeIronflowAPI struct {
	mu        sync.Mutex
	heartbeat map[string]any
	hbCh      chan map[string]any
	image     []byte
}

func (f *fakeIronflowAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.URL.Path == "/v1/lookup":
		if !strings.Contains(r.URL.Query().Get("addresses"), vmMAC) {
			http.NotFound(w, r)
			return
		}
		json.NewEncoder(w).Encode(map[string]any{
			"node":   map[string]any{"uuid": "0f5bd1f6-6a2b-4f52-9b8c-4d9c7d3b1a01", "properties": map[string]any{}},
			"config": map[string]any{"heartbeat_timeout": 300, "agent_token": qemuToken, "agent_token_required": true},
		})
	case strings.HasPrefix(r.URL.Path, "/v1/heartbeat/"):
		var body map[string]any
		json.NewDecoder(r.Body).Decode(&body)
		if body["agent_token"] != qemuToken {
			w.WriteHeader(400)
			return
		}
		select {
		case f.hbCh <- body:
		default:
		}
		w.WriteHeader(202)
	case r.URL.Path == "/disk.img":
		http.ServeContent(w, r, "disk.img", time.Unix(0, 0), bytes.NewReader(f.image))
	default:
		http.NotFound(w, r)
	}
}

// accel picks KVM when it really runs a guest, else TCG: /dev/kvm can exist
// on hosts (nested virtualisation) where guests hang.
func accel(t *testing.T, kernel string) string {
	accelOnce.Do(func() { accelChoice = probeAccel(t, kernel) })
	return accelChoice
}

var (
	accelOnce   sync.Once
	accelChoice string
)

func probeAccel(t *testing.T, kernel string) string {
	if v := os.Getenv("IRONFLOW_QEMU_ACCEL"); v != "" {
		return v
	}
	if _, err := os.Stat("/dev/kvm"); err != nil {
		return "tcg"
	}
	log := filepath.Join(t.TempDir(), "probe.log")
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "qemu-system-x86_64", "-accel", "kvm", "-m", "256", "-kernel", kernel,
		"-append", "console=ttyS0 panic=-1", "-display", "none", "-serial", "file:"+log, "-no-reboot")
	_ = cmd.Start()
	for ctx.Err() == nil {
		if b, _ := os.ReadFile(log); bytes.Contains(b, []byte("Linux version")) {
			cancel()
			cmd.Wait()
			return "kvm"
		}
		time.Sleep(200 * time.Millisecond)
	}
	cmd.Wait()
	t.Log("KVM does not boot a guest here: using TCG")
	return "tcg"
}

// vm is one agent VM in its own network namespace with the test-side
// DHCP and API servers.
type vm struct {
	api     *fakeIronflowAPI
	apiURL  string
	disk    string
	extra   []string // further disks (vdb, ...)
	vars    string   // UEFI variable store (UEFI VMs)
	console string
	exited  chan struct{}
	client  *client.Client
}

// bootVM builds the ramdisk, boots it (UEFI with OVMF when uefi) and waits
// for the agent's first heartbeat; it returns a client for the agent.
func bootVM(t *testing.T, uefi bool, image []byte, extraDisks ...int64) *vm {
	return bootVMWithSteps(t, "", uefi, image, extraDisks...)
}

// bootVMWithSteps is bootVM with a ramdisk of its own that carries the
// custom deploy steps of stepsDir ("": the shared ramdisk).
func bootVMWithSteps(t *testing.T, stepsDir string, uefi bool, image []byte, extraDisks ...int64) *vm {
	if os.Geteuid() != 0 {
		t.Skip("SKIP: the agent VM tests need root (network namespaces, tap devices)")
	}
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		t.Skip("SKIP: qemu-system-x86_64 is not installed (Debian qemu-system-x86)")
	}
	root := repoRoot(t)
	kernelDir := filepath.Join(root, ".data", "kernel")
	if _, err := os.Stat(filepath.Join(kernelDir, "vmlinuz")); err != nil {
		run(t, filepath.Join(root, "scripts", "fetch-kernel.sh"))
	}
	res, err := ramdisk.Build(ramdisk.Options{KernelDir: kernelDir, OutDir: filepath.Join(root, ".data", "ramdisk"), ModuleRoot: root})
	if err != nil {
		t.Fatal(err)
	}
	if stepsDir != "" {
		// The agent the shared build made, in a ramdisk of this test's own.
		own := ramdisk.Options{KernelDir: kernelDir, OutDir: t.TempDir(), ModuleRoot: root,
			Agent: filepath.Join(root, ".data", "ramdisk", "ironflow-agent"), CustomSteps: stepsDir}
		if res, err = ramdisk.Build(own); err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("ramdisk %s (cached %v)", res.Initramfs, res.Cached)

	ns := newNetns(t)
	v := &vm{api: &fakeIronflowAPI{hbCh: make(chan map[string]any, 16), image: image}, exited: make(chan struct{})}
	var ln net.Listener
	var dhcp *server4.Server
	if err := ns.do(func() error {
		var err error
		if ln, err = net.Listen("tcp", nsBridgeIP+":0"); err != nil {
			return err
		}
		dhcp, err = server4.NewServer("br0", &net.UDPAddr{IP: net.IPv4zero, Port: dhcpv4.ServerPort}, dhcpHandler(t))
		return err
	}); err != nil {
		t.Fatal(err)
	}
	go dhcp.Serve()
	t.Cleanup(func() { dhcp.Close() })
	srv := &http.Server{Handler: v.api}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	v.apiURL = "http://" + ln.Addr().String()

	dir := t.TempDir()
	v.disk = filepath.Join(dir, "disk.img")
	if err := os.WriteFile(v.disk, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	os.Truncate(v.disk, 64<<20)
	v.console = filepath.Join(dir, "console.log")
	acc := accel(t, res.Kernel)
	args := []string{"netns", "exec", ns.name, "qemu-system-x86_64",
		"-accel", acc, "-m", "512", "-smp", "1", "-kernel", res.Kernel, "-initrd", res.Initramfs,
		"-append", "console=ttyS0 panic=-1 ipa-api-url=" + v.apiURL + " ipa-heartbeat-interval=5 ipa-min-disk-size=32M",
		"-netdev", "tap,id=n0,ifname=tap0,script=no,downscript=no", "-device", "virtio-net-pci,netdev=n0,mac=" + vmMAC,
		"-device", "virtio-rng-pci", "-drive", "file=" + v.disk + ",format=raw,if=virtio,cache=unsafe",
		"-display", "none", "-serial", "file:" + v.console, "-no-reboot"}
	for i, size := range extraDisks {
		p := filepath.Join(dir, fmt.Sprintf("disk%d.img", i+1))
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		os.Truncate(p, size)
		v.extra = append(v.extra, p)
		args = append(args, "-drive", "file="+p+",format=raw,if=virtio,cache=unsafe")
	}
	if uefi {
		const code, vars = "/usr/share/OVMF/OVMF_CODE_4M.fd", "/usr/share/OVMF/OVMF_VARS_4M.fd"
		if _, err := os.Stat(code); err != nil {
			t.Skip("SKIP: OVMF is not installed (Debian ovmf)")
		}
		b, err := os.ReadFile(vars)
		if err != nil {
			t.Fatal(err)
		}
		v.vars = filepath.Join(dir, "vars.fd")
		os.WriteFile(v.vars, b, 0o600)
		args = append(args, "-machine", "q35", "-drive", "if=pflash,format=raw,readonly=on,file="+code,
			"-drive", "if=pflash,format=raw,file="+v.vars)
	}
	qemu := exec.Command("ip", args...)
	if err := qemu.Start(); err != nil {
		t.Fatal(err)
	}
	var waitErr error
	go func() { waitErr = qemu.Wait(); close(v.exited) }()
	t.Cleanup(func() {
		qemu.Process.Kill()
		<-v.exited
		if t.Failed() {
			b, _ := os.ReadFile(v.console)
			t.Logf("VM console:\n%s", b)
		}
	})

	var hb map[string]any
	select {
	case hb = <-v.api.hbCh:
	case <-v.exited:
		t.Fatalf("QEMU exited before the agent heartbeated: %v", waitErr)
	case <-time.After(bootTimeout):
		t.Fatalf("no heartbeat from the agent within %s (accel %s)", bootTimeout, acc)
	}
	cbURL, _ := hb["callback_url"].(string)
	caPEM, _ := hb["agent_verify_ca"].(string)
	if cbURL != "https://"+nsVMIP+":9999" || !strings.Contains(caPEM, "BEGIN CERTIFICATE") {
		t.Fatalf("heartbeat %v", hb)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM([]byte(caPEM))
	hc := &http.Client{Transport: &http.Transport{DialContext: ns.dial, TLSClientConfig: &tls.Config{RootCAs: pool}}}
	if v.client, err = client.New(cbURL, qemuToken, client.WithHTTPClient(hc)); err != nil {
		t.Fatal(err)
	}
	return v
}

// writeImage runs the write_image deploy step on the VM.
func (v *vm) writeImage(t *testing.T, ctx context.Context) {
	t.Helper()
	steps, err := v.client.GetDeploySteps(ctx, nil, nil)
	if err != nil || len(steps.Steps) == 0 || steps.Steps[0].Step != "write_image" {
		t.Fatalf("deploy steps %+v %v", steps, err)
	}
	sum := sha256.Sum256(v.api.image)
	step := steps.Steps[0]
	step.Args = map[string]any{"image_source": v.apiURL + "/disk.img", "image_os_hash_algo": "sha256", "image_os_hash_value": hex.EncodeToString(sum[:])}
	r, err := v.client.ExecuteDeployStep(ctx, step, map[string]any{"uuid": "0f5bd1f6-6a2b-4f52-9b8c-4d9c7d3b1a01"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err = v.client.WaitCommand(ctx, r.ID, time.Second, func(cr client.CommandResult) {
		if p, ok := cr.Progress(); ok {
			t.Logf("write_image progress: %d/%d", p.BytesWritten, p.TotalBytes)
		}
	}); err != nil {
		t.Fatalf("write_image: %v", err)
	}
}

// powerOff asks the agent to power the VM off and waits for QEMU to exit.
func (v *vm) powerOff(t *testing.T, ctx context.Context) {
	t.Helper()
	if err := v.client.PowerOff(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-v.exited:
	case <-time.After(2 * time.Minute):
		t.Fatal("the VM did not power off")
	}
}

// TestAgentQEMU boots the real ramdisk in QEMU (BIOS) inside a network
// namespace, drives write_image through the agent's command API, powers the
// VM off through the agent and checks the image is on the VM's disk.
func TestAgentQEMU(t *testing.T) {
	v := bootVM(t, false, vmImage(8<<20))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	inv, err := v.client.GetInventory(ctx)
	if err != nil || len(inv.Disks) != 1 || inv.Disks[0].Name != "/dev/vda" || inv.Disks[0].Size != 64<<20 || inv.Boot.CurrentBootMode != "bios" {
		t.Fatalf("inventory %+v %v", inv, err)
	}
	v.writeImage(t, ctx)
	v.powerOff(t, ctx)
	got := make([]byte, len(v.api.image))
	f, err := os.Open(v.disk)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	f.ReadAt(got, 0)
	if !bytes.Equal(got, v.api.image) {
		t.Fatal("the VM's disk does not hold the image after power off")
	}
}

// TestAgentQEMUCustomStep: a custom deploy step packaged by mkramdisk
// (Options.CustomSteps: a #! script, with Debian's dash and its libraries
// carried for it) is offered by the agent booted in QEMU and runs there by
// name: its output, made from the step's args on its standard input and
// the node's UUID in its environment, is the step's deploy_result.
func TestAgentQEMUCustomStep(t *testing.T) {
	steps := t.TempDir()
	script := "#!/bin/sh\nread -r args\necho \"flashed on $IRONFLOW_NODE_UUID with $args\"\n"
	if err := os.WriteFile(filepath.Join(steps, "flash_firmware"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	v := bootVMWithSteps(t, steps, false, vmImage(1<<20))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	const node = "3b8f6c1e-2a4d-4e5f-9a6b-7c8d9e0f1a2b"
	list, err := v.client.GetDeploySteps(ctx, map[string]any{"uuid": node, "deploy_interface": "custom-agent"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var step *client.Step
	for i, s := range list.Steps {
		if s.Step == "flash_firmware" {
			step = &list.Steps[i]
		}
	}
	if step == nil {
		t.Fatalf("deploy steps %+v: the packaged flash_firmware is not offered", list.Steps)
	}
	step.Args = map[string]any{}
	r, err := v.client.ExecuteDeployStep(ctx, *step, map[string]any{"uuid": node}, nil)
	if err != nil {
		t.Fatal(err)
	}
	done, err := v.client.WaitCommand(ctx, r.ID, time.Second, nil)
	if err != nil {
		t.Fatalf("flash_firmware: %v", err)
	}
	if want := "flashed on " + node + " with {}"; !strings.Contains(string(done.CommandResult), want) {
		t.Fatalf("the step's result %s; want %q", done.CommandResult, want)
	}
	t.Logf("custom step result: %s", done.CommandResult)
}

// TestAgentQEMUSoftwareRAID runs raid.create_configuration on the real
// ramdisk (its kernel's md driver, Debian's mdadm it carries) in a BIOS VM
// with two disks: after power off each disk holds a GPT with a BIOS boot
// partition and a Linux RAID partition whose md superblock (metadata 1.2,
// 4 KiB into the partition) says RAID-1 over 2 devices.
func TestAgentQEMUSoftwareRAID(t *testing.T) {
	v := bootVM(t, false, vmImage(8<<20), 64<<20)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	node := map[string]any{"uuid": "7c4e2a91-5d3b-4f68-9e0a-b2d1c3f4a5e6", "raid_interface": "agent",
		"target_raid_config": map[string]any{"logical_disks": []any{
			map[string]any{"controller": "software", "raid_level": "1", "size_gb": "MAX", "is_root_volume": true}}}}
	steps, err := v.client.GetCleanSteps(ctx, node, nil)
	if err != nil {
		t.Fatal(err)
	}
	var offered bool
	for _, s := range steps.Steps {
		offered = offered || (s.Interface == "raid" && s.Step == "create_configuration")
	}
	if !offered {
		t.Fatalf("clean steps for raid_interface agent lack raid.create_configuration: %+v", steps.Steps)
	}
	r, err := v.client.ExecuteCleanStep(ctx, client.Step{Step: "create_configuration", Interface: "raid"}, node, nil)
	if err == nil {
		r, err = v.client.WaitCommand(ctx, r.ID, time.Second, nil)
	}
	if err != nil {
		t.Fatalf("create_configuration: %v", err)
	}
	var body struct {
		Result struct {
			LogicalDisks []map[string]any `json:"logical_disks"`
		} `json:"clean_result"`
	}
	if err := json.Unmarshal(r.CommandResult, &body); err != nil {
		t.Fatal(err)
	}
	if lds := body.Result.LogicalDisks; len(lds) != 1 || fmt.Sprint(lds[0]["physical_disks"]) != "[/dev/vda2 /dev/vdb2]" || lds[0]["raid_level"] != "1" {
		t.Fatalf("raid_config %s", r.CommandResult)
	}
	v.powerOff(t, ctx)
	for _, disk := range append([]string{v.disk}, v.extra...) {
		f, err := os.Open(disk)
		if err != nil {
			t.Fatal(err)
		}
		tbl, err := gpt.Read(f, 512, 512)
		if err != nil {
			f.Close()
			t.Fatalf("%s: GPT: %v", disk, err)
		}
		if len(tbl.Partitions) < 2 || tbl.Partitions[0].Type != gpt.BIOSBoot || tbl.Partitions[1].Type != gpt.LinuxRAID {
			f.Close()
			t.Fatalf("%s: partitions %+v", disk, tbl.Partitions)
		}
		sb := make([]byte, 256)
		f.ReadAt(sb, int64(tbl.Partitions[1].Start)*512+4096)
		f.Close()
		magic, level, devices := binary.LittleEndian.Uint32(sb), int32(binary.LittleEndian.Uint32(sb[72:])), binary.LittleEndian.Uint32(sb[92:])
		if magic != 0xa92b4efc || level != 1 || devices != 2 {
			t.Fatalf("%s: md superblock magic %#x level %d raid_disks %d", disk, magic, level, devices)
		}
	}
}

// TestAgentQEMUSoftwareRAIDDelete: raid.delete_configuration after a
// create stops the array and leaves both disks without a partition table
// or md superblock.
func TestAgentQEMUSoftwareRAIDDelete(t *testing.T) {
	v := bootVM(t, false, vmImage(8<<20), 64<<20)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	node := map[string]any{"uuid": "7c4e2a91-5d3b-4f68-9e0a-b2d1c3f4a5e7", "raid_interface": "agent",
		"target_raid_config": map[string]any{"logical_disks": []any{
			map[string]any{"controller": "software", "raid_level": "1", "size_gb": "MAX", "is_root_volume": true}}}}
	for _, step := range []string{"create_configuration", "delete_configuration"} {
		r, err := v.client.ExecuteCleanStep(ctx, client.Step{Step: step, Interface: "raid"}, node, nil)
		if err == nil {
			r, err = v.client.WaitCommand(ctx, r.ID, time.Second, nil)
		}
		if err != nil {
			t.Fatalf("%s: %v", step, err)
		}
	}
	v.powerOff(t, ctx)
	for _, disk := range append([]string{v.disk}, v.extra...) {
		f, err := os.Open(disk)
		if err != nil {
			t.Fatal(err)
		}
		if tbl, err := gpt.Read(f, 512, 512); err == nil && len(tbl.Partitions) > 0 {
			t.Errorf("%s: GPT left after delete_configuration: %+v", disk, tbl.Partitions)
		}
		sb := make([]byte, 4)
		f.ReadAt(sb, 8<<20+4096) // where the member's superblock was
		f.Close()
		if binary.LittleEndian.Uint32(sb) == 0xa92b4efc {
			t.Errorf("%s: md superblock left after delete_configuration", disk)
		}
	}
}

// TestAgentQEMUUEFI boots the ramdisk under OVMF, writes a GPT image with an
// EFI system partition and runs image.install_bootloader: the new boot entry
// must be in the VM's UEFI variable store after power off.
func TestAgentQEMUUEFI(t *testing.T) {
	v := bootVM(t, true, gptESPImage(t, 8<<20))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	inv, err := v.client.GetInventory(ctx)
	if err != nil || inv.Boot.CurrentBootMode != "uefi" {
		t.Fatalf("inventory boot %+v %v", inv.Boot, err)
	}
	v.writeImage(t, ctx)
	r, err := v.client.InstallBootloader(ctx, client.InstallBootloaderParams{TargetBootMode: "uefi"})
	if err == nil {
		r, err = v.client.WaitCommand(ctx, r.ID, time.Second, nil)
	}
	if err != nil || !strings.Contains(string(r.CommandResult), "UEFI boot entry added") {
		t.Fatalf("install_bootloader: %v %s", err, r.CommandResult)
	}
	v.powerOff(t, ctx)
	vars, err := os.ReadFile(v.vars)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"ironflow vda", `\EFI\BOOT\BOOTX64.EFI`} {
		if !bytes.Contains(vars, utf16le(want)) {
			t.Errorf("UEFI variable store lacks %q", want)
		}
	}
}

func utf16le(s string) []byte {
	var b []byte
	for _, r := range s {
		b = append(b, byte(r), byte(r>>8))
	}
	return b
}

// gptESPImage is a whole-disk image with a GPT holding an EFI system
// partition and a root partition.
func gptESPImage(t *testing.T, size int64) []byte {
	p := filepath.Join(t.TempDir(), "gpt.img")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	f.Truncate(size)
	tbl := &gpt.Table{LogicalSectorSize: 512, PhysicalSectorSize: 512, ProtectiveMBR: true, Partitions: []*gpt.Partition{
		{Index: 1, Start: 2048, End: 8191, Type: gpt.EFISystemPartition, Name: "ESP"},
		{Index: 2, Start: 8192, End: uint64(size/512) - 2048, Type: gpt.LinuxFilesystem, Name: "root"},
	}}
	if err := tbl.Write(f, size); err != nil {
		t.Fatal(err)
	}
	f.Close()
	b, _ := os.ReadFile(p)
	return b
}

// vmImage is a random image with an MBR, smaller than the VM's disk.
func vmImage(size int) []byte {
	img := make([]byte, size)
	r := rand.New(rand.NewPCG(3, 4))
	for i := range img {
		img[i] = byte(r.Uint32())
	}
	clear(img[446:512])
	img[446+4] = 0x83
	img[446+8], img[446+9] = 0x00, 0x08 // start 2048
	n := uint32(size/512 - 2048)
	img[446+12], img[446+13], img[446+14], img[446+15] = byte(n), byte(n>>8), byte(n>>16), byte(n>>24)
	img[510], img[511] = 0x55, 0xaa
	return img
}
