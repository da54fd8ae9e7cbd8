package tests

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ironflow/ironflow/agent/sim"
	"github.com/ironflow/ironflow/embedded"
	"github.com/ironflow/ironflow/internal/testkit/devstack"
)

// glanceGroup is a worker and a boot service that know Glance.
type glanceGroup struct {
	glance    *devstack.Glance
	downloads atomic.Int64 // GET /v2/images/{id}/file at Glance
	bootURL   string
	// metrics is where the group's `ironflow pxe` serves its metrics.
	metrics string
}

// startGlanceGroup runs Debian's glance-api, a counting proxy in front of
// it, an `ironflow pxe` whose image cache downloads from that Glance and an
// `ironflow worker` that resolves Glance images.
func startGlanceGroup(t *testing.T, group string) *glanceGroup {
	t.Helper()
	if !devstack.GlanceAvailable() {
		t.Skip(devstack.ErrNoGlance)
	}
	g, err := devstack.StartGlance(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Stop)
	gg := &glanceGroup{glance: g}
	target, _ := url.Parse(g.URL)
	proxy := httputil.NewSingleHostReverseProxy(target)
	ps := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == "GET" && strings.HasSuffix(r.URL.Path, "/file") {
			gg.downloads.Add(1)
		}
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(ps.Close)

	port, err := embedded.FreePort("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	gg.bootURL = fmt.Sprintf("http://127.0.0.1:%d", port)
	if gg.metrics, _, err = freeMetricsAddresses(); err != nil {
		t.Fatal(err)
	}
	pxe, err := lab.Spawn("ironflow-pxe-"+group, append(lab.PXEArgs(), "--boot-listen", fmt.Sprintf("127.0.0.1:%d", port),
		"--image-cache-dir", t.TempDir(), "--image-cache-size", "64MiB", "--glance-url", ps.URL, "--metrics-listen", gg.metrics))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pxe.Kill)
	// The lab's worker knows no Glance: one that does stands in for it
	// (fake-hardware's BMC calls run in the workflow's worker, so the
	// group's own worker would not see them), until the test ends.
	lab.KillWorker()
	w, err := lab.Spawn("ironflow-worker", append(lab.WorkerArgs(), "--glance-url", ps.URL, "--boot-url", gg.bootURL))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		w.Kill()
		if err := lab.StartWorker(); err != nil {
			t.Errorf("restart the lab's worker: %v", err)
		}
	})
	waitFor(t, "the boot service", 30*time.Second, func() bool {
		return exec.Command("curl", "-sf", gg.bootURL+"/health").Run() == nil
	})
	return gg
}

func enrollGlanceNode(t *testing.T, name, mac string, ii map[string]any) string {
	t.Helper()
	img := &imageServer{}
	img.Server = httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(img.Close)
	uuid := enrollAgentNode(t, name, mac, img)
	ops := []map[string]any{
		{"op": "add", "path": "/automated_clean", "value": false},
		{"op": "remove", "path": "/instance_info/image_os_hash_algo"},
		{"op": "remove", "path": "/instance_info/image_os_hash_value"},
	}
	for k, v := range ii {
		ops = append(ops, map[string]any{"op": "add", "path": "/instance_info/" + k, "value": v})
	}
	if code, _ := call(t, "PATCH", "/v1/nodes/"+uuid, ops, nil); code != 200 {
		t.Fatalf("patch %s: %d", name, code)
	}
	moveTo(t, uuid, [2]string{"manage", "manageable"}, [2]string{"provide", "available"})
	return uuid
}

func deployAndWait(t *testing.T, uuid, state string) node {
	t.Helper()
	if code, _ := call(t, "PUT", "/v1/nodes/"+uuid+"/states/provision", map[string]any{"target": "active"}, nil); code != 202 {
		t.Fatalf("deploy %s: %d", uuid, code)
	}
	return waitState(t, uuid, state, 3*time.Minute)
}

// TestDeployGlanceImagesThroughTheCache deploys a Glance image (by UUID and
// by glance://UUID) on ten nodes at once with simulated agents through the
// image cache of the boot service: all go active and Glance serves the
// image's data once. A deactivated image and a missing one fail the deploy before any
// agent boots, with Ironic's reason in last_error; an image whose stored
// data no longer matches Glance's os_hash_value fails with the checksum
// error.
func TestDeployGlanceImagesThroughTheCache(t *testing.T) {
	gg := startGlanceGroup(t, "glance-rack")
	disk := newImageServer(t, 8<<20) // a whole-disk image with an MBR
	disk.Close()
	id, err := gg.glance.CreateImage("disk", "raw", disk.data)
	if err != nil {
		t.Fatal(err)
	}

	var machines []*simMachine
	var nodes []string
	for i := range 10 {
		src := map[bool]string{true: id, false: "glance://" + id}[i%2 == 0]
		mac := fmt.Sprintf("52:54:00:6a:00:%02x", i)
		uuid := enrollGlanceNode(t, fmt.Sprintf("glance-node-%d", i), mac, map[string]any{"image_source": src})
		machines = append(machines, startSimMachine(t, uuid, []string{mac}, sim.Config{}))
		nodes = append(nodes, uuid)
	}
	for _, uuid := range nodes {
		if code, _ := call(t, "PUT", "/v1/nodes/"+uuid+"/states/provision", map[string]any{"target": "active"}, nil); code != 202 {
			t.Fatalf("deploy %s: %d", uuid, code)
		}
	}
	for _, uuid := range nodes {
		waitState(t, uuid, "active", 3*time.Minute)
	}
	if n := gg.downloads.Load(); n != 1 {
		t.Fatalf("Glance served the image %d times for ten deploys at once, want 1", n)
	}
	// The boot service's metrics say the same (docs/metrics.md): one
	// download of the image, ten deploys' worth of it served.
	if n := seriesAt(t, gg.metrics, "ironflow_image_cache_downloaded_bytes_total"); n != float64(len(disk.data)) {
		t.Errorf("ironflow_image_cache_downloaded_bytes_total = %v, want the image's %d bytes once", n, len(disk.data))
	}
	if n := seriesAt(t, gg.metrics, "ironflow_image_cache_requests_total"); n < 10 {
		t.Errorf("ironflow_image_cache_requests_total = %v, want one a deploy at least", n)
	}
	if n := seriesAt(t, gg.metrics, "ironflow_boot_http_sent_bytes_total", "kind=cache"); n < float64(10*len(disk.data)) {
		t.Errorf("ironflow_boot_http_sent_bytes_total{kind=cache} = %v, want ten images' %d bytes at least", n, 10*len(disk.data))
	}
	for i, m := range machines {
		// The agent verified Glance's sha512 over what it wrote.
		if a := m.current(); a == nil || a.Hardware().Disks()[0].BytesWritten() < int64(len(disk.data)) {
			t.Fatalf("node %d: the Glance image was not written to the simulated disk", i)
		}
	}

	// Refused before anything boots.
	deactivated, err := gg.glance.CreateImage("deactivated", "raw", disk.data)
	if err != nil {
		t.Fatal(err)
	}
	if err := gg.glance.Deactivate(deactivated); err != nil {
		t.Fatal(err)
	}
	const missing = "6f1d0a0e-0000-4000-8000-0000000000aa"
	for i, c := range []struct{ src, want string }{
		{deactivated, "Image " + deactivated + " is unacceptable: The image is required to be in an active state (it is deactivated)"},
		{missing, "Image " + missing + " could not be found"},
	} {
		mac := fmt.Sprintf("52:54:00:6a:01:%02x", i)
		uuid := enrollGlanceNode(t, fmt.Sprintf("glance-refused-%d", i), mac, map[string]any{"image_source": c.src})
		m := startSimMachine(t, uuid, []string{mac}, sim.Config{})
		n := deployAndWait(t, uuid, "deploy failed")
		if !strings.Contains(deref(n.LastError), c.want) {
			t.Errorf("%s: last_error %q, want it to contain %q", c.src, deref(n.LastError), c.want)
		}
		if m.boots() != 0 {
			t.Errorf("%s: the agent booted %d times for a refused image", c.src, m.boots())
		}
	}

	// Glance's data no longer matches its os_hash_value: the agent's
	// checksum check (direct) or the cache's (http) fails the deploy.
	for i, ds := range []string{"direct", "http"} {
		bad, err := gg.glance.CreateImage("bad-"+ds, "raw", disk.data)
		if err != nil {
			t.Fatal(err)
		}
		f, err := os.OpenFile(gg.glance.StoredFile(bad), os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		f.WriteAt([]byte("corrupt"), 4096)
		f.Close()
		mac := fmt.Sprintf("52:54:00:6a:02:%02x", i)
		uuid := enrollGlanceNode(t, "glance-bad-hash-"+ds, mac, map[string]any{"image_source": bad, "image_download_source": ds})
		startSimMachine(t, uuid, []string{mac}, sim.Config{})
		n := deployAndWait(t, uuid, "deploy failed")
		if le := deref(n.LastError); !strings.Contains(le, "checksum") {
			t.Errorf("wrong os_hash_value, image_download_source %s: last_error %q, want the checksum error", ds, le)
		} else {
			t.Logf("image_download_source %s: %s", ds, le)
		}
	}
}

// bootFileRecorder is a simulated agent's download client that keeps the
// sha256 of every boot file (kernel, ramdisk) it fetches from the image
// cache, by URL.
type bootFileRecorder struct {
	mu   sync.Mutex
	sums map[string]string
}

func (b *bootFileRecorder) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := http.DefaultTransport.RoundTrip(r)
	if err != nil || !strings.HasSuffix(r.URL.Path, "/kernel") && !strings.HasSuffix(r.URL.Path, "/ramdisk") {
		return resp, err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(body)
	b.mu.Lock()
	b.sums[r.URL.String()] = fmt.Sprintf("%d %s", resp.StatusCode, hex.EncodeToString(sum[:]))
	b.mu.Unlock()
	resp.Body = io.NopCloser(bytes.NewReader(body))
	return resp, nil
}

func (b *bootFileRecorder) get(url string) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.sums[url]
}

// TestGlancePartitionImageKernelAndRamdisk deploys a Glance partition image
// whose kernel_id and ramdisk_id properties name two more Glance images (aki
// and ari, as Ironic's documentation uploads them) through a simulated
// agent: the worker maps them to instance_info kernel and ramdisk as
// Ironic's build_instance_info_for_deploy does, the agent is told the
// image cache's URLs for them, and install_bootloader fetches from those
// URLs exactly the bytes uploaded to Glance; the node goes active. A
// kernel_id naming no image fails the deploy before the agent boots.
func TestGlancePartitionImageKernelAndRamdisk(t *testing.T) {
	gg := startGlanceGroup(t, "glance-partition")
	upload := func(spec devstack.ImageSpec) (string, string) {
		t.Helper()
		id, err := gg.glance.Create(spec)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(spec.Data)
		return id, hex.EncodeToString(sum[:])
	}
	blob := func(tag string, n int) []byte {
		b := bytes.Repeat([]byte(tag), n/len(tag)+1)[:n]
		copy(b, fmt.Sprintf("%s %d", tag, time.Now().UnixNano()))
		return b
	}
	kernel, kernelSum := upload(devstack.ImageSpec{Name: "vmlinuz", DiskFormat: "aki", ContainerFormat: "aki", Data: blob("kernel ", 300<<10)})
	ramdisk, ramdiskSum := upload(devstack.ImageSpec{Name: "initrd", DiskFormat: "ari", ContainerFormat: "ari", Data: blob("ramdisk ", 700<<10)})
	root, _ := upload(devstack.ImageSpec{Name: "root-fs", DiskFormat: "raw", Data: blob("root ", 2<<20),
		Properties: map[string]string{"kernel_id": kernel, "ramdisk_id": ramdisk}})

	rec := &bootFileRecorder{sums: map[string]string{}}
	uuid := enrollGlanceNode(t, "glance-partition", "52:54:00:6a:03:01", map[string]any{
		"image_source": root, "root_gb": 1, "capabilities": map[string]any{"boot_mode": "uefi"}})
	startSimMachine(t, uuid, []string{"52:54:00:6a:03:01"}, sim.Config{DiskSize: 8 << 30, KeepWrites: true,
		DownloadClient: &http.Client{Transport: rec}})
	n := deployAndWait(t, uuid, "active")
	for part, want := range map[string]string{"kernel": kernelSum, "ramdisk": ramdiskSum} {
		url := gg.bootURL + "/cache/" + uuid + "/" + part
		if got := rec.get(url); got != "200 "+want {
			t.Errorf("%s: the agent fetched %s as %q, want 200 and the uploaded image's sha256 %s (fetched: %v)", part, url, got, want, rec.sums)
		}
	}
	t.Logf("partition image from Glance: active, kernel and ramdisk fetched from the cache; provision_state %s", n.ProvisionState)

	const missing = "6f1d0a0e-0000-4000-8000-0000000000cc"
	bad, _ := upload(devstack.ImageSpec{Name: "root-fs-no-kernel", DiskFormat: "raw", Data: blob("root ", 1<<20),
		Properties: map[string]string{"kernel_id": missing, "ramdisk_id": ramdisk}})
	uuid = enrollGlanceNode(t, "glance-partition-no-kernel", "52:54:00:6a:03:02", map[string]any{
		"image_source": bad, "root_gb": 1, "capabilities": map[string]any{"boot_mode": "uefi"}})
	m := startSimMachine(t, uuid, []string{"52:54:00:6a:03:02"}, sim.Config{})
	n = deployAndWait(t, uuid, "deploy failed")
	if want := "kernel: Image " + missing + " could not be found"; !strings.Contains(deref(n.LastError), want) {
		t.Errorf("kernel_id naming no image: last_error %q, want it to contain %q", deref(n.LastError), want)
	}
	if m.boots() != 0 {
		t.Errorf("the agent booted %d times for a partition image whose kernel is missing", m.boots())
	}
}
