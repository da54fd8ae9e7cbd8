package tests

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	commonpb "go.temporal.io/api/common/v1"
	enumspb "go.temporal.io/api/enums/v1"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/ironflow/ironflow/agent/sim"
	"github.com/ironflow/ironflow/embedded"
	"github.com/ironflow/ironflow/internal/testkit/registry"
	"github.com/ironflow/ironflow/workflows"
)

// ociGroup is an `ironflow pxe` with an image cache and metrics, and a
// worker pointing agents at it, in place of the lab's worker.
type ociGroup struct {
	bootURL, metrics, pxeLog string
}

func startOCIGroup(t *testing.T, group string) *ociGroup {
	t.Helper()
	port, err := embedded.FreePort("127.0.0.1")
	if err != nil {
		t.Fatal(err)
	}
	g := &ociGroup{bootURL: fmt.Sprintf("http://127.0.0.1:%d", port)}
	if g.metrics, _, err = freeMetricsAddresses(); err != nil {
		t.Fatal(err)
	}
	name := "ironflow-pxe-" + group
	g.pxeLog = filepath.Join(filepath.Dir(lab.WorkerLog()), name+".log")
	pxe, err := lab.Spawn(name, append(lab.PXEArgs(), "--boot-listen", fmt.Sprintf("127.0.0.1:%d", port),
		"--image-cache-dir", t.TempDir(), "--image-cache-size", "256MiB", "--metrics-listen", g.metrics))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pxe.Kill)
	lab.KillWorker()
	w, err := lab.Spawn("ironflow-worker", append(lab.WorkerArgs(), "--boot-url", g.bootURL))
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
		return exec.Command("curl", "-sf", g.bootURL+"/health").Run() == nil
	})
	return g
}

// enrollOCINode enrolls a direct-deploy node of architecture arch whose
// image_source is src, trusting caFile for the registry, with the pull
// secret secret ("" for none).
func enrollOCINode(t *testing.T, name, mac, arch, src, caFile, secret string) string {
	t.Helper()
	img := &imageServer{}
	img.Server = httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(img.Close)
	uuid := enrollAgentNode(t, name, mac, img)
	ops := []map[string]any{
		{"op": "add", "path": "/automated_clean", "value": false},
		{"op": "add", "path": "/properties/cpu_arch", "value": arch},
		{"op": "add", "path": "/driver_info/image_verify_ca", "value": caFile},
		{"op": "add", "path": "/instance_info/image_source", "value": src},
		{"op": "remove", "path": "/instance_info/image_os_hash_algo"},
		{"op": "remove", "path": "/instance_info/image_os_hash_value"},
	}
	if secret != "" {
		ops = append(ops, map[string]any{"op": "add", "path": "/instance_info/image_pull_secret", "value": secret})
	}
	if code, _ := call(t, "PATCH", "/v1/nodes/"+uuid, ops, nil); code != 200 {
		t.Fatalf("patch %s: %d", name, code)
	}
	moveTo(t, uuid, [2]string{"manage", "manageable"}, [2]string{"provide", "available"})
	return uuid
}

// validateAndDeploy checks that validate of the first node passes (it
// resolves the reference), then asks every node to deploy.
func validateAndDeploy(t *testing.T, nodes []string) {
	t.Helper()
	var v map[string]map[string]any
	if code, _ := call(t, "GET", "/v1/nodes/"+nodes[0]+"/validate", nil, &v); code != 200 || v["deploy"]["result"] != true {
		t.Fatalf("validate: %d %v", code, v["deploy"])
	}
	for _, uuid := range nodes {
		if code, _ := call(t, "PUT", "/v1/nodes/"+uuid+"/states/provision", map[string]any{"target": "active"}, nil); code != 202 {
			t.Fatalf("deploy %s: %d", uuid, code)
		}
	}
}

// decodedHistory is every event of the node's deploy workflow as text,
// with every payload decoded with the lab's key: what anyone holding the
// key (the Web UI's codec server) reads.
func decodedHistory(t *testing.T, uuid string) (text string, payloads int) {
	t.Helper()
	codec := labCodec(t)
	var b strings.Builder
	it := temporalClient(t).GetWorkflowHistory(context.Background(), workflows.WorkflowID(uuid), "", false, enumspb.HISTORY_EVENT_FILTER_TYPE_ALL_EVENT)
	for it.HasNext() {
		ev, err := it.Next()
		if err != nil {
			t.Fatal(err)
		}
		b.WriteString(ev.String())
		var walk func(m protoreflect.Message)
		walk = func(m protoreflect.Message) {
			if p, ok := m.Interface().(*commonpb.Payload); ok {
				dec, err := codec.Decode([]*commonpb.Payload{proto.Clone(p).(*commonpb.Payload)})
				if err == nil {
					payloads++
					b.Write(dec[0].GetData())
					b.WriteByte('\n')
				}
				return
			}
			m.Range(func(fd protoreflect.FieldDescriptor, v protoreflect.Value) bool {
				switch {
				case fd.IsList() && fd.Message() != nil:
					for i := 0; i < v.List().Len(); i++ {
						walk(v.List().Get(i).Message())
					}
				case fd.IsMap() && fd.MapValue().Message() != nil:
					v.Map().Range(func(_ protoreflect.MapKey, mv protoreflect.Value) bool { walk(mv.Message()); return true })
				case !fd.IsList() && !fd.IsMap() && fd.Message() != nil:
					walk(v.Message())
				}
				return true
			})
		}
		walk(ev.ProtoReflect())
	}
	return b.String(), payloads
}

// TestDeployOCIImages deploys oci:// images from Debian's docker-registry
// (TLS with the node's image_verify_ca, htpasswd auth) holding a
// multi-architecture index in Ironic's layout, with simulated agents on the
// real stack through the boot service's image cache: ten nodes by two tags
// and one by manifest digest go active with the layer downloaded once;
// a wrong digest, a missing architecture, a bad and a missing pull secret
// fail validate and the deploy before any agent boots, with Ironic's text;
// the pull secret shows in no API answer, workflow history or log.
func TestDeployOCIImages(t *testing.T) {
	reg := registry.Start(t)
	caFile := filepath.Join(t.TempDir(), "registry-ca.pem")
	if err := os.WriteFile(caFile, reg.CAPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	disk := newImageServer(t, 4<<20) // a whole-disk raw image with an MBR
	disk.Close()
	arm := newImageServer(t, 1<<20)
	arm.Close()
	p := reg.PushIndex(t, "ironflow/disk", []string{"1.0", "stable"},
		registry.Disk{Arch: "amd64", DiskType: "raw", MediaType: "application/octet-stream", Title: "disk.x86_64.raw", Data: disk.data},
		registry.Disk{Arch: "arm64", DiskType: "raw", MediaType: "application/octet-stream", Title: "disk.aarch64.raw", Data: arm.data},
	)
	g := startOCIGroup(t, "oci")
	base := "oci://" + reg.Host + "/ironflow/disk"
	// A container tool's config.json "auth" value: base64 of user:password.
	secret := base64.StdEncoding.EncodeToString([]byte(reg.User + ":" + reg.Password))

	start := time.Now()
	var nodes []string
	var machines []*simMachine
	for i := range 11 {
		src := map[int]string{0: base + ":1.0", 1: base + ":stable", 2: base + "@" + p.Manifests[0].String()}[min(i%3, 2)]
		if i == 10 {
			src = base + "@" + p.Manifests[0].String()
		}
		mac := fmt.Sprintf("52:54:00:0c:00:%02x", i)
		uuid := enrollOCINode(t, fmt.Sprintf("oci-node-%d", i), mac, "x86_64", src, caFile, map[bool]string{true: secret, false: reg.User + ":" + reg.Password}[i%2 == 0])
		machines = append(machines, startSimMachine(t, uuid, []string{mac}, sim.Config{}))
		nodes = append(nodes, uuid)
	}
	// validate resolves the reference.
	validateAndDeploy(t, nodes)
	var v map[string]map[string]any
	for _, uuid := range nodes {
		n := waitState(t, uuid, "active", 3*time.Minute)
		pin, _ := n.DriverInternalInfo["oci_image"].(map[string]any)
		if pin["layer"] != p.Layers[0].String() || pin["manifest"] != base+"@"+p.Manifests[0].String() {
			t.Errorf("node %s: driver_internal_info/oci_image %v, want the amd64 manifest and layer", uuid, pin)
		}
		if s := n.InstanceInfo["image_pull_secret"]; s != "******" {
			t.Errorf("node %s: the API shows image_pull_secret as %v", uuid, s)
		}
	}
	t.Logf("eleven oci:// deploys active in %s", time.Since(start).Round(time.Second))
	if n := seriesAt(t, g.metrics, "ironflow_image_cache_downloaded_bytes_total"); n != float64(len(disk.data)) {
		t.Errorf("ironflow_image_cache_downloaded_bytes_total = %v, want the layer's %d bytes once for two tags and a digest", n, len(disk.data))
	}
	for i, m := range machines {
		if a := m.current(); a == nil || a.Hardware().Disks()[0].BytesWritten() < int64(len(disk.data)) {
			t.Fatalf("node %d: the image was not written to the simulated disk", i)
		}
	}

	// Refused by validate and before anything boots, with Ironic's texts.
	missing := "sha256:" + strings.Repeat("0", 64)
	for i, c := range []struct{ name, arch, src, secret, want string }{
		{"wrong-digest", "x86_64", base + "@" + missing, secret, "Image " + base + "@" + missing + " could not be found."},
		{"missing-arch", "ppc64le", base + ":1.0", secret, "the image index has no disk image for architecture ppc64le"},
		{"bad-secret", "x86_64", base + ":1.0", reg.User + ":wrong-password", "requires authentication which has not been provided"},
		{"no-secret", "x86_64", base + ":1.0", "", "requires authentication which has not been provided"},
		{"unknown-tag", "x86_64", base + ":9.9", secret, "Image tag " + base + ":9.9 could not be found, available tags are 1.0, stable"},
	} {
		mac := fmt.Sprintf("52:54:00:0c:01:%02x", i)
		uuid := enrollOCINode(t, "oci-"+c.name, mac, c.arch, c.src, caFile, c.secret)
		if code, _ := call(t, "GET", "/v1/nodes/"+uuid+"/validate", nil, &v); code != 200 || v["deploy"]["result"] != false || !strings.Contains(fmt.Sprint(v["deploy"]["reason"]), c.want) {
			t.Errorf("%s: validate %d %v, want deploy false with %q", c.name, code, v["deploy"], c.want)
		}
		m := startSimMachine(t, uuid, []string{mac}, sim.Config{})
		n := deployAndWait(t, uuid, "deploy failed")
		if le := deref(n.LastError); !strings.Contains(le, c.want) {
			t.Errorf("%s: last_error %q, want it to contain %q", c.name, le, c.want)
		}
		if m.boots() != 0 {
			t.Errorf("%s: the agent booted %d times for a refused image", c.name, m.boots())
		}
	}

	// A tag moved after the deploy started: the manifest resolved when it
	// started (driver_internal_info/oci_image) is what the cache and the
	// agent fetch; the moved tag's layer is never downloaded.
	reg.PushIndex(t, "ironflow/disk", []string{"moving"},
		registry.Disk{Arch: "amd64", DiskType: "raw", MediaType: "application/octet-stream", Data: disk.data})
	moved := newImageServer(t, 2<<20)
	moved.Close()
	mac := "52:54:00:0c:02:00"
	uuid := enrollOCINode(t, "oci-moving-tag", mac, "x86_64", base+":moving", caFile, secret)
	m := startSimMachine(t, uuid, []string{mac}, sim.Config{})
	m.paused.Store(true)
	if code, _ := call(t, "PUT", "/v1/nodes/"+uuid+"/states/provision", map[string]any{"target": "active"}, nil); code != 202 {
		t.Fatalf("deploy %s: %d", uuid, code)
	}
	waitFor(t, "the deploy to pin the tag's manifest", time.Minute, func() bool {
		return getNode(t, uuid).DriverInternalInfo["oci_image"] != nil
	})
	p2 := reg.PushIndex(t, "ironflow/disk", []string{"moving"},
		registry.Disk{Arch: "amd64", DiskType: "raw", MediaType: "application/octet-stream", Data: moved.data})
	m.paused.Store(false)
	n := waitState(t, uuid, "active", 3*time.Minute)
	if pin, _ := n.DriverInternalInfo["oci_image"].(map[string]any); pin["layer"] != p.Layers[0].String() || pin["source"] != base+":moving" {
		t.Errorf("moved tag: driver_internal_info/oci_image %v, want the layer %s resolved at the start (the tag now has %s)", pin, p.Layers[0], p2.Layers[0])
	}
	if got := seriesAt(t, g.metrics, "ironflow_image_cache_downloaded_bytes_total"); got != float64(len(disk.data)) {
		t.Errorf("moved tag: the cache downloaded %v bytes in all, want only the first layer's %d", got, len(disk.data))
	}
	if a := m.current(); a == nil || a.Hardware().Disks()[0].BytesWritten() < int64(len(disk.data)) {
		t.Errorf("moved tag: the agent did not write the %d bytes of the image resolved at the start", len(disk.data))
	}

	// A tag moved between node validate and the deploy: the manifest
	// validate resolved is deployed, and the node's history says so and
	// where the tag points now. The moved tag's layer is never fetched.
	reg.PushIndex(t, "ironflow/disk", []string{"validated"},
		registry.Disk{Arch: "amd64", DiskType: "raw", MediaType: "application/octet-stream", Data: disk.data})
	mac = "52:54:00:0c:02:01"
	uuid = enrollOCINode(t, "oci-validated-tag", mac, "x86_64", base+":validated", caFile, secret)
	if code, _ := call(t, "GET", "/v1/nodes/"+uuid+"/validate", nil, &v); code != 200 || v["deploy"]["result"] != true {
		t.Fatalf("validate before the tag moves: %d %v", code, v["deploy"])
	}
	if pin, _ := getNode(t, uuid).DriverInternalInfo["oci_image"].(map[string]any); pin["pinned_by"] != "validate" || pin["layer"] != p.Layers[0].String() {
		t.Fatalf("after validate: driver_internal_info/oci_image %v, want validate's pin of layer %s", pin, p.Layers[0])
	}
	p3 := reg.PushIndex(t, "ironflow/disk", []string{"validated"},
		registry.Disk{Arch: "amd64", DiskType: "raw", MediaType: "application/octet-stream", Data: moved.data})
	m = startSimMachine(t, uuid, []string{mac}, sim.Config{})
	n = deployAndWait(t, uuid, "active")
	if pin, _ := n.DriverInternalInfo["oci_image"].(map[string]any); pin["layer"] != p.Layers[0].String() || pin["pinned_by"] != "deploy" {
		t.Errorf("validated tag: driver_internal_info/oci_image %v, want the layer %s validate resolved (the tag now has %s)", pin, p.Layers[0], p3.Layers[0])
	}
	hist := mustCLI(t, "node", "history", "list", uuid, "-f", "value", "-c", "Description of the event")
	if !strings.Contains(hist, "as node validate resolved it at") || !strings.Contains(hist, "the reference now resolves to manifest") ||
		!strings.Contains(hist, p3.Manifests[0].String()) {
		t.Errorf("validated tag: the history does not say which manifest was deployed and where the tag points now:\n%s", hist)
	}
	if got := seriesAt(t, g.metrics, "ironflow_image_cache_downloaded_bytes_total"); got != float64(len(disk.data)) {
		t.Errorf("validated tag: the cache downloaded %v bytes in all, want only the validated layer's %d", got, len(disk.data))
	}
	if a := m.current(); a == nil || a.Hardware().Disks()[0].BytesWritten() < int64(len(disk.data)) {
		t.Errorf("validated tag: the agent did not write the %d bytes of the validated image", len(disk.data))
	}

	// A partition image whose kernel and ramdisk are artifacts named by
	// manifest digest: the agent fetches all three from the cache.
	blob := func(tag string, n int) []byte {
		b := bytes.Repeat([]byte(tag), n/len(tag)+1)[:n]
		copy(b, fmt.Sprintf("%s %d", tag, time.Now().UnixNano()))
		return b
	}
	kernel, ramdisk := blob("kernel ", 300<<10), blob("ramdisk ", 700<<10)
	pk := reg.PushIndex(t, "ironflow/boot", []string{"kernel"}, registry.Disk{Arch: "amd64", MediaType: "application/octet-stream", Title: "vmlinuz", Data: kernel})
	pr := reg.PushIndex(t, "ironflow/boot", []string{"ramdisk"}, registry.Disk{Arch: "amd64", MediaType: "application/octet-stream", Title: "initrd", Data: ramdisk})
	reg.PushIndex(t, "ironflow/rootfs", []string{"1"}, registry.Disk{Arch: "amd64", DiskType: "raw", MediaType: "application/octet-stream", Data: blob("root ", 2<<20)})
	bootRef := "oci://" + reg.Host + "/ironflow/boot"
	for i, c := range []struct{ kernel, want string }{
		{bootRef + "@" + pk.Manifests[0].String(), ""},
		{bootRef + ":kernel", "The requested image (" + bootRef + ":kernel) was not specific."},
	} {
		mac := fmt.Sprintf("52:54:00:0c:03:%02x", i)
		uuid := enrollOCINode(t, fmt.Sprintf("oci-partition-%d", i), mac, "x86_64", "oci://"+reg.Host+"/ironflow/rootfs:1", caFile, secret)
		if code, _ := call(t, "PATCH", "/v1/nodes/"+uuid, []map[string]any{
			{"op": "add", "path": "/instance_info/image_type", "value": "partition"},
			{"op": "add", "path": "/instance_info/kernel", "value": c.kernel},
			{"op": "add", "path": "/instance_info/ramdisk", "value": bootRef + "@" + pr.Manifests[0].String()},
			{"op": "add", "path": "/instance_info/root_gb", "value": 1},
			{"op": "add", "path": "/instance_info/capabilities", "value": map[string]any{"boot_mode": "uefi"}},
		}, nil); code != 200 {
			t.Fatalf("patch partition node: %d", code)
		}
		rec := &bootFileRecorder{sums: map[string]string{}}
		m := startSimMachine(t, uuid, []string{mac}, sim.Config{DiskSize: 8 << 30, KeepWrites: true, DownloadClient: &http.Client{Transport: rec}})
		if c.want != "" {
			if code, _ := call(t, "GET", "/v1/nodes/"+uuid+"/validate", nil, &v); code != 200 || !strings.Contains(fmt.Sprint(v["deploy"]["reason"]), c.want) {
				t.Errorf("kernel by tag: validate %v, want %q", v["deploy"], c.want)
			}
			n := deployAndWait(t, uuid, "deploy failed")
			if le := deref(n.LastError); !strings.Contains(le, "kernel: "+c.want) || m.boots() != 0 {
				t.Errorf("kernel by tag: last_error %q after %d boots, want %q before any", le, m.boots(), "kernel: "+c.want)
			}
			continue
		}
		deployAndWait(t, uuid, "active")
		for part, data := range map[string][]byte{"kernel": kernel, "ramdisk": ramdisk} {
			sum := sha256.Sum256(data)
			url := g.bootURL + "/cache/" + uuid + "/" + part
			if got := rec.get(url); got != "200 "+hex.EncodeToString(sum[:]) {
				t.Errorf("%s: the agent fetched %s as %q, want 200 and the pushed layer's sha256 (fetched: %v)", part, url, got, rec.sums)
			}
		}
	}

	// The pull secret (either form) is in no history, no log.
	for _, uuid := range append(nodes[:2:2], nodes[len(nodes)-1]) {
		h, payloads := decodedHistory(t, uuid)
		if strings.Contains(h, reg.Password) || strings.Contains(h, secret) {
			t.Errorf("node %s: the pull secret is in the workflow history", uuid)
		}
		if payloads < 10 || !strings.Contains(h, uuid) {
			t.Errorf("node %s: the history read decoded %d payloads: the check read nothing", uuid, payloads)
		}
	}
	// A registry that does not answer: validate says so, and the deploy,
	// after the hardware call's retries, fails before the agent boots.
	reg.Stop()
	mac = "52:54:00:0c:04:00"
	uuid = enrollOCINode(t, "oci-registry-down", mac, "x86_64", base+":1.0", caFile, secret)
	const down = "Resource temporarily unavailable, please retry."
	if code, _ := call(t, "GET", "/v1/nodes/"+uuid+"/validate", nil, &v); code != 200 || v["deploy"]["result"] != false || v["deploy"]["reason"] != down {
		t.Errorf("registry down: validate %d %v, want deploy false with %q", code, v["deploy"], down)
	}
	m = startSimMachine(t, uuid, []string{mac}, sim.Config{})
	downAt := time.Now()
	if n := deployAndWait(t, uuid, "deploy failed"); !strings.Contains(deref(n.LastError), down) || m.boots() != 0 {
		t.Errorf("registry down: last_error %q after %d boots, want %q before any", deref(n.LastError), m.boots(), down)
	}
	t.Logf("registry down: deploy failed after %s of retries", time.Since(downAt).Round(time.Second))

	for _, log := range []string{lab.WorkerLog(), lab.APILog(), g.pxeLog} {
		b, err := os.ReadFile(log)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), reg.Password) || strings.Contains(string(b), secret) {
			t.Errorf("%s holds the pull secret", log)
		}
	}
}

// TestDeployOCIImageDirect deploys an oci:// image with
// image_download_source=direct: the agent fetches the layer from the
// registry itself (Debian's docker-registry with token authentication),
// with a short-lived bearer token the worker asked the registry's token
// service for, never the pull secret; the image cache downloads nothing,
// and no token is in any history or log. A registry that takes the pull
// secret itself (basic auth) is refused for direct download by validate
// and by the deploy, before the agent boots, with the way out in the
// message.
func TestDeployOCIImageDirect(t *testing.T) {
	reg := registry.StartTokenAuth(t)
	caFile := filepath.Join(t.TempDir(), "registry-ca.pem")
	if err := os.WriteFile(caFile, reg.CAPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	disk := newImageServer(t, 3<<20)
	disk.Close() // the image is in the registry only
	p := reg.PushIndex(t, "ironflow/direct", []string{"1.0"},
		registry.Disk{Arch: "amd64", DiskType: "raw", MediaType: "application/octet-stream", Title: "disk.x86_64.raw", Data: disk.data})
	g := startOCIGroup(t, "oci-direct")
	base := "oci://" + reg.Host + "/ironflow/direct"
	direct := func(uuid string) {
		t.Helper()
		if code, _ := call(t, "PATCH", "/v1/nodes/"+uuid, []map[string]any{
			{"op": "add", "path": "/instance_info/image_download_source", "value": "direct"}}, nil); code != 200 {
			t.Fatalf("patch %s: %d", uuid, code)
		}
	}
	var nodes []string
	var machines []*simMachine
	for i := range 2 {
		mac := fmt.Sprintf("52:54:00:0c:05:%02x", i)
		uuid := enrollOCINode(t, fmt.Sprintf("oci-direct-%d", i), mac, "x86_64", base+":1.0", caFile, reg.User+":"+reg.Password)
		direct(uuid)
		machines = append(machines, startSimMachine(t, uuid, []string{mac}, sim.Config{}))
		nodes = append(nodes, uuid)
	}
	validateAndDeploy(t, nodes)
	var v map[string]map[string]any
	for i, uuid := range nodes {
		n := waitState(t, uuid, "active", 3*time.Minute)
		if pin, _ := n.DriverInternalInfo["oci_image"].(map[string]any); pin["layer"] != p.Layers[0].String() {
			t.Errorf("node %s: driver_internal_info/oci_image %v, want layer %s", uuid, pin, p.Layers[0])
		}
		// The registry refuses a request without a valid bearer token, and
		// the bytes are nowhere else: the agent fetched them from the
		// registry with the token.
		if a := machines[i].current(); a == nil || a.Hardware().Disks()[0].BytesWritten() < int64(len(disk.data)) {
			t.Errorf("node %s: the image was not written to the simulated disk", uuid)
		}
	}
	if n := seriesAt(t, g.metrics, "ironflow_image_cache_downloaded_bytes_total"); n != 0 {
		t.Errorf("ironflow_image_cache_downloaded_bytes_total = %v, want 0: the agents fetch directly", n)
	}
	issued := reg.Tokens.IssuedTokens()
	if len(issued) == 0 {
		t.Fatal("the token service issued no token")
	}
	for _, tok := range issued {
		if tok.Expires.Sub(time.Now()) > reg.Tokens.Lifetime {
			t.Errorf("a token lives until %s, beyond the service's %s", tok.Expires, reg.Tokens.Lifetime)
		}
	}
	// No token, no pull secret in a history or a log.
	for _, uuid := range nodes {
		h, payloads := decodedHistory(t, uuid)
		if payloads < 10 || !strings.Contains(h, uuid) {
			t.Fatalf("node %s: the history read decoded %d payloads: the check read nothing", uuid, payloads)
		}
		if strings.Contains(h, reg.Password) {
			t.Errorf("node %s: the pull secret is in the workflow history", uuid)
		}
		for _, tok := range issued {
			if strings.Contains(h, tok.Token) || strings.Contains(h, base64.StdEncoding.EncodeToString([]byte("Bearer "+tok.Token))) {
				t.Errorf("node %s: a registry token is in the workflow history", uuid)
			}
		}
	}
	for _, log := range []string{lab.WorkerLog(), lab.APILog(), g.pxeLog} {
		b, err := os.ReadFile(log)
		if err != nil {
			t.Fatal(err)
		}
		for _, tok := range issued {
			if strings.Contains(string(b), tok.Token) || strings.Contains(string(b), reg.Password) {
				t.Errorf("%s holds a registry token or the pull secret", log)
			}
		}
	}

	// A registry with basic auth: the agent would have to hold the pull
	// secret itself, which direct download refuses.
	basic := registry.Start(t)
	basicCA := filepath.Join(t.TempDir(), "basic-ca.pem")
	if err := os.WriteFile(basicCA, basic.CAPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	basic.PushIndex(t, "ironflow/direct", []string{"1.0"},
		registry.Disk{Arch: "amd64", DiskType: "raw", MediaType: "application/octet-stream", Data: disk.data})
	mac := "52:54:00:0c:05:10"
	uuid := enrollOCINode(t, "oci-direct-basic", mac, "x86_64", "oci://"+basic.Host+"/ironflow/direct:1.0", basicCA, basic.User+":"+basic.Password)
	direct(uuid)
	const want = "image_download_source=direct: the registry takes the pull secret itself (basic auth), not short-lived bearer tokens; use image_download_source=http"
	if code, _ := call(t, "GET", "/v1/nodes/"+uuid+"/validate", nil, &v); code != 200 || v["deploy"]["result"] != false || !strings.Contains(fmt.Sprint(v["deploy"]["reason"]), want) {
		t.Errorf("basic auth, direct: validate %d %v, want deploy false with %q", code, v["deploy"], want)
	}
	m := startSimMachine(t, uuid, []string{mac}, sim.Config{})
	if n := deployAndWait(t, uuid, "deploy failed"); !strings.Contains(deref(n.LastError), want) || m.boots() != 0 {
		t.Errorf("basic auth, direct: last_error %q after %d boots, want %q before any", deref(n.LastError), m.boots(), want)
	}
}
