package apiserver

import (
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/ironflow/ironflow/glance"
	"github.com/ironflow/ironflow/internal/testkit/devstack"
)

// TestValidateReportsUndeployableGlanceImages runs Debian's glance-api
// (devstack.StartGlance) behind a proxy that counts requests: node validate
// reports, in the deploy interface's result, every Glance image an agent
// deploy cannot write (missing, queued, deactivated, a container or disk
// format the agent does not write, a partition image whose kernel_id names
// no image) with the reason, and true for an active raw or qcow2 bare
// image, by UUID or glance://UUID. A node whose
// image_source is a URL never reaches Glance; without a Glance configured,
// or with one that does not answer, validate says so.
func TestValidateReportsUndeployableGlanceImages(t *testing.T) {
	if !devstack.GlanceAvailable() {
		t.Skip(devstack.ErrNoGlance)
	}
	g, err := devstack.StartGlance(context.Background(), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(g.Stop)
	target, _ := url.Parse(g.URL)
	proxy := httputil.NewSingleHostReverseProxy(target)
	var asked atomic.Int64
	ps := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		asked.Add(1)
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(ps.Close)
	gc, err := glance.New(glance.Config{URL: ps.URL})
	if err != nil {
		t.Fatal(err)
	}
	e := newEnv(t, func(c *Config) { c.Glance = gc })

	data := make([]byte, 64<<10)
	copy(data[510:], []byte{0x55, 0xaa})
	create := func(spec devstack.ImageSpec) string {
		t.Helper()
		id, err := g.Create(spec)
		if err != nil {
			t.Fatal(err)
		}
		return id
	}
	active := create(devstack.ImageSpec{Name: "raw", DiskFormat: "raw", Data: data})
	qcow := create(devstack.ImageSpec{Name: "qcow2", DiskFormat: "qcow2", Data: data})
	queued := create(devstack.ImageSpec{Name: "queued", DiskFormat: "raw"})
	deactivated := create(devstack.ImageSpec{Name: "deactivated", DiskFormat: "raw", Data: data})
	if err := g.Deactivate(deactivated); err != nil {
		t.Fatal(err)
	}
	ova := create(devstack.ImageSpec{Name: "ova", DiskFormat: "vmdk", ContainerFormat: "ova", Data: data})
	vmdk := create(devstack.ImageSpec{Name: "vmdk", DiskFormat: "vmdk", Data: data})
	const missing = "6f1d0a0e-0000-4000-8000-0000000000bb"
	kernel := create(devstack.ImageSpec{Name: "vmlinuz", DiskFormat: "aki", ContainerFormat: "aki", Data: data})
	partition := create(devstack.ImageSpec{Name: "root", DiskFormat: "raw", Data: data, Properties: map[string]string{"kernel_id": kernel}})
	noKernel := create(devstack.ImageSpec{Name: "root-no-kernel", DiskFormat: "raw", Data: data, Properties: map[string]string{"kernel_id": missing}})

	validateDeploy := func(e *env, src string) map[string]any {
		t.Helper()
		id := e.createNode(map[string]any{"driver": "fake-hardware", "deploy_interface": "direct",
			"instance_info": map[string]any{"image_source": src}})["uuid"].(string)
		return e.do("GET", "/v1/nodes/"+id+"/validate", "1.82", nil).json(t)["deploy"].(map[string]any)
	}
	for _, c := range []struct{ src, want string }{
		{active, ""},
		{"glance://" + qcow, ""},
		{queued, "Image " + queued + " is unacceptable: The image is required to be in an active state (it is queued)"},
		{deactivated, "Image " + deactivated + " is unacceptable: The image is required to be in an active state (it is deactivated)"},
		{missing, "Image " + missing + " can not be found."},
		{ova, "Image " + ova + " is unacceptable: its container_format is ova"},
		{vmdk, "Image " + vmdk + " is unacceptable: its disk_format is vmdk: ironflow's agent writes raw and qcow2 images"},
		{partition, ""},
		{noKernel, "kernel (the image's kernel_id): Image " + missing + " can not be found."},
	} {
		d := validateDeploy(e, c.src)
		reason, _ := d["reason"].(string)
		switch {
		case c.want == "" && d["result"] != true:
			t.Errorf("%s: validate deploy %v, want true", c.src, d)
		case c.want != "" && (d["result"] != false || !strings.HasPrefix(reason, c.want)):
			t.Errorf("%s: validate deploy %v, want false with a reason starting %q", c.src, d, c.want)
		}
	}

	before := asked.Load()
	if d := validateDeploy(e, "http://images.example.com/disk.qcow2"); d["result"] != true {
		t.Errorf("a URL image_source: validate deploy %v, want true", d)
	}
	if n := asked.Load() - before; n != 0 {
		t.Errorf("validate of a node whose image_source is a URL asked Glance %d times", n)
	}

	none := newEnv(t)
	if d := validateDeploy(none, active); d["result"] != false || d["reason"] != "image_source "+active+" is a Glance image, but no Glance is configured (--glance-url)" {
		t.Errorf("no Glance configured: validate deploy %v", d)
	}
	down, err := glance.New(glance.Config{URL: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	unreachable := newEnv(t, func(c *Config) { c.Glance = down })
	if d := validateDeploy(unreachable, active); d["result"] != false || d["reason"] != "Failed to connect to Glance to get the properties of the image "+active {
		t.Errorf("Glance unreachable: validate deploy %v", d)
	}
}
