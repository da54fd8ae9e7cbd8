package installer

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cavaliergopher/cpio"

	"github.com/ironflow/ironflow/pxe"
)

const (
	testNode  = "5c1d7e2a-3b4f-4a6c-9d8e-0f1a2b3c4d5e"
	testToken = "installer-tok_9Zq"
	// vmTimeout bounds one installer run under TCG on a loaded machine.
	vmTimeout = 5 * time.Minute
)

// fakeAPI is the test's ironflow: it serves the kickstart and the image and
// records heartbeats.
type fakeAPI struct {
	ks    string
	image []byte

	mu         sync.Mutex
	heartbeats []map[string]string
	versions   []string
}

func (f *fakeAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/boot/"+testNode+"/ks.cfg":
		io.WriteString(w, f.ks)
	case r.Method == http.MethodGet && r.URL.Path == "/images/disk.img":
		w.Write(f.image)
	case r.Method == http.MethodPost && r.URL.Path == "/v1/heartbeat/"+testNode:
		var hb map[string]string
		if err := json.NewDecoder(r.Body).Decode(&hb); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		f.mu.Lock()
		f.heartbeats = append(f.heartbeats, hb)
		f.versions = append(f.versions, r.Header.Get("X-OpenStack-Ironic-API-Version"))
		f.mu.Unlock()
		w.WriteHeader(http.StatusAccepted) // as Ironic answers heartbeats
	default:
		http.NotFound(w, r)
	}
}

func (f *fakeAPI) statuses() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for i, hb := range f.heartbeats {
		s := hb["agent_status"]
		if hb["agent_token"] != testToken || hb["agent_version"] != "anaconda" || f.versions[i] != pxe.KickstartAPIVersion {
			s += "(bad: " + fmt.Sprint(hb["agent_version"], " ", f.versions[i]) + ")"
		}
		out = append(out, s)
	}
	return out
}

func kickstart(t *testing.T, base, image string) string {
	t.Helper()
	ks, err := pxe.RenderKickstart(pxe.KickstartParams{NodeUUID: testNode, APIURL: base, AgentToken: testToken,
		ImageURL: base + image, SSHKeys: []string{"ssh-ed25519 AAAAC3Nza test@ironflow"}})
	if err != nil {
		t.Fatal(err)
	}
	return ks
}

// TestCurlStandInRunsKickstartHeartbeats runs the rendered kickstart's
// sections on the host with the installer's curl stand-in over busybox
// wget: the heartbeats arrive as Ironic's, and a refused heartbeat fails
// the section as curl --fail would.
func TestCurlStandInRunsKickstartHeartbeats(t *testing.T) {
	if _, err := os.Stat(DefaultBusybox); err != nil {
		t.Skipf("SKIP: %s missing (Debian package busybox-static): %v", DefaultBusybox, err)
	}
	api := &fakeAPI{}
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	bin := t.TempDir()
	if err := os.Symlink(DefaultBusybox, filepath.Join(bin, "wget")); err != nil {
		t.Fatal(err)
	}
	curl := filepath.Join(bin, "curl")
	if err := os.WriteFile(curl, curlScript, 0o755); err != nil {
		t.Fatal(err)
	}
	run := func(ks, section string) error {
		body := pxe.KickstartSections(ks)[section][0]
		cmd := exec.Command(DefaultBusybox, "sh", "-ec", strings.ReplaceAll(body, "/usr/bin/curl", curl))
		cmd.Env = append(os.Environ(), "PATH="+bin+":/usr/bin:/bin")
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("%w: %s", err, out)
		}
		return nil
	}
	ks := kickstart(t, srv.URL, "/images/disk.img")
	for _, s := range []string{"%pre", "%onerror", "%post"} {
		if err := run(ks, s); err != nil {
			t.Fatalf("%s: %v", s, err)
		}
	}
	if got := api.statuses(); !slices.Equal(got, []string{"start", "error", "end"}) {
		t.Fatalf("heartbeats %v, want start, error, end with token, agent_version and API version", got)
	}
	// A node the API does not know: 404, and the section fails.
	other := strings.ReplaceAll(ks, testNode, "00000000-0000-4000-8000-000000000000")
	if err := run(other, "%pre"); err == nil {
		t.Fatal("the pre section succeeded although the heartbeat was refused")
	}
}

func TestBuildInitramfs(t *testing.T) {
	kdir := requireKernel(t)
	out := filepath.Join(t.TempDir(), "installer.cpio")
	if err := BuildInitramfs(out, Options{KernelDir: kdir}); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	files := map[string][]byte{}
	modes := map[string]cpio.FileMode{}
	r := cpio.NewReader(f)
	for {
		h, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(r)
		files[h.Name], modes[h.Name] = b, h.Mode
	}
	for _, name := range []string{"init", "bin/busybox", "etc/udhcpc.script", "usr/bin/curl"} {
		if modes[name]&0o111 == 0 || len(files[name]) == 0 {
			t.Errorf("%s missing or not executable (mode %o)", name, modes[name])
		}
	}
	if strings.Contains(string(files["init"]), "@MARKER@") || !strings.Contains(string(files["init"]), `DISK="/dev/vda"`) {
		t.Error("init was not filled in")
	}
	order := strings.Fields(string(files["lib/modules/load-order"]))
	pos := map[string]int{}
	for i, m := range order {
		pos[m] = i
		if !bytes.HasPrefix(files["lib/modules/"+m+".ko"], []byte("\x7fELF")) {
			t.Errorf("module %s is not an uncompressed ELF object", m)
		}
	}
	// Each module comes after what it depends on.
	for _, m := range order {
		deps, err := modinfoDepends(filepath.Join(kdir, "modules", kernelVersion(t, kdir)) + "/" + mustFind(t, kdir, m))
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range deps {
			if p, ok := pos[d]; ok && p > pos[m] {
				t.Errorf("module %s is loaded before its dependency %s: %v", m, d, order)
			}
		}
	}
	for _, m := range DefaultModules {
		if _, ok := pos[m]; !ok {
			t.Errorf("module %s not in the load order %v", m, order)
		}
	}
}

// TestInstallerInQEMU boots the installer with QEMU's direct kernel boot and
// user-mode networking (the host's 127.0.0.1 is 10.0.2.2 to the guest) and
// checks what an anaconda deploy must do: heartbeats start and end with the
// token, the image on the disk; and on a missing image, the error heartbeat
// from %onerror.
func TestInstallerInQEMU(t *testing.T) {
	kdir := requireKernel(t)
	if _, err := exec.LookPath("qemu-system-x86_64"); err != nil {
		t.Skipf("SKIP: qemu-system-x86_64 is not installed (Debian package qemu-system-x86): %v", err)
	}
	initrd := filepath.Join(t.TempDir(), "installer.cpio")
	if err := BuildInitramfs(initrd, Options{KernelDir: kdir}); err != nil {
		t.Fatal(err)
	}
	image := make([]byte, 3<<20+123)
	rand.Read(image)

	cases := []struct {
		name      string
		imagePath string
		want      []string
		marker    string
	}{
		{"deploy", "/images/disk.img", []string{"start", "end"}, MarkerDone},
		{"image missing", "/images/missing.img", []string{"start", "error"}, MarkerError + " write"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			api := &fakeAPI{image: image}
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			srv := httptest.NewUnstartedServer(api)
			srv.Listener.Close()
			srv.Listener = ln
			srv.Start()
			t.Cleanup(srv.Close)
			guestBase := fmt.Sprintf("http://10.0.2.2:%d", ln.Addr().(*net.TCPAddr).Port)
			api.ks = kickstart(t, guestBase, tc.imagePath)

			dir := t.TempDir()
			disk := filepath.Join(dir, "disk.raw")
			if err := os.WriteFile(disk, make([]byte, 8<<20), 0o644); err != nil {
				t.Fatal(err)
			}
			console := runVM(t, kdir, initrd, disk, guestBase+"/boot/"+testNode+"/ks.cfg")
			for _, l := range strings.Split(console, "\n") {
				if strings.HasPrefix(strings.TrimSpace(l), Marker) {
					t.Log(strings.TrimSpace(l))
				}
			}
			if !strings.Contains(console, tc.marker) {
				t.Fatalf("console lacks %q:\n%s", tc.marker, console)
			}
			if got := api.statuses(); !slices.Equal(got, tc.want) {
				t.Fatalf("heartbeats %v, want %v\nconsole:\n%s", got, tc.want, console)
			}
			onDisk, err := os.ReadFile(disk)
			if err != nil {
				t.Fatal(err)
			}
			written := bytes.Equal(onDisk[:len(image)], image)
			if want := tc.marker == MarkerDone; written != want {
				t.Fatalf("image on disk: %v, want %v", written, want)
			}
		})
	}
}

// runVM boots the installer and returns its console once QEMU exits
// (-no-reboot turns the installer's reboot into an exit).
func runVM(t *testing.T, kdir, initrd, disk, ks string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), vmTimeout)
	defer cancel()
	console := filepath.Join(t.TempDir(), "console.log")
	args := append(qemuAccel(),
		"-m", "256", "-smp", "1", "-nodefaults", "-display", "none", "-no-reboot",
		"-kernel", filepath.Join(kdir, "vmlinuz"), "-initrd", initrd,
		"-append", "console=ttyS0 panic=-1 inst.ks="+ks,
		"-drive", "file="+disk+",format=raw,if=virtio",
		"-netdev", "user,id=n0", "-device", "virtio-net-pci,netdev=n0",
		"-serial", "file:"+console)
	cmd := exec.CommandContext(ctx, "qemu-system-x86_64", args...)
	out, err := cmd.CombinedOutput()
	log, _ := os.ReadFile(console)
	if ctx.Err() != nil {
		t.Fatalf("installer VM still running after %s:\n%s", vmTimeout, log)
	}
	if err != nil {
		t.Fatalf("qemu: %v: %s\nconsole:\n%s", err, out, log)
	}
	return string(log)
}

// qemuAccel: $IRONFLOW_QEMU_ACCEL (kvm or tcg) if set; else KVM when
// /dev/kvm opens on bare metal, TCG inside a VM (nested KVM was unreliable
// in pxe's VM tests).
func qemuAccel() []string {
	switch os.Getenv("IRONFLOW_QEMU_ACCEL") {
	case "kvm":
		return []string{"-accel", "kvm"}
	case "tcg":
		return []string{"-accel", "tcg", "-cpu", "max"}
	}
	cpuinfo, _ := os.ReadFile("/proc/cpuinfo")
	if f, err := os.OpenFile("/dev/kvm", os.O_RDWR, 0); err == nil && !strings.Contains(string(cpuinfo), " hypervisor") {
		f.Close()
		return []string{"-accel", "kvm"}
	}
	return []string{"-accel", "tcg", "-cpu", "max"}
}

func requireKernel(t *testing.T) string {
	t.Helper()
	kdir := RepoKernelDir()
	if _, err := os.Stat(filepath.Join(kdir, "vmlinuz")); err != nil {
		script := filepath.Join(kdir, "..", "..", "scripts", "fetch-kernel.sh")
		if out, err := exec.Command(script).CombinedOutput(); err != nil {
			t.Skipf("SKIP: no kernel in %s and %s failed: %v: %s", kdir, script, err, out)
		}
	}
	if _, err := exec.LookPath("modinfo"); err != nil {
		t.Skipf("SKIP: modinfo is not installed (Debian package kmod): %v", err)
	}
	return kdir
}

func kernelVersion(t *testing.T, kdir string) string {
	b, err := os.ReadFile(filepath.Join(kdir, "version"))
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

func mustFind(t *testing.T, kdir, mod string) string {
	root := filepath.Join(kdir, "modules", kernelVersion(t, kdir))
	var found string
	filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.ReplaceAll(strings.TrimSuffix(d.Name(), ".ko"), "-", "_") == mod {
			found, _ = filepath.Rel(root, p)
		}
		return nil
	})
	if found == "" {
		t.Fatalf("module %s not found under %s", mod, root)
	}
	return found
}
