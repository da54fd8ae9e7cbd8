package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ironflow/ironflow/embedded"
	"github.com/ironflow/ironflow/internal/testkit/devstack"
	"github.com/ironflow/ironflow/internal/testkit/registry"
)

// glancePort is where the lab reaches Glance.
const glancePort = 9292

// labGlance is Debian's glance-api (devstack.StartGlance, on the host's
// loopback) made reachable inside a lab at http://LabAddress:glancePort by
// a proxy that counts the image data downloads Glance serves.
type labGlance struct {
	*devstack.Glance
	// LabURL is Glance's endpoint as ironflow, in the lab, reaches it.
	LabURL    string
	downloads atomic.Int64 // GET /v2/images/{id}/file
}

func startLabGlance(t *testing.T, lab *Lab) *labGlance {
	t.Helper()
	if !devstack.GlanceAvailable() {
		t.Skip(devstack.ErrNoGlance)
	}
	g, err := devstack.StartGlance(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Stop)
	lg := &labGlance{Glance: g, LabURL: fmt.Sprintf("http://%s:%d", LabAddress, glancePort)}
	target, err := url.Parse(g.URL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := httputil.NewSingleHostReverseProxy(target)
	l, err := listenInLab(lab, glancePort)
	if err != nil {
		t.Fatalf("glance proxy: %v", err)
	}
	srv := &http.Server{ReadHeaderTimeout: 30 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/file") {
			lg.downloads.Add(1)
		}
		proxy.ServeHTTP(w, r)
	})}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	})
	t.Logf("glance: glance-api at %s, reached in the lab at %s", g.URL, lg.LabURL)
	return lg
}

// TestDeployGlanceImage deploys the test disk as a Glance image: a
// compressed qcow2 (qemu-img convert -O qcow2 -c) uploaded to Debian's
// glance-api, and a SeaBIOS VM behind ipmi_sim whose node has
// instance_info/image_source = the image's UUID and nothing else about the
// image. The worker resolves it through Glance (disk_format, os_hash_algo,
// os_hash_value), the boot service's image cache downloads it from Glance
// once and serves it to the agent (image_download_source=http, the default
// for Glance images); the node goes active, the VM boots from its disk,
// and the disk's first virtual-size bytes are qemu-img convert -O raw's of
// the image.
//
// Then, on the same VM, a Glance image whose stored data no longer matches
// its os_hash_value: the cache's checksum check fails the deploy, with the
// checksum error in last_error (tests/glance_test.go covers both download
// modes with simulated agents).
func TestDeployGlanceImage(t *testing.T) {
	RequireQEMU(t)
	if _, err := exec.LookPath("qemu-img"); err != nil {
		t.Skip("qemu-img (Debian package qemu-utils) is needed")
	}
	lab := NewLab(t)
	g := startLabGlance(t, lab)
	s := startStack(t, lab, "--glance-url", g.LabURL)
	raw, _, err := BuildTestImage(DefaultCacheDir())
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	img, ref := filepath.Join(dir, "e2e-test.qcow2"), filepath.Join(dir, "ref.raw")
	for _, args := range [][]string{
		{"convert", "-f", "raw", "-O", "qcow2", "-c", raw, img},
		{"convert", "-f", "qcow2", "-O", "raw", img, ref},
	} {
		if out, err := exec.Command("qemu-img", args...).CombinedOutput(); err != nil {
			t.Fatalf("qemu-img %v: %v\n%s", args, err, out)
		}
	}
	data, err := os.ReadFile(img)
	if err != nil {
		t.Fatal(err)
	}
	id, err := g.CreateImage("e2e-test", "qcow2", data)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("glance: image %s, qcow2 of %d bytes for a %d-byte disk", id, len(data), imageSize)

	vm := lab.AddVM("node-g", "52:54:00:e2:11:01", FirmwareBIOS, filepath.Join(lab.Dir, "vm-node-g", "disk.raw"))
	password := newBMCPassword()
	startIPMISim(t, s, agentVM(vm), password)
	begin := time.Now()
	uuid := createIPMINode(t, s, vm, "e2e-g", password, "--deploy-interface", "direct", "--no-automated-clean")
	defer printNodeHistory(t, s, uuid)
	s.mustCLI(t, "node", "manage", uuid, "--wait", seconds(manageWait))
	s.mustCLI(t, "node", "provide", uuid, "--wait", seconds(provideWait))
	s.mustCLI(t, "node", "set", uuid, "--instance-info", "image_source="+id)
	if out, err := s.baremetal(t, "node", "validate", uuid, "-f", "value", "-c", "Interface", "-c", "Result"); err != nil {
		t.Fatalf("node validate: %v", err)
	} else if !strings.Contains(out, "deploy True") {
		t.Fatalf("node validate of a deployable Glance image:\n%s", out)
	}
	if _, err := s.baremetal(t, "node", "deploy", uuid, "--wait", seconds(deployWait)); err != nil {
		s.failStep(t, uuid, vm.SerialLog, err)
	}
	printTimeline(t, s, uuid, "glance deploy")
	t.Logf("glance deploy reached active %.1fs after node create", time.Since(begin).Seconds())

	ctx, cancel := context.WithTimeout(context.Background(), DefaultBootTimeout)
	defer cancel()
	if _, err := WaitSerial(ctx, vm.SerialLog, "IRONFLOW-E2E booted-from-disk firmware=bios", nil); err != nil {
		t.Fatalf("the VM did not boot the Glance image from its disk: %v\n%s", err, embedded.Tail(vm.SerialLog, 3000))
	}
	t.Logf("glance: the VM booted the image from its disk %.1fs after node create", time.Since(begin).Seconds())
	want, err := fileSHA256(ref)
	if err != nil {
		t.Fatal(err)
	}
	got, err := prefixSHA256(vm.Disk, imageSize)
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Fatalf("the disk's first %d bytes hash %s, qemu-img convert -O raw of the Glance image %s", imageSize, got, want)
	}
	t.Logf("the disk equals qemu-img convert -O raw of the Glance image (sha256 %s)", want)
	// The agent fetched the image from the boot service's cache, which
	// fetched it from Glance once.
	if n := g.downloads.Load(); n != 1 {
		t.Errorf("Glance served the image's data %d times, want 1 (the image cache's download)", n)
	}

	// Glance's stored data is changed behind its back (no API client can):
	// what it serves no longer hashes to its os_hash_value.
	s.mustCLI(t, "node", "undeploy", uuid, "--wait", seconds(provideWait))
	bad, err := g.CreateImage("e2e-test-corrupt", "qcow2", data)
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(g.StoredFile(bad), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, err = f.WriteAt([]byte("corrupt"), int64(len(data)/2))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	s.mustCLI(t, "node", "set", uuid, "--instance-info", "image_source="+bad)
	failBegin := time.Now()
	if _, err := s.baremetal(t, "node", "deploy", uuid, "--wait", seconds(deployWait)); err == nil {
		t.Fatalf("a deploy of a Glance image whose data does not match its os_hash_value succeeded")
	}
	fields := s.nodeFields(t, uuid)
	lastErr, _ := fields["last_error"].(string)
	if fields["provision_state"] != "deploy failed" || !strings.Contains(lastErr, "checksum") {
		t.Fatalf("wrong os_hash_value: node %v, last_error %q; want deploy failed with the checksum error\n%s", fields["provision_state"], lastErr, s.logTail())
	}
	t.Logf("wrong os_hash_value: deploy failed %.1fs after it started: %s", time.Since(failBegin).Seconds(), lastErr)
	if n := g.downloads.Load(); n != 2 {
		t.Errorf("Glance served image data %d times for two images, want 2", n)
	}

	// The same VM deploys the same qcow2 from an OCI registry (Debian's
	// docker-registry, TLS and htpasswd, reached in the lab through a TCP
	// proxy), pushed in Ironic's layout under a multi-architecture index
	// (docs/oci-images.md), and boots it.
	deployOCIOnVM(t, lab, s, vm, uuid, data, ref)
}

// ociLabPort is where the lab reaches the registry.
const ociLabPort = 5443

func deployOCIOnVM(t *testing.T, lab *Lab, s *stack, vm *LabVM, uuid string, qcow2 []byte, ref string) {
	t.Helper()
	reg := registry.StartFor(t, net.ParseIP(LabAddress))
	l, err := listenInLab(lab, ociLabPort)
	if err != nil {
		t.Fatalf("registry proxy: %v", err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				up, err := net.Dial("tcp", reg.Host)
				if err != nil {
					return
				}
				defer up.Close()
				go func() { _, _ = io.Copy(up, c) }()
				_, _ = io.Copy(c, up)
			}()
		}
	}()
	reg.PushIndex(t, "e2e/disk", []string{"1"},
		registry.Disk{Arch: "arm64", DiskType: "qemu", MediaType: "application/octet-stream", Data: []byte("not this one")},
		registry.Disk{Arch: "amd64", DiskType: "qemu", MediaType: "application/octet-stream", Title: "e2e-test.qcow2", Data: qcow2})
	ca := filepath.Join(t.TempDir(), "registry-ca.pem")
	if err := os.WriteFile(ca, reg.CAPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	s.mustCLI(t, "node", "undeploy", uuid, "--wait", seconds(provideWait))
	src := fmt.Sprintf("oci://%s:%d/e2e/disk:1", LabAddress, ociLabPort)
	s.mustCLI(t, "node", "set", uuid, "--instance-info", "image_source="+src,
		"--instance-info", "image_pull_secret="+reg.User+":"+reg.Password, "--driver-info", "image_verify_ca="+ca,
		"--property", "cpu_arch=x86_64")
	before, _ := os.ReadFile(vm.SerialLog)
	const marker = "IRONFLOW-E2E booted-from-disk firmware=bios"
	begin := time.Now()
	if _, err := s.baremetal(t, "node", "deploy", uuid, "--wait", seconds(deployWait)); err != nil {
		s.failStep(t, uuid, vm.SerialLog, err)
	}
	t.Logf("oci: deploy reached active in %.1fs", time.Since(begin).Seconds())
	deadline := time.Now().Add(DefaultBootTimeout)
	for {
		now, _ := os.ReadFile(vm.SerialLog)
		if strings.Count(string(now), marker) > strings.Count(string(before), marker) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the VM did not boot the oci:// image from its disk\n%s", embedded.Tail(vm.SerialLog, 3000))
		}
		time.Sleep(time.Second)
	}
	want, err := fileSHA256(ref)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := prefixSHA256(vm.Disk, imageSize); err != nil || got != want {
		t.Fatalf("the disk's first %d bytes hash %s (%v), qemu-img convert -O raw of the pushed qcow2 %s", imageSize, got, err, want)
	}
	t.Logf("oci: the VM booted the image from its disk %.1fs after the deploy started; the disk equals the pushed qcow2 converted to raw", time.Since(begin).Seconds())
}
